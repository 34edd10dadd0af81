"""A diamond-shaped job in one query: payments -> parse -> {small, large} -> merge (a union)
-> detector (keyed) -> sink, reconfigured live with both branches and the detector as
targets: one Fries component with two heads (small, large) whose rows meet again at the
detector, a non-head reading one tag column written by either head. Each run's recorded
schedule goes to the consistency checker."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.runtime.compiling import job_snapshot
from swivel.jobs.runtime.feeds import FileFeed, publish
from swivel.jobs.runtime.testing import (
    check_recorded,
    mcs_components,
    memory_rows,
    record_transition,
    run_for_batches,
    start_bounded,
    with_transition,
)
from tests.polling import wait_for

pytestmark = pytest.mark.spark

SWAP = {
    "small": {"params": {"label": "s2", "delay_ms": 120.0}},
    "large": {"params": {"label": "l2", "delay_ms": 120.0}},
    "detector": {"params": {"model": "cheap", "work": 20}},
}
OLD = {("s1", "expensive"), ("l1", "expensive")}
NEW = {("s2", "cheap"), ("l2", "cheap")}


def diamond_job() -> StreamJobSpec:
    labelled = "swivel.jobs.examples.labels:labelled"
    return StreamJobSpec.model_validate(
        {
            "sparkConf": {"spark.sql.execution.arrow.maxRecordsPerBatch": "10"},
            "source": {"kind": "generator", "options": {"customers": "8", "merchants": "4"}},
            "dataflow": {
                "bins": 4,
                "operators": [
                    {"name": "payments", "kind": "source"},
                    {
                        "name": "parse",
                        "inputs": ["payments"],
                        "function": "swivel.jobs.examples.fraud:parse",
                    },
                    {
                        "name": "small",
                        "inputs": ["parse"],
                        "function": labelled,
                        "params": {"label": "s1", "delay_ms": 120.0},
                    },
                    {
                        "name": "large",
                        "inputs": ["parse"],
                        "function": labelled,
                        "params": {"label": "l1", "delay_ms": 120.0},
                    },
                    {"name": "merge", "kind": "union", "inputs": ["small", "large"]},
                    {
                        "name": "detector",
                        "kind": "keyed",
                        "key": "customer",
                        "inputs": [{"from": "merge", "partitioning": "hash", "key": "customer"}],
                        "function": "swivel.jobs.examples.fraud:customer_model",
                        "params": {"model": "expensive", "work": 20},
                    },
                    {"name": "alerts", "kind": "sink", "inputs": ["detector"]},
                ],
            },
        }
    )


def run_with_update(spark, job, tmp_path: Path, *, scheduler: str, lag: dict | None = None):
    feed_path, schedule = tmp_path / "feed.json", tmp_path / "schedule"
    schedule.mkdir()
    before = job_snapshot(job)
    publish(feed_path, before)
    runtime = start_bounded(
        spark,
        job,
        tmp_path,
        rows_per_batch=40,
        feed=FileFeed(str(feed_path), lag=lag or {}),
        recording_dir=str(schedule),
    )
    try:
        runtime.wait_for_batches(1, timeout=300)
        # Land inside the next batch, while the branches run it: a task that has started
        # keeps what its first check read unless the feed delivers more (a FileFeed `lag`
        # delays that delivery only; every task reads the feed at its first check).
        wait_for(
            lambda: any(
                '"operator":"small"' in line and '"batch":0,' not in line
                for path in schedule.glob("process-*.jsonl")
                for line in path.read_text().splitlines()
            ),
            300,
            "the branches running a task of batch 1",
            every=0.01,
        )
        components = mcs_components(job, tuple(SWAP)) if scheduler == "fries" else []
        after = with_transition(before, SWAP, scheduler=scheduler, components=components)
        publish(feed_path, after)
        record_transition(schedule, before, after)
        runtime.wait_for_batches(runtime.batches_completed() + 1, timeout=300)
        runtime.stop_at_boundary()
    finally:
        runtime.stop()
    assert runtime.compiled is not None
    return runtime, check_recorded(schedule), memory_rows(spark, runtime.job)


def by_record(rows: list[dict]) -> dict[str, list[tuple[str, str]]]:
    seen: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for row in rows:
        seen[row["_swivel_record"]].append((row["label"], row["customer_model"]))
    return seen


def test_the_planner_heads_the_diamond_at_its_fan_out() -> None:
    # parse copies each payment to both branches (Fries Def. 5.2: one-to-many), so the
    # switch starts above the copies; parse runs in the branches' one pass (no split).
    assert mcs_components(diamond_job(), tuple(SWAP)) == [
        (["parse"], ["parse", "small", "large", "merge", "detector"])
    ]


def test_fries_reconfigures_both_branches_of_a_diamond_consistently(spark, tmp_path) -> None:
    runtime, verdict, rows = run_with_update(spark, diamond_job(), tmp_path, scheduler="fries")
    shape = runtime.compiled.shape
    assert shape is not None and not shape.splits  # parse -> branches -> merge: one pass
    assert verdict.serializable, [v.describe() for v in verdict.violations[:5]]
    assert verdict.records >= 80
    records = by_record(rows)
    # Every record went down both branches and reached the sink once through each.
    assert all(sorted(label[0] for label, _ in pairs) == ["l", "s"] for pairs in records.values())
    for pairs in records.values():
        assert set(pairs) <= OLD or set(pairs) <= NEW, pairs
    generations = {set(pairs) <= OLD for pairs in records.values()}
    assert generations == {True, False}  # both the old and the new configuration ran


def test_naive_switching_of_a_diamond_is_caught_by_the_checker(spark, tmp_path) -> None:
    # The branches hear of the update an hour late: the tasks running them when it is
    # published finish the batch on the old labels, while the detector's tasks, which start
    # after them (the next stage) and read the feed at their first check, run the new model.
    # Without tags nothing holds the detector back. (Before tasks read the feed at their
    # first check, the late one was the detector, and records saw new labels and the old
    # model; a task that starts after the publication now always sees it.)
    _, verdict, rows = run_with_update(
        spark, diamond_job(), tmp_path, scheduler="naive", lag={"small": 3600, "large": 3600}
    )
    assert not verdict.serializable
    pairs = {pair for pairs in by_record(rows).values() for pair in pairs}
    assert ("s1", "cheap") in pairs and ("l1", "cheap") in pairs
    # The two branches still switch together per chunk (one snapshot per region chunk).
    for record_pairs in by_record(rows).values():
        assert len({label[1] for label, _ in record_pairs}) == 1, record_pairs


def test_branches_meeting_after_keyed_operators_split_the_shared_input(spark, tmp_path) -> None:
    # parse feeds two keyed operators (by customer, by merchant) whose outputs meet at the
    # sink: no region can hold that, so Spark reads the source and runs parse once per branch.
    counting = "swivel.jobs.testing.probes:counting"
    job = StreamJobSpec.model_validate(
        {
            "source": {"kind": "generator", "options": {"customers": "8", "merchants": "4"}},
            "dataflow": {
                "bins": 4,
                "operators": [
                    {"name": "payments", "kind": "source"},
                    {
                        "name": "parse",
                        "inputs": ["payments"],
                        "function": "swivel.jobs.examples.fraud:parse",
                    },
                    {"name": "by-customer", "kind": "keyed", "key": "customer",
                     "inputs": ["parse"], "function": counting},
                    {"name": "by-merchant", "kind": "keyed", "key": "merchant",
                     "inputs": ["parse"], "function": counting},
                    {"name": "out", "kind": "sink", "inputs": ["by-customer", "by-merchant"]},
                ],
            },
        }
    )  # fmt: skip
    rows = run_for_batches(spark, job, tmp_path, batches=2, rows_per_batch=20, timeout=300)
    per_record: dict[str, int] = defaultdict(int)
    for row in rows:
        per_record[row["_swivel_record"]] += 1
    assert len(per_record) >= 40 and set(per_record.values()) == {2}
    assert {row["amount_cents"] == round(row["amount"] * 100) for row in rows} == {True}
