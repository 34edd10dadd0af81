"""One way to run a benchmark command from a test: in a session of its own, bounded in time,
and never leaving an agent or a JVM behind (the smoke tests of `swivel bench`)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a benchmark's log, without the query plan Spark prints after an error."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return text.split("=== Streaming Query ===", 1)[0][-chars:]


def kill_left_over(marker: str) -> None:
    """SIGKILL the processes whose command line names `marker` (a test's work folder): an
    agent a benchmark started runs in a session of its own."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def run_bounded(
    command: list[str], log: Path, limit_s: float, workdir: Path | None = None
) -> tuple[int, str]:
    """(exit code, stdout) of `command`, its stderr in `log`. Past `limit_s` it is
    interrupted (SIGINT: its `finally` blocks stop the agent, Spark and any cluster), then
    killed with whatever names `workdir`, and the test fails with the log's end."""
    with log.open("w") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True
        )
        try:
            out, _ = process.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.communicate(timeout=45)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
            if workdir is not None:
                kill_left_over(str(workdir))
            pytest.fail(f"the benchmark ran over {limit_s:g} s; its log ends with:\n{tail(log)}")
    return process.returncode, out
