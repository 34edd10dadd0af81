"""Flux's collection phase on the driver: statistics since the last move phase ended.

Flux's sites accrue idle time and tuples per partition for a whole collection phase and
report them when it ends (§5.3). `CollectionPhase` does that for Swivel's driver: every
measurement reads only the batches completed since the previous one and adds them to the
phase's totals (records and task time per bin, busy time per executor, the batches' summed
duration), so a policy round decides on every batch since the placement last changed, not
on the last few. The phase restarts when a move phase ends (`restart`): statistics
gathered on the old placement describe neither the donor nor the receiver any more.

What is not summed: state rows and bytes, JVM memory and executor cores describe the
executors as they are now, so the latest measurement's values are kept; an executor
absent from the latest measurement is gone and is dropped with its busy time.
"""

from __future__ import annotations

import copy
import threading

from swivel.jobs.migration.metrics import LoadSnapshot


class CollectionPhase:
    """The running totals of one collection phase (thread-safe: the driver's boundary
    listener restarts it while its measuring thread adds to it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first_batch: int | None = None  # None: from the next batch measured
        self._next_batch: int | None = None
        self._total: LoadSnapshot | None = None

    @property
    def first_batch(self) -> int | None:
        return self._first_batch

    @property
    def empty(self) -> bool:
        """No batch of this phase measured yet."""
        with self._lock:
            return self._total is None

    def restart(self, first_batch: int) -> None:
        """A move phase ended: count from `first_batch` on (the first batch run entirely
        on the new placement), forgetting everything before."""
        with self._lock:
            self._first_batch = self._next_batch = first_batch
            self._total = None

    def batches(self, newest: int) -> range:
        """The batches to measure now: those completed since the last measurement (or
        since the phase began), up to `newest`. Empty when none is new."""
        with self._lock:
            first = newest if self._next_batch is None else self._next_batch
            return range(first, newest + 1)

    def add(self, measured: LoadSnapshot) -> LoadSnapshot | None:
        """Add one measurement of new batches; the phase's totals so far (None: no batch
        of this phase measured yet). A measurement of batches that a restart has since
        put before the phase is dropped."""
        with self._lock:
            batches = sorted(measured.batches)
            if self._first_batch is not None:
                batches = [b for b in batches if b >= self._first_batch]
                if len(batches) != len(measured.batches):  # mixed placements: not ours
                    return copy.deepcopy(self._total) if self._total else None
            if batches:
                self._total = merged(self._total, measured)
                self._next_batch = batches[-1] + 1
                if self._first_batch is None:
                    self._first_batch = batches[0]
            elif self._total is not None:
                self._total = _latest_state(self._total, measured)
            return copy.deepcopy(self._total) if self._total else None


def merged(total: LoadSnapshot | None, measured: LoadSnapshot) -> LoadSnapshot:
    """`total` with `measured` (later batches) added: counts summed, the rest the latest."""
    if total is None:
        return copy.deepcopy(measured)
    out = LoadSnapshot(
        sorted({*total.batches, *measured.batches}),
        total.window_s + measured.window_s,
        state_error=measured.state_error,
    )
    for bin_id, stats in measured.bins.items():
        before = total.bins.get(bin_id)
        bin_total = copy.copy(stats)
        if before is not None:
            bin_total.records += before.records
            bin_total.task_ms += before.task_ms
        out.bins[bin_id] = bin_total
    for bin_id, stats in total.bins.items():
        out.bins.setdefault(bin_id, copy.copy(stats))
    for name, executor in measured.executors.items():
        executor_total = copy.copy(executor)
        before_executor = total.executors.get(name)
        if before_executor is not None:
            executor_total.busy_s += before_executor.busy_s
        executor_total.window_s = out.window_s
        out.executors[name] = executor_total
    out.state_rows = measured.state_rows or total.state_rows
    return out


def _latest_state(total: LoadSnapshot, measured: LoadSnapshot) -> LoadSnapshot:
    """No new batch: the totals stay, state and memory figures come from `measured`."""
    out = copy.deepcopy(total)
    for bin_id, stats in measured.bins.items():
        if bin_id in out.bins:
            out.bins[bin_id].state_rows = stats.state_rows
            out.bins[bin_id].state_bytes = stats.state_bytes
    for name, executor in measured.executors.items():
        if name in out.executors:
            held = out.executors[name]
            held.state_bytes, held.jvm_memory_used = executor.state_bytes, executor.jvm_memory_used
    if measured.state_rows is not None:
        out.state_rows = measured.state_rows
    return out
