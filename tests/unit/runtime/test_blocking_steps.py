"""Blocking operators compile as blocking steps (issue 10 §3): plan and runtime agree.

The planner cuts a component at every blocking operator (Fries §7.1: its input side and its
output side never run together). `plan_shape` therefore never fuses a blocking operator
with its inputs or consumers: a stateless one is a `BlockingStep` (a shuffle, then a pass
that drains its partition before calling the function), a keyed one stays a `KeyedStep`
(behind the groupBy's shuffle, sorted by key before the first group).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest

from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.mcs import plan_mcs
from swivel.controllers.planning import dataflow_of
from swivel.controllers.shapes import BlockingStep, KeyedStep, Region, plan_shape
from swivel.jobs.examples.aggregates import totals
from swivel.jobs.runtime.feeds import StaticFeed
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
)
from swivel.jobs.runtime.regions import run_blocking
from swivel.protocol.snapshots import OperatorConfig, Snapshot

LABEL = "swivel.jobs.examples.labels:labelled"
TOTALS = "swivel.jobs.examples.aggregates:totals"


def job(*operators: dict[str, Any]) -> StreamJobSpec:
    return StreamJobSpec.model_validate({"dataflow": {"bins": 4, "operators": list(operators)}})


def fn(name: str, *inputs: Any, function: str = LABEL, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputs": list(inputs), "function": function, **extra}


SOURCE = {"name": "in", "kind": "source"}


def test_an_aggregate_is_its_own_step_between_the_regions_of_its_two_sides() -> None:
    spec = job(
        SOURCE,
        fn("parse", "in"),
        fn("total", "parse", function=TOTALS, kind="aggregate", key="customer"),
        fn("after", "total"),
        {"name": "out", "kind": "sink", "inputs": ["after"]},
    )
    assert plan_shape(spec).steps == (
        Region(("parse",), "parse", "in"),
        BlockingStep("total", "customer"),
        Region(("after",), "after", "total"),
    )
    # the planner's view of the same dataflow: cut after the aggregate
    plan = plan_mcs(dataflow_of(spec.dataflow), ("parse", "after"))
    assert [set(c.operators) for c in plan.components] == [{"parse"}, {"after"}]


@pytest.mark.parametrize(
    ("extra", "inputs", "key"),
    [
        ({"kind": "aggregate"}, ["parse"], None),  # one partition: a global per-batch total
        ({"kind": "aggregate"}, [{"from": "parse", "partitioning": "hash", "key": "m"}], "m"),
        ({"kind": "map", "blocking": True, "key": "c"}, ["parse"], "c"),  # the flag wins
    ],
)
def test_the_blocking_steps_key_is_its_own_or_its_hash_edges(
    extra: dict[str, Any], inputs: list[Any], key: str | None
) -> None:
    spec = job(
        SOURCE,
        fn("parse", "in"),
        fn("b", *inputs, **extra),
        {"name": "out", "kind": "sink", "inputs": ["b"]},
    )
    assert BlockingStep("b", key) in plan_shape(spec).steps


def test_an_aggregate_marked_not_blocking_is_pipelined_again() -> None:
    spec = job(
        SOURCE,
        fn("parse", "in"),
        fn("total", "parse", function=TOTALS, kind="aggregate", blocking=False),
        {"name": "out", "kind": "sink", "inputs": ["total"]},
    )
    assert plan_shape(spec).steps == (Region(("parse", "total"), "total", "in"),)


def test_a_blocking_keyed_operator_stays_a_keyed_step() -> None:
    spec = job(
        SOURCE,
        fn("parse", "in"),
        {"name": "k", "kind": "keyed", "key": "customer", "inputs": ["parse"],
         "function": "swivel.jobs.testing.probes:counting", "blocking": True},
        fn("after", "k"),
        {"name": "out", "kind": "sink", "inputs": ["after"]},
    )  # fmt: skip
    assert plan_shape(spec).steps == (
        Region(("parse",), "parse", "in"),
        KeyedStep("k"),
        Region(("after",), "after", "k"),
    )


def test_a_blocking_pass_drains_its_input_before_it_emits() -> None:
    columns = ("_swivel_record", "customer", "amount", "_swivel_tag_0")
    output = (*columns, "total", "payments", EMITTED_COLUMN)
    config = OperatorConfig(function=TOTALS, version=1)
    snapshot = Snapshot(config_version=1, revision=1, operators={"total": config})
    runner = OperatorRunner(
        OperatorPlan("total", False, "customer", columns, output, config),
        WorkerSettings(StaticFeed(snapshot)),
    )
    consumed: list[int] = []

    def chunks() -> Iterator[pd.DataFrame]:
        for index in range(3):
            consumed.append(index)
            yield pd.DataFrame(
                {"_swivel_record": [f"p{index}a", f"p{index}b"], "customer": [1, 2],
                 "amount": [1.0, 10.0], "_swivel_tag_0": [0, 0]}
            )  # fmt: skip

    body = run_blocking(runner, chunks())
    first = next(body)
    assert consumed == [0, 1, 2]  # every chunk was taken before the first output
    assert list(itertools.chain([first], body)) == [first]  # one call, one output
    assert first["total"].tolist() == [3.0, 30.0] and first["payments"].tolist() == [3, 3]
    assert first["_swivel_record"].tolist() == ["total(p0a)", "total(p0b)"]
    assert tuple(first.columns) == output


def test_an_empty_partition_emits_nothing() -> None:
    config = OperatorConfig(function=TOTALS, version=1)
    snapshot = Snapshot(config_version=1, revision=1, operators={"total": config})
    plan = OperatorPlan("total", False, None, ("customer",), ("customer",), config)
    runner = OperatorRunner(plan, WorkerSettings(StaticFeed(snapshot)))
    assert list(run_blocking(runner, iter([]))) == []
    assert totals(pd.DataFrame({"customer": [], "amount": [], "_swivel_record": []})).empty
