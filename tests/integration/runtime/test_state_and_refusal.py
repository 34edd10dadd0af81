"""State transforms run once per key even when a batch is replayed; a refused function
update leaves the query running on the old function."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.runtime.compiling import job_snapshot
from swivel.jobs.runtime.feeds import FileFeed, publish
from swivel.jobs.runtime.testing import memory_rows, start_bounded, with_transition

pytestmark = pytest.mark.spark


def counting_job() -> StreamJobSpec:
    return StreamJobSpec.model_validate(
        {
            "source": {"options": {"customers": "4"}},
            "dataflow": {
                "bins": 4,
                "operators": [
                    {"name": "payments", "kind": "source"},
                    {
                        "name": "count",
                        "kind": "keyed",
                        "key": "customer",
                        "inputs": [{"from": "payments", "partitioning": "hash", "key": "customer"}],
                        "function": "swivel.jobs.testing.probes:counting",
                    },
                    {"name": "out", "kind": "sink", "inputs": ["count"]},
                ],
            },
        }
    )


def test_a_state_transform_is_applied_once_per_key_across_a_replayed_batch(
    spark, tmp_path: Path
) -> None:
    # The failure is injected once (the probe deletes its marker, then raises): a master that
    # retries a failed task (standalone: spark.task.maxFailures = 4) would hide it.
    assert re.fullmatch(r"local\[\d+\]", spark.sparkContext.master), spark.sparkContext.master
    job = counting_job()
    feed_path, marker = tmp_path / "feed.json", tmp_path / "fail-once"
    before = job_snapshot(job)
    publish(feed_path, before)
    runtime = start_bounded(spark, job, tmp_path, rows_per_batch=40, feed=FileFeed(str(feed_path)))
    try:
        runtime.wait_for_batches(1)
        runtime.stop_at_boundary()
        marker.touch()  # the next batch fails once, after the transform ran on the old state
        after = with_transition(
            before,
            {
                "count": {
                    "params": {"fail_marker": str(marker)},
                    "stateTransform": "swivel.jobs.testing.probes:mark_transformed",
                }
            },
        )
        publish(feed_path, after)
        runtime.start()
        # The first batch of the new run sees the new snapshot and fails; the bound only
        # keeps a run that never fails from passing silently.
        with pytest.raises(RuntimeError, match="failing once on purpose"):
            runtime.wait_for_batches(runtime.batches_completed() + 8)
        assert not marker.exists()
        runtime.start()  # from the checkpoint: the failed batch is replayed
        runtime.wait_for_batches(runtime.batches_completed() + 2)
        runtime.stop_at_boundary()
    finally:
        runtime.stop()
    rows = memory_rows(spark, runtime.job)
    assert {r["transforms"] for r in rows if r["seen"] > 0} <= {0, 1}
    last = {}
    for row in sorted(rows, key=lambda r: r["seen"]):
        last[row["customer"]] = row["transforms"]
    assert last == dict.fromkeys(range(4), 1)


def test_a_refused_function_leaves_the_query_running_on_the_old_one(
    spark, make_labelling_job, tmp_path: Path
) -> None:
    job = make_labelling_job()
    feed_path = tmp_path / "feed.json"
    before = job_snapshot(job)
    publish(feed_path, before)
    runtime = start_bounded(spark, job, tmp_path, rows_per_batch=40, feed=FileFeed(str(feed_path)))
    try:
        runtime.wait_for_batches(1)
        publish(feed_path, with_transition(before, {"label": {"function": "os:system"}}))
        runtime.wait_for_batches(3)
        assert runtime.query is not None and runtime.query.isActive
        runtime.stop_at_boundary()
    finally:
        runtime.stop()
    assert {r["label"] for r in memory_rows(spark, runtime.job)} == {"v1"}
