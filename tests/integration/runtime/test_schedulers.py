"""MCS tagging across a shuffle: customer-detector (a head) and combine (a non-head, two
shuffles later) updated together. Every run's recorded schedule goes to the checker.

The update is published once customer-detector runs a task of the next batch (a recorded
event), so it lands mid-batch. A FileFeed `lag` delays only the asynchronous delivery (the
long-poll): every task reads the feed synchronously at its first check
(`swivel.jobs.runtime.freshness`). So "customer-detector hears an hour late" means: the
tasks that had started when the update was published finish the batch on the old version,
every later task (of this batch, or the next) starts on the new one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swivel.jobs.control.recording import process_events
from swivel.jobs.runtime.compiling import job_snapshot
from swivel.jobs.runtime.feeds import FileFeed, publish
from swivel.jobs.runtime.testing import (
    check_recorded,
    mcs_components,
    memory_rows,
    record_transition,
    start_bounded,
    with_transition,
)
from tests.polling import wait_for

pytestmark = pytest.mark.spark

SWAP = {
    "customer-detector": {"params": {"model": "cheap", "threshold": 0.8}},
    "combine": {"params": {"rule": "both"}},
}
TARGETS = tuple(SWAP)


def run_with_update(
    spark,
    job,
    tmp_path: Path,
    *,
    scheduler: str,
    lag: dict | None = None,
    publish_after_batches: int = 1,
    batches: int = 3,
    apply_from_batch=None,
    rows_per_batch: int = 40,
):
    feed_path, schedule = tmp_path / "feed.json", tmp_path / "schedule"
    schedule.mkdir()
    before = job_snapshot(job)
    publish(feed_path, before)
    runtime = start_bounded(
        spark,
        job,
        tmp_path,
        rows_per_batch=rows_per_batch,
        feed=FileFeed(str(feed_path), lag=lag or {}),
        recording_dir=str(schedule),
    )
    try:
        runtime.wait_for_batches(publish_after_batches)
        # Land inside the next batch, while customer-detector runs it.
        running(schedule, "customer-detector", publish_after_batches)
        components = mcs_components(job, TARGETS) if scheduler == "fries" else []
        after = with_transition(
            before,
            SWAP,
            scheduler=scheduler,
            components=components,
            apply_from_batch=apply_from_batch,
        )
        publish(feed_path, after)
        record_transition(schedule, before, after)
        remaining = batches - publish_after_batches
        if scheduler == "restart":
            runtime.restart(after)
        runtime.wait_for_batches(runtime.batches_completed() + remaining)
        runtime.stop_at_boundary()
    finally:
        runtime.stop()
    return check_recorded(schedule), memory_rows(spark, runtime.job)


def running(schedule: Path, operator: str, batch: int, timeout: float = 300) -> None:
    """Wait until `operator` recorded processing rows of batch `batch` or a later one."""
    wait_for(
        lambda: any(
            e["operator"] == operator and (e["batch"] or 0) >= batch
            for e in process_events(schedule)
        ),
        timeout,
        f"{operator} running a task of batch {batch}",
        every=0.01,
    )


def test_the_planner_puts_both_targets_in_one_component_headed_by_the_detector(fraud_job) -> None:
    assert mcs_components(fraud_job, TARGETS) == [
        (["customer-detector"], ["customer-detector", "merchant-detector", "combine"])
    ]


def test_fries_is_consistent_when_the_switch_lands_mid_batch(spark, fraud_job, tmp_path) -> None:
    verdict, rows = run_with_update(spark, fraud_job, tmp_path, scheduler="fries")
    assert verdict.serializable, [v.describe() for v in verdict.violations[:5]]
    pairs = {(r["customer_model"], r["combine_rule"]) for r in rows}
    assert pairs == {("expensive", "any"), ("cheap", "both")}


def test_fries_follows_the_head_even_when_the_head_hears_late(spark, fraud_job, tmp_path) -> None:
    # customer-detector's long-poll delivers the update an hour late, so its running tasks
    # stamp the old version after the publication; combine, which has the update at once,
    # must wait for the tags. (Before the batch-start read the head never switched in the
    # run and every row was old; now its next tasks start on the new version.)
    verdict, rows = run_with_update(
        spark, fraud_job, tmp_path, scheduler="fries", lag={"customer-detector": 3600}
    )
    assert verdict.serializable, [v.describe() for v in verdict.violations[:5]]
    pairs = {(r["customer_model"], r["combine_rule"]) for r in rows}
    assert pairs <= {("expensive", "any"), ("cheap", "both")}, pairs
    published = json.loads((tmp_path / "feed.json").read_text())[-1]["at"]
    events = process_events(tmp_path / "schedule")
    # Not vacuous: combine ran old-tagged rows under the old version after it had the update.
    assert any(e["operator"] == "combine" and e["version"] == 1 and e["at"] > published
               for e in events)  # fmt: skip
    # The head's later tasks (at the latest the next batch's) read the update at their start.
    assert ("cheap", "both") in pairs, pairs


def test_naive_switching_is_caught_by_the_checker(spark, fraud_job, tmp_path) -> None:
    # The same delay without tags: combine switches, customer-detector does not yet.
    verdict, rows = run_with_update(
        spark, fraud_job, tmp_path, scheduler="naive", lag={"customer-detector": 3600}
    )
    assert not verdict.serializable
    assert ("expensive", "both") in {(r["customer_model"], r["combine_rule"]) for r in rows}


def test_epoch_switches_everyone_at_one_batch_boundary(spark, fraud_job, tmp_path) -> None:
    verdict, rows = run_with_update(
        spark, fraud_job, tmp_path, scheduler="epoch", apply_from_batch=2, batches=3
    )
    assert verdict.serializable
    assert {(r["customer_model"], r["combine_rule"]) for r in rows} == {
        ("expensive", "any"),
        ("cheap", "both"),
    }
    assert verdict.records >= 80


def test_restart_switches_when_the_query_restarts(spark, fraud_job, tmp_path) -> None:
    verdict, rows = run_with_update(spark, fraud_job, tmp_path, scheduler="restart", batches=2)
    assert verdict.serializable
    assert ("cheap", "both") in {(r["customer_model"], r["combine_rule"]) for r in rows}
