"""The driver channel: what the driver reports (batches, bin migrations, loads, coordination)
and the boundary actions it takes (docs/control-protocol.md, the driver channel).

Reports change the configuration only at batch boundaries (a replayed batch pinned to the
version it first ran under; a finished plan's transition retired once its batch ended) and
otherwise feed the plan ledger, which settles the active plan after each one. The actions
queue itself is driver_actions.py; the latest loads latest_loads.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from swivel.api.phases import FINAL_PHASES, PlanPhase
from swivel.jobs.agent import plans
from swivel.jobs.agent.driver_actions import COORDINATION_ACTION, MIGRATION_ACTIONS
from swivel.jobs.agent.parts import HubParts
from swivel.jobs.agent.plans import PlanRecord
from swivel.protocol.bodies import (
    CoordinationReport,
    MigrationReport,
    PrewarmCheck,
    ProgressReport,
)
from swivel.protocol.documents import BodyRejected

MAX_BATCH_JUMP = 1_000_000  # a driver's batch id this far beyond the last one is a lie


class DriverChannel:
    def __init__(self, parts: HubParts) -> None:
        """`parts`: what the driver's reports feed (parts.py)."""
        self._state, self._save, self._ledger = parts.state, parts.save, parts.ledger
        self._config, self._actions, self._loads = parts.config, parts.actions, parts.loads
        self._batches, self._metrics, self._clock = parts.batches, parts.metrics, parts.clock
        self.ready = False  # the driver reported a batch: the job runs (GET /readyz)
        # the driver's last prewarm check (GET /v1/config); not persisted: a driver checks
        # once per query run, and an agent that restarted says it has none until the next
        self.prewarm_check: PrewarmCheck | None = None

    # -- batches ----------------------------------------------------------------------------

    def record_progress(self, body: Any) -> None:
        """A micro-batch started or completed; BodyRejected (400) when not a
        `ProgressReport`, (422) when its batch id leaps far beyond the last one."""
        report = ProgressReport.parse(body)
        latest = self._batches.latest(self._state)
        if latest is not None and report.batch_id > latest + MAX_BATCH_JUMP:
            self._metrics.rejected.labels("progress").inc()
            reason = f"{report.batch_id} is more than {MAX_BATCH_JUMP} past the last batch {latest}"
            raise BodyRejected.single("batchId", reason, 422)
        self.ready = True
        batch, kind = report.batch_id, report.event
        self._metrics.batches.labels(kind).inc()
        state = self._state
        if kind == "started":
            self._batches.started(batch)
            recorded = state.batch_versions.get(batch)
            if recorded is None:
                state.remember_batch(batch, self._config.version_at(report.at or 0.0))
                self._save()
            elif recorded != state.config_version and batch not in state.pinned_batches:
                state.pinned_batches[batch] = recorded  # a replay: run it as it first ran
                self._config.publish()
        elif kind == "completed":
            self._batches.completed(batch)
            self._note_batch_end(batch, report.at or self._clock())
            changed = state.pinned_batches.pop(batch, None) is not None
            if state.transition is not None and state.active_plan is None:
                after = self._batches.retire_after
                if after is None or batch >= after:
                    state.transition, changed = None, True
            if changed:
                self._config.publish()

    def _note_batch_end(self, batch: int, at: float) -> None:
        """The active plan may wait for this batch to end (old-tagged rows, plans.py)."""
        record = self._ledger.active
        if record is None:
            return
        ended = plans.record_batch_end(record, batch, at)
        if ended is not record:
            self._ledger.put(ended)
            self._save()
            self._ledger.settle()

    # -- bin migrations and coordination ----------------------------------------------------

    def _known_plan(self, plan_id: str) -> PlanRecord:
        record = self._ledger.get(plan_id)
        if record is None:
            self._metrics.rejected.labels("driver").inc()
            raise BodyRejected.single("planId", f"no plan {plan_id!r} in this agent", 422)
        return record

    def record_migration(self, report: Mapping[str, Any]) -> None:
        """The driver's bin-migration progress for plan `planId`; BodyRejected when not a
        `MigrationReport` (400) or of no plan the agent has (422)."""
        parsed = MigrationReport.parse(report)
        record = self._known_plan(parsed.plan_id)
        if record.phase is not PlanPhase.APPLYING:
            return
        record = replace(record, migration=dict(report))
        self._ledger.put(record)
        phase = report.get("phase")
        if phase in FINAL_PHASES:
            plan_id = record.id
            self._actions.mark_done(
                lambda a: a.get("planId") == plan_id and a.get("action") in MIGRATION_ACTIONS
            )
            self._loads.forget()  # anything measured meanwhile saw a placement in motion
        if phase == "Failed":
            self._ledger.fail(record, str(report.get("message") or "the bin migration failed"))
            self._ledger.refresh()  # `fail` saved it
            return
        if phase == "Completed" and not record.targets:
            record = replace(
                record,
                timings=plans.switched_without_workers(record.timings, self._clock()),
                message=str(report.get("message") or ""),
            )
            self._ledger.put(record)
        self._save()
        self._ledger.settle()

    def record_prewarm_check(self, check: PrewarmCheck) -> None:
        """The driver's prewarm check (validated by the route), replacing the last one."""
        self.prewarm_check = check

    def record_coordination(self, body: Any) -> None:
        """The driver applied a coordination interval; BodyRejected when not a
        `CoordinationReport` (400) or of an unknown plan (422)."""
        report = CoordinationReport.parse(body)
        if report.plan_id is not None:
            self._known_plan(report.plan_id)
        interval = report.interval_seconds
        self._metrics.coordination_interval.set(interval)
        plan_id = report.plan_id or ""
        if self._actions.mark_done(
            lambda a: a.get("action") == COORDINATION_ACTION and a.get("planId") == plan_id
        ):
            self._save()
        record = self._ledger.get(plan_id)
        if record is None or record.phase is not PlanPhase.APPLYING:
            return
        now = self._clock()
        timings = record.timings
        if not record.targets and not record.moves_bins:  # nothing else to wait for
            timings = plans.switched_without_workers(timings, now)
        record = replace(
            record, coordination={"intervalSeconds": interval, "appliedAt": now}, timings=timings
        )
        self._ledger.put(record)
        self._save()
        self._ledger.settle()

    def coordination_interval(self) -> float | None:
        """The interval of the last coordination the driver confirmed (durable: the plans
        survive an agent restart), so a restarted driver takes it up (GET /v1/config)."""
        confirmed = [p.coordination for p in self._state.plans.values() if p.coordination]
        if not confirmed:
            return None
        last = max(confirmed, key=lambda c: float(c.get("appliedAt") or 0.0))
        return float(last["intervalSeconds"])

    # -- actions ----------------------------------------------------------------------------

    def action_done(self, seq: int) -> bool:
        """The driver carried out action `seq`. False: no such action kept. Durable before
        the answer."""
        if self._actions.mark_done(lambda a: int(a["seq"]) == seq):
            self._save()
            return True
        return self._actions.kept(seq)

    async def next_action(self, since: int, timeout: float) -> dict[str, Any] | None:
        """The oldest action not yet done with seq > `since`, waiting up to `timeout`."""
        return await self._actions.next(since, timeout)
