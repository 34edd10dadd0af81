"""The agent's core: configuration versions, snapshots, waiters, workers, plans, batches.

Everything runs on the aiohttp event loop, so the hub needs no locks; waiting is done on
asyncio Events that are replaced at each publication (every long-poll waiting on the old
one wakes at once, with one shared, pre-serialised body). State that must survive a restart
lives in `DurableState` and is saved before anything that depends on it is published.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from swivel.api.errors import FieldProblem
from swivel.api.phases import FINAL_PHASES, PlanPhase
from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.agent import plans
from swivel.jobs.agent.acks import AcksRejected, implausible, parse_acks, transient
from swivel.jobs.agent.driver_actions import (
    COORDINATION_ACTION,
    MIGRATION_ACTIONS,
    DriverActions,
    driver_action,
    of_plan,
)
from swivel.jobs.agent.latest_loads import LatestLoads
from swivel.jobs.agent.metrics import AgentMetrics
from swivel.jobs.agent.plans import PlanRecord, Timings
from swivel.jobs.agent.store import DurableState, StateStore
from swivel.jobs.agent.submissions import (
    Planner,
    PlanRejected,
    build_transition,
    default_planner,
    initial_operators,
    parse_submission,
    runtime_refusals,
    updated_operators,
)
from swivel.jobs.agent.wire import BodyRejected, CoordinationReport, MigrationReport, ProgressReport
from swivel.jobs.agent.workers import WorkerRegistry
from swivel.jobs.control.recording import record_update
from swivel.jobs.control.snapshots import Snapshot

MAX_BATCH_JUMP = 1_000_000  # a driver's batch id this far beyond the last one is a lie


class Hub:
    def __init__(
        self,
        job: StreamJobSpec,
        job_name: str,
        *,
        store: StateStore | None = None,
        planner: Planner = default_planner,
        clock: Callable[[], float] = time.time,
        worker_ttl_s: float = 30.0,
        forget_after_s: float | None = None,
        plan_timeout_s: float = 600.0,
        metrics: AgentMetrics | None = None,
        schedule_dir: Path | None = None,
        migrations: bool | None = None,
    ) -> None:
        self.job, self.job_name = job, job_name
        self._store, self._planner, self._clock = store, planner, clock
        self._worker_ttl_s, self._plan_timeout_s = worker_ttl_s, plan_timeout_s
        # A worker not seen for this long is forgotten (the registry is bounded); until then
        # one that reappears keeps the operators and hosting times it had.
        self._forget_after_s = 4 * worker_ttl_s if forget_after_s is None else forget_after_s
        self.metrics = metrics or AgentMetrics()
        self._schedule_dir = schedule_dir
        if migrations is None:  # the driver runs a MigrationDriver (docs/migration.md)
            migrations = os.environ.get("SWIVEL_AGENT_MIGRATIONS") == "1"
        self.migrations = migrations
        self.registry = WorkerRegistry(
            [op.name for op in job.dataflow.operators],
            clock,
            ttl_s=worker_ttl_s,
            forget_after_s=self._forget_after_s,
        )
        self.workers = self.registry.by_pid  # pid -> Worker (workers.py)
        self.known_operators = self.registry.known_operators
        self._register = self.registry.register
        self._registered = self.registry.registered
        self.live_workers = self.registry.live
        self._booted_at = clock()
        self.ready = False
        self._last_started: int | None = None
        self._last_completed: int | None = None
        self._retire_after_batch: int | None = None
        self._loads = LatestLoads(job.dataflow.bins, self.metrics, clock)
        self._state = (store.load() if store else None) or self._fresh_state()
        # A corrupt state file was moved aside and the job starts from its spec (store.py).
        self.state_recovered_from = store.recovered_from if store else None
        if self.state_recovered_from is not None:
            self.metrics.state_recovered.inc()
        self._snapshot_changed = asyncio.Event()
        self._actions = DriverActions(self._state.actions, clock)
        self._resume_accepted_plan()
        if self._actions.settle(self.active_plan):
            self._save()
        self._snapshot, self._snapshot_body = self._render()

    def _fresh_state(self) -> DurableState:
        operators = initial_operators(self.job)
        return DurableState(
            config_version=1,
            operators=operators,
            history={1: operators},
            accepted_at={1: self._clock()},
        )

    def _resume_accepted_plan(self) -> None:
        # Accepted = durable but maybe never published: publishing it again is harmless.
        record = self.active_plan
        if record is not None and record.phase is PlanPhase.ACCEPTED:
            self._state.plans[record.id] = plans.move(record, PlanPhase.APPLYING)
            self._save()

    # -- snapshots and the watch channel ----------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def snapshot_body(self) -> bytes:
        return self._snapshot_body

    def _render(self) -> tuple[Snapshot, bytes]:
        state = self._state
        pinned_configs = {
            cv: state.history[cv]
            for cv in set(state.pinned_batches.values())
            if cv != state.config_version and cv in state.history
        }
        snapshot = Snapshot(
            config_version=state.config_version,
            operators=state.operators,
            revision=state.revision,
            transition=state.transition,
            pinned_batches=dict(state.pinned_batches),
            pinned_configs=pinned_configs,
        )
        return snapshot, json.dumps(snapshot.to_json(), separators=(",", ":")).encode()

    def _publish(self) -> None:
        self._state.revision += 1
        self._prune_history()
        self._save()
        self._snapshot, self._snapshot_body = self._render()
        self.metrics.config_version.set(self._state.config_version)
        woken, self._snapshot_changed = self._snapshot_changed, asyncio.Event()
        woken.set()

    async def watch(
        self, since: int, pid: int | None, operators: Iterable[str], timeout: float
    ) -> bytes | None:
        """The snapshot body once its revision differs from `since`, else None on timeout."""
        worker = self._register(pid, operators) if pid is not None else None
        if worker is not None:
            worker.watching += 1
        try:
            changed = self._snapshot_changed
            if self._state.revision == since and timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout)
            if self._state.revision == since:
                return None
            self.metrics.control_messages.inc()
            return self._snapshot_body
        finally:
            if worker is not None:
                worker.watching -= 1
                worker.last_seen = self._clock()

    def latest_batch(self) -> int | None:
        """The last batch id the driver reported (kept across agent restarts), None before."""
        seen = [b for b in (self._last_started, self._last_completed) if b is not None]
        seen += [max(self._state.batch_versions)] if self._state.batch_versions else []
        return max(seen) if seen else None

    # -- plans ----------------------------------------------------------------------------

    @property
    def active_plan(self) -> PlanRecord | None:
        plan_id = self._state.active_plan
        return self._state.plans.get(plan_id) if plan_id else None

    def plan(self, plan_id: str) -> PlanRecord | None:
        return self._state.plans.get(plan_id)

    def plan_document(self, record: PlanRecord) -> dict[str, Any]:
        expected = self._expected(record) if record.phase is PlanPhase.APPLYING else frozenset()
        return record.to_json(expected)

    def submit(self, body: Any) -> PlanRecord:
        """Accept a plan (durably, then publish it) or raise PlanRejected (400/409/422)."""
        return self.accept(body)[0]

    def accept(self, body: Any) -> tuple[PlanRecord, bool]:
        """`submit`, telling a new plan (True) from the one an earlier submission with the
        same `idempotencyKey` created (False: nothing is planned or published again)."""
        try:
            submission = parse_submission(body, self.job, self.job_name, migrations=self.migrations)
            earlier = self._plan_with_key(submission.idempotency_key)
            if earlier is not None:
                return earlier, False
            self._refuse_while_busy()
            plan = self._planner(self.job, submission.spec)
            refused = runtime_refusals(plan, self.job, submission)
            if refused:
                raise PlanRejected(422, refused)
        except PlanRejected:
            self.metrics.plans.labels("rejected").inc()
            raise
        state, now = self._state, self._clock()
        plan_id = f"{_slug(submission.name)}-{state.config_version + 1}"
        new_operators = updated_operators(state.operators, submission.spec)
        next_batch = self._first_untouched_batch()
        transition = build_transition(
            plan_id=plan_id,
            scheduler=submission.scheduler,
            plan=plan,
            current=state.operators,
            spec=submission.spec,
            from_config_version=state.config_version,
            apply_from_batch=next_batch,
        )
        record = PlanRecord(
            id=plan_id,
            name=submission.name,
            scheduler=submission.scheduler,
            spec=submission.spec.to_manifest(),
            plan=plan,
            from_config_version=state.config_version,
            to_config_version=state.config_version + 1,
            targets={op: new_operators[op].version for op in submission.spec.targets},
            timings=Timings(requested_at=submission.requested_at or now, accepted_at=now),
            idempotency_key=submission.idempotency_key,
        )
        self._record_schedule_updates(record, state.operators)
        state.config_version += 1
        state.operators = new_operators
        state.history[state.config_version] = new_operators
        state.accepted_at[state.config_version] = now
        state.transition, state.plans[plan_id], state.active_plan = transition, record, plan_id
        if submission.scheduler == "restart":
            self._actions.add({"action": "restart", "configVersion": state.config_version})
        migration = driver_action(plan_id, record.spec)  # rescale / moves (docs/migration.md)
        if migration is not None:
            self._actions.add(migration)
            self._loads.forget()  # measured on a placement that is about to change
        if submission.spec.coordination is not None:
            interval = submission.spec.coordination.interval_seconds
            self._actions.add(
                {"action": COORDINATION_ACTION, "planId": plan_id, "intervalSeconds": interval}
            )
        self._save()  # durable: from here on an agent restart resumes this plan
        state.plans[plan_id] = record = plans.move(record, PlanPhase.APPLYING)
        self._publish()
        self.metrics.plans.labels("accepted").inc()
        return record, True

    def _plan_with_key(self, key: str | None) -> PlanRecord | None:
        """The plan an earlier submission with this key created (kept in the durable state,
        so a repeat after an agent restart is recognised too)."""
        if key is None:
            return None
        return next((p for p in self._state.plans.values() if p.idempotency_key == key), None)

    def _refuse_while_busy(self) -> None:
        running = self.active_plan
        if running is not None:
            reason = f"plan {running.id} is {running.phase.value}; one plan at a time"
            raise PlanRejected(409, [FieldProblem("", reason)], running_plan=running.id)
        transition = self._state.transition
        if transition is not None:
            reason = (
                f"plan {transition.id} completed; its transition ends with the current "
                "micro-batch, retry in a moment"
            )
            raise PlanRejected(409, [FieldProblem("", reason)], running_plan=transition.id)

    def _record_schedule_updates(self, record: PlanRecord, before: Mapping[str, Any]) -> None:
        if self._schedule_dir is None:
            return
        for operator, version in record.targets.items():
            record_update(
                self._schedule_dir, operator, before[operator].version, version,
                txn=record.to_config_version,
            )  # fmt: skip

    def _expected(self, record: PlanRecord) -> frozenset[plans.WorkerOperator]:
        """Live workers that hosted a target or a Fries head when the plan was accepted: a
        worker that starts hosting it later (a freshly forked Python worker) never ran the
        old version, so it has nothing to switch; its records still count towards
        propagation."""
        accepted = record.timings.accepted_at
        hosted = (
            (w.pid, op)
            for w in self.live_workers()
            for op in w.operators
            if accepted is None or self._hosted_before(w.hosting_since.get(op, 0.0), accepted)
        )
        return plans.expected_workers(record, hosted)

    def _hosted_before(self, since: float, accepted: float) -> bool:
        """Whether a worker hosting an operator since `since` (as this agent learnt it) may
        have run it before `accepted`. After an agent restart every worker registers anew:
        for a plan accepted before the boot, one that reappears within a worker TTL of it
        may have been hosting all along, so it counts (a worker forked meanwhile only
        makes the plan wait for its first ack)."""
        if since <= accepted:
            return True
        return accepted < self._booted_at and since <= self._booted_at + self._worker_ttl_s

    # -- acknowledgements -----------------------------------------------------------------

    def record_acks(self, body: Any) -> None:
        """Acks from workers: registration, plan progress, maybe completion. The whole body
        is validated first (AcksRejected, 400), so a bad ack never leaves half applied.
        `body` may be acks already parsed: the HTTP handler parses first to check that the
        caller speaks for every worker the acks name (app.py, `_speaks_for`)."""
        acks = parse_acks(body)
        problems = implausible(
            acks,
            versions={op: config.version for op, config in self._state.operators.items()},
            config_version=self._state.config_version,
            registered=self._registered,
            latest_batch=self.latest_batch(),
            now=self._clock(),
        )
        if problems:
            self.metrics.rejected.labels("acks").inc()
            raise AcksRejected(problems, 409 if transient(problems) else 422)
        record = self.active_plan
        before = record
        for ack in acks:
            # A worker clock ahead of the agent's (skew) counts as now.
            at = self._clock() if ack.at is None else min(ack.at, self._clock())
            self._register(ack.pid, (ack.operator,), since=at)  # it checked at `at`
            self.metrics.acks.inc()
            if record is not None:
                record = plans.record_switch(
                    record,
                    pid=ack.pid,
                    operator=ack.operator,
                    version=ack.version,
                    at=at,
                    batch_id=ack.batch_id,
                    kind=ack.kind.value,
                    config_version=ack.config_version,
                    running_batch=self._last_started,
                    completed_batch=self._last_completed,
                )
        if record is not None and record is not before:
            self._state.plans[record.id] = record
            self._save()
        self.check_plan()

    def check_plan(self) -> None:
        """Complete the active plan when due, fail it when it timed out."""
        record = self.active_plan
        if record is None or record.phase is not PlanPhase.APPLYING:
            return
        now = self._clock()
        expected = self._expected(record)
        if plans.completion_due(record, expected):
            done = plans.move(record, PlanPhase.COMPLETED, timings=_completed(record, now))
            self._finish(done, "completed")
            if done.delay_ms is not None:
                self.metrics.delay.labels(done.scheduler).observe(done.delay_ms / 1000.0)
        elif now - (record.timings.accepted_at or now) > self._plan_timeout_s:
            waiting = plans.still_waiting(record, expected)
            message = f"timed out after {self._plan_timeout_s:.0f}s waiting for {waiting}"
            failed = plans.move(
                record, PlanPhase.FAILED, timings=_completed(record, now), message=message
            )
            self._finish(failed, "failed")

    def _finish(self, record: PlanRecord, outcome: str) -> None:
        self._state.plans[record.id] = record
        self._state.active_plan = None

        self._actions.mark_done(lambda a: of_plan(a, record))  # nothing left to carry out
        self.metrics.plans.labels(outcome).inc()
        self._retire_after_batch = record.last_switch_batch
        if (
            record.last_switch_batch is None
            and self._last_started is None
            and self._last_completed is None
        ):
            self._state.transition = None  # no driver: no batch to wait for
            self._publish()
        else:
            self._save()

    # -- the driver channel ---------------------------------------------------------------

    def record_progress(self, body: Any) -> None:
        """A micro-batch started or completed (driver runtime); BodyRejected (400) when not a
        `ProgressReport`, (422) when its batch id leaps far beyond the last one."""
        report = ProgressReport.parse(body)
        latest = self.latest_batch()
        if latest is not None and report.batch_id > latest + MAX_BATCH_JUMP:
            self.metrics.rejected.labels("progress").inc()
            reason = f"{report.batch_id} is more than {MAX_BATCH_JUMP} past the last batch {latest}"
            raise BodyRejected.single("batchId", reason, 422)
        self.ready = True
        batch, kind = report.batch_id, report.event
        self.metrics.batches.labels(kind).inc()
        state = self._state
        if kind == "started":
            self._last_started = max(batch, self._last_started or batch)
            recorded = state.batch_versions.get(batch)
            if recorded is None:
                state.remember_batch(batch, self._version_at(report.at or 0.0))
                self._save()
            elif recorded != state.config_version and batch not in state.pinned_batches:
                state.pinned_batches[batch] = recorded  # a replay: run it as it first ran
                self._publish()
        elif kind == "completed":
            self._last_completed = max(batch, self._last_completed or batch)
            self._note_batch_end(batch, report.at or self._clock())
            changed = state.pinned_batches.pop(batch, None) is not None
            if state.transition is not None and state.active_plan is None:
                after = self._retire_after_batch
                if after is None or batch >= after:
                    state.transition, changed = None, True
            if changed:
                self._publish()

    def _note_batch_end(self, batch: int, at: float) -> None:
        """The active plan may wait for this batch to end (old-tagged rows, plans.py)."""
        record = self.active_plan
        if record is None:
            return
        ended = plans.record_batch_end(record, batch, at)
        if ended is not record:
            self._state.plans[record.id] = ended
            self._save()
            self.check_plan()

    def record_migration(self, report: Mapping[str, Any]) -> None:
        """The driver's bin-migration progress for plan `planId` (POST /v1/driver/migration);
        BodyRejected when not a `MigrationReport` (400) or of no plan the agent has (422)."""
        parsed = MigrationReport.parse(report)
        record = self._known_plan(parsed.plan_id)
        if record.phase is not PlanPhase.APPLYING:
            return
        record = replace(record, migration=dict(report))
        self._state.plans[record.id] = record
        if report.get("phase") in FINAL_PHASES:
            plan_id = record.id
            self._actions.mark_done(
                lambda a: a.get("planId") == plan_id and a.get("action") in MIGRATION_ACTIONS
            )
            self._loads.forget()  # anything measured meanwhile saw a placement in motion
        if report.get("phase") == "Failed":
            message = str(report.get("message") or "the bin migration failed")
            failed = plans.move(
                record, PlanPhase.FAILED, timings=_completed(record, self._clock()), message=message
            )
            self._finish(failed, "failed")
            return
        if report.get("phase") == "Completed" and not record.targets:
            record = replace(
                record,
                timings=plans.switched_without_workers(record.timings, self._clock()),
                message=str(report.get("message") or ""),
            )
            self._state.plans[record.id] = record
        self._save()
        self.check_plan()

    # -- loads for the policies (docs/control-protocol.md, "Loads") --------------------------

    def record_loads(self, body: Any) -> None:
        """The driver's latest load measurement; LoadsRejected (400) when malformed."""
        self._loads.record(body)

    def loads(self) -> dict[str, Any] | None:
        """The latest measurement with `receivedAt` and `ageSeconds`, None before any (or
        after bins moved: a measurement of the old placement would mislead a policy)."""
        return self._loads.document()

    def _known_plan(self, plan_id: str) -> PlanRecord:
        record = self.plan(plan_id)
        if record is None:
            self.metrics.rejected.labels("driver").inc()
            raise BodyRejected.single("planId", f"no plan {plan_id!r} in this agent", 422)
        return record

    def record_coordination(self, body: Any) -> None:
        """The driver applied a coordination interval (POST /v1/driver/coordination);
        BodyRejected when not a `CoordinationReport` (400) or of an unknown plan (422)."""
        report = CoordinationReport.parse(body)
        if report.plan_id is not None:
            self._known_plan(report.plan_id)
        interval = report.interval_seconds
        self.metrics.coordination_interval.set(interval)
        plan_id = report.plan_id or ""
        if self._actions.mark_done(
            lambda a: a.get("action") == COORDINATION_ACTION and a.get("planId") == plan_id
        ):
            self._save()
        record = self.plan(plan_id)
        if record is None or record.phase is not PlanPhase.APPLYING:
            return
        now = self._clock()
        timings = record.timings
        if not record.targets and not record.moves_bins:  # nothing else to wait for
            timings = plans.switched_without_workers(timings, now)
        record = replace(
            record, coordination={"intervalSeconds": interval, "appliedAt": now}, timings=timings
        )
        self._state.plans[record.id] = record
        self._save()
        self.check_plan()

    def coordination_interval(self) -> float | None:
        """The interval of the last coordination the driver confirmed (durable: the plans
        survive an agent restart), so a restarted driver takes it up (GET /v1/config)."""
        confirmed = [p.coordination for p in self._state.plans.values() if p.coordination]
        if not confirmed:
            return None
        last = max(confirmed, key=lambda c: float(c.get("appliedAt") or 0.0))
        return float(last["intervalSeconds"])

    def _first_untouched_batch(self) -> int:
        """The first batch id surely not yet running (epoch's applyFromBatch).

        After a `started` report the next batch has not begun; after only a `completed`
        report the following batch may already be running, so the one after it.
        """
        candidates = [0]
        if self._last_started is not None:
            candidates.append(self._last_started + 1)
        if self._last_completed is not None:
            candidates.append(self._last_completed + 2)
        return max(candidates)

    def _version_at(self, at: float) -> int:
        """The configuration version in force at `at` (0/unknown time: the current one)."""
        if not at:
            return self._state.config_version
        times = self._state.accepted_at
        earlier = [cv for cv, accepted in times.items() if accepted <= at]
        return max(earlier) if earlier else min(times)

    def action_done(self, seq: int) -> bool:
        """The driver carried out action `seq` (POST /v1/driver/actions/done). False: no such
        action kept. Durable before the answer."""
        if self._actions.mark_done(lambda a: int(a["seq"]) == seq):
            self._save()
            return True
        return self._actions.kept(seq)

    def pending_actions(self) -> list[dict[str, Any]]:
        """The actions not yet done, oldest first, as handed out (without the done mark)."""
        return self._actions.pending()

    async def next_driver_action(self, since: int, timeout: float) -> dict[str, Any] | None:
        """The oldest action not yet done with seq > `since`, waiting up to `timeout`
        (`DriverActions.next`)."""
        return await self._actions.next(since, timeout)

    # -- views and housekeeping -----------------------------------------------------------

    def topology(self) -> dict[str, Any]:
        operators = [
            {
                "name": op.name,
                "kind": op.kind.value,
                "inputs": [edge.from_ for edge in op.inputs],
                "parallelism": op.parallelism,
                "key": op.key,
            }
            for op in self.job.dataflow.operators
        ]
        workers = [
            {"pid": w.pid, "operators": sorted(w.operators), "lastSeen": w.last_seen}
            for w in self.live_workers()
        ]
        return {"job": self.job_name, "bins": self.job.dataflow.bins, "operators": operators,
                "workers": workers}  # fmt: skip

    def tick(self) -> None:
        """Periodic: forget dead workers, re-check the plan (a dead worker may unblock it)."""
        self.registry.forget()
        self.metrics.workers.set(len(self.live_workers()))
        self.check_plan()

    def _prune_history(self) -> None:
        state = self._state
        keep = {state.config_version, *state.batch_versions.values()}
        if state.transition is not None:
            keep.add(state.transition.from_config_version)
        state.history = {cv: ops for cv, ops in state.history.items() if cv in keep}

    def _save(self) -> None:
        if self._store is not None:
            self._store.save(self._state)


def _completed(record: PlanRecord, now: float) -> Timings:
    return plans.completion_timings(record, now)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:50] or "plan"
