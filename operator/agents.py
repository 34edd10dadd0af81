"""`AgentLink`: the operator's one door to a job's sidecar agent.

The operator needs three things from an agent: submit a plan, follow a plan, and know
whether the job is healthy (and what it runs). `ClientAgentLink` does them over
`AgentClient` (retries with backoff, then `AgentUnreachable`). The tests' in-memory agent
with failure switches (`tests/fakes_agent.py`) implements the same `AgentLink`.

An agent is addressed by job (namespace, name), the operator's token and, when it serves
TLS, the job's CA (operator/credentials.py): then the link speaks HTTPS and verifies the
agent's certificate against that CA alone. Where it listens is the driver Service's DNS
name unless `url_for` says otherwise (the sandbox, a port-forward).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from pydantic import ValidationError

from swivel.api.errors import problems_from
from swivel.jobs.agent.client import AgentClient, AgentRejected, AgentUnreachable
from swivel.operator.naming import Names
from swivel.protocol.bodies import PrewarmCheck
from swivel.protocol.counts import WorkerLoads
from swivel.protocol.documents import BodyRejected
from swivel.protocol.loads import ServedLoads

__all__ = [
    "AgentHealth",
    "AgentLink",
    "AgentRejected",
    "AgentUnreachable",
    "ClientAgentLink",
    "JobAddress",
    "Loads",
]


@dataclass(frozen=True)
class JobAddress:
    namespace: str
    name: str
    token: str
    ca: str | None = None  # PEM of the job's CA: the agent serves HTTPS

    def url(self, base: str) -> str:
        """`base` over HTTPS when the agent serves TLS."""
        if self.ca and base.startswith("http://"):
            return "https://" + base.removeprefix("http://")
        return base


@dataclass(frozen=True)
class AgentHealth:
    """What the health timer learns: `ready` = the driver reported progress (`/readyz`)."""

    ready: bool
    config_version: int | None = None
    operators: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    active_plan: str | None = None
    workers: int = 0
    message: str = ""
    # Where the agent moved a corrupt state file at start (it then runs the job's spec).
    state_recovered_from: str | None = None
    # The driver's prewarm check (None: none reported, or the agent's did not validate).
    prewarm_check: PrewarmCheck | None = None


@dataclass(frozen=True)
class Loads:
    """Flux's statistics for one collection phase (per executor and per bin), as the driver
    measured them and the agent serves them (`GET /v1/loads`, docs/control-protocol.md)."""

    executors: tuple[Mapping[str, Any], ...]  # {executor, busySeconds, windowSeconds, memoryBytes}
    bins: tuple[Mapping[str, Any], ...]  # {bin, executor, records, stateBytes}
    assignment: Mapping[int, str]
    coordination_seconds: float = 0.0
    processing_seconds: float = 0.0
    measured_at: float | None = None  # epoch seconds, the driver's clock
    age_seconds: float = 0.0  # since the agent received it
    batches: tuple[int, ...] = ()
    interval_seconds: float | None = None  # the driver's coordination interval in force
    # The workers' own counts over the agent's sliding window (Chi §5), when any reported:
    # rows and busy time per bin, seconds old (swivel.controllers.worker_loads).
    workers: WorkerLoads | None = None

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Loads:
        """From the agent's `GET /v1/loads` answer, read with the models the agent checked
        the driver's body against (ValueError naming each bad field when it is not one)."""
        try:
            served = ServedLoads.model_validate(document)
        except ValidationError as error:
            problems = "; ".join(str(p) for p in problems_from(error))
            raise ValueError(f"not a loads document: {problems}") from None
        return cls(
            # The wire form (camelCase, only the fields given): the policies default the rest.
            executors=tuple(e.to_wire() for e in served.executors),
            bins=tuple(b.to_wire() for b in served.bins),
            assignment={b.bin: b.executor for b in served.bins},
            coordination_seconds=served.coordination_seconds,
            processing_seconds=served.processing_seconds,
            measured_at=served.measured_at,
            age_seconds=served.age_seconds,
            batches=tuple(served.batches),
            interval_seconds=served.coordination_interval_seconds,
            workers=served.workers,
        )


class AgentLink(Protocol):
    async def submit(
        self, job: JobAddress, name: str, spec: Mapping[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """The agent's plan document (with its `id`); AgentRejected / AgentUnreachable.

        `key` (the Reconfiguration's `namespace/name/uid`) is the agent's idempotency key:
        submitting it again returns the plan it created, never a second one."""
        ...

    async def get_plan(
        self, job: JobAddress, plan_id: str, *, since: int | None = None, timeout: float = 0.0
    ) -> dict[str, Any]:
        """The agent's plan document; with `since` (a `revision` the caller saw) a long-poll
        answered when the document changes, or unchanged after `timeout` seconds. A link
        whose documents carry no `revision` answers at once."""
        ...

    async def health(self, job: JobAddress) -> AgentHealth:
        """Raises AgentUnreachable when the agent does not answer."""
        ...

    async def loads(self, job: JobAddress) -> Loads | None:
        """The driver's latest load measurement for the policies, None while there is none
        (not measured yet, or bins moved since). Raises AgentUnreachable."""
        ...

    async def close(self) -> None:
        """Let go of connections (the operator's cleanup, before its loop ends)."""
        ...


def service_url(namespace: str, job: str) -> str:
    return Names(job).agent_url(namespace)


class ClientAgentLink:
    """The real link, over `AgentClient` (one per call: tokens rotate with the Secret).

    Every call goes through one HTTP session per event loop, so connections to an agent are
    kept alive between calls (a new session per call cost a TCP connect and close, about
    a third of the operator's time in a burst of submits). `close()` ends it."""

    def __init__(
        self,
        url_for: Callable[[str, str], str] = service_url,
        *,
        retries: int = 3,
        backoff_s: float = 0.2,
        request_timeout_s: float = 5.0,
    ) -> None:
        self._url_for = url_for
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}  # per CA PEM
        self._options = {
            "retries": retries,
            "backoff_s": backoff_s,
            "request_timeout_s": request_timeout_s,
        }

    def _shared(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            timeout = aiohttp.ClientTimeout(total=float(self._options["request_timeout_s"]))
            connector = aiohttp.TCPConnector(limit=0)  # no cap, as with a session per call
            self._session = aiohttp.ClientSession(timeout=timeout, connector=connector)
            self._session_loop = loop
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = self._session_loop = None

    def _ssl(self, job: JobAddress) -> ssl.SSLContext | None:
        """Trust the job's CA and nothing else (a certificate of any other CA is refused)."""
        if not job.ca:
            return None
        context = self._contexts.get(job.ca)
        if context is None:
            context = self._contexts[job.ca] = ssl.create_default_context(cadata=job.ca)
        return context

    def _client(self, job: JobAddress) -> AgentClient:
        url = job.url(self._url_for(job.namespace, job.name))
        return AgentClient(
            url,
            job.token,
            session=self._shared(),
            ssl_context=self._ssl(job),
            **self._options,  # type: ignore[arg-type]
        )

    async def submit(
        self, job: JobAddress, name: str, spec: Mapping[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        async with self._client(job) as client:
            return await client.submit_plan(name, spec, idempotency_key=key)

    async def get_plan(
        self, job: JobAddress, plan_id: str, *, since: int | None = None, timeout: float = 0.0
    ) -> dict[str, Any]:
        async with self._client(job) as client:
            return await client.get_plan(plan_id, since=since, timeout=timeout)

    async def health(self, job: JobAddress) -> AgentHealth:
        url = job.url(self._url_for(job.namespace, job.name)).rstrip("/") + "/readyz"
        try:
            async with self._shared().get(url, ssl=self._ssl(job) or True) as response:
                ready = response.status == 200
                message = "" if ready else str((await response.json()).get("status", ""))
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise AgentUnreachable(f"GET {url}: {error or type(error).__name__}") from error
        async with self._client(job) as client:
            config = await client.get_config()
            topology = await client.get_topology()
        return AgentHealth(
            ready=ready,
            config_version=config.get("configVersion"),
            operators=config.get("operators") or {},
            active_plan=config.get("activePlan"),
            workers=len(topology.get("workers") or []),
            message=message,
            state_recovered_from=config.get("stateRecoveredFrom"),
            prewarm_check=_prewarm_check(config.get("prewarmCheck")),
        )

    async def loads(self, job: JobAddress) -> Loads | None:
        """`GET /v1/loads`; None while the driver has reported none (404)."""
        async with self._client(job) as client:
            document = await client.get_loads()
        return None if document is None else Loads.from_document(document)


def _prewarm_check(document: Any) -> PrewarmCheck | None:
    """The agent's `prewarmCheck`, validated as the agent validated the driver's: an agent
    is a pod of the user's job, so one that does not validate is shown as none."""
    if document is None:
        return None
    try:
        return PrewarmCheck.parse(document)
    except BodyRejected:
        return None
