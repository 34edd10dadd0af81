"""What every handler gets: the Kubernetes door, the agent link, the clock and intervals.

One `OperatorContext` is built by `swivel operator` (or by a test) and closed over when the
handlers are registered, so a test swaps the agent for `TestingAgentLink` and the clock for
a fixed one without touching module globals.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from swivel.operator.agents import AgentLink, JobAddress
from swivel.operator.clusters import Clock, Cluster, Ref, utc_now
from swivel.operator.rendering import Names, token_of


@dataclass
class Intervals:
    """Seconds between timer runs (tests shorten them)."""

    health: float = 10.0
    reconfiguration: float = 2.0
    policies: float = 5.0


@dataclass
class OperatorContext:
    cluster: Cluster
    agents: AgentLink
    clock: Clock = utc_now
    intervals: Intervals = field(default_factory=Intervals)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def lock(self, key: str) -> asyncio.Lock:
        """One lock per key (a job, an object uid): kopf runs timers and change handlers of
        the same object concurrently, and nothing may be submitted twice."""
        return self._locks.setdefault(key, asyncio.Lock())

    async def job_address(self, namespace: str, job: str) -> JobAddress | None:
        """The agent of `job`, with its token; None until the token Secret exists."""
        secret = await self.cluster.get(Ref("v1", "Secret", namespace, Names(job).token_secret))
        token = token_of(secret) if secret else None
        return JobAddress(namespace, job, token) if token else None
