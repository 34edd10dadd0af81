"""Which configuration an operator uses for a record: the choice table of
docs/control-protocol.md, as pure functions over the snapshot's wire form.

The wrapper asks once per Arrow batch (`choose`), and the answer is either one fixed
configuration for every row, or - for a non-head operator of a Fries component while a
transition is open - "old or new by the row's tag", decided per row with one vectorised
comparison (`Choice.uses_new`).

Tags: every operator with a function writes the configuration version it ran a row under
into its own tag column `_swivel_tag_<operator>`; a non-head reads the column of the head of
its component that is its ancestor. (The protocol numbers components; component ids change
per transition while a query's schema is fixed, so the columns are named by the operator
that can head a component - every operator with a function can.)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

TAG_PREFIX = "_swivel_tag_"


def tag_column(operator: str) -> str:
    """The column in which `operator` writes the configuration version it used."""
    return TAG_PREFIX + operator.replace("-", "_")


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """One operator's function at one function version."""

    function: str | None
    params: Mapping[str, Any]
    version: int
    state_transform: str | None = None

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> OperatorConfig:
        return cls(
            function=wire.get("function"),
            params=dict(wire.get("params") or {}),
            version=int(wire.get("version", 1)),
            state_transform=wire.get("stateTransform"),
        )


@dataclass(frozen=True, slots=True)
class Choice:
    """The configuration(s) for one Arrow batch of an operator.

    `old`/`old_tag` and `new`/`new_tag` are the configuration and the configuration version
    written into the tag. Without `by_tag_column` every row uses `new`.
    """

    new: OperatorConfig
    new_tag: int
    old: OperatorConfig | None = None
    old_tag: int = 0
    by_tag_column: str | None = None
    switch_at: int = 0  # rows whose head tag is >= this configuration version use `new`

    def uses_new(self, tags: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.asarray(tags >= self.switch_at)

    @property
    def mixed(self) -> bool:
        return self.by_tag_column is not None


def choose(
    snapshot: Mapping[str, Any],
    operator: str,
    *,
    ancestors: Collection[str],
    batch_id: int | None,
    baseline: Mapping[str, Any] | None = None,
) -> Choice:
    """The protocol's table. `ancestors` are the operators upstream of `operator`;
    `baseline` is the snapshot the query was (re)started with (restart scheduler)."""
    cv = int(snapshot["configVersion"])
    current = OperatorConfig.from_wire(snapshot["operators"][operator])
    transition = snapshot.get("transition")
    if not transition:
        return Choice(current, cv)
    previous_wire = (transition.get("previous") or {}).get(operator)
    old_cv = int(transition["fromConfigVersion"])
    new_cv = int(transition["toConfigVersion"])
    pinned = (snapshot.get("pinnedBatches") or {}).get(str(batch_id))
    if previous_wire is not None:
        previous = OperatorConfig.from_wire(previous_wire)
        if pinned is not None:  # a replayed batch runs under the version it first ran under
            return Choice(previous, old_cv) if int(pinned) < new_cv else Choice(current, cv)
        scheduler = transition.get("scheduler", "fries")
        if scheduler == "epoch":
            start = transition.get("applyFromBatch")
            switched = start is not None and batch_id is not None and batch_id >= int(start)
            return Choice(current, cv) if switched else Choice(previous, old_cv)
        if scheduler == "restart":
            started_with = (baseline or snapshot)["operators"].get(operator)
            started = OperatorConfig.from_wire(started_with) if started_with else current
            return Choice(started, cv if started == current else old_cv)
    else:
        previous = current
    if transition.get("scheduler", "fries") != "fries":
        return Choice(current, cv)  # naive: the newest snapshot seen, independently
    for component in transition.get("components") or ():
        members = component.get("operators") or ()
        heads = component.get("heads") or ()
        if operator not in members or operator in heads:
            continue
        head = next((h for h in heads if h in ancestors), None)
        if head is None or previous is current:
            break
        return Choice(
            new=current,
            new_tag=cv,
            old=previous,
            old_tag=old_cv,
            by_tag_column=tag_column(head),
            switch_at=new_cv,
        )
    return Choice(current, cv)
