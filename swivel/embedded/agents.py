"""The sidecar agent as a local subprocess: 127.0.0.1, a free port, a fresh token.

`token` is the operator's (the CLI's: `swivel apply`, `swivel status`); the driver side gets
`driver_token` and the Python workers `worker_token` (derived: `RoleTokens`), so a
user function that reads its environment holds only the workers' credential. All three
live in one user's processes here: the split guards against mistakes and stray code, not
against a hostile process of the same user (docs/agent.md, "Credentials").

It runs in its own process (as on Kubernetes, where it is a sidecar container) so that a
busy driver - py4j calls, the GIL held by pandas in local mode - never slows the control
channel down, and in its own session so that Ctrl-C in the terminal reaches `swivel run`
only: `swivel run` stops the query at a batch boundary first and the agent after.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from swivel.jobs.agent.auth import RoleTokens
from swivel.jobs.agent.client import AgentClient, AgentUnreachable
from swivel.jobs.migration.cluster import die_with_parent

T = TypeVar("T")


class AgentStartFailed(RuntimeError):  # noqa: N818 - the name is the condition
    """The agent process exited or did not answer in time."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LocalAgent(RoleTokens):
    """`swivel agent` for one job manifest; `start()`, then `url`/`token`, then `stop()`."""

    manifest: Path
    state_dir: Path
    schedule_dir: Path | None = None
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    log_path: Path | None = None
    _process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, timeout_s: float = 30.0) -> LocalAgent:
        self.port = self.port or free_port()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "swivel", "agent", "--job", str(self.manifest),
            "--host", "127.0.0.1", "--port", str(self.port), "--state-dir", str(self.state_dir),
        ]  # fmt: skip
        if self.schedule_dir is not None:
            self.schedule_dir.mkdir(parents=True, exist_ok=True)
            command += ["--schedule-dir", str(self.schedule_dir)]
        inherited = ("SWIVEL_AGENT_TOKEN_FILE", "SWIVEL_AGENT_TLS_CERT", "SWIVEL_AGENT_TLS_KEY")
        env = {k: v for k, v in os.environ.items() if k not in inherited}
        env["SWIVEL_AGENT_TOKEN"] = self.token
        log_path = self.log_path or self.state_dir / "agent.log"
        with log_path.open("ab") as log:
            # Its own session (a terminal's Ctrl-C reaches the job, which stops the agent
            # in order), but it dies with this process if that is killed outright.
            self._process = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),  # noqa: PLW1509 (prctl only)
            )
        self._wait_healthy(timeout_s, log_path)
        return self

    def _wait_healthy(self, timeout_s: float, log_path: Path) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process.poll() is not None:
                raise AgentStartFailed(
                    f"the agent exited ({self._process.returncode}): "
                    + log_path.read_text(errors="replace")[-2000:]
                )
            try:
                BlockingAgent(self.url, self.token, retries=0, request_timeout_s=0.5).health()
                return
            except AgentUnreachable:
                if time.monotonic() > deadline:
                    self.stop()
                    raise AgentStartFailed(
                        f"the agent did not answer within {timeout_s}s"
                    ) from None
                time.sleep(0.05)

    def stop(self, timeout_s: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)


class BlockingAgent:
    """`AgentClient` for embedded mode's synchronous callers (the trial loop runs beside the
    query, on a thread without an event loop): the CLI's one client of the agent, each
    call on an event loop of its own, so nothing is shared between threads."""

    def __init__(
        self, url: str, token: str, *, retries: int = 5, request_timeout_s: float = 10.0
    ) -> None:
        self.url, self._token = url, token
        self._retries, self._timeout_s = retries, request_timeout_s

    def _run(self, call: Callable[[AgentClient], Awaitable[T]]) -> T:
        async def once() -> T:
            async with AgentClient(
                self.url, self._token, retries=self._retries, request_timeout_s=self._timeout_s
            ) as client:
                return await call(client)

        return asyncio.run(once())

    def health(self) -> dict[str, Any]:
        return self._run(lambda client: client.health())

    def loads(self) -> dict[str, Any] | None:
        """`GET /v1/loads` (None: 404, no measurement yet)."""
        return self._run(lambda client: client.get_loads())

    def submit(
        self,
        name: str,
        spec: Mapping[str, Any],
        *,
        requested_at: float | None = None,
        scheduler_override: Literal["naive"] | None = None,
    ) -> dict[str, Any]:
        """POST /v1/plans (`AgentClient.submit_plan`); AgentRejected when refused."""
        return self._run(
            lambda client: client.submit_plan(
                name, spec, requested_at=requested_at, scheduler_override=scheduler_override
            )
        )

    def wait_for_completion(self, plan_id: str, timeout_s: float = 300.0) -> dict[str, Any]:
        """The plan once Completed or Failed (a long-poll on its revision)."""
        return self._run(lambda client: client.wait_for_completion(plan_id, timeout_s=timeout_s))
