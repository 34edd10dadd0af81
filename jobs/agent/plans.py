"""A plan's lifecycle in the agent, as an explicit state machine over immutable records.

    Accepted -> Applying -> Completed
         \\          \\----> Failed
          \\--------------> Failed

A plan is *Accepted* once it is durable (written under the state directory) and *Applying*
once its snapshot is published. A worker process switches a target operator either by
processing records under the new version (a *processed* ack, stamped with the check that
chose it) or, where `swivel.jobs.control.arming` allows, on receipt of the snapshot (an
*armed* ack: a Fries non-head that picks its function by tag, or an idle head). A Fries
head that is no target (the planner heads a component with the targets' one-to-many
ancestor) switches too: it starts stamping new tags; its acks carry its unchanged
function version and the new configuration version.

- **delay** (`delayMs`), **armed** (`armedMs`), **propagation** (`propagationMs`): from
  the request; what each means and how the agent decides *in effect* is
  `swivel.jobs.agent.timings`.

It *Completes* when the new version is in effect: every live worker hosting a target or head
switched, every target operator processed records under its new version, and the batch that
may hold old-tagged rows ended (so the batch in which the switch happened is known before the
transition is retired).

Every function here is pure: the hub decides when, these decide what.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from swivel.api.phases import IllegalTransitionError, PlanPhase
from swivel.api.reconfiguration import HandOverStatus
from swivel.jobs.agent.timings import (
    BOUNDARY_SCHEDULERS,
    Timings,
    in_effect,
    old_rows_batch_after,
)
from swivel.jobs.control.arming import ARMED, PROCESSED
from swivel.protocol.plans import PlanDocument, PlanProgress, PlanTimings

__all__ = ["Timings"]  # re-exported: the plan record's timings live in timings.py


ALLOWED_TRANSITIONS: Mapping[PlanPhase, frozenset[PlanPhase]] = {
    PlanPhase.ACCEPTED: frozenset({PlanPhase.APPLYING, PlanPhase.FAILED}),
    PlanPhase.APPLYING: frozenset({PlanPhase.COMPLETED, PlanPhase.FAILED}),
    PlanPhase.COMPLETED: frozenset(),
    PlanPhase.FAILED: frozenset(),
}


WorkerOperator = tuple[int, str]  # (pid, operator)


@dataclass(frozen=True)
class PlanRecord:
    id: str
    name: str
    scheduler: str
    spec: Mapping[str, Any]
    plan: Mapping[str, Any]
    from_config_version: int
    to_config_version: int
    targets: Mapping[str, int]  # operator -> the function version it switches to
    phase: PlanPhase = PlanPhase.ACCEPTED
    timings: Timings = field(default_factory=Timings)
    switched: frozenset[WorkerOperator] = frozenset()
    processed: frozenset[str] = frozenset()  # targets that ran records under the new version
    last_switch_batch: int | None = None
    message: str = ""
    migration: Mapping[str, Any] | None = None  # the driver's last bin-migration report
    idempotency_key: str | None = None  # the submitter's key: a repeat gets this plan back
    coordination: Mapping[str, Any] | None = None  # the driver's confirmation of the interval
    # Fries: the latest micro-batch that may hold rows tagged before the last head switched
    # (a tag-follower runs them under the old version until it ends); None: none may.
    old_rows_batch: int | None = None

    @property
    def heads(self) -> frozenset[str]:
        """The Fries components' heads (targets or not): they switch by stamping tags."""
        if self.scheduler != "fries":
            return frozenset()
        return frozenset(h for c in self.plan.get("components", ()) for h in c.get("heads", ()))

    @property
    def moves_bins(self) -> bool:
        """A rescale or bin moves: complete only when the driver's migration completed."""
        return bool(self.spec.get("rescale") or self.spec.get("moves"))

    @property
    def sets_coordination(self) -> bool:
        """A coordination interval: complete only once the driver confirmed it."""
        return bool(self.spec.get("coordination"))

    def _since_request_ms(self, at: float | None) -> float | None:
        start = self.timings.start
        if start is None or at is None or self.phase != PlanPhase.COMPLETED:
            return None
        return max(0.0, (at - start) * 1000.0)

    @property
    def delay_ms(self) -> float | None:
        """The request -> in effect (module doc); None until Completed."""
        return self._since_request_ms(self.timings.in_effect_at)

    @property
    def armed_ms(self) -> float | None:
        """The request -> the last target or head worker holds the new version."""
        return self._since_request_ms(self.timings.last_switch_at)

    @property
    def propagation_ms(self) -> float | None:
        return self._since_request_ms(self.timings.propagated_at)

    def to_json(self, expected: frozenset[WorkerOperator] = frozenset()) -> dict[str, Any]:
        """The `GET /v1/plans/{id}` document without its `revision` (the ledger's);
        `expected` = the pairs that must switch."""
        document = PlanDocument(
            id=self.id,
            name=self.name,
            phase=self.phase,
            scheduler=self.scheduler,
            config_version=self.to_config_version,
            plan=dict(self.plan),
            timings=PlanTimings.model_validate(self.timings.to_json()),
            delay_ms=self.delay_ms,
            armed_ms=self.armed_ms,
            propagation_ms=self.propagation_ms,
            progress=PlanProgress.model_validate(progress(self, expected)),
            message=self.message,
            migration=dict(self.migration) if self.migration else None,
            coordination=dict(self.coordination) if self.coordination else None,
        )
        return document.model_dump(mode="json", by_alias=True, exclude={"revision"})

    def to_state(self) -> dict[str, Any]:
        """The durable form (store.py); epoch seconds, nothing derived."""
        t = self.timings
        return {
            "id": self.id,
            "name": self.name,
            "scheduler": self.scheduler,
            "spec": dict(self.spec),
            "plan": dict(self.plan),
            "fromConfigVersion": self.from_config_version,
            "toConfigVersion": self.to_config_version,
            "targets": dict(self.targets),
            "phase": self.phase.value,
            "timings": [
                t.requested_at,
                t.accepted_at,
                t.first_switch_at,
                t.last_switch_at,
                t.completed_at,
                t.propagated_at,
                t.in_effect_at,
                t.old_rows_ended_at,
            ],
            "switched": sorted([pid, op] for pid, op in self.switched),
            "processed": sorted(self.processed),
            "lastSwitchBatch": self.last_switch_batch,
            "oldRowsBatch": self.old_rows_batch,
            "message": self.message,
            "migration": dict(self.migration) if self.migration else None,
            "idempotencyKey": self.idempotency_key,
            "coordination": dict(self.coordination) if self.coordination else None,
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> PlanRecord:
        return cls(
            id=data["id"],
            name=data["name"],
            scheduler=data["scheduler"],
            spec=data["spec"],
            plan=data["plan"],
            from_config_version=int(data["fromConfigVersion"]),
            to_config_version=int(data["toConfigVersion"]),
            targets={k: int(v) for k, v in data["targets"].items()},
            phase=PlanPhase(data["phase"]),
            timings=Timings(*data["timings"]),
            switched=frozenset((int(pid), str(op)) for pid, op in data["switched"]),
            processed=frozenset(data.get("processed", ())),
            last_switch_batch=data.get("lastSwitchBatch"),
            old_rows_batch=data.get("oldRowsBatch"),
            message=data.get("message", ""),
            migration=data.get("migration"),
            idempotency_key=data.get("idempotencyKey"),
            coordination=data.get("coordination"),
        )


def switched_without_workers(timings: Timings, now: float) -> Timings:
    """A plan with no target (bin moves, a coordination interval) has no worker to switch:
    it switches at `now`, when the driver's part is done."""
    return replace(timings, first_switch_at=timings.first_switch_at or now, last_switch_at=now)


def move(record: PlanRecord, phase: PlanPhase, **changes: Any) -> PlanRecord:
    """The only way a record changes phase; refuses what the diagram above does not allow."""
    if phase not in ALLOWED_TRANSITIONS[record.phase]:
        raise IllegalTransitionError(f"plan {record.id}: {record.phase.value} -> {phase.value}")
    return replace(record, phase=phase, **changes)


def record_switch(
    record: PlanRecord,
    *,
    pid: int,
    operator: str,
    version: int,
    at: float,
    batch_id: int | None,
    kind: str = PROCESSED,
    config_version: int | None = None,
    running_batch: int | None = None,
    completed_batch: int | None = None,
) -> PlanRecord:
    """Note that worker `pid` switched `operator` to `version` under `config_version`
    (`kind`: processed | armed); unchanged if it is not a switch of this plan.

    `running_batch`/`completed_batch`: the latest micro-batch the driver reported started /
    completed when the ack arrived (a Fries head's switch bounds the old-tagged rows)."""
    if record.phase != PlanPhase.APPLYING:
        return record
    if not _switches(record, operator, version, config_version):
        return record
    key = (pid, operator)
    if key not in record.switched:  # its first switch: what it tagged before may be in flight
        record = _note_old_rows(record, operator, kind, batch_id, running_batch, completed_batch)
    ran = kind != ARMED  # records ran (in batch `batch_id`), not only received
    processed = ran and operator in record.targets  # a target's new version ran
    if key in record.switched and (not ran or operator in record.processed):
        return record  # nothing new: no time, no target reached, no later batch
    t = record.timings
    # Worker clocks may trail the agent's a little; a switch cannot precede acceptance.
    at = max(at, t.accepted_at or at)
    timings, switched = t, record.switched
    if key not in switched:
        switched = switched | {key}
        timings = replace(
            timings,
            first_switch_at=at if t.first_switch_at is None else min(t.first_switch_at, at),
            last_switch_at=at if t.last_switch_at is None else max(t.last_switch_at, at),
        )
    reached = record.processed
    if processed and operator not in reached:
        reached = reached | {operator}
        before = timings.propagated_at
        timings = replace(timings, propagated_at=at if before is None else max(before, at))
    last_batch = record.last_switch_batch
    if batch_id is not None:
        last_batch = batch_id if last_batch is None else max(last_batch, batch_id)
    return replace(
        record,
        switched=switched,
        processed=reached,
        timings=timings,
        last_switch_batch=last_batch,
    )


def tag_followers(record: PlanRecord) -> frozenset[str]:
    """Fries targets that are no head: they run old-tagged rows under the old version."""
    return frozenset(set(record.targets) - record.heads) if record.heads else frozenset()


def _note_old_rows(  # noqa: PLR0917 - the ack's fields and the driver's two batches
    record: PlanRecord,
    operator: str,
    kind: str,
    batch_id: int | None,
    running_batch: int | None,
    completed_batch: int | None,
) -> PlanRecord:
    """A head switched: rows it tagged before may sit in any batch that had started."""
    if operator not in record.heads or not tag_followers(record):
        return record
    processed = batch_id if kind != ARMED else None
    latest = old_rows_batch_after(record.old_rows_batch, processed, running_batch, completed_batch)
    return record if latest == record.old_rows_batch else replace(record, old_rows_batch=latest)


def record_batch_end(record: PlanRecord, batch_id: int, at: float) -> PlanRecord:
    """The driver reported batch `batch_id` completed at `at`: if it is the batch that may
    hold old-tagged rows (or a later one), no tag-follower will run another old row."""
    if record.phase != PlanPhase.APPLYING or record.old_rows_batch is None:
        return record
    if batch_id < record.old_rows_batch or record.timings.old_rows_ended_at is not None:
        return record
    return replace(record, timings=replace(record.timings, old_rows_ended_at=at))


def old_rows_pending(record: PlanRecord) -> bool:
    return record.old_rows_batch is not None and record.timings.old_rows_ended_at is None


def completion_timings(record: PlanRecord, now: float) -> Timings:
    """The timings of a plan completing (or failing) at `now`, `in_effect_at` included."""
    if record.phase != PlanPhase.APPLYING or old_rows_pending(record):
        return replace(record.timings, completed_at=now)
    boundary = record.scheduler in BOUNDARY_SCHEDULERS
    at = in_effect(record.timings, boundary=boundary, has_targets=bool(record.targets))
    return replace(record.timings, completed_at=now, in_effect_at=at)


def _switches(record: PlanRecord, operator: str, version: int, config_version: int | None) -> bool:
    """A target switches to its new function version; a head that is no target keeps its
    function and switches to the plan's configuration version (the tags it stamps)."""
    wanted = record.targets.get(operator)
    if wanted is not None:
        return version >= wanted
    return (
        operator in record.heads
        and config_version is not None
        and config_version >= record.to_config_version
    )


def expected_workers(
    record: PlanRecord, hosted: Iterable[WorkerOperator]
) -> frozenset[WorkerOperator]:
    """The (pid, operator) pairs that must switch: live workers hosting a target or head."""
    switching = record.heads | set(record.targets)
    return frozenset(pair for pair in hosted if pair[1] in switching)


def completion_due(record: PlanRecord, expected: frozenset[WorkerOperator]) -> bool:
    if record.phase != PlanPhase.APPLYING:
        return False
    if record.moves_bins and (record.migration or {}).get("phase") != "Completed":
        return False
    if record.sets_coordination and record.coordination is None:
        return False
    if old_rows_pending(record):
        return False
    return set(record.targets) <= record.processed and expected <= record.switched


def still_waiting(record: PlanRecord, expected: frozenset[WorkerOperator]) -> str:
    """What completion still waits for, in words (the message of a timed-out plan)."""
    parts = []
    unswitched = sorted(expected - record.switched)
    if unswitched:
        pairs = ", ".join(f"{op} at pid {pid}" for pid, op in unswitched)
        parts.append(f"workers that have not switched ({pairs})")
    unprocessed = sorted(set(record.targets) - record.processed)
    if unprocessed:
        parts.append(f"targets with no records processed under the new version {unprocessed}")
    if record.moves_bins and (record.migration or {}).get("phase") != "Completed":
        parts.append("the driver's bin migration")
    if record.sets_coordination and record.coordination is None:
        parts.append("the driver's confirmation of the coordination interval")
    if old_rows_pending(record):
        parts.append(f"the end of batch {record.old_rows_batch} (rows tagged before the switch)")
    return "; ".join(parts) or "nothing (completion was due)"


def progress(record: PlanRecord, expected: frozenset[WorkerOperator]) -> dict[str, Any]:
    """Workers (pids) switched / total, and the same per target operator."""
    pairs = expected | record.switched
    pids = {pid for pid, _ in pairs}
    switched_pids = {pid for pid in pids if all(p in record.switched for p in pairs if p[0] == pid)}
    operators = {
        op: {
            "version": version,
            "switched": sum(1 for _, o in record.switched if o == op),
            "total": sum(1 for _, o in pairs if o == op),
        }
        for op, version in record.targets.items()
    }
    heads = {
        op: {
            "switched": sum(1 for _, o in record.switched if o == op),
            "total": sum(1 for _, o in pairs if o == op),
        }
        for op in sorted(record.heads - set(record.targets))
    }
    migration = record.migration or {}
    return {
        "workersSwitched": len(switched_pids),
        "workersTotal": len(pids),
        "operators": operators,
        "heads": heads,
        # A report may leave them null (`MigrationReport`): not counted yet.
        "binsMoved": int(migration.get("binsMoved") or 0),
        "binsTotal": int(migration.get("binsTotal") or 0),
        "step": int(migration.get("step") or 0),
        "steps": int(migration.get("steps") or 0),
        # The order the driver carried out (Chi's hand-over, docs/migration.md), bounded
        "handOver": HandOverStatus.latest(migration.get("handOver") or ()),
        "handOvers": len(migration.get("handOver") or ()),
        "binsPrewarmed": int(migration.get("binsPrewarmed") or 0),
        "prewarmFallback": (
            str(migration["prewarmFallback"])[:1024] if migration.get("prewarmFallback") else None
        ),
    }
