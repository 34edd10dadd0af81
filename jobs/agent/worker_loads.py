"""The workers' counts, added up per (operator, bin) over a sliding window (Chi §5:
monitoring through the control plane; docs/control-protocol.md, "Worker counts").

Each worker process reports, at most once a second or with its next ack, the rows it ran
and the time spent in the user function per operator and Spark partition since its
previous report (`swivel.protocol.counts.WorkerCounts`). The agent stamps each report
with its own clock on arrival (worker clocks never enter the sums), keeps them for
`window_s` and serves the sums (`document`): per bin, the keyed operators' rows and busy
time, summed over every worker that ran the bin within the window (Python workers are
not pinned to partitions: a bin's tasks run in whichever worker the executor hands them
to); per operator, its totals. A report repeated after a lost answer (the same `seq` from
the same worker) is counted once.

Nothing here is durable: after an agent restart the window fills again within seconds.
The sums are placement-free (a bin's rows are the bin's, wherever it ran), so unlike the
driver's measurement they are not forgotten when bins move; a policy adds them up per
executor on the placement it acts on (`swivel.controllers.worker_loads`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from swivel.protocol.counts import WorkerBinLoad, WorkerCounts, WorkerLoads, WorkerOperatorLoad

DEFAULT_WINDOW_S = 30.0
MAX_KEPT_WORKERS = 4096  # the registry's bound; seqs of workers beyond it are forgotten


@dataclass(slots=True)
class _Entry:
    at: float  # the agent's clock on arrival
    pid: int
    rows: int
    busy_s: float


@dataclass(slots=True)
class _Series:
    entries: deque[_Entry] = field(default_factory=deque)
    newest: float = 0.0


class WorkerLoadWindow:
    """Reports of the last `window_s` seconds, summed on demand (one event loop: no locks)."""

    def __init__(
        self,
        keyed: Mapping[str, bool],
        clock: Callable[[], float],
        window_s: float = DEFAULT_WINDOW_S,
        on_counted: Callable[[WorkerCounts], None] | None = None,
    ) -> None:
        if not window_s > 0:
            raise ValueError("window_s must be positive")
        self._keyed, self._clock, self.window_s = dict(keyed), clock, window_s
        self._on_counted = on_counted  # e.g. the /metrics totals: each report once
        self._series: dict[tuple[str, int], _Series] = {}
        self._last_seq: dict[int, int] = {}
        self._reports: deque[float] = deque()  # arrival times, for the count and the age
        self._since: float | None = None  # when the first counted interval began

    def record(self, reports: Iterable[WorkerCounts]) -> int:
        """Add reports (already validated against the job); the number counted (a repeated
        `seq` is not)."""
        now = self._clock()
        self._prune(now)
        counted = 0
        for report in reports:
            if report.seq <= self._last_seq.get(report.pid, 0):
                continue
            self._remember_seq(report.pid, report.seq)
            counted += 1
            if self._on_counted is not None:
                self._on_counted(report)
            self._reports.append(now)
            began = now - report.interval_seconds
            self._since = began if self._since is None else min(self._since, began)
            for part in report.partitions:
                series = self._series.setdefault((part.operator, part.partition), _Series())
                series.entries.append(_Entry(now, report.pid, part.rows, part.busy_seconds))
                series.newest = now
        return counted

    def _remember_seq(self, pid: int, seq: int) -> None:
        self._last_seq.pop(pid, None)
        self._last_seq[pid] = seq  # most recent last: the oldest is forgotten first
        while len(self._last_seq) > MAX_KEPT_WORKERS:
            del self._last_seq[next(iter(self._last_seq))]

    def _prune(self, now: float) -> None:
        oldest = now - self.window_s
        while self._reports and self._reports[0] < oldest:
            self._reports.popleft()
        if not self._reports:  # idle for a whole window: the next report starts afresh
            self._since = None
        for key in list(self._series):
            entries = self._series[key].entries
            while entries and entries[0].at < oldest:
                entries.popleft()
            if not entries:
                del self._series[key]

    def document(self) -> WorkerLoads | None:
        """The sums over the window; None when no report arrived within it."""
        now = self._clock()
        self._prune(now)
        if not self._reports or self._since is None:
            return None
        window = min(self.window_s, max(now - self._since, 1e-3))
        bins: dict[int, _Sum] = {}
        operators: dict[str, _Sum] = {}
        for (operator, partition), series in self._series.items():
            total = _Sum.of(series, now)
            operators.setdefault(operator, _Sum()).add(total)
            if self._keyed.get(operator, False):
                bins.setdefault(partition, _Sum()).add(total)
        return WorkerLoads(
            window_seconds=round(window, 6),
            age_seconds=round(max(0.0, now - self._reports[-1]), 6),
            reports=len(self._reports),
            bins=[
                WorkerBinLoad(
                    bin=b,
                    rows=s.rows,
                    busy_seconds=round(s.busy_s, 6),
                    workers=len(s.pids),
                    age_seconds=round(s.age_s, 6),
                )
                for b, s in sorted(bins.items())
            ],
            operators=[
                WorkerOperatorLoad(
                    operator=name,
                    keyed=self._keyed.get(name, False),
                    rows=s.rows,
                    busy_seconds=round(s.busy_s, 6),
                    workers=len(s.pids),
                )
                for name, s in sorted(operators.items())
            ],
        )


@dataclass(slots=True)
class _Sum:
    rows: int = 0
    busy_s: float = 0.0
    pids: set[int] = field(default_factory=set)
    age_s: float = float("inf")

    @classmethod
    def of(cls, series: _Series, now: float) -> _Sum:
        total = cls(age_s=max(0.0, now - series.newest))
        for entry in series.entries:
            total.rows += entry.rows
            total.busy_s += entry.busy_s
            total.pids.add(entry.pid)
        return total

    def add(self, other: _Sum) -> None:
        self.rows += other.rows
        self.busy_s += other.busy_s
        self.pids |= other.pids
        self.age_s = min(self.age_s, other.age_s)
