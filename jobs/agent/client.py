"""`AgentClient`: how the CLI and the operator talk to a job's agent.

Connection failures are retried with exponential backoff (the agent may be restarting
beside its driver); answers the agent gave on purpose (400/401/404/409/422) are not retried
but raised as `AgentRejected` with the agent's `field: reason` errors.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Literal

import aiohttp

from swivel.api.phases import FINAL_PHASES
from swivel.protocol.bodies import SubmissionBody
from swivel.protocol.documents import MAX_PLAN_WAIT_S


class AgentUnreachable(Exception):  # noqa: N818 - the name is the condition
    """No answer from the agent after every retry."""


class AgentRejected(Exception):  # noqa: N818 - the name is the condition
    """The agent answered with an error status; `errors` are its `{field, reason}` items."""

    def __init__(self, status: int, errors: list[dict[str, str]], body: Any = None) -> None:
        self.status = status
        self.errors = errors
        self.running_plan = body.get("runningPlan") if isinstance(body, dict) else None
        lines = "; ".join(
            f"{e.get('field')}: {e.get('reason')}" if e.get("field") else str(e.get("reason"))
            for e in errors
        )
        super().__init__(f"agent answered {status}: {lines or body}")


class AgentClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        retries: int = 5,
        backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
        request_timeout_s: float = 10.0,
        session: aiohttp.ClientSession | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`token`: the operator's (a job's credential answers 403 here: docs/agent.md);
        `ssl_context`: what an https agent's certificate is verified against (the job's CA)."""
        self.base_url = base_url.rstrip("/")
        self._ssl: ssl.SSLContext | bool = ssl_context or True
        self._headers = {"Authorization": f"Bearer {token}"}
        self._retries, self._backoff_s, self._max_backoff_s = retries, backoff_s, max_backoff_s
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s)
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._owns_session:
            await self._session.close()
        self._session = None

    async def submit_plan(
        self,
        name: str,
        spec: Mapping[str, Any],
        *,
        requested_at: float | None = None,
        idempotency_key: str | None = None,
        scheduler_override: Literal["naive"] | None = None,
    ) -> dict[str, Any]:
        """POST /v1/plans; the spec is the Reconfiguration spec's wire form. With an
        `idempotency_key`, a repeat (a retry, a restarted operator) gets the plan the first
        submission created instead of a second one. `scheduler_override`: the benchmarks'
        naive baseline."""
        # Built unchecked: the agent is the judge of a body (its 400 names the field).
        body = SubmissionBody.model_construct(
            name=name,
            spec=dict(spec),
            requested_at=requested_at or time.time(),
            idempotency_key=idempotency_key,
            scheduler_override=scheduler_override,
        )
        wire = body.model_dump(mode="json", by_alias=True, exclude_none=True)
        return await self._request("POST", "/v1/plans", wire)

    async def health(self) -> dict[str, Any]:
        """GET /healthz (no token needed): the agent process serves requests."""
        return await self._request("GET", "/healthz")

    async def get_plan(
        self, plan_id: str, *, since: int | None = None, timeout: float = 0.0
    ) -> dict[str, Any]:
        """GET /v1/plans/{id}; with `since` (the `revision` of a document the caller holds)
        a long-poll: the agent answers once the document's revision differs, else with the
        same document after `timeout` seconds (at most 30). The request may take that much
        longer than `request_timeout_s`."""
        path = f"/v1/plans/{plan_id}"
        if since is None:
            return await self._request("GET", path)
        query = urllib.parse.urlencode({"since": since, "timeout": f"{timeout:g}"})
        return await self._request("GET", f"{path}?{query}", wait_s=timeout)

    async def get_config(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/config")

    async def get_topology(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/topology")

    async def get_loads(self) -> dict[str, Any] | None:
        """The driver's latest load measurement (`GET /v1/loads`), None while there is none."""
        try:
            return await self._request("GET", "/v1/loads")
        except AgentRejected as error:
            if error.status == 404:
                return None
            raise

    async def wait_for_completion(
        self,
        plan_id: str,
        *,
        timeout_s: float = 600.0,
        poll_interval_s: float = 0.05,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Follow the plan until Completed or Failed (`on_progress` sees each document);
        TimeoutError after `timeout_s`. It long-polls with the `revision` it last saw, so it
        hears of each change as it happens; an agent whose documents carry no revision is
        polled every `poll_interval_s`."""
        deadline = time.monotonic() + timeout_s
        revision: int | None = None
        while True:
            wait = min(max(deadline - time.monotonic(), 0.0), MAX_PLAN_WAIT_S)
            plan = await self.get_plan(plan_id, since=revision, timeout=wait)
            if on_progress is not None:
                on_progress(plan)
            if plan.get("phase") in FINAL_PHASES:
                return plan
            if time.monotonic() >= deadline:
                raise TimeoutError(f"plan {plan_id} still {plan.get('phase')} after {timeout_s}s")
            seen = plan.get("revision")
            if not isinstance(seen, int):
                await asyncio.sleep(poll_interval_s)
            revision = seen if isinstance(seen, int) else None

    async def _request(
        self, method: str, path: str, body: Any = None, *, wait_s: float = 0.0
    ) -> dict[str, Any]:
        """`wait_s`: how long the agent may hold the answer back (a long-poll), on top of the
        request timeout."""
        delay = self._backoff_s
        for attempt in range(self._retries + 1):
            try:
                return await self._once(method, path, body, wait_s)
            except (aiohttp.ClientConnectionError, TimeoutError) as error:
                if attempt == self._retries:
                    raise AgentUnreachable(
                        f"{method} {self.base_url}{path}: {error or type(error).__name__}"
                    ) from error
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._max_backoff_s)
        raise AssertionError("unreachable")

    async def _once(self, method: str, path: str, body: Any, wait_s: float) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        timeout = self._timeout
        if wait_s > 0:
            timeout = aiohttp.ClientTimeout(total=(timeout.total or 0.0) + wait_s)
        async with self._session.request(
            method,
            self.base_url + path,
            json=body,
            headers=self._headers,
            ssl=self._ssl,
            timeout=timeout,
        ) as response:
            try:
                document = await response.json(content_type=None)
            except ValueError:
                document = {"errors": [{"field": "", "reason": await response.text()}]}
            if response.status >= 400:
                errors = document.get("errors", []) if isinstance(document, dict) else []
                raise AgentRejected(response.status, errors, document)
            if not isinstance(document, dict):
                raise AgentRejected(response.status, [], document)
            return document
