"""The workers' counts in the agent (Chi §5): the sliding window, staleness, several workers
per bin, repeated reports, and the hub taking them off the acks route's body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.jobs.agent.acks import AcksRejected, parse_report
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.worker_loads import WorkerLoadWindow
from swivel.protocol.counts import WorkerCounts
from tests.worker_counts import counts_report

JOB = load_streamjob(
    Path(__file__).resolve().parents[3] / "examples/fraud-detection/streamjob.yaml"
)
KEYED = {"parse": False, "customer-detector": True, "merchant-detector": True}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def report(pid: int, seq: int, *parts: tuple[str, int, int, float], interval: float = 1.0) -> Any:
    return WorkerCounts.model_validate(
        {
            "pid": pid,
            "seq": seq,
            "intervalSeconds": interval,
            "partitions": [
                {"operator": op, "partition": p, "rows": rows, "busySeconds": busy}
                for op, p, rows, busy in parts
            ],
        }
    )


def test_nothing_reported_is_no_document() -> None:
    assert WorkerLoadWindow(KEYED, Clock()).document() is None


def test_several_workers_of_one_bin_are_summed_and_counted() -> None:
    clock = Clock()
    window = WorkerLoadWindow(KEYED, clock, window_s=10.0)
    window.record([report(1, 1, ("customer-detector", 3, 100, 0.5), ("parse", 0, 400, 0.1))])
    clock.now += 1
    window.record([report(2, 1, ("customer-detector", 3, 50, 0.25))])
    window.record([report(2, 2, ("merchant-detector", 3, 10, 0.05))])
    document = window.document()
    assert document is not None
    (bin3,) = document.bins  # parse's partition 0 is no bin: parse is not keyed
    assert (bin3.bin, bin3.rows, bin3.workers) == (3, 160, 2)
    assert bin3.busy_seconds == pytest.approx(0.8)
    assert bin3.age_seconds == 0.0 and document.reports == 3
    assert document.window_seconds == pytest.approx(2.0)  # since the first interval began
    operators = {o.operator: (o.rows, o.keyed, o.workers) for o in document.operators}
    assert operators == {
        "customer-detector": (150, True, 2),
        "merchant-detector": (10, True, 1),
        "parse": (400, False, 1),
    }


def test_reports_leave_the_window_and_an_idle_window_is_none() -> None:
    clock = Clock()
    window = WorkerLoadWindow(KEYED, clock, window_s=10.0)
    window.record([report(1, 1, ("customer-detector", 0, 100, 1.0))])
    clock.now += 6
    window.record([report(1, 2, ("customer-detector", 1, 30, 0.3))])
    clock.now += 5  # the first report is 11 s old: out of the window
    document = window.document()
    assert document is not None
    assert [(b.bin, b.rows) for b in document.bins] == [(1, 30)]
    assert document.bins[0].age_seconds == pytest.approx(5.0)
    assert document.age_seconds == pytest.approx(5.0) and document.window_seconds == 10.0
    clock.now += 6  # nothing within the last 10 s
    assert window.document() is None
    # A report after an idle window covers only its own interval, not the idle time.
    window.record([report(1, 3, ("customer-detector", 1, 20, 0.2), interval=2.0)])
    document = window.document()
    assert document is not None and document.window_seconds == pytest.approx(2.0)


def test_a_repeated_report_is_counted_once() -> None:
    clock = Clock()
    window = WorkerLoadWindow(KEYED, clock)
    first = report(7, 1, ("customer-detector", 2, 10, 0.1))
    assert window.record([first]) == 1
    assert window.record([first, report(7, 2, ("customer-detector", 2, 5, 0.1))]) == 1
    document = window.document()
    assert document is not None and document.bins[0].rows == 15


def hub(tmp_path: Path, clock: Clock) -> Hub:
    return Hub(JOB.spec, JOB.name, clock=clock, worker_loads_window_s=10.0)


def test_the_hub_takes_counts_off_an_ack_report(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(11, ["customer-detector"])
    agent.record_acks(counts_report(11, 1))
    document = agent.worker_loads.document()
    assert document is not None and [(b.bin, b.rows) for b in document.bins] == [(4, 9)]


def test_untrue_counts_are_dropped_and_the_acks_beside_them_apply(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(11, ["customer-detector"])
    body = counts_report(11, 1, bin_id=16)  # the job has bins 0..15
    body["counts"][0]["partitions"] += [
        {"operator": "nope", "partition": 1, "rows": 5},  # not an operator of the job
        {"operator": "parse", "partition": 99, "rows": 7},  # stateless: any partition
        {"operator": "customer-detector", "partition": 2, "rows": 3},
    ]
    body["acks"] = [{"pid": 11, "operator": "customer-detector", "version": 1}]
    agent.record_acks(body)
    document = agent.worker_loads.document()
    assert document is not None and [(b.bin, b.rows) for b in document.bins] == [(2, 3)]
    assert {o.operator for o in document.operators} == {"customer-detector", "parse"}
    assert agent.registry.registered(11)


def test_counts_or_acks_that_cannot_apply_hold_the_body_back(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    agent._register(11, ["customer-detector"])
    with pytest.raises(AcksRejected) as refused:
        agent.record_acks(counts_report(12, 1))  # never watched: may clear, retry
    assert refused.value.status == 409
    assert [p.field for p in refused.value.problems] == ["counts[0].pid"]
    body = counts_report(11, 1)
    body["acks"] = [{"pid": 11, "operator": "customer-detector", "version": 9}]
    with pytest.raises(AcksRejected) as refused:
        agent.record_acks(body)  # an untrue ack: 422, and its counts are not applied either
    assert [p.field for p in refused.value.problems] == ["acks[0].version"]
    assert agent.worker_loads.document() is None


def test_a_body_is_an_array_of_acks_or_a_report() -> None:
    assert parse_report([]) == ([], [])
    with pytest.raises(AcksRejected) as refused:
        parse_report({"counts": [{"pid": 1, "seq": 1, "partitions": [{"operator": "x"}]}]})
    assert [p.field for p in refused.value.problems] == ["counts[0].partitions[0].partition"]
    with pytest.raises(AcksRejected) as refused:
        parse_report("acks")
    assert refused.value.problems[0].field == "body"
