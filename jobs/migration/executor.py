"""The migration executor: carries out a Megaphone migration plan on a running query, one
plan step per micro-batch boundary, and checks that every move landed.

    mover = BinMover(spark, bins=32)
    query = frame.writeStream.foreachBatch(mover.wrap(write)).start()   # boundary hook
    mover.attach(query)
    run = mover.submit(plan)          # a MigrationPlan, as the planner made it
    mover.wait(run)

It carries out the steps it is given and never plans: a Reconfiguration's plan is made once,
by the agent from the placement the driver reported (`controllers/planning.py`), and
reaches the driver in its action. At the first boundary the executor compares the
placement it finds with the plan's (`controllers/resuming.py`): the plan's start, or the
placement after some of its steps (a restarted driver resumes after them); anything else
fails the migration with the bins that differ, and nothing moves. `migrate(target)` and
`scale_to(n)` are conveniences for what runs without an agent (the driver's own policy
loop, tests): they call the same planner on the current placement and submit its plan.

How a step is carried out (docs/migration.md):

1. At the boundary after batch `b` (synchronously, inside `foreachBatch` after the user's
   write, so no stateful task of `b` or `b+1` runs), the step's bins are re-pointed in the
   driver's StateStoreCoordinator (`SparkInternals.set_location`), hand-over by hand-over
   in the plan's (Chi's) order. Batch `b+1` runs them on their new executors, which reload
   them from the checkpoint: every bin of a step switches at the same boundary.
2. A verifier thread reads batch `b+1`'s task list (status REST API) off the batch path,
   and the step's moves are settled against it (jobs/migration/verification.py): landed;
   ran elsewhere while the target is alive -> re-pointed at a later boundary (up to
   `max_attempts`); ran elsewhere because the target is gone -> reported as landed
   elsewhere (`landed_elsewhere`), never silently dropped.

`spark.locality.wait` is raised (default 30 s) while a migration runs, so a busy target is
waited for rather than bypassed, and restored when it ends. A query without a
`foreachBatch` sink can call `boundary(batch_id)` from a `StreamingQueryListener`
(`onQueryProgress`); the next batch may then already be scheduled, so moves can land one
batch late -- the verifier catches and retries those.

The records it fills in (`Migration`, `MoveOutcome`, `BatchRecord`) live in
jobs/migration/migrations.py, so that code which only waits on a migration and reads its
progress does not depend on how one is stepped.
"""

from __future__ import annotations

import functools
import itertools
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from swivel.controllers.metatopology import MetaTopology, plan_meta_topology
from swivel.controllers.migration import MigrationPlan, Strategy, plan_migration
from swivel.controllers.resuming import StalePlanError, steps_already_done
from swivel.jobs.migration import rescaling
from swivel.jobs.migration.migrations import BatchRecord, Migration, MigrationError, MoveOutcome
from swivel.jobs.migration.prewarming import PREWARM_AHEAD, PrewarmedSteps
from swivel.jobs.migration.snapshot_staggering import StaggeredSnapshots
from swivel.jobs.migration.verification import all_settled, issued, read_batch, settle
from swivel.jobs.spark_internals import STORE_DEFAULT, SparkInternals

ProgressCallback = Callable[[dict[str, Any]], None]
_ids = itertools.count(1)


class BinMover:
    """Moves a running query's bins between executors (see the module docstring)."""

    def __init__(
        self,
        spark: Any,
        bins: int,
        *,
        internals: SparkInternals | None = None,
        migration_locality_wait: str = "30s",
        max_attempts: int = 3,
        on_progress: ProgressCallback | None = None,
        verify_timeout_s: float = 20.0,
        verify_async: bool = True,
        prewarm_timeout_s: float = 120.0,
        prewarm_ahead: int = PREWARM_AHEAD,
    ) -> None:
        self.spark = spark
        self.bins = bins
        self.internals = internals or SparkInternals(spark)
        self.migration_locality_wait = migration_locality_wait
        self.max_attempts = max_attempts
        self.on_progress = on_progress
        self.verify_timeout_s = verify_timeout_s
        self.verify_async = verify_async
        self._prewarmed = PrewarmedSteps(
            self.internals, self.stores, prewarm_timeout_s, ahead=prewarm_ahead
        )
        self.snapshots = StaggeredSnapshots(self.internals)  # off the batch path
        self.query: Any = None
        self.batches: dict[int, BatchRecord] = {}
        self.history: list[Migration] = []
        self.last_boundary: int | None = None
        self._stores: list[tuple[int, str]] | None = None
        self._lock = threading.RLock()
        self._queue: list[Migration] = []
        self._active: Migration | None = None
        self._saved_wait: str | None = None
        self._verify: queue.Queue[int | None] = queue.Queue()
        self._watch_batches = False
        self._verifier = threading.Thread(
            target=self._verify_loop, daemon=True, name="swivel-verify"
        )
        self._verifier.start()
        self._hosts: dict[str, str] = {}

    # -- wiring -------------------------------------------------------------------------

    def attach(self, query: Any) -> None:
        """The query whose bins move (call again after a restart: the run id changes)."""
        with self._lock:
            if self.query is not None and query is not self.query:
                self._prewarmed.drop_all()  # loaded for the old run's ids
                if self._active is not None and self._active.prewarm:
                    self._active.prewarm_fallback = self._active.prewarm_fallback or (
                        "the query restarted: the steps left move the plain way"
                    )
            self.query = query
            self._stores = None
            self.snapshots.attach(query)
            self._prewarmed.attach(query)

    @property
    def helper_check(self) -> dict[str, str] | None:
        """The prewarm helper's round trip after `attach` (PrewarmedSteps.helper_check)."""
        return self._prewarmed.helper_check

    def wrap(self, write: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """A `foreachBatch` function: the user's write, then the boundary hook."""

        def run(frame: Any, batch_id: int) -> None:
            write(frame, batch_id)
            self.boundary(batch_id)

        return run

    def stores(self) -> list[tuple[int, str]]:
        if self._stores is None:
            found = self.internals.state_stores(self.query) if self.query else []
            self._stores = found or [(0, STORE_DEFAULT)]
        return self._stores

    # -- placement ------------------------------------------------------------------------

    def executors(self) -> list[str]:
        return self.internals.executor_ids()

    def current_assignment(self) -> dict[int, str]:
        """The coordinator's placement; bins it does not know yet go round-robin (as a
        fresh query's first batch places them)."""
        if self.query is None:
            raise MigrationError("no query attached")
        alive = sorted(self.executors(), key=rescaling.id_order)
        placement = self.internals.placement(self.query, self.bins)
        return {
            b: (e if e is not None and e in alive else alive[b % len(alive)])
            for b, e in placement.items()
        }

    def migrate(
        self,
        target: Mapping[int, str],
        strategy: Strategy | str = Strategy.BATCHED,
        *,
        batch_size: int = 2,
        gap_batches: int = 0,
        kind: str = "move-bins",
        prewarm: bool = False,
    ) -> Migration:
        """Plan (the one planner, on the current placement) and submit: for callers without
        an agent (the driver's policy loop, tests)."""
        current = self.current_assignment()
        plan = plan_migration(
            current, target, strategy, batch_size=batch_size, gap_batches=gap_batches
        )
        topology = plan_meta_topology(current, dict(target))
        return self.submit(plan, topology, kind=kind, prewarm=prewarm)

    def submit(
        self,
        plan: MigrationPlan,
        topology: MetaTopology | None = None,
        *,
        kind: str = "move-bins",
        on_submit: Callable[[Migration], None] | None = None,
        prewarm: bool = False,
    ) -> Migration:
        """Queue a plan, carried out as given: its first step (or, resumed, its first step
        not yet reflected in the placement) is applied at the next boundary. With `prewarm`,
        each step's bins are first loaded on their targets (jobs/migration/prewarming.py)
        and the step switches at the first boundary after they are loaded."""
        migration = Migration(f"migration-{next(_ids)}", plan, topology, kind, prewarm=prewarm)
        for move in plan.moves:
            migration.outcomes[move.bin] = MoveOutcome(move)
        if on_submit is not None:
            on_submit(migration)
        with self._lock:
            self._queue.append(migration)
            self.history.append(migration)
        self._report(migration)
        return migration

    @property
    def migrating(self) -> bool:
        """A migration is queued or running (bins may move at the next boundary)."""
        with self._lock:
            return self._active is not None or bool(self._queue)

    def wait(self, migration: Migration, timeout: float = 300.0) -> Migration:
        if not migration.done.wait(timeout):
            raise TimeoutError(f"{migration.id} still {migration.phase} after {timeout}s")
        return migration

    # -- the boundary -------------------------------------------------------------------

    def boundary(self, batch_id: int) -> None:
        """Batch `batch_id`'s stateful tasks are done and the next batch's not started."""
        began = time.perf_counter()
        with self._lock:
            locked, applied = time.perf_counter(), False
            self.last_boundary = batch_id
            self.snapshots.boundary(
                batch_id, migrating=self._active is not None or bool(self._queue)
            )
            if self._watch_batches and self.verify_async:
                self._verify.put(batch_id)
            elif self._watch_batches:
                self.record_batch(batch_id)
            active = self._active
            if active is None and self._queue:
                active = self._active = self._queue.pop(0)
                if not self._begin(active, batch_id):
                    self._active = None
                    self._report(active)
                    return
            if active is None:
                return
            self._settle(active, at_boundary=True)
            if active.step < active.plan.step_count and self._prewarmed.ready(
                active, self.query, self._hosts, batch_id
            ):
                self._apply_step(active, batch_id)
                applied = True
            elif all_settled(active):
                self._finish(active, batch_id)
            self._report(active)
            if applied:  # part of this batch's duration; the next batch starts after it
                active.boundary_ms.append(round((time.perf_counter() - began) * 1e3, 1))
                active.boundary_lock_ms.append(round((locked - began) * 1e3, 1))

    def _begin(self, migration: Migration, batch_id: int) -> bool:
        """Start the plan where the placement says it stands; False: refused (stale)."""
        try:
            done = steps_already_done(migration.plan, self.current_assignment())
        except StalePlanError as error:
            migration.fail(str(error))
            return False
        migration.begin(done, batch_id)
        self._saved_wait = self.internals.locality_wait()
        self.internals.set_locality_wait(self.migration_locality_wait)
        self._watch_batches = True
        self._hosts = {e.id: e.host for e in self.internals.executors() if e.active}
        return True

    def _apply_step(self, migration: Migration, batch_id: int) -> None:
        step = migration.plan.steps[migration.step]
        switched = self._prewarmed.switch(migration, batch_id)
        for move in step.moves:  # the plan's hand-over order
            outcome = migration.outcomes[move.bin]
            if move.bin in switched:  # re-pointed by the prewarmed switch
                issued(outcome, batch_id)
            else:
                self._point(outcome, batch_id)
        migration.step_batches.append(batch_id)
        migration.step += 1
        self._prewarmed.start(migration, self.query, self._hosts)  # loads while this runs

    def _point(self, outcome: MoveOutcome, batch_id: int) -> None:
        target = outcome.move.target
        host = self._hosts.get(target) or self._refresh_host(target)
        if host is None:  # the target is gone before the move was made
            outcome.status = "failed"
            return
        self.internals.set_location(self.query, outcome.move.bin, target, host, self.stores())
        issued(outcome, batch_id)

    def _refresh_host(self, executor: str) -> str | None:
        self._hosts = {e.id: e.host for e in self.internals.executors() if e.active}
        return self._hosts.get(executor)

    def _settle(self, migration: Migration, *, at_boundary: bool) -> None:
        """Check issued moves against the batches verified so far; retry (only at a
        boundary: between batches no stateful task runs) or report (verification.py)."""
        boundary = self.last_boundary
        repoint = None
        if at_boundary and boundary is not None:
            repoint = functools.partial(self._point, batch_id=boundary)
        settle(
            migration,
            self.batches,
            alive=lambda: set(self.executors()),
            max_attempts=self.max_attempts,
            repoint=repoint,
        )

    def _finish(self, migration: Migration, batch_id: int) -> None:
        self._active = None
        self._prewarmed.drop(migration)
        if not self._queue:
            self._watch_batches = False
            if self._saved_wait is not None:
                self.internals.set_locality_wait(self._saved_wait)
                self._saved_wait = None
        migration.complete(batch_id)

    def _report(self, migration: Migration) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress(migration.to_dict())
            except Exception as error:  # a progress sink must never break a batch
                print(f"swivel: migration progress report failed: {error}")

    # -- verification -------------------------------------------------------------------

    def _verify_loop(self) -> None:
        while True:
            boundary = self._verify.get()
            if boundary is None:
                return
            # The boundary after batch b was reached: batch b's tasks are all done.
            try:
                self.record_batch(boundary)
            except Exception as error:
                print(f"swivel: verifying batch {boundary} failed: {error}")

    def record_batch(self, batch_id: int) -> BatchRecord | None:
        """Read which executor served each bin in `batch_id`, and settle the moves it
        verifies (on the verifier thread: the read is REST, off the batch path)."""
        query = self.query
        if query is None:
            return None
        record = read_batch(
            self.internals, str(query.runId), batch_id, self.bins, self.verify_timeout_s
        )
        with self._lock:
            self.batches[batch_id] = record
            active = self._active
            if active is not None:
                self._settle(active, at_boundary=False)
                if active.step >= active.plan.step_count and all_settled(active):
                    self._finish(active, batch_id)
                self._report(active)
        return record

    # -- rescale ------------------------------------------------------------------------

    def scale_to(
        self, executors: int, strategy: Strategy | str = Strategy.BATCHED, **options: Any
    ) -> Migration:
        """Plan a rescale on the current placement and carry it out (jobs/migration/rescaling.py)."""
        return rescaling.scale_to(self, executors, strategy, **options)

    def rescale(self, plan: MigrationPlan, executors: int, **options: Any) -> Migration:
        """Carry out a rescale's plan as given (jobs/migration/rescaling.py)."""
        return rescaling.rescale(self, plan, executors, **options)

    def refuse(
        self,
        plan: MigrationPlan,
        reason: str,
        *,
        kind: str = "move-bins",
        on_submit: Callable[[Migration], None] | None = None,
    ) -> Migration:
        """A migration that failed before its first step (nothing moved), reported."""
        migration = Migration(f"migration-{next(_ids)}", plan, None, kind)
        migration.fail(reason)
        if on_submit is not None:
            on_submit(migration)
        self._report(migration)
        return migration

    def close(self) -> None:
        self._verify.put(None)
