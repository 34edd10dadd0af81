"""Swivel's per-batch coordination on the driver, grouped every g batches.

Drizzle (SOSP 2017, §3) schedules a group of micro-batches at once and coordinates only at
group boundaries, with the group size tuned by AIMD within an overhead bound. Grouping
Spark's *tasks* needs Spark's scheduler and cannot be done from PySpark (docs/benchmarks.md,
"Drizzle"). What Swivel groups is the coordination it adds itself to every
micro-batch on the driver; g is tuned with Drizzle's AIMD (`swivel.controllers.aimd`).

Every batch, always -- correctness needs it timely:
- Spark's listener callback (Spark calls it; the runtime keeps the event in memory);
- the `started` report of the next batch: the agent stamps the batch with the configuration
  version in force (a replay is pinned to it), an epoch plan applies from the first batch
  the agent has not seen start, and a worker's ack naming a batch far beyond the last
  report is refused.

Every g batches (at a *coordination point*):
- the `completed` report to the agent (`POST /v1/driver/progress`);
- the migration driver's boundary hook (the query's run id, the mover's boundary, waking
  the loads thread).

Every batch is a coordination point while work is pending (g = 1): a plan in flight or a
pinned replay (a transition or pinned batches in the configuration the driver's control
client holds, pushed by the agent's long-poll), a bin migration queued or running, and the
first batch after the query (re)started. The agent needs each batch's end then: a plan is
in effect once the batch that may hold old-tagged rows ended, a finished plan's transition
is retired and a replay's pin released at a batch end, and a migration step is applied and
verified at a boundary. So a reconfiguration never waits for a group to end; what a larger
g delays is only what the agent shows of completed batches (status, batch counter) and the
newest batch of the loads' window, by at most g - 1 batches.

g is stepped at each coordination point with nothing pending, on the overhead since the
previous point: the wall time the driver spent in this coordination (listener hooks and
reports to the agent, `spent`) over that plus the batches' own time (`batch_ended`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from swivel.controllers.aimd import GroupConfig, GroupState, group_in_force, overhead, step_group

KEPT_DECISIONS = 64  # batch ids whose decision is remembered (both listeners ask)


@dataclass
class CoordinationTotals:
    """What a run spent, for `swivel bench coordination` (since `reset_totals`)."""

    batches: int = 0
    points: int = 0
    coordination_s: float = 0.0
    processing_s: float = 0.0

    @property
    def coordination_ms_per_batch(self) -> float:
        return 1000.0 * self.coordination_s / self.batches if self.batches else 0.0


class CoordinationGroups:
    """Which batch ends are coordination points, and g (see the module docstring).

    `fixed`: a fixed g instead of AIMD's (the benchmark's g = 1 phases); pending work still
    makes every batch a point."""

    def __init__(self, config: GroupConfig | None = None, *, fixed: int | None = None) -> None:
        self.config = config or GroupConfig()
        self.fixed = fixed
        self.state = GroupState()
        self.totals = CoordinationTotals()
        self.points: deque[int] = deque(maxlen=256)  # the latest coordination points
        self._lock = threading.Lock()
        self._pending: list[Callable[[], bool]] = []
        self._next: int | None = None  # None: the next batch end is a point
        self._decided: dict[int, bool] = {}
        self._spent_s = 0.0  # since the last point
        self._processed_s = 0.0

    @property
    def group(self) -> int:
        """g while nothing is pending."""
        return self.state.group if self.fixed is None else self.fixed

    def when_pending(self, source: Callable[[], bool]) -> None:
        """`source()` True: reconfiguration work is pending (every batch is a point)."""
        self._pending.append(source)

    def restart(self) -> None:
        """The query (re)started: its first batch end is a point (a replay's pin, the mover
        attaching to the new run)."""
        with self._lock:
            self._next = None
            self._decided.clear()

    def set_fixed(self, group: int | None) -> None:
        """A fixed g (None: AIMD's again), from the next batch end on (a point)."""
        with self._lock:
            self.fixed = group
            self._next = None

    def reset_totals(self) -> None:
        with self._lock:
            self.totals = CoordinationTotals()

    def is_point(self, batch_id: int) -> bool:
        """Is the end of `batch_id` a coordination point? Decided once per batch (the first
        caller decides; the runtime's and the migration driver's listeners both ask)."""
        with self._lock:
            decided = self._decided.get(batch_id)
        if decided is not None:
            return decided
        pending = self._pending_now()  # outside the lock: the sources take their own
        with self._lock:
            decided = self._decided.get(batch_id)
            if decided is None:
                decided = self._decide(batch_id, pending)
            return decided

    def spent(self, seconds: float) -> None:
        """Wall time the driver spent in Swivel's per-batch coordination."""
        with self._lock:
            self._spent_s += seconds
            self.totals.coordination_s += seconds

    def batch_ended(self, seconds: float) -> None:
        """A batch of the query ended after `seconds` (its triggerExecution)."""
        with self._lock:
            self._processed_s += seconds
            self.totals.batches += 1
            self.totals.processing_s += seconds

    def _pending_now(self) -> bool:
        for source in self._pending:
            try:
                if source():
                    return True
            except Exception:  # a source that cannot tell counts as pending
                return True
        return False

    def _decide(self, batch_id: int, pending: bool) -> bool:
        point = pending or self._next is None or batch_id >= self._next
        if point:
            if not pending and self.fixed is None and self._processed_s > 0:
                measured = overhead(self._spent_s, self._processed_s)
                self.state = step_group(self.state, measured, self.config)
            self._spent_s = self._processed_s = 0.0
            group = self.fixed if self.fixed is not None else self.state.group
            self._next = batch_id + group_in_force(GroupState(group), pending=pending)
            self.points.append(batch_id)
            self.totals.points += 1
        self._decided[batch_id] = point
        for old in sorted(self._decided)[:-KEPT_DECISIONS]:
            del self._decided[old]
        return point


def timed(groups: CoordinationGroups | None) -> _Timer:
    """`with timed(groups): ...` adds the block's wall time to `groups.spent` (if any)."""
    return _Timer(groups)


class _Timer:
    def __init__(self, groups: CoordinationGroups | None) -> None:
        self.groups = groups
        self.began = 0.0

    def __enter__(self) -> None:
        self.began = time.perf_counter()

    def __exit__(self, *exc_info: object) -> None:
        if self.groups is not None:
            self.groups.spent(time.perf_counter() - self.began)
