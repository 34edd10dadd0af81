"""Keeps a running query's RocksDB snapshots staggered over the snapshot interval, so that
no batch pays every bin's snapshot at once (docs/migration.md, "Staggered snapshots").

The migration executor calls `boundary()` at each boundary it sees. A pass
(`SnapshotPhases.offset`: one short task per executor) runs on its own thread, off the batch
path: after the query is attached (its first batches load the stores), after each migration
(moved bins reload from their newest snapshot, which keeps its phase, but a bin reloaded
before its first offset snapshot was uploaded comes back on Spark's schedule), and every
`recheck_batches` batches in between, for executors that joined; at the next boundary when
a task of the last pass ran on another executor than its own. Never while a migration
runs: its bins are in motion. A pass may race a commit of a running batch: it sets the
value again when the store's version moved meanwhile. A pass still running when the query
is attached again (a restart) records nothing: the new query gets its own first pass.

A query whose stores do not snapshot inside their tasks (HDFS-backed, or RocksDB without
changelog checkpointing) is left alone, and so is every query when the helper jar is missing;
`reason` then says why.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from swivel.jobs.spark_internals import SparkInternals
from swivel.jobs.spark_snapshot_phases import HelperUnavailableError, PhaseReport, SnapshotPhases

RECHECK_BATCHES = 100


class StaggeredSnapshots:
    """Schedules `SnapshotPhases` passes for the attached query (see the module docstring)."""

    def __init__(
        self,
        internals: SparkInternals,
        recheck_batches: int = RECHECK_BATCHES,
        phases: SnapshotPhases | None = None,
    ) -> None:
        self.phases = phases or internals.snapshot_phases()
        self.recheck_batches = recheck_batches
        self.report: PhaseReport | None = None  # the last pass's
        self.passes = 0
        self.reason: str | None = None  # why no pass runs for this query, if none does
        self.error: str | None = None  # the last pass's failure, retried at the next recheck
        self._query: Any = None
        self._due = False
        self._last_pass: int | None = None
        self._was_migrating = False
        self._generation = 0
        self._running: threading.Thread | None = None
        self._lock = threading.Lock()

    def attach(self, query: Any) -> None:
        with self._lock:
            self._query, self._due, self._last_pass, self.reason = query, True, None, None
            self.report, self.error = None, None
            self._generation += 1  # a pass still running for the last query keeps quiet

    def boundary(self, batch_id: int, migrating: bool) -> None:
        """Start a pass when one is due (returns at once; the pass runs on its own thread)."""
        with self._lock:
            if self._query is None or self.reason is not None:
                return
            if migrating:
                self._was_migrating = True
                return
            if self._was_migrating:
                self._was_migrating, self._due = False, True
            recheck = self._last_pass is not None and (
                batch_id - self._last_pass >= self.recheck_batches
            )
            if not (self._due or recheck) or self._busy():
                return
            self._due, self._last_pass = False, batch_id
            self._running = threading.Thread(
                target=self._pass,
                args=(self._query, self._generation),
                daemon=True,
                name="swivel-snapshot-phases",
            )
            self._running.start()

    def wait(self, timeout: float = 60.0) -> None:
        """Until the running pass (if any) has ended (tests, benchmarks)."""
        running = self._running
        if running is not None:
            running.join(timeout)

    def _busy(self) -> bool:
        return self._running is not None and self._running.is_alive()

    def _pass(self, query: Any, generation: int) -> None:
        reason = report = error = None
        try:
            reason = self.phases.applies(query)
            if reason is None:
                report = self.phases.offset(query)
        except HelperUnavailableError as unavailable:
            reason = str(unavailable)
        except Exception as failure:  # a pass must never stop the query
            error = f"{type(failure).__name__}: {failure}"
            print(f"swivel: staggering snapshots failed: {error}", file=sys.stderr)
        with self._lock:
            if generation != self._generation:
                return  # the query was restarted meanwhile: its own first pass is due
            self.reason, self.error = reason, error
            if report is not None:
                self.report, self.passes = report, self.passes + 1
                # a task that ran on another executor left that one's stores as they were
                self._due = bool(report.missed)
