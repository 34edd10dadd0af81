"""The cold restart baseline: what the Spark operators do to change a job's code.

The Spark-on-Kubernetes operators apply a new configuration by stopping the application and
starting a new driver from the checkpoint: a new process, a new JVM, new Python workers,
the query planned and its state stores opened again. `ColdRestart` makes the embedded
job's restart scheduler do that for one trial: the agent's `restart` action stops the
in-process query at a batch boundary (as SIGTERM does to `swivel driver`), then starts a
new driver process (`python -m swivel.embedded.cold`, the same runtime with the agent as
feed and driver channel, recording the schedule) that runs until the trial has measured it
and releases it; it stops at a boundary and the in-process query resumes from the
checkpoint, so the next trials run where they ran before.

The same-driver query restart (`JobRuntime.restart`: a new query in the running driver,
JVM and Python workers warm) is the `restart-warm` baseline beside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

STOP_TIMEOUT_S = 120.0


class ColdRestart:
    """For the duration of a `with` block, the runtime's restart starts a new driver."""

    def __init__(self, runtime: Any, job_manifest: dict[str, Any], workdir: Path) -> None:
        self.runtime, self.manifest, self.workdir = runtime, job_manifest, workdir
        self.released = threading.Event()
        self.resumed = threading.Event()  # the query runs in this process again
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self._original: Any = None

    def __enter__(self) -> ColdRestart:
        self._original = self.runtime.restart
        self.runtime.restart = self._restart  # what the runtime's action poller calls
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.released.set()
        self.runtime.restart = self._original

    def release(self) -> None:
        """The trial has its figures: stop the new driver, resume in this process."""
        self.released.set()

    def _restart(self, baseline: Any = None) -> Any:
        runtime = self.runtime
        runtime.stop_at_boundary()
        runtime.restarts += 1
        # The old driver's Python workers go with it (Spark forks new ones for the query
        # that resumes here: it checks an idle worker is alive before reusing it).
        stop_python_workers(os.getpid())
        self.workdir.mkdir(parents=True, exist_ok=True)
        manifest = self.workdir / "cold-streamjob.json"
        manifest.write_text(json.dumps(self.manifest))
        command = [sys.executable, "-m", "swivel.embedded.cold", str(manifest),
                   runtime.checkpoint, runtime.name, runtime.recording_dir or ""]  # fmt: skip
        self.started_at = time.time()
        with (self.workdir / "cold-driver.log").open("ab") as log:
            # This process's environment carries the workers' credential; the new driver
            # also needs its own (docs/agent.md, "Credentials").
            driver_token = getattr(runtime.agent, "token", None) or ""
            env = {**os.environ, "SWIVEL_AGENT_DRIVER_TOKEN": driver_token}
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        while not self.released.wait(0.2):
            if self.process.poll() is not None:
                break  # it failed: resume here, the plan times out and says so
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        try:
            return runtime.start(baseline)
        finally:
            self.resumed.set()

    def wait_resumed(self, timeout_s: float = STOP_TIMEOUT_S + 60.0) -> None:
        """After `release`: until the query runs in this process again and one of its
        batches completed (the rows of the hand-over are in it)."""
        if not self.resumed.wait(timeout_s):
            raise TimeoutError("the query did not resume after the cold restart")
        seen = len(self.runtime.progress)
        deadline = time.monotonic() + timeout_s
        while len(self.runtime.progress) == seen and time.monotonic() < deadline:
            time.sleep(0.05)


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    return children


def stop_python_workers(root: int) -> list[int]:
    """SIGTERM the PySpark workers forked by a `pyspark.daemon` below process `root` (not
    the daemon itself); the pids signalled."""
    children, stopped = _children(), []
    pending = list(children.get(root, ()))
    while pending:
        pid = pending.pop()
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"pyspark.daemon" in command:
            for worker in children.get(pid, ()):
                with contextlib.suppress(OSError):
                    os.kill(worker, signal.SIGTERM)
                    stopped.append(worker)
            continue
        pending.extend(children.get(pid, ()))
    return stopped


def main(argv: list[str]) -> int:
    """The new driver: `python -m swivel.embedded.cold MANIFEST CHECKPOINT NAME [SCHEDULE]`
    with `SWIVEL_AGENT_URL`/`SWIVEL_AGENT_TOKEN` set; runs until SIGTERM."""
    manifest, checkpoint, name = Path(argv[0]), argv[1], argv[2]
    schedule = argv[3] if len(argv) > 3 and argv[3] else None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    from swivel.api.manifests import load_streamjob
    from swivel.embedded.sessions import local_session
    from swivel.jobs.control.driver_channel import AgentDriverChannel
    from swivel.jobs.runtime.compiling import job_snapshot
    from swivel.jobs.runtime.driver import JobRuntime
    from swivel.jobs.runtime.feeds import AgentFeed

    url, worker_token = os.environ["SWIVEL_AGENT_URL"], os.environ["SWIVEL_AGENT_TOKEN"]
    # Out of the environment before Spark starts: its Python workers inherit it.
    token = os.environ.pop("SWIVEL_AGENT_DRIVER_TOKEN", None) or worker_token
    spec = load_streamjob(manifest).spec
    spark = local_session(spec)
    runtime = JobRuntime(
        spec,
        spark,
        checkpoint=checkpoint,
        name=name,
        feed=AgentFeed(url, worker_token, job_snapshot(spec)),
        recording_dir=schedule,
        agent=AgentDriverChannel(url, token),
    )
    runtime.start()
    while not stop.wait(0.2):
        query = runtime.query
        if query is not None and not query.isActive and query.exception() is not None:
            print(f"the query failed: {query.exception()}", file=sys.stderr)
            runtime.stop()
            spark.stop()
            return 1
    runtime.stop_at_boundary()
    runtime.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
