"""What a worker process did, counted in memory until its ack thread reports it (Chi §5:
monitoring through the control plane; docs/control-protocol.md, "Worker counts").

The operator wrappers (`swivel.jobs.runtime.operators`) add, after each call of a user
function, the rows it was handed and the wall time it took, under the operator and the
Spark partition of the task (`TaskContext.partitionId()`: for a keyed operator the state
partition, its bin). `add` is a dictionary update under an uncontended lock (about a
microsecond); nothing leaves the process until the ack thread (`ack_sender.AckSender`)
drains the counts into its next post: at most once a second, or with the next ack.

One counter per process, made anew in a forked child (PySpark forks workers from its
daemon: a child must not report its parent's counts). Standard library only: every Python
worker imports it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

# The most (operator, partition) pairs one report holds (`swivel.protocol.counts`); rows of
# a pair beyond it wait for the next report.
MAX_COUNTED_PARTITIONS = 2048


class WorkCounter:
    """Rows and busy seconds per (operator, partition) since the last `drain`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int], list[Any]] = {}
        self._overflow: dict[tuple[str, int], list[Any]] = {}
        self._since = clock()

    def add(self, operator: str, partition: int, rows: int, seconds: float) -> None:
        key = (operator, partition)
        with self._lock:
            held = self._counts if key in self._counts else None
            if held is None:
                full = len(self._counts) >= MAX_COUNTED_PARTITIONS
                held = self._overflow if full else self._counts
                held.setdefault(key, [0, 0.0])
            entry = held[key]
            entry[0] += rows
            entry[1] += seconds

    @property
    def pending(self) -> bool:
        return bool(self._counts)

    def drain(self) -> tuple[float, list[dict[str, Any]]]:
        """(seconds since the last drain, the counts as `PartitionCounts` wire dicts), and
        start counting afresh."""
        with self._lock:
            counts, self._counts = self._counts, {}
            while self._overflow and len(self._counts) < MAX_COUNTED_PARTITIONS:
                key = next(iter(self._overflow))
                self._counts[key] = self._overflow.pop(key)
            now = self._clock()
            interval, self._since = max(0.0, now - self._since), now
        return interval, [
            {"operator": op, "partition": p, "rows": rows, "busySeconds": round(busy, 6)}
            for (op, p), (rows, busy) in counts.items()
        ]


_counter = WorkCounter()


def counter() -> WorkCounter:
    """This process's counter."""
    return _counter


def add(operator: str, partition: int | None, rows: int, seconds: float) -> None:
    """Count one call of `operator`'s function (nothing outside a Spark task: no partition)."""
    if partition is not None:
        _counter.add(operator, partition, rows, seconds)


def _fresh_in_child() -> None:
    global _counter  # noqa: PLW0603 - a forked child starts from nothing
    _counter = WorkCounter()


os.register_at_fork(after_in_child=_fresh_in_child)
