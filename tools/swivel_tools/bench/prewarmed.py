"""The `batched-prewarmed` strategy of `swivel bench migration`: the batched plan, with each
step's bins loaded on their targets *before* the step's switch (Megaphone: state moves
ahead of the routing change).

Built on the adapter's prototype (`SparkInternals.prewarm` / `switch_prewarmed`,
jobs/spark_prewarm.py, docs/migration.md "Prewarmed moves"): per step and target, a Spark
job on the target loads the step's bins under their shadow ids at the last committed
version while the old owners keep serving them; at the next boundary (inside
`foreachBatch`, after the write and the BinMover's own hook) the real ids are re-pointed
and the loaded providers handed to them, so the switching batch reads only the deltas
committed since the prewarm.

It lives in the benchmark, not in `BinMover`, because the prototype is for Spark's JVM
stateful operators on the HDFS-backed store only (not Swivel's transformWithState
operators): a product strategy would need the v3 schema first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from swivel.controllers.migration import MigrationPlan
from swivel.jobs.spark_internals import SparkInternals

Write = Callable[[Any, int], None]


@dataclass
class PrewarmedRun:
    """What one prewarmed migration did, step by step."""

    started_at: float  # epoch s, the first prewarm's start
    first_batch: int  # the batch running when the first prewarm began
    switch_boundaries: list[int] = field(default_factory=list)  # batch after which a step switched
    prewarm_ms: list[float] = field(default_factory=list)  # per step, all its targets' loads
    statuses: dict[str, int] = field(default_factory=dict)  # prewarm and activate answers
    moved_bins: int = 0
    steps: int = 0

    @property
    def last_batch(self) -> int:
        return max(self.switch_boundaries) + 1

    def count(self, results: Sequence[dict[str, Any]], phase: str) -> None:
        for result in results:
            key = f"{phase}:{result.get('status')}"
            self.statuses[key] = self.statuses.get(key, 0) + 1


class PrewarmedMigrator:
    """Runs prewarmed plans on one query; `wrap` must be the outermost foreachBatch hook."""

    def __init__(self, internals: SparkInternals, stores: Callable[[], list[tuple[int, str]]]):
        self.internals = internals
        self.stores = stores
        self.query: Any = None
        self._lock = threading.Lock()
        self._pending: list[tuple[list[int], str, str]] | None = None
        self._switched = threading.Event()
        self._switched_after = -1
        self._results: list[dict[str, Any]] = []
        self._error: BaseException | None = None

    def wrap(self, write: Write) -> Write:
        def run(frame: Any, batch_id: int) -> None:
            write(frame, batch_id)
            self.boundary(batch_id)

        return run

    def boundary(self, batch_id: int) -> None:
        """Switch the pending step: no stateful task of this batch or the next runs now."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        results: list[dict[str, Any]] = []
        try:
            for bins, target, host in pending:
                results += self.internals.switch_prewarmed(
                    self.query, bins, target, host, self.stores()
                )
        except BaseException as error:  # reported to the waiting run, not to the query
            self._error = error
        self._results = results
        self._switched_after = batch_id
        self._switched.set()

    def run(self, plan: MigrationPlan, batches_done: int, timeout_s: float) -> PrewarmedRun:
        """Each step: prewarm its bins on every target (blocking Spark jobs, off the batch
        path), then switch them at the next boundary and wait for it."""
        outcome = PrewarmedRun(time.time(), batches_done + 1)
        for step in plan.steps:
            if not step.moves:
                continue  # a gap step
            by_target: dict[str, list[int]] = {}
            for move in step.moves:
                by_target.setdefault(move.target, []).append(move.bin)
            began = time.monotonic()
            pending = []
            for target, bins in sorted(by_target.items()):
                host = self.internals.executor_host(target)
                outcome.count(
                    self.internals.prewarm(self.query, bins, target, host, self.stores()),
                    "prewarm",
                )
                pending.append((bins, target, host))
            outcome.prewarm_ms.append(round((time.monotonic() - began) * 1e3, 1))
            self._switched.clear()
            with self._lock:
                self._pending = pending
            if not self._switched.wait(timeout_s):
                raise TimeoutError(f"no boundary switched the prewarmed step in {timeout_s}s")
            if self._error is not None:
                raise RuntimeError("the prewarmed switch failed") from self._error
            outcome.count(self._results, "activate")
            outcome.switch_boundaries.append(self._switched_after)
            outcome.moved_bins += len(step.moves)
            outcome.steps += 1
        return outcome

    def landed(self, plan: MigrationPlan, outcome: PrewarmedRun, bins: int) -> list[int]:
        """Bins that did not run on their target in the batch after their switch."""
        run_id = str(self.query.runId)
        missing = []
        steps = [s for s in plan.steps if s.moves]
        for step, boundary in zip(steps, outcome.switch_boundaries, strict=True):
            served = self.internals.served_by(run_id, boundary + 1, bins)
            missing += [m.bin for m in step.moves if served.get(m.bin) != m.target]
        return sorted(missing)
