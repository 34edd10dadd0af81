"""The runtime's progress reports under coordination groups (no Spark): `started` for every
batch, `completed` at coordination points only, every batch while the configuration feed
shows a plan in flight or a pinned replay."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.runtime.driver import JobRuntime
from swivel.jobs.runtime.grouping import CoordinationGroups

JOB = StreamJobSpec.model_validate(
    {
        "dataflow": {
            "bins": 4,
            "operators": [
                {"name": "payments", "kind": "source"},
                {
                    "name": "label",
                    "inputs": ["payments"],
                    "function": "swivel.jobs.examples.labels:labelled",
                    "params": {"label": "v1"},
                },
                {"name": "out", "kind": "sink", "inputs": ["label"]},
            ],
        }
    }
)


class Feed:
    def __init__(self) -> None:
        self.snapshot = SimpleNamespace(transition=None, pinned_batches={})

    def current(self, operator: str) -> Any:
        return self.snapshot


def runtime(feed: Feed, g: int) -> JobRuntime:
    groups = CoordinationGroups(fixed=g)
    rt = JobRuntime(JOB, spark=None, checkpoint="", agent=object(), feed=feed, groups=groups)  # type: ignore[arg-type]
    groups.when_pending(rt.plan_in_flight)
    return rt


def run(rt: JobRuntime, batches: range) -> list[tuple[str, int]]:
    for batch in batches:
        rt._on_progress({"batchId": batch, "event": "completed", "runId": "r", "durationMs": 400})
    queued = []
    while not rt._outbox.empty():
        event = rt._outbox.get_nowait()
        queued.append((event["event"], event["batchId"]))
    return queued


def test_started_every_batch_completed_every_g_batches() -> None:
    queued = run(runtime(Feed(), 3), range(7))
    assert [b for e, b in queued if e == "started"] == list(range(1, 8))
    assert [b for e, b in queued if e == "completed"] == [0, 3, 6]


def test_a_plan_in_flight_or_a_pinned_replay_makes_every_batch_a_point() -> None:
    feed = Feed()
    rt = runtime(feed, 4)
    assert [b for e, b in run(rt, range(2)) if e == "completed"] == [0]
    feed.snapshot = SimpleNamespace(transition=object(), pinned_batches={})
    assert [b for e, b in run(rt, range(2, 5)) if e == "completed"] == [2, 3, 4]
    feed.snapshot = SimpleNamespace(transition=None, pinned_batches={5: 1})
    assert [b for e, b in run(rt, range(5, 7)) if e == "completed"] == [5, 6]
    feed.snapshot = SimpleNamespace(transition=None, pinned_batches={})
    assert [b for e, b in run(rt, range(7, 16)) if e == "completed"] == [7, 11, 15]
