"""`swivel agent` as the sidecar runs it, on a state directory whose file is corrupt: it
starts (no crash loop), says where it moved the file, and serves the job from its spec; with
a certificate it cannot read it exits naming the file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.polling import wait_for

from .conftest import http

ROOT = Path(__file__).resolve().parents[3]
JOB = ROOT / "examples/fraud-detection/streamjob.yaml"
TOKEN = "recovery-token"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _agent(state: Path, port: int, **extra_env: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWIVEL_AGENT_")}
    env |= {"SWIVEL_AGENT_TOKEN": TOKEN, **extra_env}
    command = [sys.executable, "-m", "swivel", "agent", "--job", str(JOB),
               "--port", str(port), "--state-dir", str(state)]  # fmt: skip
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_a_corrupt_state_file_is_moved_aside_and_the_agent_serves(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "agent-state.json").write_bytes(b'{"format": 1, "configVersion": 3, "oper')
    port = _free_port()
    process = _agent(state, port)
    try:

        def config_served() -> tuple[int, Any, Any]:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            return http(f"http://127.0.0.1:{port}/v1/config", token=TOKEN)

        status, config, _ = wait_for(
            config_served, 30, "the agent to start", every=0.1, ignoring=(OSError,)
        )
        assert status == 200 and config["configVersion"] == 1  # the job's spec
        (moved,) = state.glob("agent-state.json.corrupt-*")
        assert config["stateRecoveredFrom"] == str(moved)
        metrics = http(f"http://127.0.0.1:{port}/metrics", token=TOKEN)[1]
        assert "swivel_agent_state_recovered_total 1.0" in metrics
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0]
    assert "is corrupt" in output and "moved it to" in output


def test_an_unreadable_certificate_is_a_clear_exit(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere" / "tls.crt")
    process = _agent(
        tmp_path / "state",
        _free_port(),
        SWIVEL_AGENT_TLS_CERT=missing,
        SWIVEL_AGENT_TLS_KEY=missing,
    )
    output = process.communicate(timeout=60)[0]
    assert process.returncode != 0
    assert "Traceback" not in output and "tls.crt" in output
