"""`swivel bench coordination` at smoke size on the test session (local Spark, the real
agent, the migration driver): the JSON contract and both modes measured. The figures are
the lead's, from a full run on an idle machine (docs/benchmarks.md, "Drizzle")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from swivel_tools.bench.coordination import run_coordination_bench

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def test_smoke_run_reports_both_modes_and_their_ratio(spark: Any, tmp_path: Path) -> None:
    report = run_coordination_bench(
        bins=2,  # one wave of tasks per stage on the session's 2 slots
        rows_per_batch=50,
        customers=20,
        batches=3,
        warmup=1,
        rounds=1,
        warmup_rounds=0,
        spark=spark,
        workdir=tmp_path,
        timeout_s=240.0,
    )
    json.dumps(report)  # one JSON document
    assert {"g1", "tuned", "ratio", "pair_ratios", "phases", "setup", "group_config"} <= set(report)
    assert [p["mode"] for p in report["phases"]] == ["g1", "tuned"]
    g1 = report["g1"]
    assert g1["points_per_batch"] == 1.0  # every batch a coordination point
    assert g1["coordination_ms_per_batch"] > 0
    assert report["ratio"] is not None and report["ratio"] > 0
    assert 1 <= report["tuned"]["groups_at_end"][0] <= report["group_config"]["max_group"]
