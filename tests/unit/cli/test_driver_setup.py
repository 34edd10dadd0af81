"""`swivel driver`: which masters start a MigrationDriver beside the query, and the Spark
settings the session then gets (no Spark, no Kubernetes: the decision only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJobSpec
from swivel.cli.driver import driver_setup
from swivel.controllers.planning import migrates_bins

ROOT = Path(__file__).resolve().parents[3]


def _spec(spark_conf: dict[str, str]) -> StreamJobSpec:
    spec = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml").spec
    return spec.model_copy(update={"spark_conf": spark_conf})


@pytest.mark.parametrize(
    ("master", "migrations"),
    [
        ("k8s://https://kubernetes.default.svc", True),  # the operator's driver pod
        ("k8s://https://10.0.0.1:6443", True),
        ("spark://127.0.0.1:7077", True),  # a standalone master
        ("local-cluster[2,1,1024]", True),  # Spark's own test cluster
        ("local[2]", False),  # the sandbox's kubelet makes it local
        ("local", False),
        ("local[*]", False),
        (None, False),  # no master in the manifest: local[2]
    ],
)
def test_which_master_runs_a_migration_driver(master: str | None, migrations: bool) -> None:
    conf = {} if master is None else {"spark.master": master}
    chosen, runs, spec = driver_setup(_spec(conf))
    assert chosen == (master or "local[2]")
    assert runs is migrations and migrates_bins(chosen) is migrations
    if migrations:  # the REST verification of moves and the loads need the Spark UI
        assert spec.spark_conf["spark.ui.enabled"] == "true"
        assert spec.spark_conf["spark.sql.adaptive.enabled"] == "false"
    else:
        assert spec.spark_conf == conf


def test_the_ui_stays_on_even_if_the_manifest_turns_it_off() -> None:
    conf = {
        "spark.master": "k8s://https://kubernetes.default.svc",
        "spark.ui.enabled": "false",
        "spark.sql.adaptive.enabled": "true",  # the user's choice is kept
    }
    _, runs, spec = driver_setup(_spec(conf))
    assert runs
    assert spec.spark_conf["spark.ui.enabled"] == "true"
    assert spec.spark_conf["spark.sql.adaptive.enabled"] == "true"
