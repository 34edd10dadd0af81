"""`AgentLink`: the operator's one door to a job's sidecar agent, and a fake to test with.

The operator needs three things from an agent: submit a plan, follow a plan, and know
whether the job is healthy (and what it runs). `ClientAgentLink` does them over
`AgentClient` (retries with backoff, then `AgentUnreachable`); `TestingAgentLink` keeps
plans in memory and has switches for every failure a handler must survive: unreachable,
409 busy, 422 rejected, slow completion, a failing plan, an unready driver.

An agent is addressed by job (namespace, name), the operator's token and, when it serves
TLS, the job's CA (operator/credentials.py): then the link speaks HTTPS and verifies the
agent's certificate against that CA alone. Where it listens is the driver Service's DNS
name unless `url_for` says otherwise (the sandbox, a port-forward).
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import aiohttp
from pydantic import ValidationError

from swivel.api.errors import problems_from
from swivel.api.loads import ServedLoads
from swivel.api.phases import FINAL_PHASES
from swivel.jobs.agent.client import AgentClient, AgentRejected, AgentUnreachable
from swivel.operator.naming import Names

__all__ = [
    "AgentHealth",
    "AgentLink",
    "AgentRejected",
    "AgentUnreachable",
    "ClientAgentLink",
    "JobAddress",
    "Loads",
    "TestingAgentLink",
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
        )


class AgentLink(Protocol):
    async def submit(
        self, job: JobAddress, name: str, spec: Mapping[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """The agent's plan document (with its `id`); AgentRejected / AgentUnreachable.

        `key` (the Reconfiguration's `namespace/name/uid`) is the agent's idempotency key:
        submitting it again returns the plan it created, never a second one."""
        ...

    async def get_plan(self, job: JobAddress, plan_id: str) -> dict[str, Any]: ...

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

    async def get_plan(self, job: JobAddress, plan_id: str) -> dict[str, Any]:
        async with self._client(job) as client:
            return await client.get_plan(plan_id)

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
        )

    async def loads(self, job: JobAddress) -> Loads | None:
        """`GET /v1/loads`; None while the driver has reported none (404)."""
        async with self._client(job) as client:
            document = await client.get_loads()
        return None if document is None else Loads.from_document(document)


@dataclass
class FakePlan:
    id: str
    name: str
    spec: dict[str, Any]
    polls_left: int
    fails: bool
    document: dict[str, Any] = field(default_factory=dict)
    key: str | None = None


class TestingAgentLink:
    """An in-memory agent per job, with failure switches a test flips at any time.

    - `unreachable`: every call raises AgentUnreachable (a set of job names, or all with "*").
    - `reject`: the next submissions answer this status (422 or 400) with `reject_errors`.
    - `completion_polls`: a plan completes after this many `get_plan` calls (slow completion).
    - `fail_plans`: plans end Failed instead of Completed.
    - `ready`: what `/readyz` says.
    - `loads_by_job`: the statistics `loads()` returns.
    One plan at a time per job, like the agent: a second submission answers 409 with
    `runningPlan`; a submission with the key of an earlier one gets that plan back.
    `submissions` records every accepted plan (what a test asserts on).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, *, completion_polls: int = 1) -> None:
        self.unreachable: set[str] = set()
        self.reject: int | None = None
        self.reject_errors: list[dict[str, str]] = []
        self.completion_polls = completion_polls
        self.fail_plans = False
        self.ready = True
        self.loads_by_job: dict[str, Loads] = {}
        self.submissions: list[tuple[str, str, dict[str, Any]]] = []
        self.calls: list[tuple[str, str]] = []
        self._plans: dict[str, FakePlan] = {}
        self._config_version: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _check(self, job: JobAddress, call: str) -> None:
        self.calls.append((call, job.name))
        if "*" in self.unreachable or job.name in self.unreachable:
            raise AgentUnreachable(f"{job.name}: agent unreachable (testing switch)")

    def plans_of(self, job: str) -> list[FakePlan]:
        return [p for p in self._plans.values() if p.id.startswith(f"{job}/")]

    def _running(self, job: str) -> FakePlan | None:
        return next(
            (p for p in self.plans_of(job) if p.document["phase"] not in FINAL_PHASES),
            None,
        )

    async def submit(
        self, job: JobAddress, name: str, spec: Mapping[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        self._check(job, "submit")
        with self._lock:
            earlier = next((p for p in self.plans_of(job.name) if key and p.key == key), None)
            if earlier is not None:  # the agent's idempotency key: the same plan back
                return dict(earlier.document)
            if self.reject is not None:
                raise AgentRejected(
                    self.reject, list(self.reject_errors), {"errors": self.reject_errors}
                )
            if spec.get("jobRef", {}).get("name") != job.name:
                errors = [{"field": "spec.jobRef.name", "reason": f"this agent runs {job.name!r}"}]
                raise AgentRejected(422, errors, {"errors": errors})
            running = self._running(job.name)
            if running is not None:
                errors = [{"field": "", "reason": f"plan {running.id} is in flight"}]
                raise AgentRejected(409, errors, {"errors": errors, "runningPlan": running.id})
            plan_id = f"{job.name}/{name}-{next(self._ids)}"
            now = _now()
            plan = FakePlan(
                plan_id, name, dict(spec), self.completion_polls, self.fail_plans, key=key
            )
            version = self._config_version.get(job.name, 1) + 1
            self._config_version[job.name] = version
            plan.document = {
                "id": plan_id,
                "name": name,
                "scheduler": spec.get("scheduler", "fries"),
                "configVersion": version,
                "phase": "Accepted",
                "timings": {"requestedAt": now, "acceptedAt": now},
                "delayMs": None,
                "progress": {"workersSwitched": 0, "workersTotal": 2},
                "message": "",
            }
            self._plans[plan_id] = plan
            self.submissions.append((job.name, name, dict(spec)))
            return dict(plan.document)

    async def get_plan(self, job: JobAddress, plan_id: str) -> dict[str, Any]:
        self._check(job, "get_plan")
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None:
                errors = [{"field": "id", "reason": "no such plan"}]
                raise AgentRejected(404, errors, {"errors": errors})
            document = plan.document
            if document["phase"] in FINAL_PHASES:
                return dict(document)
            if plan.polls_left > 0:
                plan.polls_left -= 1
                document.update(
                    phase="Applying", progress={"workersSwitched": 1, "workersTotal": 2}
                )
                document["timings"]["firstSwitchAt"] = _now()
                return dict(document)
            now = _now()
            document["timings"].update(lastSwitchAt=now, completedAt=now)
            if plan.fails:
                document.update(phase="Failed", message="workers did not switch (testing switch)")
            else:
                document.update(
                    phase="Completed",
                    delayMs=12.5,
                    progress={"workersSwitched": 2, "workersTotal": 2},
                )
            return dict(document)

    def finish_all(self) -> None:
        """Let every plan complete on its next poll."""
        with self._lock:
            for plan in self._plans.values():
                plan.polls_left = 0

    async def health(self, job: JobAddress) -> AgentHealth:
        self._check(job, "health")
        running = self._running(job.name)
        return AgentHealth(
            ready=self.ready,
            config_version=self._config_version.get(job.name, 1),
            operators={},
            active_plan=running.id if running else None,
            workers=2,
            message="" if self.ready else "waiting for the driver's first progress report",
        )

    async def loads(self, job: JobAddress) -> Loads | None:
        self._check(job, "loads")
        return self.loads_by_job.get(job.name)

    async def close(self) -> None:
        pass


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")
