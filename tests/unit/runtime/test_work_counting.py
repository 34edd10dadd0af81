"""What a worker counts for the agent (Chi §5): rows and time inside the user function per
operator and Spark partition, gathered in memory and drained by the ack thread."""

from __future__ import annotations

from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest

from swivel.jobs.control import counting
from swivel.jobs.control.counting import MAX_COUNTED_PARTITIONS, WorkCounter
from swivel.jobs.runtime import operators
from swivel.jobs.runtime.feeds import StaticFeed
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
    decode_state,
    run_keyed_group,
    run_stateless_chain,
)
from swivel.protocol.counts import PartitionCounts
from swivel.protocol.snapshots import OperatorConfig, Snapshot

MODEL = "swivel.jobs.examples.fraud:customer_model"
PARSE = "swivel.jobs.examples.fraud:parse"
KEYED_INPUT = ("_swivel_record", "_swivel_ts", "customer", "amount", "_swivel_tag_0")


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_counts_add_up_per_operator_and_partition_and_drain_afresh() -> None:
    clock = Clock()
    counter = WorkCounter(clock)
    assert not counter.pending
    counter.add("detector", 3, 10, 0.5)
    counter.add("detector", 3, 5, 0.25)
    counter.add("detector", 4, 1, 0.1)
    counter.add("parse", 0, 20, 0.05)
    clock.now += 1.5
    interval, partitions = counter.drain()
    assert interval == 1.5 and not counter.pending
    by_key = {(p["operator"], p["partition"]): (p["rows"], p["busySeconds"]) for p in partitions}
    assert by_key == {
        ("detector", 3): (15, 0.75),
        ("detector", 4): (1, 0.1),
        ("parse", 0): (20, 0.05),
    }
    for wire in partitions:  # each is a valid PartitionCounts
        PartitionCounts.model_validate(wire)
    clock.now += 1.0
    counter.add("detector", 3, 2, 0.01)
    assert counter.drain() == (1.0, [
        {"operator": "detector", "partition": 3, "rows": 2, "busySeconds": 0.01}
    ])  # fmt: skip


def test_pairs_beyond_one_report_wait_for_the_next() -> None:
    counter = WorkCounter()
    for partition in range(MAX_COUNTED_PARTITIONS + 3):
        counter.add("op", partition, 1, 0.0)
    counter.add("op", MAX_COUNTED_PARTITIONS + 1, 1, 0.0)  # an overflowed pair still adds up
    _, first = counter.drain()
    assert len(first) == MAX_COUNTED_PARTITIONS
    _, second = counter.drain()
    assert sorted((p["partition"], p["rows"]) for p in second) == [
        (MAX_COUNTED_PARTITIONS, 1), (MAX_COUNTED_PARTITIONS + 1, 2), (MAX_COUNTED_PARTITIONS + 2, 1)
    ]  # fmt: skip


def test_nothing_is_counted_outside_a_spark_task() -> None:
    before = counting.counter().pending
    counting.add("op", None, 5, 0.1)
    assert counting.counter().pending == before


def test_a_forked_child_counts_from_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = counting.counter()
    monkeypatch.setattr(counting, "_counter", parent)  # restored after the test
    counting.add("op", 1, 5, 0.1)
    counting._fresh_in_child()  # what os.register_at_fork runs in a child (no fork here:
    # forking a test process that may hold threads is what the hook exists to avoid)
    assert counting.counter() is not parent and not counting.counter().pending
    parent.drain()


@pytest.fixture
def in_partition(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The wrappers as a Spark task of partition 5 of batch 2 would run them; the process's
    counter emptied before and after."""
    monkeypatch.setattr(operators, "_task_position", lambda: (2, 5))
    counting.counter().drain()
    yield counting.counter()
    counting.counter().drain()


def _runner(name: str, function: str, keyed: bool, columns: tuple[str, ...]) -> OperatorRunner:
    config = OperatorConfig(
        function=function, version=1, params={"model": "cheap"} if keyed else {}
    )
    snapshot = Snapshot(config_version=1, revision=1, operators={name: config})
    plan = OperatorPlan(name, keyed, "customer" if keyed else None, columns, columns, config)
    return OperatorRunner(plan, WorkerSettings(StaticFeed(snapshot)))


def test_a_key_group_is_counted_under_its_bin(in_partition: WorkCounter) -> None:
    chunk = pd.DataFrame(
        {"_0": ["p1", "p2", "p3"], "_1": [1] * 3, "customer": [7] * 3,
         "amount": [10.0, 30.0, 5.0], "_4": [0] * 3}
    )  # fmt: skip
    output = (*KEYED_INPUT, "customer_score", "customer_flag", "customer_model", EMITTED_COLUMN)
    runner = _runner("detector", MODEL, True, KEYED_INPUT)
    runner.plan = OperatorPlan(
        "detector", True, "customer", KEYED_INPUT, output, runner.plan.initial
    )
    list(run_keyed_group(runner, (7,), iter([chunk]), decode_state(None)))
    _, partitions = in_partition.drain()
    (counted,) = partitions
    assert (counted["operator"], counted["partition"], counted["rows"]) == ("detector", 5, 3)
    assert counted["busySeconds"] > 0


def test_a_stateless_chunk_is_counted_under_its_partition(in_partition: WorkCounter) -> None:
    columns = ("_swivel_record", "_swivel_ts", "value")
    runner = _runner("ident", "swivel.jobs.examples.labels:labelled", False, columns)
    chunk = pd.DataFrame({"_swivel_record": ["a", "b"], "_swivel_ts": [1, 2], "value": ["x", "y"]})
    runner.plan = OperatorPlan(
        "ident", False, None, columns, (*columns, EMITTED_COLUMN), runner.plan.initial
    )
    list(run_stateless_chain([runner], iter([chunk])))
    _, partitions = in_partition.drain()
    assert [(p["operator"], p["partition"], p["rows"]) for p in partitions] == [("ident", 5, 2)]
