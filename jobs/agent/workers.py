"""The agent's registry of worker processes: who long-polls, which operators each hosts and
since when, who is alive. Bounded: a worker neither watching nor seen for `forget_after_s`
is forgotten, and at most `MAX_WORKERS` are registered at once (a made-up pid per request
must not grow the agent without end). The clock is injected (tests).

Identity (issue 11): every Python worker holds the same workers' token, so the token alone
cannot tell one worker from another. A worker therefore *enrols* (`POST /v1/control/workers`,
`enrol`) and gets a secret of its own, bound to its worker id (its pid when free); every
later call naming that id (a watch with `pid`, an ack) must present it (`authenticate`).
An id that is taken is never handed to another process, whatever it presents: a second
process with the same pid (another executor's pid namespace, or a pid reused after a
worker died but before the registry forgot it) gets an unused id above any pid
(`ALIAS_BASE`) instead, so nobody can take over a live, or recently live, worker.
"""

from __future__ import annotations

import hmac
import itertools
import secrets
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from swivel.api.errors import FieldProblem
from swivel.protocol.documents import MAX_PID, BodyRejected

MAX_WORKERS = 4096
MAX_OPERATORS_QUERY = 65536  # characters of a watch call's `operators`
MAX_WORKER_ID = MAX_PID  # an ack's `pid` field
ALIAS_BASE = 2**22  # Linux's PID_MAX_LIMIT: ids from here on are no process's pid
SECRET_BYTES = 32


@dataclass
class Worker:
    pid: int
    operators: set[str] = field(default_factory=set)
    last_seen: float = 0.0
    watching: int = 0  # long-polls in flight: a worker blocked in one is alive
    # operator -> since when it hosts it: the agent's clock when first told, or the earlier
    # worker time of an ack (the check that chose a version), whichever is earlier
    hosting_since: dict[str, float] = field(default_factory=dict)
    # The secret the worker was given when it enrolled; None for an entry made in-process
    # (the hub's own callers, tests): no HTTP call can then speak for it.
    secret: str | None = field(default=None, repr=False)


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

    def enrol(self, proposed: int) -> tuple[int, str]:
        """A new worker identity and its secret: `proposed` (the worker's pid) unless that
        id is registered (alive or not yet forgotten), else an unused id from `ALIAS_BASE`.
        Never hands out an id that is taken: re-enrolling cannot take a worker over.
        BodyRejected (429) when the registry is full."""
        self.forget()
        worker_id = proposed
        if worker_id in self.by_pid:
            worker_id = next(
                i for i in itertools.count(ALIAS_BASE) if i not in self.by_pid
            )  # at most MAX_WORKERS are taken: found within that many steps
            if worker_id >= MAX_WORKER_ID:  # pragma: no cover - needs 2**32 - 2**22 entries
                raise BodyRejected.single("pid", "no worker id left", 429)
        worker = self.register(worker_id, ())
        worker.secret = secrets.token_urlsafe(SECRET_BYTES)
        return worker_id, worker.secret

    def authenticate(self, pid: int, presented: str | None, field_name: str) -> FieldProblem | None:
        """Why a call naming worker `pid` may not speak for it (None: it may). A registered
        worker needs its own secret (a problem answered 403); an unknown id is left to the
        caller (the watch answers 409 "enrol", an ack 409 "watch first"): after an agent
        restart or a forget the worker enrols again and usually gets its id back."""
        worker = self.by_pid.get(pid)
        if worker is None:
            return None
        expected = worker.secret
        if (
            expected is None
            or presented is None
            or not presented.isascii()
            or not hmac.compare_digest(presented.encode(), expected.encode())
        ):
            reason = (
                f"worker {pid} is registered to another process: present its own "
                "Swivel-Worker-Secret (POST /v1/control/workers enrols a new worker)"
            )
            return FieldProblem(field_name, reason)
        return None

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
