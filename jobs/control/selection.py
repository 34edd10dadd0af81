"""Which configuration an operator wrapper uses for a record: the table of
docs/control-protocol.md as one pure function.

Kept free of Spark and of the network so the rules can be tested as a table and the
wrappers stay thin: they gather (snapshot, operator, tag, batch id) and call `select`.
"""

from __future__ import annotations

from dataclasses import dataclass

from swivel.protocol.snapshots import OperatorConfig, Snapshot


@dataclass(frozen=True)
class Selection:
    """The configuration chosen, the configuration version it belongs to, and why.

    `tag` is what the operator writes into its component's tag column for the records it
    emits (heads stamp the version they used; others pass the incoming tag on); None when
    the operator is in no component of the running transition.
    """

    config: OperatorConfig
    config_version: int
    tag: int | None
    rule: str


def tag_column(component_id: int) -> str:
    return f"_swivel_tag_{component_id}"


def select(
    snapshot: Snapshot,
    operator: str,
    *,
    tag: int | None = None,
    batch_id: int | None = None,
    started_config_version: int | None = None,
) -> Selection:
    """Choose `operator`'s configuration for one record (or one Arrow batch of records).

    `tag` is the record's `_swivel_tag_<k>` for a non-head of component k; `batch_id` the
    task's micro-batch id; `started_config_version` the configuration the query was
    (re)started with (restart scheduler). Raises KeyError for an operator the snapshot does
    not know: the runtime must not guess a function.
    """
    current = snapshot.operators[operator]
    pinned = snapshot.pinned_batches.get(batch_id) if batch_id is not None else None
    if pinned is not None:
        # A replayed batch runs entirely under the configuration durable when it started.
        config = snapshot.config_at(pinned, operator) or current
        return Selection(config, pinned, pinned, "pinned-replay")
    transition = snapshot.transition
    newest = snapshot.config_version
    if transition is None:
        return Selection(current, newest, tag, "no-transition")
    component = transition.component_of(operator) if transition.scheduler == "fries" else None
    if component is None and not transition.is_target(operator):
        return Selection(current, newest, tag, "untouched")
    old_version = transition.from_config_version
    old = transition.previous.get(operator, current)
    if transition.scheduler == "fries":
        assert component is not None or transition.is_target(operator)
        if component is None:
            # A target the planner left out of every component switches on its own.
            return Selection(current, newest, None, "fries-lone-target")
        if operator in component.heads:
            return Selection(current, newest, newest, "fries-head")
        if tag is not None and tag >= transition.to_config_version:
            return Selection(current, newest, tag, "fries-tag-new")
        # No tag, or one from before the switch: the record was emitted under the old one.
        return Selection(old, old_version, tag, "fries-tag-old")
    if transition.scheduler == "epoch":
        start = transition.apply_from_batch
        if start is not None and batch_id is not None and batch_id >= start:
            return Selection(current, newest, tag, "epoch-new")
        return Selection(old, old_version, tag, "epoch-old")
    if transition.scheduler == "naive":
        return Selection(current, newest, tag, "naive")
    # restart: what the query was (re)started with; the new code only after the restart.
    if (
        started_config_version is not None
        and started_config_version >= transition.to_config_version
    ):
        return Selection(current, newest, tag, "restart-new")
    return Selection(old, old_version, tag, "restart-old")
