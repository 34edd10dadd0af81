"""The fraud-detection example compiles into one query and produces correct rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.runtime.testing import run_for_batches

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fraud-detection" / "streamjob.yaml"

pytestmark = pytest.mark.spark


def fraud_job() -> StreamJobSpec:
    return load_streamjob(EXAMPLE).spec


def test_the_fraud_job_runs_and_scores_every_payment(spark, tmp_path: Path) -> None:
    job = fraud_job()
    rows = run_for_batches(spark, job, tmp_path, batches=2, rows_per_batch=40)
    assert len(rows) >= 80 and len(rows) % 40 == 0
    ids = [row["_swivel_record"] for row in rows]
    assert len(set(ids)) == len(ids)
    assert {row["customer_model"] for row in rows} == {"expensive"}
    assert {row["combine_rule"] for row in rows} == {"any"}
    for row in rows:
        assert row["fraud"] == (row["customer_flag"] or row["merchant_flag"])
        assert row["amount_cents"] == round(row["amount"] * 100)
