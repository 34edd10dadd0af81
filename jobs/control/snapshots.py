"""The configuration snapshot a worker receives from the agent, as frozen dataclasses.

Parsed from (and rendered to) the JSON of docs/control-protocol.md. Standard library only:
this module is imported by every PySpark Python worker, where import time is paid per
forked process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

SCHEDULERS = ("fries", "epoch", "naive", "restart")


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class OperatorConfig:
    """One operator's function at one function version."""

    function: str | None
    version: int
    params: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))
    state_transform: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OperatorConfig:
        return cls(
            function=data.get("function"),
            version=int(data["version"]),
            params=_frozen(data.get("params")),
            state_transform=data.get("stateTransform"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "params": dict(self.params),
            "version": self.version,
            "stateTransform": self.state_transform,
        }


def _operators_from_json(data: Mapping[str, Any] | None) -> Mapping[str, OperatorConfig]:
    return MappingProxyType(
        {name: OperatorConfig.from_json(value) for name, value in (data or {}).items()}
    )


def operators_to_json(operators: Mapping[str, OperatorConfig]) -> dict[str, Any]:
    return {name: config.to_json() for name, config in operators.items()}


@dataclass(frozen=True)
class Component:
    """An MCS component: heads switch on the control message, the rest follow tags."""

    id: int
    heads: tuple[str, ...]
    operators: tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Component:
        return cls(
            id=int(data["id"]),
            heads=tuple(data.get("heads", ())),
            operators=tuple(data.get("operators", ())),
        )

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "heads": list(self.heads), "operators": list(self.operators)}


@dataclass(frozen=True)
class Transition:
    """The reconfiguration in progress: what the targets ran before, and how to switch."""

    id: str
    scheduler: str
    from_config_version: int
    to_config_version: int
    previous: Mapping[str, OperatorConfig]
    components: tuple[Component, ...] = ()
    apply_from_batch: int | None = None

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {self.scheduler!r} (one of {SCHEDULERS})")

    def is_target(self, operator: str) -> bool:
        return operator in self.previous

    def component_of(self, operator: str) -> Component | None:
        return next((c for c in self.components if operator in c.operators), None)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transition:
        apply_from = data.get("applyFromBatch")
        return cls(
            id=str(data["id"]),
            scheduler=str(data["scheduler"]),
            from_config_version=int(data["fromConfigVersion"]),
            to_config_version=int(data["toConfigVersion"]),
            previous=_operators_from_json(data.get("previous")),
            components=tuple(Component.from_json(c) for c in data.get("components", ())),
            apply_from_batch=None if apply_from is None else int(apply_from),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scheduler": self.scheduler,
            "fromConfigVersion": self.from_config_version,
            "toConfigVersion": self.to_config_version,
            "previous": operators_to_json(self.previous),
            "components": [c.to_json() for c in self.components],
            "applyFromBatch": self.apply_from_batch,
        }


@dataclass(frozen=True)
class Snapshot:
    """The whole configuration at `config_version`, as published at `revision`.

    `revision` grows with every publication (a new configuration, a retired transition, a
    pinned replay); `config_version` only with accepted reconfigurations.
    """

    config_version: int
    operators: Mapping[str, OperatorConfig]
    revision: int = 0
    transition: Transition | None = None
    pinned_batches: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    pinned_configs: Mapping[int, Mapping[str, OperatorConfig]] = field(
        default_factory=lambda: MappingProxyType({})
    )

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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Snapshot:
        transition = data.get("transition")
        return cls(
            config_version=int(data["configVersion"]),
            operators=_operators_from_json(data.get("operators")),
            revision=int(data.get("revision", data["configVersion"])),
            transition=None if transition is None else Transition.from_json(transition),
            pinned_batches=MappingProxyType(
                {int(k): int(v) for k, v in (data.get("pinnedBatches") or {}).items()}
            ),
            pinned_configs=MappingProxyType(
                {
                    int(k): _operators_from_json(v)
                    for k, v in (data.get("pinnedConfigs") or {}).items()
                }
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "configVersion": self.config_version,
            "revision": self.revision,
            "operators": operators_to_json(self.operators),
            "transition": None if self.transition is None else self.transition.to_json(),
            "pinnedBatches": {str(k): v for k, v in self.pinned_batches.items()},
            "pinnedConfigs": {str(k): operators_to_json(v) for k, v in self.pinned_configs.items()},
        }
