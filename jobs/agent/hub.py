"""The agent's parts, put together: the one object the app, the CLI and the tests hold.

The parts, by responsibility (each reads in one sitting):

- configuration.py `ConfigChannel`: versions, the snapshot workers run, its long-poll;
- workers.py `WorkerRegistry` (and acks.py, their validation): who runs what, who is alive;
- ledger.py `PlanLedger` and intake.py `PlanIntake`: plans from acceptance to
  completion, failure or timeout, and their documents' long-poll;
- driver_channel.py `DriverChannel`: batches, migrations, loads, coordination, actions;
- worker_loads.py `WorkerLoadWindow`: the workers' counts (rows, busy time per operator and
  bin) over a sliding window, served inside the loads (Chi §5).

The hub stays as a thin composition, and the routes talk to it rather than to the parts,
for two reasons: the parts share one `DurableState`, saved as a whole to one file (store.py),
so one owner loads it, recovers it and hands every part the same `save`; and the hub's
methods are the agent's in-process API (embedded mode, the benchmarks and the tests drive a
`Hub` without HTTP), which the split leaves unchanged. Time-based changes (a plan timing
out, a worker ageing out) come in through `tick`, which the app calls periodically: no
read changes anything. Everything runs on one event loop: no locks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from swivel.api.dataflow import OperatorKind
from swivel.api.errors import FieldProblem
from swivel.api.phases import PlanPhase
from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.agent import plans
from swivel.jobs.agent.acks import (
    AcksRejected,
    implausible_counts,
    parse_acks,
    parse_report,
    plausible_counts,
)
from swivel.jobs.agent.batches import Batches
from swivel.jobs.agent.configuration import ConfigChannel
from swivel.jobs.agent.driver_actions import DriverActions
from swivel.jobs.agent.driver_channel import DriverChannel
from swivel.jobs.agent.intake import PlanIntake, initial_operators
from swivel.jobs.agent.latest_loads import LatestLoads
from swivel.jobs.agent.ledger import PlanLedger
from swivel.jobs.agent.metrics import AgentMetrics
from swivel.jobs.agent.parts import HubParts
from swivel.jobs.agent.plans import PlanRecord
from swivel.jobs.agent.store import DurableState, StateStore
from swivel.jobs.agent.worker_loads import DEFAULT_WINDOW_S, WorkerLoadWindow
from swivel.jobs.agent.workers import WorkerRegistry
from swivel.protocol.acks import Ack
from swivel.protocol.answers import Topology, TopologyOperator, TopologyWorker
from swivel.protocol.bodies import PrewarmCheck
from swivel.protocol.counts import WorkerCounts
from swivel.protocol.snapshots import Snapshot


class Hub:
    def __init__(
        self,
        job: StreamJobSpec,
        job_name: str,
        *,
        store: StateStore | None = None,
        clock: Callable[[], float] = time.time,
        worker_ttl_s: float = 30.0,
        forget_after_s: float | None = None,
        plan_timeout_s: float = 600.0,
        metrics: AgentMetrics | None = None,
        schedule_dir: Path | None = None,
        migrations: bool | None = None,
        worker_loads_window_s: float | None = None,
    ) -> None:
        self.job, self.job_name = job, job_name
        self._store, self._clock = store, clock
        self.metrics = metrics or AgentMetrics()
        if migrations is None:  # the driver runs a MigrationDriver (docs/migration.md)
            migrations = os.environ.get("SWIVEL_AGENT_MIGRATIONS") == "1"
        self.migrations = migrations
        # A worker not seen for this long is forgotten (the registry is bounded); until then
        # one that reappears keeps the operators and hosting times it had.
        forget_after_s = 4 * worker_ttl_s if forget_after_s is None else forget_after_s
        self.registry = WorkerRegistry(
            [op.name for op in job.dataflow.operators],
            clock,
            ttl_s=worker_ttl_s,
            forget_after_s=forget_after_s,
        )
        self.workers = self.registry.by_pid  # pid -> Worker (workers.py)
        self.known_operators = self.registry.known_operators
        self._register = self.registry.register
        self.live_workers = self.registry.live
        self._state = (store.load() if store else None) or self._fresh_state()
        # A corrupt state file was moved aside and the job starts from its spec (store.py).
        self.state_recovered_from = store.recovered_from if store else None
        if self.state_recovered_from is not None:
            self.metrics.state_recovered.inc()
        state, save = self._state, self._save
        self._batches = Batches()
        if worker_loads_window_s is None:
            raw_window = os.environ.get("SWIVEL_WORKER_LOADS_WINDOW_S")
            worker_loads_window_s = float(raw_window) if raw_window else DEFAULT_WINDOW_S
        self.keyed = {op.name: op.kind is OperatorKind.KEYED for op in job.dataflow.operators}
        self.worker_loads = WorkerLoadWindow(
            self.keyed, clock, worker_loads_window_s, self.metrics.record_worker_counts
        )
        self._loads = LatestLoads(job.dataflow.bins, self.metrics, clock, self.worker_loads)
        self._actions = DriverActions(state.actions, clock)
        self.config = ConfigChannel(state, save, self.metrics, clock)
        self.ledger = PlanLedger(
            state, save, self.registry, self._batches, self.config, self._actions,
            self.metrics, clock, plan_timeout_s=plan_timeout_s, worker_ttl_s=worker_ttl_s,
        )  # fmt: skip
        parts = HubParts(
            state=state, save=save, ledger=self.ledger, config=self.config,
            actions=self._actions, loads=self._loads, batches=self._batches,
            metrics=self.metrics, clock=clock,
        )  # fmt: skip
        self.intake = PlanIntake(
            job, job_name, parts, migrations=migrations, schedule_dir=schedule_dir
        )
        self.driver = DriverChannel(parts)
        self._resume_accepted_plan()
        if self._actions.settle(self.active_plan):
            self._save()

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
            self.ledger.put(plans.move(record, PlanPhase.APPLYING))
            self._save()
            self.ledger.refresh()

    def _save(self) -> None:
        if self._store is not None:
            self._store.save(self._state)

    # -- the configuration channel ----------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        return self.config.snapshot

    @property
    def snapshot_body(self) -> bytes:
        return self.config.snapshot_body

    async def watch(
        self, since: int, pid: int | None, operators: Iterable[str], timeout: float
    ) -> bytes | None:
        """A worker's long-poll (`ConfigChannel.watch`); with `pid` it also registers the
        worker and the operators it hosts."""
        worker = self._register(pid, operators) if pid is not None else None
        return await self.config.watch(since, worker, timeout)

    def latest_batch(self) -> int | None:
        """The last batch id the driver reported (kept across agent restarts), None before."""
        return self._batches.latest(self._state)

    # -- plans ------------------------------------------------------------------------------

    @property
    def active_plan(self) -> PlanRecord | None:
        return self.ledger.active

    def plan(self, plan_id: str) -> PlanRecord | None:
        return self.ledger.get(plan_id)

    def plan_document(self, record: PlanRecord) -> dict[str, Any]:
        """`record`'s document with its revision (`GET /v1/plans/{id}`); read only."""
        return self.ledger.document(record.id) or {**self.ledger.render(record), "revision": 0}

    async def wait_plan(
        self, plan_id: str, since: int | None, timeout: float
    ) -> dict[str, Any] | None:
        """The plan's long-poll (`PlanLedger.wait`); None when there is no such plan."""
        return await self.ledger.wait(plan_id, since, timeout)

    def submit(self, body: Any) -> PlanRecord:
        """Accept a plan (durably, then publish it) or raise PlanRejected (400/409/422)."""
        return self.accept(body)[0]

    def accept(self, body: Any) -> tuple[PlanRecord, bool]:
        """`PlanIntake.accept`: the plan and whether it is new (False: an earlier submission
        with the same `idempotencyKey` created it)."""
        return self.intake.accept(body)

    def record_acks(self, body: Any, counts: list[WorkerCounts] | None = None) -> None:
        """Acks from workers: registration, plan progress, maybe completion; and the
        workers' counts riding on them (an `AckReport` object, or `counts`). The whole body
        is validated first (AcksRejected, 400; 409/422 when not true of the job), so a bad
        ack never leaves half applied; count entries untrue of the job are dropped. `body`
        may be acks already parsed: the HTTP handler parses first to check that the caller
        speaks for every worker the acks name (app.py, `_speaks_for`)."""
        prefix = ""
        if isinstance(body, dict):
            acks, counts = parse_report(body)
            prefix = "acks"
        else:
            acks, counts = parse_acks(body), counts or []
        self.record_report(acks, counts, prefix)

    def record_report(self, acks: list[Ack], counts: list[WorkerCounts], prefix: str = "") -> None:
        """Parsed acks and counts (`record_acks`); `prefix` names the acks in errors."""
        bins = self.job.dataflow.bins
        problems = implausible_counts(
            counts, keyed=self.keyed, bins=bins, registered=self.registry.registered
        )
        unknown = [p for p in problems if p.field.endswith(".pid")]
        if unknown:  # the worker's acks would be refused too: 409, it enrols and retries
            self.metrics.rejected.labels("acks").inc()
            raise AcksRejected(unknown, 409)
        if problems:  # monitoring, not control: untrue entries go, the acks still apply
            self.metrics.rejected.labels("counts").inc()
            counts = plausible_counts(counts, keyed=self.keyed, bins=bins)
        if acks or not counts:
            try:
                self.ledger.record_acks(acks)
            except AcksRejected as rejected:  # `acks[i].field` in the object form
                named = [FieldProblem(prefix + p.field, p.reason) for p in rejected.problems]
                raise AcksRejected(named, rejected.status) from None
        self.worker_loads.record(counts)

    def check_plan(self) -> None:
        """Complete the active plan when due, fail it when it timed out."""
        self.ledger.settle()

    def tick(self) -> None:
        """Periodic (the app's background task): forget dead workers, settle the plan (a
        dead worker may unblock it, time may run it out)."""
        self.registry.forget()
        self.metrics.workers.set(len(self.live_workers()))
        self.ledger.settle()

    # -- the driver channel -----------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.driver.ready

    def record_progress(self, body: Any) -> None:
        self.driver.record_progress(body)

    def record_migration(self, report: Mapping[str, Any]) -> None:
        self.driver.record_migration(report)

    def record_coordination(self, body: Any) -> None:
        self.driver.record_coordination(body)

    def coordination_interval(self) -> float | None:
        return self.driver.coordination_interval()

    def record_prewarm_check(self, check: PrewarmCheck) -> None:
        self.driver.record_prewarm_check(check)

    @property
    def prewarm_check(self) -> PrewarmCheck | None:
        return self.driver.prewarm_check

    def record_loads(self, body: Any) -> None:
        """The driver's latest load measurement; LoadsRejected (400) when malformed."""
        self._loads.record(body)

    def loads(self) -> dict[str, Any] | None:
        """The latest measurement (`LatestLoads.document`), None before any."""
        return self._loads.document()

    def action_done(self, seq: int) -> bool:
        return self.driver.action_done(seq)

    def pending_actions(self) -> list[dict[str, Any]]:
        """The actions not yet done, oldest first, as handed out (without the done mark)."""
        return self._actions.pending()

    async def next_driver_action(self, since: int, timeout: float) -> dict[str, Any] | None:
        return await self.driver.next_action(since, timeout)

    # -- views ------------------------------------------------------------------------------

    def topology(self) -> dict[str, Any]:
        """`GET /v1/topology`: the job's operators and the live workers hosting them."""
        operators = [
            TopologyOperator(
                name=op.name,
                kind=op.kind.value,
                inputs=[edge.from_ for edge in op.inputs],
                parallelism=op.parallelism,
                key=op.key,
            )
            for op in self.job.dataflow.operators
        ]
        workers = [
            TopologyWorker(pid=w.pid, operators=sorted(w.operators), last_seen=w.last_seen)
            for w in self.live_workers()
        ]
        topology = Topology(
            job=self.job_name, bins=self.job.dataflow.bins, operators=operators, workers=workers
        )
        return topology.to_wire()
