"""The agent's registry of worker processes: who long-polls, which operators each hosts and
since when, who is alive. Bounded: a worker neither watching nor seen for `forget_after_s`
is forgotten, and at most `MAX_WORKERS` are registered at once (a made-up pid per request
must not grow the agent without end). The clock is injected (tests)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from swivel.jobs.agent.wire import BodyRejected

MAX_WORKERS = 4096
MAX_OPERATORS_QUERY = 65536  # characters of a watch call's `operators`


@dataclass
class Worker:
    pid: int
    operators: set[str] = field(default_factory=set)
    last_seen: float = 0.0
    watching: int = 0  # long-polls in flight: a worker blocked in one is alive
    # operator -> since when it hosts it: the agent's clock when first told, or the earlier
    # worker time of an ack (the check that chose a version), whichever is earlier
    hosting_since: dict[str, float] = field(default_factory=dict)


class WorkerRegistry:
    def __init__(
        self,
        operators: Collection[str],
        clock: Callable[[], float],
        *,
        ttl_s: float,
        forget_after_s: float,
        capacity: int | None = None,
    ) -> None:
        self.by_pid: dict[int, Worker] = {}
        self._operators = frozenset(operators)
        self._clock, self._ttl_s, self._forget_after_s = clock, ttl_s, forget_after_s
        self._capacity = capacity

    def known_operators(self, names: str) -> list[str]:
        """The comma-separated operator names of a watch call, each one of the job's
        (BodyRejected 422 otherwise: a registry entry per made-up name is unbounded)."""
        listed = (
            [op for op in names.split(",") if op] if len(names) <= MAX_OPERATORS_QUERY else None
        )
        unknown = sorted(set(listed or ()) - self._operators)
        if listed is None or unknown:
            reason = f"not operators of this job: {unknown[:5]}" if unknown else "too long"
            raise BodyRejected.single("operators", reason, 422)
        return listed

    def register(self, pid: int, operators: Iterable[str], since: float | None = None) -> Worker:
        """Note that `pid` is alive and hosts `operators`, at the latest since `since` (the
        worker's time of an ack; now when None or later). BodyRejected (429) when full."""
        worker = self.by_pid.get(pid)
        if worker is None:
            self.forget()
            capacity = MAX_WORKERS if self._capacity is None else self._capacity
            if len(self.by_pid) >= capacity:
                reason = f"{capacity} workers are registered and alive; no room for another"
                raise BodyRejected.single("pid", reason, 429)
            worker = self.by_pid[pid] = Worker(pid)
        now = self._clock()
        since = now if since is None else min(since, now)
        for op in operators:
            if op:
                worker.operators.add(op)
                worker.hosting_since[op] = min(worker.hosting_since.get(op, since), since)
        worker.last_seen = now
        return worker

    def forget(self) -> None:
        """Drop the workers neither watching nor seen for `forget_after_s`."""
        horizon = self._clock() - self._forget_after_s
        for pid in [p for p, w in self.by_pid.items() if not w.watching and w.last_seen < horizon]:
            del self.by_pid[pid]

    def registered(self, pid: int) -> bool:
        return pid in self.by_pid

    def live(self) -> list[Worker]:
        """Watching now, or seen within the TTL."""
        horizon = self._clock() - self._ttl_s
        return [w for w in self.by_pid.values() if w.watching or w.last_seen >= horizon]
