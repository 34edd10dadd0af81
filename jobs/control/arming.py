"""When a worker process counts as switched without processing a record: the "armed" ack.

A worker acknowledges a function version in two ways (docs/control-protocol.md):

- **processed**: it ran records of the operator under the version (the wrapper's ack, with
  the time of the check that chose the version);
- **armed**: it received the snapshot and, from that instant on, every record it processes
  that belongs to the new configuration runs under the new version, without waiting for a
  check. That holds in two cases, and these are the only ones this module admits:

  * a **non-head of a Fries component** holds the old and the new function and picks one
    per record by the tag the component's heads wrote (`selection.select`): it needs no
    switch moment of its own, it is switched once it holds the new function. In a
    pipelined engine Fries' non-heads switch when the first tagged tuple arrives; in Spark
    the first tagged row reaches an operator behind a shuffle only when the whole upstream
    stage has ended, which is when records arrive, not when the configuration changes. The
    agent reports that moment separately (`propagatedAt`).
  * a **head** (or a naive target, or a lone Fries target) that is **not in the middle of
    an Arrow batch** for the operator in this process: its next check reads the snapshot
    that is already in memory, so every record it emits from now on is new. A head that is
    busy switches at its next check and acknowledges then (processed). A Fries head need
    not be a target (the planner heads a component with the targets' one-to-many
    ancestor): it keeps its function version but stamps the new configuration version
    from its next check, so it is armed like any head; the agent takes its ack by the
    configuration version (`swivel.jobs.agent.plans`).

Epoch and restart never arm: their switch is a micro-batch boundary or a new query, and the
first record processed there is their switch.

Pure: the control client in every Python worker imports it.
"""

from __future__ import annotations

from swivel.protocol.acks import AckKind
from swivel.protocol.snapshots import Snapshot

ARMED, PROCESSED = AckKind.ARMED, AckKind.PROCESSED


def armed_version(snapshot: Snapshot, operator: str, *, busy: bool) -> int | None:
    """The function version `operator` is switched to on receipt of `snapshot`, else None."""
    transition = snapshot.transition
    config = snapshot.operators.get(operator)
    if transition is None or config is None:
        return None
    if transition.scheduler == "fries":
        component = transition.component_of(operator)
        if component is not None and operator in component.heads:
            return None if busy else config.version  # a head, target or not
        if not transition.is_target(operator):
            return None
        if component is not None:
            return config.version  # a tag-follower holds both functions
        return None if busy else config.version  # a lone target switches like a head
    if not transition.is_target(operator):
        return None
    if transition.scheduler == "naive":
        return None if busy else config.version
    return None
