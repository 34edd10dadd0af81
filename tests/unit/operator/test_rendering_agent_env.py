"""The agent sidecar's environment: SWIVEL_AGENT_MIGRATIONS=1 exactly when the driver runs a
MigrationDriver, decided on the master of the job config both containers read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from swivel.api.manifests import load_streamjob
from swivel.api.sparkconf import TRUSTED
from swivel.api.streamjob import StreamJob
from swivel.cli.driver import driver_setup
from swivel.operator import jobconfigs, pods
from swivel.operator.naming import Owner

ROOT = Path(__file__).resolve().parents[3]
OWNER = Owner(name="fraud-detection", namespace="streams", uid="0b9f6a3e-1111-2222-3333-4444")


def _job(spark_conf: dict[str, str]) -> StreamJob:
    job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
    spec = job.spec.model_copy(update={"spark_conf": spark_conf})
    return job.model_copy(update={"spec": spec})


def _env(job: StreamJob, container: str) -> dict[str, Any]:
    pod = pods.render_driver_pod(job, OWNER)
    (found,) = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in found["env"]}


@pytest.mark.parametrize(
    "spark_conf",
    [
        {},
        {"spark.master": "local[4]"},  # the operator's k8s:// master wins over the user's
        {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "16"},
    ],
)
def test_the_agent_accepts_migrations_on_kubernetes(spark_conf: dict[str, str]) -> None:
    job = _job(spark_conf)
    agent = _env(job, "agent")
    assert agent["SWIVEL_AGENT_MIGRATIONS"] == "1"
    assert agent["SWIVEL_AGENT_STATE_DIR"] == pods.AGENT_STATE_DIR
    assert "SWIVEL_AGENT_MIGRATIONS" not in _env(job, "spark")  # the agent's switch only


@pytest.mark.parametrize(
    ("master", "migrations"),
    [
        ("k8s://https://kubernetes.default.svc", True),
        ("spark://10.0.0.5:7077", True),
        ("local[2]", False),  # the sandbox's kubelet makes the driver local
    ],
)
def test_the_renderer_and_the_driver_decide_alike(
    master: str, migrations: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever master the job config carries, the agent's switch matches what
    `swivel driver` does with the same config."""
    job = _job({})
    real = jobconfigs.spark_conf
    monkeypatch.setattr(
        jobconfigs, "spark_conf", lambda j, o: {**real(j, o), "spark.master": master}
    )
    config = jobconfigs.render_job_config(job, OWNER)["data"][jobconfigs.JOB_FILE]
    spec = StreamJob.model_validate(yaml.safe_load(config), context={TRUSTED: True}).spec
    _, runs_migrations, _ = driver_setup(spec)
    assert runs_migrations is migrations
    assert ("SWIVEL_AGENT_MIGRATIONS" in _env(job, "agent")) is migrations
