"""The real Swivel operator beside the sandbox: `swivel operator` as a supervised process.

`swivel sandbox up` runs it (unless `--no-operator`): the unchanged `swivel operator
--all-namespaces --standalone`, with a kubeconfig for the sandbox, started through
`python -m swivel_tools.sandbox.network` so the agent URLs it derives from Service names
(`http://JOB-driver.NS.svc:8470`) reach the local ports the kubelet gave the driver pods.
Its output goes to a log file. Like a one-replica Deployment it is started again if it
exits (after 2 s); on stop it gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from swivel_tools.sandbox import kubeconfig
from swivel_tools.sandbox.containers import inherited_environment
from swivel_tools.sandbox.kubelet import die_with_parent, kill_group

logger = logging.getLogger(__name__)

RESTART_DELAY_SECONDS = 2.0
STOP_GRACE_SECONDS = 5.0


class OperatorProcess:
    def __init__(self, url: str, network_file: Path, log: Path, *, kubeconfig_path: Path) -> None:
        self.url = url
        self.network_file = network_file
        self.log = log
        self.kubeconfig_path = kubeconfig_path
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "swivel_tools.sandbox.network",
            "--map",
            str(self.network_file),
            "--",
            "operator",
            "--all-namespaces",
            "--standalone",
        ]

    def start(self) -> None:
        kubeconfig.write(self.kubeconfig_path, self.url)
        self._task = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        env = {**inherited_environment(), "KUBECONFIG": str(self.kubeconfig_path)}
        env["PYTHONUNBUFFERED"] = "1"
        while not self._stopping.is_set():
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("ab") as output:
                self.process = await asyncio.create_subprocess_exec(
                    *self.command(),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_parent if sys.platform == "linux" else None,
                )
            self.starts += 1
            logger.info("swivel operator started (pid %d), log %s", self.process.pid, self.log)
            code = await self.process.wait()
            kill_group(self.process.pid)
            if self._stopping.is_set():
                return
            logger.warning("swivel operator exited with %s; restarting", code)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), RESTART_DELAY_SECONDS)

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        self._stopping.set()
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), grace)
            kill_group(process.pid)
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(OSError):
            os.unlink(self.kubeconfig_path)
