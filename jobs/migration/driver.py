"""Bin migration beside the job runtime (`swivel.jobs.runtime.driver.JobRuntime`), without
touching its sink: a `StreamingQueryListener` gives the boundaries, a second long-poll on
the agent's driver channel receives `move-bins` / `request-executors` / `kill-executors`
(the runtime's own poller handles `restart` and ignores these), and progress is posted to
`POST /v1/driver/migration`.

    runtime = JobRuntime(job, spark, checkpoint, agent=channel)
    runtime.start()
    migration = MigrationDriver(spark, job.dataflow.bins, lambda: runtime.query, channel)
    migration.start()

Listener boundaries arrive just after a batch ends; with a processing-time trigger the next
batch has usually not been scheduled yet, otherwise a move lands one batch late (or the
verifier sees it run elsewhere and re-points it). A `foreachBatch` sink should call
`BinMover.wrap` instead, which is exact. Given the runtime's `groups`, the boundary hook
runs at its coordination points only, and at every batch while a migration is queued or
running (swivel.jobs.runtime.grouping).

What the workers see is no longer the driver's to read often: rows and busy time per bin
come from the workers themselves, piggybacked on their acks and summed by the agent over a
window of seconds (Chi §5; `GET /v1/loads` `workers`, `swivel.controllers.worker_loads`),
and the policies prefer them when fresh. The driver's measurement stays for what workers
cannot see -- the placement (which executor ran each bin, from Spark's task lists), each
executor's cores and JVM memory, and each bin's state rows and bytes (the state reader:
Spark keeps a store's size in the executors' JVMs only) -- and as the fallback for records
and busy time when no worker reported.

Loads for the policies: after batches, at most once per *coordination interval* (seconds
between two load measurements, apart from the trigger interval: a period, not Drizzle's
group of batches; docs/benchmarks.md, "Drizzle"), a third thread measures
the batches completed since its last measurement (`metrics.measure`: per-bin records and
state, per-executor busy time and memory), adds them to Flux's collection phase
(`collection.CollectionPhase`: every batch since the last move phase ended) and posts that
to `POST /v1/driver/loads`, with the time spent coordinating (measuring, boundary hooks)
and processing (batch durations) since the last report, which the operator's AIMD timer
turns into the next interval. Never while a migration runs (its placement is in motion).
A `set-coordination` action (an accepted Reconfiguration with
`coordination.intervalSeconds`) changes the interval; the driver confirms it with
`POST /v1/driver/coordination`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from swivel.jobs.agent.driver_actions import COORDINATION_ACTION
from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.jobs.migration.actions import MigrationActions
from swivel.jobs.migration.collection import CollectionPhase
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.migration.metrics import (
    LoadSnapshot,
    apply_state_rows,
    loads_document,
    measure,
)
from swivel.jobs.migration.state_memory import OperatorRows
from swivel.jobs.runtime.grouping import CoordinationGroups, timed
from swivel.jobs.runtime.listening import ProgressListener
from swivel.protocol.bodies import PrewarmCheck
from swivel.protocol.documents import MAX_TEXT

DEFAULT_COORDINATION_INTERVAL_S = 60.0  # Flux's first collection phase; AIMD tunes it
# State rows per bin are read with Spark jobs beside the query (the `statestore` reader opens
# every bin's store: 3-5 s and ~5-9 s of CPU for 16 RocksDB bins on 2 cores, ~1/4 of the
# query's CPU over a 60 s interval; docs/migration.md, overhead). A bin's rows change slowly
# and do not move with its placement, so they are read at most this often and reused. Rows
# and busy time per bin, which change fast, come from the workers every second instead.
STATE_ROWS_EVERY_S = 600.0
ATTACH_TIMEOUT_S = 600.0  # a resumed migration waits this long for the query's first batch
Measure = Callable[..., LoadSnapshot]


class _Boundaries(ProgressListener):
    def __init__(self, driver: MigrationDriver) -> None:
        self.driver = driver

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
        return None

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        progress = event.progress
        duration = (progress.durationMs or {}).get("triggerExecution")
        self.driver.on_batch_completed(
            int(progress.batchId),
            str(progress.runId),
            None if duration is None else float(duration),
        )

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        return None

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        return None


class MigrationDriver:
    def __init__(
        self,
        spark: Any,
        bins: int,
        query: Callable[[], Any],
        agent: AgentDriverChannel | None = None,
        mover: BinMover | None = None,
        *,
        checkpoint: str | None = None,
        coordination_interval_s: float = DEFAULT_COORDINATION_INTERVAL_S,
        memory_limit_bytes: int | None = None,
        measure_loads: Measure = measure,
        state_rows_every_s: float = STATE_ROWS_EVERY_S,
        groups: CoordinationGroups | None = None,  # the runtime's (its docstring)
    ) -> None:
        self.spark = spark
        self.groups = groups
        self.query = query
        self.agent = agent
        self.mover = mover or BinMover(spark, bins)
        self.actions = MigrationActions(self.mover, self._report)
        self.checkpoint = checkpoint  # with it, loads include state rows/bytes per bin
        self.coordination_interval_s = coordination_interval_s
        self.memory_limit_bytes = memory_limit_bytes
        self.latest_loads: dict[str, Any] | None = None
        self.latest_snapshot: LoadSnapshot | None = None  # shared with the policy loop
        self._snapshot_taken: float | None = None  # monotonic; None: none, or bins moved since
        self._measuring = threading.Lock()  # one measurement at a time (loop, policy)
        self._measure = measure_loads
        self.state_rows_every_s = state_rows_every_s
        self._state_rows: tuple[OperatorRows, ...] = ()  # the last state rows per bin read
        # Flux's collection phase: loads cover the batches since the last move phase ended.
        self.collection = CollectionPhase()
        self._was_migrating = False  # at the last boundary: a migration may end between two
        self._state_rows_at: float | None = None  # monotonic
        self._listener: _Boundaries | None = None
        self._stopping = threading.Event()
        self._batch_done = threading.Event()
        self._lock = threading.Lock()
        self._coordination_s = 0.0  # since the last loads report (Drizzle's numerator)
        self._processing_s = 0.0
        self._last_measured: float | None = None  # monotonic
        self._warned: set[str] = set()
        self._check_sent: dict[str, str] | None = None  # the mover's last helper_check sent

    def start(self) -> MigrationDriver:
        self._listener = _Boundaries(self)
        self.spark.streams.addListener(self._listener)
        if self.groups is not None:  # a queued or running migration: a boundary every batch
            self.groups.when_pending(lambda: self.mover.migrating)
        if self.agent is not None:
            threading.Thread(
                target=self._follow, daemon=True, name="swivel-migration-actions"
            ).start()
            threading.Thread(target=self._measure_loop, daemon=True, name="swivel-loads").start()
        return self

    def on_batch_completed(
        self, batch_id: int, run_id: str, duration_ms: float | None = None
    ) -> None:
        """The boundary hook, at coordination points only when the runtime groups them
        (swivel.jobs.runtime.grouping): the mover's boundary every batch while it migrates."""
        with timed(self.groups):
            groups = self.groups
            if groups is not None and not self.mover.migrating and not groups.is_point(batch_id):
                with self._lock:
                    self._processing_s += (duration_ms or 0.0) / 1000.0
                return
            self._on_boundary(batch_id, run_id, duration_ms)

    def _on_boundary(self, batch_id: int, run_id: str, duration_ms: float | None) -> None:
        query = self.query()
        if query is None or str(query.runId) != run_id:
            return
        started = time.monotonic()
        if self.mover.query is not query:
            self.mover.attach(query)  # first batch, or the runtime restarted the query
            self.collection.restart(batch_id)
        moving = self._migrating() or self._was_migrating
        self.mover.boundary(batch_id)
        if moving or self._migrating():
            self._snapshot_taken = None  # measured on a placement that is changing
        if moving and not self._migrating():
            # Bins moved: the agent plans the next migration from the placement the loads
            # report, so measure (and report) it after this batch, not an interval later.
            self._last_measured = None
            self.collection.restart(batch_id + 1)  # the first batch wholly on the new placement
        self._was_migrating = self._migrating()
        with self._lock:
            self._coordination_s += time.monotonic() - started
            self._processing_s += (duration_ms or 0.0) / 1000.0
        self._batch_done.set()

    # -- actions from the agent -----------------------------------------------------------

    def _follow(self) -> None:
        """From seq 0: the agent hands out only actions not yet done (docs/control-protocol.md,
        "Driver channel"), so a restarted driver resumes exactly what is left: the migration
        action of a plan still Applying (once; `handle` carries its plan on from the current
        placement), nothing of a plan whose migration was reported Completed or Failed."""
        assert self.agent is not None  # started only with a channel (`start`)
        seq = 0
        while not self._stopping.is_set():
            try:
                actions = self.agent.actions(seq)
            except (OSError, ValueError):
                time.sleep(1.0)
                continue
            for action in actions:
                seq = max(seq, int(action.get("seq", seq + 1)))
                self.handle(dict(action))

    def handle(self, action: dict[str, Any]) -> bool:
        """Carry out one driver action (False: not one of ours, e.g. `restart`).

        `move-bins` / `request-executors` carry out the plan in the action as given (a
        resumed half-done plan goes on after the steps the placement already reflects; a
        placement the plan does not pass through fails it, nothing moved) and are done when
        their Completed/Failed report reaches the agent;
        `kill-executors` has no report, so the driver marks it done itself."""
        kind = action.get("action")
        if kind == COORDINATION_ACTION:
            plan_id = action.get("planId")
            if not self._confirmed(plan_id):  # an older agent replays confirmed ones
                self.set_coordination_interval(float(action["intervalSeconds"]), plan_id=plan_id)
            return True
        if kind == "kill-executors":
            self.actions.handle(action, block=True)
            if "seq" in action:
                seq = int(action["seq"])
                self._send("/v1/driver/actions/done", lambda agent: agent.action_done(seq))
            return True
        if kind in ("move-bins", "request-executors") and self.mover.query is None:
            # A restarted driver gets the action of a plan still Applying before its first
            # batch: the mover can check the plan only once it knows the query (its placement).
            threading.Thread(
                target=self._when_attached, args=(action,), daemon=True, name="swivel-migration"
            ).start()
            return True
        return self.actions.handle(action)

    def _when_attached(self, action: dict[str, Any], timeout_s: float | None = None) -> None:
        timeout_s = ATTACH_TIMEOUT_S if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while self.mover.query is None:
            if self._stopping.is_set():  # left pending: the next driver gets it
                return
            if time.monotonic() > deadline:
                self._report({
                    "planId": action.get("planId"), "phase": "Failed",
                    "message": f"{action.get('action')} not carried out: no batch of the query "
                    f"within {timeout_s:.0f}s of the driver's start",
                })  # fmt: skip
                return
            self._stopping.wait(0.2)
        self.actions.handle(action, block=True)

    def _confirmed(self, plan_id: Any) -> bool:
        """Was this coordination plan confirmed already (by this driver or an earlier one)?
        Its interval, or a newer one, is then what the driver started with (`GET /v1/config`);
        applying it again would go back to an older interval for a while."""
        if self.agent is None or not isinstance(plan_id, str) or not plan_id:
            return False
        try:
            plan = self.agent.plan(plan_id)
        except (OSError, ValueError):
            return False
        return bool(plan.get("coordination"))

    def set_coordination_interval(self, interval_s: float, plan_id: str | None = None) -> None:
        """From now on measure loads at most every `interval_s` seconds; confirm to the agent."""
        if not interval_s > 0:
            raise ValueError("the coordination interval must be positive")
        self.coordination_interval_s = float(interval_s)
        body = {"planId": plan_id, "intervalSeconds": self.coordination_interval_s,
                "appliedAt": time.time()}  # fmt: skip
        self._send("/v1/driver/coordination", lambda agent: agent.confirm_coordination(body))

    # -- loads for the policies -----------------------------------------------------------

    def _measure_loop(self) -> None:
        while not self._stopping.is_set():
            self._report_helper_check()
            if not self._batch_done.wait(1.0) or self._stopping.is_set():
                continue
            remaining = self._remaining_s()
            if remaining > 0:  # a batch ended, but the interval has not passed yet
                self._stopping.wait(min(remaining, 1.0))
                continue
            self._batch_done.clear()
            try:
                self.measure_loads()
            except Exception as error:  # e.g. the Spark UI is off: say so once, keep running
                self._warn("loads", f"measuring loads failed: {error}")

    def _remaining_s(self) -> float:
        last = self._last_measured
        return 0.0 if last is None else last + self.coordination_interval_s - time.monotonic()

    def _migrating(self) -> bool:
        return self.mover.migrating

    def shared_snapshot(self, max_age_s: float) -> LoadSnapshot | None:
        """The loads a policy round decides on: the latest measurement if it is at most
        `max_age_s` old and no bins moved since, else one taken (and posted) now. None: no
        batch yet, or bins in motion."""
        with self._measuring:
            taken = self._snapshot_taken
            if taken is not None and time.monotonic() - taken <= max_age_s:
                return self.latest_snapshot
            if self._measure_now() is None:
                return None
            return self.latest_snapshot

    def measure_loads(self) -> dict[str, Any] | None:
        """Measure the new batches and post the collection phase so far (None: no batch of
        it yet, or bins in motion)."""
        with self._measuring:
            return self._measure_now()

    def _measure_now(self) -> dict[str, Any] | None:
        query, newest = self.mover.query, self.mover.last_boundary
        if query is None or newest is None or self._migrating():
            return None
        started = time.monotonic()
        batches = self.collection.batches(newest)  # new since the last measurement
        if not batches and self.collection.empty:  # none of this collection phase yet
            return None
        read_state = self.checkpoint is not None and (
            self._state_rows_at is None or started - self._state_rows_at >= self.state_rows_every_s
        )
        snapshot = self._measure(
            self.mover.internals,
            query,
            self.mover.bins,
            batches,
            checkpoint=self.checkpoint if read_state else None,
        )
        if read_state and snapshot.state_error is None:
            self._state_rows = snapshot.state_rows or ()
            self._state_rows_at = started
        elif self._state_rows:
            apply_state_rows(query, self._state_rows, snapshot)
        collected = self.collection.add(snapshot)
        if collected is None:  # no batch of this collection phase yet
            return None
        snapshot = collected
        finished = time.monotonic()
        with self._lock:
            coordination = self._coordination_s + (finished - started)
            processing = self._processing_s
            self._coordination_s = self._processing_s = 0.0
        self._last_measured = finished
        self.latest_snapshot, self._snapshot_taken = snapshot, finished
        if self._migrating():  # a move began while measuring: not for the next policy round
            self._snapshot_taken = None
        document = loads_document(
            snapshot,
            measured_at=time.time(),
            coordination_s=coordination,
            processing_s=processing,
            interval_s=self.coordination_interval_s,
            memory_limit_bytes=self.memory_limit_bytes,
        )
        self.latest_loads = document
        self._send("/v1/driver/loads", lambda agent: agent.report_loads(document))
        return document

    # -- reports --------------------------------------------------------------------------

    def _report_helper_check(self) -> None:
        """The mover's prewarm check, once per check (a query restarted: checked again),
        for the StreamJob's `PrewarmReady` condition (`POST /v1/driver/prewarm-check`)."""
        check = self.mover.helper_check
        if check is None or check is self._check_sent:
            return
        # a reason is a Java failure's text: cut to what the wire document takes, so that
        # building it cannot end this loop (the agent would refuse it anyway)
        executors = {e: why[:MAX_TEXT] for e, why in check.items()}
        body = PrewarmCheck(executors=executors, checked_at=time.time()).to_wire()
        if self._send("/v1/driver/prewarm-check", lambda a: a.report_prewarm_check(body)):
            self._check_sent = check  # else sent again at the next turn of the loop

    def _report(self, body: dict[str, Any]) -> None:
        self._send("/v1/driver/migration", lambda agent: agent.report_migration(body))

    def _send(self, route: str, call: Callable[[AgentDriverChannel], None]) -> bool:
        """One report to the agent, True once it took it; a refusal or an unreachable agent
        is said once per route and never stops the driver."""
        if self.agent is None or self._stopping.is_set():  # stopping: the agent may be gone
            return False
        try:
            call(self.agent)
        except OSError as error:
            self._warn(route, f"{route} not accepted by the agent: {error}")
            return False
        return True

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            print(f"swivel: {message}", file=sys.stderr)
            self._warned.add(key)

    def stop(self) -> None:
        self._stopping.set()
        self._batch_done.set()
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
            self._listener = None
        self.mover.close()
