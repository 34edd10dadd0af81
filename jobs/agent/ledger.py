"""The plan ledger: the plans the agent holds, their documents, and when one finishes.

A plan changes only where the agent learns something: an acceptance (intake.py), a
worker's acks (`record_acks`), a driver report (driver_channel.py), and time (a plan timing
out, a worker ageing out), which the app's periodic task (`Hub.tick`) brings in. Each of
these ends in `settle`: complete or fail the active plan when due, then re-render the
documents that may have changed. So a read (`document`, `GET /v1/plans/{id}`) never
changes anything: it returns the document as the last change left it.

Each document carries a `revision` that differs whenever the document does, and
`wait` lets a reader long-poll for the next one (`?since=<revision>&timeout=<s>`). Revisions
count from the agent's boot time in milliseconds, so a restarted agent does not hand out a
revision its predecessor used for another document (a follower holding an old one gets an
answer at once). Waiting is an asyncio Event replaced at each change, like the snapshot's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from swivel.api.phases import PlanPhase
from swivel.jobs.agent import plans
from swivel.jobs.agent.acks import AcksRejected, implausible, transient
from swivel.jobs.agent.batches import Batches
from swivel.jobs.agent.configuration import ConfigChannel
from swivel.jobs.agent.driver_actions import DriverActions, of_plan
from swivel.jobs.agent.metrics import AgentMetrics
from swivel.jobs.agent.plans import PlanRecord
from swivel.jobs.agent.store import DurableState
from swivel.jobs.agent.workers import WorkerRegistry
from swivel.protocol.acks import Ack


class PlanLedger:
    def __init__(  # noqa: PLR0917 - the parts a plan's life touches
        self,
        state: DurableState,
        save: Callable[[], None],
        registry: WorkerRegistry,
        batches: Batches,
        config: ConfigChannel,
        actions: DriverActions,
        metrics: AgentMetrics,
        clock: Callable[[], float],
        *,
        plan_timeout_s: float,
        worker_ttl_s: float,
    ) -> None:
        self._state, self._save, self._registry = state, save, registry
        self._batches, self._config, self._actions = batches, config, actions
        self._metrics, self._clock = metrics, clock
        self._plan_timeout_s, self._worker_ttl_s = plan_timeout_s, worker_ttl_s
        self._booted_at = clock()
        self._revision = int(self._booted_at * 1000)
        self._documents: dict[str, tuple[int, dict[str, Any]]] = {}
        self._dirty: set[str] = set(state.plans)
        self._changed = asyncio.Event()
        self.refresh()

    # -- records --------------------------------------------------------------------------

    @property
    def active(self) -> PlanRecord | None:
        plan_id = self._state.active_plan
        return self._state.plans.get(plan_id) if plan_id else None

    def get(self, plan_id: str) -> PlanRecord | None:
        return self._state.plans.get(plan_id)

    def put(self, record: PlanRecord) -> None:
        """Keep `record` (saved by the caller); its document is re-rendered at `settle`."""
        self._state.plans[record.id] = record
        self._dirty.add(record.id)

    def with_key(self, key: str | None) -> PlanRecord | None:
        """The plan an earlier submission with this key created (kept in the durable state,
        so a repeat after an agent restart is recognised too)."""
        if key is None:
            return None
        return next((p for p in self._state.plans.values() if p.idempotency_key == key), None)

    # -- documents and their long-poll ------------------------------------------------------

    def render(
        self, record: PlanRecord, expected: frozenset[plans.WorkerOperator] | None = None
    ) -> dict[str, Any]:
        """`record`'s document as it is now (without `revision`): its progress counts the
        live workers that must switch (`expected`, when the caller has just computed it)."""
        if record.phase is not PlanPhase.APPLYING:
            return record.to_json(frozenset())
        return record.to_json(self.expected(record) if expected is None else expected)

    def document(self, plan_id: str) -> dict[str, Any] | None:
        """The plan's document as the last change left it, with its `revision`."""
        kept = self._documents.get(plan_id)
        return None if kept is None else {**kept[1], "revision": kept[0]}

    def refresh(self, expected: frozenset[plans.WorkerOperator] | None = None) -> None:
        """Re-render the plans that changed and the active one (its workers come and go);
        a document that differs gets a new revision and wakes the long-polls. `expected`:
        the active plan's, when the caller has just computed it."""
        active = self._state.active_plan
        ids, self._dirty = self._dirty | ({active} if active else set()), set()
        changed = False
        for plan_id in ids:
            record = self._state.plans.get(plan_id)
            if record is None:
                continue
            body = self.render(record, expected if plan_id == active else None)
            kept = self._documents.get(plan_id)
            if kept is None or kept[1] != body:
                self._revision += 1
                self._documents[plan_id] = (self._revision, body)
                changed = True
        if changed:
            woken, self._changed = self._changed, asyncio.Event()
            woken.set()

    async def wait(self, plan_id: str, since: int | None, timeout: float) -> dict[str, Any] | None:
        """The document once its revision differs from `since` (at once without `since`),
        else the unchanged document after `timeout` seconds; None when there is no such plan."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            document = self.document(plan_id)
            remaining = deadline - loop.time()
            if document is None or document["revision"] != since or remaining <= 0:
                return document
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    # -- who must switch --------------------------------------------------------------------

    def expected(self, record: PlanRecord) -> frozenset[plans.WorkerOperator]:
        """Live workers that hosted a target or a Fries head when the plan was accepted: a
        worker that starts hosting it later (a freshly forked Python worker) never ran the
        old version, so it has nothing to switch; its records still count towards
        propagation."""
        accepted = record.timings.accepted_at
        hosted = (
            (w.pid, op)
            for w in self._registry.live()
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

    # -- acknowledgements -------------------------------------------------------------------

    def record_acks(self, acks: list[Ack]) -> None:
        """Parsed acks: registration, plan progress, maybe completion; AcksRejected (409 or
        422) when one cannot be true, before any is applied."""
        state = self._state
        problems = implausible(
            acks,
            versions={op: config.version for op, config in state.operators.items()},
            config_version=state.config_version,
            registered=self._registry.registered,
            latest_batch=self._batches.latest(state),
            now=self._clock(),
        )
        if problems:
            self._metrics.rejected.labels("acks").inc()
            raise AcksRejected(problems, 409 if transient(problems) else 422)
        record = before = self.active
        for ack in acks:
            # A worker clock ahead of the agent's (skew) counts as now.
            at = self._clock() if ack.at is None else min(ack.at, self._clock())
            self._registry.register(ack.pid, (ack.operator,), since=at)  # it checked at `at`
            self._metrics.acks.inc()
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
                    running_batch=self._batches.last_started,
                    completed_batch=self._batches.last_completed,
                )
        if record is not None and record is not before:
            self.put(record)
            self._save()
        self.settle()

    # -- completion, failure, timeouts ------------------------------------------------------

    def settle(self) -> None:
        """After anything the active plan may depend on changed (or time passed): complete
        it when due, fail it when it timed out, then refresh the documents."""
        record = self.active
        if record is None or record.phase is not PlanPhase.APPLYING:
            self.refresh()
            return
        expected = self.expected(record)  # once: the check and the document both count it
        self._check(record, expected)
        self.refresh(expected)

    def _check(self, record: PlanRecord, expected: frozenset[plans.WorkerOperator]) -> None:
        now = self._clock()
        if plans.completion_due(record, expected):
            done = plans.move(record, PlanPhase.COMPLETED, timings=_completed(record, now))
            self.finish(done, "completed")
            if done.delay_ms is not None:
                self._metrics.delay.labels(done.scheduler).observe(done.delay_ms / 1000.0)
        elif now - (record.timings.accepted_at or now) > self._plan_timeout_s:
            waiting = plans.still_waiting(record, expected)
            self.fail(record, f"timed out after {self._plan_timeout_s:.0f}s waiting for {waiting}")

    def fail(self, record: PlanRecord, message: str) -> None:
        failed = plans.move(
            record, PlanPhase.FAILED, timings=_completed(record, self._clock()), message=message
        )
        self.finish(failed, "failed")

    def finish(self, record: PlanRecord, outcome: str) -> None:
        """`record` is final: no longer active, its driver actions moot; its transition is
        retired after the batch of its last switch (at once when there is no driver)."""
        self.put(record)
        self._state.active_plan = None
        self._actions.mark_done(lambda a: of_plan(a, record))  # nothing left to carry out
        self._metrics.plans.labels(outcome).inc()
        self._batches.retire_after = record.last_switch_batch
        if record.last_switch_batch is None and not self._batches.driver_seen:
            self._state.transition = None  # no driver: no batch to wait for
            self._config.publish()
        else:
            self._save()


def _completed(record: PlanRecord, now: float) -> plans.Timings:
    return plans.completion_timings(record, now)
