"""What every handler gets: the Kubernetes door, the agent link, the clock and intervals.

One `OperatorContext` is built by `swivel operator` (or by a test) and closed over when the
handlers are registered, so a test swaps the agent for its in-memory fake
(`tests/fakes_agent.py`) and the clock for a fixed one without touching module globals.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from swivel.operator.agents import AgentLink, JobAddress
from swivel.operator.clusters import Clock, Cluster, Ref, utc_now
from swivel.operator.credentials import JobCredentials
from swivel.operator.indexes import Known
from swivel.operator.naming import Names


@dataclass
class Intervals:
    """Seconds between timer runs (tests shorten them)."""

    health: float = 10.0
    reconfiguration: float = 2.0
    policies: float = 5.0


class Submissions:
    """Submits first: the work after an agent accepted a plan (the plan-id annotation, the
    Applying and Completed writes, the job's status, Events, each write's watch event) is
    most of what the operator and the API server do per Reconfiguration. In a burst, doing it
    as each plan is accepted delays every other object's submit; so it waits until no step
    is on its way to a submit (or `max_wait_s`, so steady arrivals cannot starve it). A crash
    meanwhile is harmless: the resubmission's idempotency key gets the same plan back."""

    def __init__(self, max_wait_s: float = 1.0) -> None:
        self.max_wait_s = max_wait_s
        self._in_flight = 0
        self._idle: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._idle is None:
            self._idle = asyncio.Event()
            self._idle.set()
        return self._idle

    @contextlib.asynccontextmanager
    async def submitting(self) -> AsyncIterator[None]:
        """Around one step's way to its submit (admission, planning, the agent's answer)."""
        self._in_flight += 1
        self._event().clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._event().set()

    async def settled(self) -> None:
        """Return once no submit is under way (at most `max_wait_s` later)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event().wait(), self.max_wait_s)


@dataclass
class OperatorContext:
    cluster: Cluster
    agents: AgentLink
    clock: Clock = utc_now
    intervals: Intervals = field(default_factory=Intervals)
    # What the watch streams showed (kopf's indexes) and the operator's own last writes.
    known: Known = field(default_factory=Known)
    submissions: Submissions = field(default_factory=Submissions)
    # A lock lives while someone holds or awaits it (`async with` keeps it referenced):
    # a finished or deleted object's lock goes with its last user, so the map stays as
    # small as the work in flight instead of growing by every name ever seen.
    _locks: weakref.WeakValueDictionary[str, asyncio.Lock] = field(
        default_factory=weakref.WeakValueDictionary
    )
    _tokens: dict[tuple[str, str], tuple[str, JobCredentials]] = field(default_factory=dict)
    # The StreamJobs whose daemon follows their Reconfigurations (operator/reconfigurations.py),
    # each with the event that wakes it; an entry lives as long as its daemon.
    followed_jobs: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)

    def lock(self, key: str) -> asyncio.Lock:
        """One lock per key (a job, an object uid): kopf runs timers and change handlers of
        the same object concurrently, and nothing may be submitted twice. Callers hold on
        to it only for the `async with`; once nobody does, it is dropped."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def job_address(
        self, namespace: str, job: str, uid: str | None = None, *, fresh: bool = False
    ) -> JobAddress | None:
        """The agent of `job`, with the operator's token (never the job's: operator/
        credentials.py) and the job's CA when the agent serves TLS; None until the Secret
        exists.

        With the job's `uid` the token is remembered for that incarnation of the job (the
        operator creates the Secret once and never rotates it), which saves a Secret read
        per agent call; `fresh=True` reads it again (after the agent answered 401)."""
        key = (namespace, job)
        if fresh:
            self._tokens.pop(key, None)
        cached = self._tokens.get(key)
        if uid and cached is not None and cached[0] == uid:
            return _address(namespace, job, cached[1])
        secret = await self.cluster.get(Ref("v1", "Secret", namespace, Names(job).token_secret))
        credentials = JobCredentials.of_secret(secret)
        if uid and credentials:
            self._tokens[key] = (uid, credentials)
        elif uid:
            self._tokens.pop(key, None)
        return _address(namespace, job, credentials) if credentials else None


def _address(namespace: str, job: str, credentials: JobCredentials) -> JobAddress:
    ca = credentials.ca_pem if credentials.tls else None
    return JobAddress(namespace, job, credentials.token, ca)
