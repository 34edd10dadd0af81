"""The configuration snapshot a worker long-polls from the agent, and the transition in it.

The agent renders it (`GET /v1/control/watch`, `GET /v1/config`) and every Python worker
and the driver read it with these models (docs/control-protocol.md). Frozen: a worker
holds one snapshot and swaps it whole when a newer revision arrives.

JSON object keys are strings, so the keys of the pinned maps (batch ids, configuration
versions) are read leniently from their digits; every other field is strict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, cast

from pydantic import Field, Strict, field_validator

from swivel.protocol.documents import Document

SCHEDULERS = ("fries", "epoch", "naive", "restart")
Scheduler = Literal["fries", "epoch", "naive", "restart"]
Names = Annotated[tuple[str, ...], Field(strict=False)]  # a JSON array, kept as a tuple
KeyInt = Annotated[int, Strict(False)]  # an integer written as a JSON object key


def scheduler_named(name: str) -> Scheduler:
    """`name` as a scheduler of a transition; ValueError when it is none of them."""
    if name not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {name!r} (one of {SCHEDULERS})")
    return cast(Scheduler, name)


class OperatorConfig(Document):
    """One operator's function at one function version."""

    function: str | None
    params: Mapping[str, Any] = Field(default_factory=dict)
    version: int
    state_transform: str | None = None


class Component(Document):
    """An MCS component: heads switch on the control message, the rest follow tags."""

    id: int
    heads: Names = ()
    operators: Names = ()


class Transition(Document):
    """The reconfiguration in progress: what the targets ran before, and how to switch."""

    id: str
    scheduler: Scheduler
    from_config_version: int
    to_config_version: int
    previous: Mapping[str, OperatorConfig]
    components: Annotated[tuple[Component, ...], Field(strict=False)] = ()
    apply_from_batch: int | None = None

    @field_validator("scheduler", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        return scheduler_named(value) if isinstance(value, str) else value

    def is_target(self, operator: str) -> bool:
        return operator in self.previous

    def component_of(self, operator: str) -> Component | None:
        return next((c for c in self.components if operator in c.operators), None)


class Snapshot(Document):
    """The whole configuration at `config_version`, as published at `revision`.

    `revision` grows with every publication (a new configuration, a retired transition, a
    pinned replay); `config_version` only with accepted reconfigurations.
    """

    config_version: int
    """Grows only with accepted reconfigurations."""
    revision: int = 0
    """Grows with every publication; a worker long-polls with the one it holds."""
    operators: Mapping[str, OperatorConfig]
    transition: Transition | None = None
    pinned_batches: Mapping[KeyInt, int] = Field(default_factory=dict)
    pinned_configs: Mapping[KeyInt, Mapping[str, OperatorConfig]] = Field(default_factory=dict)

    def config_at(self, config_version: int, operator: str) -> OperatorConfig | None:
        """The operator's config at an earlier or the current configuration version."""
        if config_version >= self.config_version:
            return self.operators.get(operator)
        pinned = self.pinned_configs.get(config_version)
        if pinned is not None and operator in pinned:
            return pinned[operator]
        transition = self.transition
        if transition is not None and config_version <= transition.from_config_version:
            return transition.previous.get(operator, self.operators.get(operator))
        return self.operators.get(operator)


def operators_to_wire(operators: Mapping[str, OperatorConfig]) -> dict[str, Any]:
    """A map of operator configs in its JSON form (the agent's durable state keeps these)."""
    return {name: config.to_wire() for name, config in operators.items()}


def operators_from_wire(data: Mapping[str, Any]) -> dict[str, OperatorConfig]:
    return {name: OperatorConfig.model_validate(config) for name, config in data.items()}
