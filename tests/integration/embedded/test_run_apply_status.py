"""`swivel run` as a real process (local Spark + agent), reconfigured with `swivel apply`
and inspected with `swivel status` from other processes, as a person would in two
terminals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from swivel.embedded.sizing import Sizing, example_job
from tests.polling import wait_for

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
RECONF = ROOT / "examples" / "fraud-detection" / "reconfiguration.yaml"


def swivel(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "swivel", *args], check=False, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


@pytest.fixture
def running_job(tmp_path: Path) -> Iterator[tuple[dict[str, str], subprocess.Popen[str], Path]]:
    """`swivel run` on a small fraud job, until it has registered and run a few batches."""
    env = {**os.environ, "SWIVEL_HOME": str(tmp_path / "home")}
    env.pop("SWIVEL_AGENT_URL", None)
    manifest = tmp_path / "streamjob.json"
    job = example_job(Sizing(rows_per_second=20, work=50, customers=8, trigger_ms=500))
    manifest.write_text(json.dumps(job.to_manifest()))
    log = (tmp_path / "run.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "swivel", "run", str(manifest), "--workdir", str(tmp_path / "work"),
         "--record-schedule", "--duration", "150"],
        env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    output = tmp_path / "run.log"
    try:

        def three_batches() -> bool:
            assert process.poll() is None, output.read_text()
            return output.read_text().count("batch ") >= 3

        wait_for(three_batches, 180, "three batches in the run's output", every=0.5)
        yield env, process, output
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(90)
        log.close()


def test_run_apply_status_end_to_end(running_job, tmp_path: Path) -> None:
    env, process, output = running_job
    bad = tmp_path / "bad.yaml"
    bad.write_text(RECONF.read_text().replace("operator: combine", "operator: ghost"))
    refused = swivel("apply", str(bad), env=env)
    assert refused.returncode == 2, refused.stderr
    assert "spec.functionUpdates[1].operator" in refused.stderr
    assert process.poll() is None  # the job never heard of it

    applied = swivel("apply", str(RECONF), "--output", "json", env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    plan = json.loads(applied.stdout)
    assert plan["phase"] == "Completed" and plan["delayMs"] is not None

    status = swivel("status", "--output", "json", env=env)
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    detector = document["config"]["operators"]["customer-detector"]
    assert detector["version"] == 2 and detector["params"]["model"] == "cheap"
    assert document["plan"]["id"] == plan["id"]
    shown = swivel("status", env=env)
    assert "customer-detector" in shown.stdout and "cheap" in shown.stdout

    process.send_signal(signal.SIGINT)
    assert process.wait(90) == 0, output.read_text()
    text = output.read_text()
    assert "stopped" in text
    assert "recorded schedule: serializable" in text, text
    assert not list((tmp_path / "home" / "embedded").glob("*.json"))  # unregistered
