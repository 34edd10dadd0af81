"""Swivel's own pacing of a migration's steps (no paper's mechanism): a step does not
switch at the boundary of a batch that is already late.

Why: a step's switch runs inside the boundary of the batch it ends, so its cost (the
re-pointing, a prewarmed copy's top-up) adds to that batch. When the batch is already slow
for a reason of its own -- a file source compacting its log every tenth batch (~225 ms on
remote storage, docs/migration.md "The input's log compaction"), a collector pause, a
neighbour on the core -- the two add up, and the user feels the sum: in the prewarmed runs
of 2026-12-07 the worst batch was such a pile-up in two of three. Waiting one boundary keeps
the switch's cost off the late batch; Megaphone bounds a migration's latency by pacing it,
and this only chooses which boundaries a paced step uses.

A batch is late when the time since the previous boundary ended exceeds the median of the
recent ones by `margin`. A step waits at most `max_waits` boundaries in a row, so a
migration whose every batch is late (a slow machine) still progresses.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field


@dataclass
class LateBatchPacing:
    """Decides, at each boundary, whether a ready step switches now or at the next one."""

    margin: float = 0.25  # late: more than (1 + margin) x the recent median
    max_waits: int = 2  # boundaries a step may wait in a row
    history: int = 20  # recent batches the median is over
    min_history: int = 5  # fewer: never late (a new query, a restarted driver)
    _recent: deque[float] = field(default_factory=deque, init=False, repr=False)
    _last_end: float | None = field(default=None, init=False, repr=False)
    _waits: int = field(default=0, init=False, repr=False)

    def elapsed(self, now: float) -> float | None:
        """This batch's time so far: since the previous boundary ended (None: unknown)."""
        return None if self._last_end is None else now - self._last_end

    def late(self, elapsed: float | None) -> bool:
        if elapsed is None or len(self._recent) < self.min_history:
            return False
        return elapsed > statistics.median(self._recent) * (1.0 + self.margin)

    def should_wait(self, elapsed: float | None) -> bool:
        """A ready step waits for the next boundary: this batch is late and the step has
        not yet waited `max_waits` boundaries in a row. Counts the wait."""
        if self._waits < self.max_waits and self.late(elapsed):
            self._waits += 1
            return True
        self._waits = 0
        return False

    def ended(self, now: float, elapsed: float | None) -> None:
        """The boundary returns at `now`; `elapsed` (this batch's time before the boundary)
        joins the recent ones."""
        if elapsed is not None:
            self._recent.append(elapsed)
            while len(self._recent) > self.history:
                self._recent.popleft()
        self._last_end = now
