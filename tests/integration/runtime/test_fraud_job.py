"""The fraud-detection example compiles into one query and produces correct rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from swivel.jobs.runtime.compiling import linear_chain
from swivel.jobs.runtime.testing import run_for_batches

pytestmark = pytest.mark.spark


def test_the_example_manifest_is_one_chain(example_job) -> None:
    chain = [op.name for op in linear_chain(example_job)]
    assert chain == [
        "payments",
        "parse",
        "customer-detector",
        "merchant-detector",
        "combine",
        "alerts",
    ]


def test_the_fraud_job_runs_and_scores_every_payment(spark, fraud_job, tmp_path: Path) -> None:
    rows = run_for_batches(spark, fraud_job, tmp_path, batches=2, rows_per_batch=40)
    assert len(rows) >= 80 and len(rows) % 40 == 0
    ids = [row["_swivel_record"] for row in rows]
    assert len(set(ids)) == len(ids)
    assert {row["customer_model"] for row in rows} == {"expensive"}
    assert {row["combine_rule"] for row in rows} == {"any"}
    for row in rows:
        assert row["fraud"] == (row["customer_flag"] or row["merchant_flag"])
        assert row["amount_cents"] == round(row["amount"] * 100)
        assert row["_swivel_emitted_at"] >= row["_swivel_ts"].timestamp() - 1
