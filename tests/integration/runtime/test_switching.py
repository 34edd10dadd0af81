"""Function updates observed inside a running micro-batch (Fries on micro-batches)."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import pytest

from swivel.jobs.control.recording import process_events
from swivel.jobs.runtime.compiling import job_snapshot
from swivel.jobs.runtime.feeds import FileFeed, publish
from swivel.jobs.runtime.testing import (
    memory_rows,
    record_transition,
    start_bounded,
    with_transition,
)
from tests.polling import wait_for

pytestmark = pytest.mark.spark


def test_a_function_update_is_seen_within_one_running_micro_batch(
    spark, make_labelling_job, tmp_path: Path
) -> None:
    # 400 rows/batch, 50 per Arrow batch: 8 slices of 40 ms, recorded per row. A batch
    # still takes seconds here, far longer than the switch may take (500 ms, below); with
    # 1000 rows a batch took ~22 s on a 2-core machine, and the test waited for four.
    job = make_labelling_job(delay_ms=40)
    rows = 400
    feed_path, schedule = tmp_path / "feed.json", tmp_path / "schedule"
    schedule.mkdir()
    before = job_snapshot(job)
    publish(feed_path, before)
    feed = FileFeed(str(feed_path), acks_path=str(tmp_path / "acks.jsonl"))
    runtime = start_bounded(
        spark, job, tmp_path, rows_per_batch=rows, feed=feed, recording_dir=str(schedule)
    )
    try:
        runtime.wait_for_batches(1)

        def mid_batch() -> int | None:  # a batch after the first, some, not all, rows processed
            per_batch = defaultdict(int)
            for event in process_events(schedule):
                per_batch[event["batch"]] += 1
            return next((b for b, n in per_batch.items() if b >= 1 and 0 < n <= rows // 2), None)

        running = wait_for(mid_batch, 90.0, "a batch after the first partly processed", every=0.005)
        after = with_transition(
            before,
            {"label": {"params": {"label": "v2", "delay_ms": 40}}},
            components=[(["label"], ["label"])],
        )
        published_at = time.time()
        publish(feed_path, after)
        record_transition(schedule, before, after)
        # Until the batch the switch landed in has completed (its progress event): its rows
        # before the switch ran v1, the rest v2, and the acks were written during it. (It
        # waited for 4 batches: the later ones, all v2, add nothing the assertions read.)
        wait_for(
            lambda: any(int(e["batchId"]) >= running for e in runtime.progress),
            90.0,
            f"batch {running} completed",
            every=0.005,
        )
    finally:
        runtime.stop()
    versions_by_batch = defaultdict(set)
    for event in process_events(schedule):
        versions_by_batch[event["batch"]].add(event["version"])
    assert any(versions == {1, 2} for versions in versions_by_batch.values()), versions_by_batch
    labels = {row["label"] for row in memory_rows(spark, runtime.job)}
    assert labels == {"v1", "v2"}
    acks = [json.loads(line) for line in (tmp_path / "acks.jsonl").read_text().splitlines()]
    switched = [a["at"] for a in acks if a["version"] == 2]
    assert switched, acks
    delay_ms = (min(switched) - published_at) * 1000
    print(
        f"switch delay: first worker {delay_ms:.1f} ms, last {(max(switched) - published_at) * 1000:.1f} ms"
    )
    assert delay_ms < 500  # one Arrow batch (~40 ms) plus scheduling noise
