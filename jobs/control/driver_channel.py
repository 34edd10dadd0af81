"""The driver's side of the agent's API (docs/control-protocol.md, "Driver channel").

The job side speaks to its agent over one transport: the workers' `Connection` (standard
library, the job's CA for TLS). The driver is several threads at once (the progress
poster, the action long-poll, the migration driver's reports and loads) and an
`http.client` connection is not thread-safe, so every call opens its own and closes it: a
few calls per micro-batch, where a workers' keep-alive per check would matter and this does
not, and nothing is left open when a thread or the channel goes away.

Every call returns the decoded JSON answer or raises `AgentCallError`, an `OSError` (as a
refused connection is), so a caller that tolerates an unreachable agent catches one type.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swivel.jobs.control.client import ENV_CA
from swivel.jobs.control.connection import Connection


class AgentCallError(OSError):
    """The agent answered a driver call with an error status (4xx/5xx)."""

    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        text = body[:300].decode("utf-8", errors="replace")
        super().__init__(f"{method} {path}: the agent answered {status}: {text}")
        self.status = status


@dataclass
class AgentDriverChannel:
    """The driver's calls to its agent, with the driver's credential."""

    url: str
    token: str | None = None
    ca: str | None = None  # PEM; from SWIVEL_AGENT_CA when None and the URL is https

    def report(self, event: Mapping[str, Any]) -> None:
        """A batch's `started`/`completed` event (`POST /v1/driver/progress`)."""
        self._call("POST", "/v1/driver/progress", dict(event))

    def actions(self, since: int, timeout: float = 20.0) -> list[Mapping[str, Any]]:
        """Boundary actions after `since` (long-poll; none when the wait ran out)."""
        query = urllib.parse.urlencode({"since": since, "timeout": f"{timeout:g}"})
        answer = self._call("GET", f"/v1/driver/actions?{query}", timeout=timeout + 5)
        if isinstance(answer, dict) and "action" in answer:  # the agent answers one action
            return [answer]
        return list((answer or {}).get("actions", []))

    def action_done(self, seq: int) -> None:
        """The outcome of action `seq` reached the agent: never hand it out again."""
        self._call("POST", "/v1/driver/actions/done", {"seq": int(seq)})

    def report_migration(self, body: Mapping[str, Any]) -> None:
        """A bin migration's progress (`POST /v1/driver/migration`)."""
        self._call("POST", "/v1/driver/migration", dict(body))

    def report_loads(self, body: Mapping[str, Any]) -> None:
        """The driver's load measurement (`POST /v1/driver/loads`)."""
        self._call("POST", "/v1/driver/loads", dict(body))

    def confirm_coordination(self, body: Mapping[str, Any]) -> None:
        """The coordination interval the driver now runs with (`POST /v1/driver/coordination`)."""
        self._call("POST", "/v1/driver/coordination", dict(body))

    def report_prewarm_check(self, body: Mapping[str, Any]) -> None:
        """The prewarm helper's check at attach (`POST /v1/driver/prewarm-check`)."""
        self._call("POST", "/v1/driver/prewarm-check", dict(body))

    def plan(self, plan_id: str) -> dict[str, Any]:
        """`GET /v1/plans/{id}` (the driver may read a plan's document)."""
        answer = self._call("GET", f"/v1/plans/{urllib.parse.quote(plan_id, safe='')}")
        return dict(answer or {})

    def config(self) -> dict[str, Any]:
        """`GET /v1/config`: what the agent last confirmed (the coordination interval)."""
        return dict(self._call("GET", "/v1/config") or {})

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 5.0) -> Any:
        ca = self.ca
        if ca is None and self.url.startswith("https:"):  # docs/agent.md: the job's CA
            ca = os.environ.get(ENV_CA) or None
        connection = Connection(self.url, self.token, ca)
        try:
            status, payload = connection.request(method, path, timeout, body)
        finally:
            connection.close()
        if status == 304:  # the agent's "nothing new" after a long-poll
            return None
        if not 200 <= status < 300:
            raise AgentCallError(method, path, status, payload)
        return json.loads(payload) if payload else None
