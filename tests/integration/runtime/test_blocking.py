"""On real Spark: a blocking operator emits nothing of a micro-batch before every input row
of that batch was produced (issue 10 §3), which is what the planner's cut at blocking
operators (Fries §7.1) assumes.

`payments -> parse -> total (aggregate by customer) -> after -> out`: `parse` notes when
it produced each Arrow batch (two source partitions, several Arrow batches each, 30 ms
apiece, so its tasks overlap in time), `total` notes when it is called. Pipelined in one
`mapInPandas` with `parse` (the runtime before this change), `total` ran on parse's first
Arrow batch while the other partition's parse was still producing; compiled as a blocking
step it runs behind a shuffle, after every parse task of the batch has ended.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.mcs import plan_mcs
from swivel.controllers.planning import dataflow_of
from swivel.controllers.shapes import BlockingStep, plan_shape
from swivel.jobs.runtime.testing import run_for_batches

pytestmark = pytest.mark.spark


def aggregate_job(log: Path) -> StreamJobSpec:
    return StreamJobSpec.model_validate(
        {
            "source": {"options": {"customers": "5", "numPartitions": "2"}},
            "sparkConf": {"spark.sql.execution.arrow.maxRecordsPerBatch": "20"},
            "dataflow": {
                "bins": 2,
                "operators": [
                    {"name": "payments", "kind": "source"},
                    {"name": "parse", "inputs": ["payments"],
                     "function": "swivel.jobs.testing.probes:logged",
                     "params": {"log": str(log), "delay_ms": 30}},
                    {"name": "total", "kind": "aggregate", "key": "customer",
                     "inputs": ["parse"],
                     "function": "swivel.jobs.testing.probes:logged_totals",
                     "params": {"log": str(log)}},
                    {"name": "after", "inputs": ["total"],
                     "function": "swivel.jobs.examples.labels:labelled",
                     "params": {"label": "after"}},
                    {"name": "out", "kind": "sink", "inputs": ["after"]},
                ],
            },
        }
    )  # fmt: skip


def times(log: Path) -> dict[str, dict[int, list[float]]]:
    seen: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in log.glob("*.txt"):
        for line in path.read_text().splitlines():
            what, batch, at, _rows = line.split()
            seen[what][int(batch)].append(float(at))
    return seen


def test_an_aggregate_emits_only_after_the_whole_batch_was_produced(spark, tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.mkdir()
    job = aggregate_job(log)
    # What the planner assumes: the cut at the aggregate separates parse from after.
    plan = plan_mcs(dataflow_of(job.dataflow), ("parse", "after"))
    assert [set(c.operators) for c in plan.components] == [{"parse"}, {"after"}]
    assert any(step == BlockingStep("total", "customer") for step in plan_shape(job).steps)

    rows = run_for_batches(spark, job, tmp_path, batches=3, rows_per_batch=200, timeout=300)

    seen = times(log)
    judged = 0
    for batch, produced in seen["produced"].items():
        aggregated = seen["aggregated"].get(batch)
        if not aggregated:
            continue
        judged += 1
        assert max(produced) < min(aggregated), (
            f"batch {batch}: total ran {max(produced) - min(aggregated):.3f} s before parse "
            "produced its last rows"
        )
    assert judged >= 3
    # One row per customer and batch, each a new record named after its group.
    batches = len(rows) // 5  # every batch of 200 payments reaches all 5 customers
    assert batches >= 3 and len(rows) == batches * 5
    assert all(r["_swivel_record"].startswith("total(p") for r in rows)
    assert sum(r["payments"] for r in rows) == batches * 200
    assert {r["label"] for r in rows} == {"after"}


def test_an_aggregate_after_a_keyed_operator_on_its_key_still_reads_through_a_shuffle(
    spark,
) -> None:
    """The keyed step's output is already partitioned by the key; Spark must not drop the
    aggregate's repartition (it keeps it: the output has fresh attributes). The keyed step
    sorts its partition's input before the first group (why keyed steps are blocking)."""
    from swivel.jobs.runtime.compiling import compile_job, job_snapshot
    from swivel.jobs.runtime.feeds import StaticFeed
    from swivel.jobs.runtime.operators import WorkerSettings

    job = StreamJobSpec.model_validate(
        {
            "source": {"options": {"rowsPerBatch": "10"}},
            "dataflow": {
                "bins": 2,
                "operators": [
                    {"name": "in", "kind": "source"},
                    {"name": "k", "kind": "keyed", "key": "customer", "inputs": ["in"],
                     "function": "swivel.jobs.testing.probes:counting"},
                    {"name": "total", "kind": "aggregate", "key": "customer", "inputs": ["k"],
                     "function": "swivel.jobs.examples.aggregates:totals"},
                    {"name": "out", "kind": "sink", "inputs": ["total"]},
                ],
            },
        }
    )  # fmt: skip
    query = compile_job(spark, job, WorkerSettings(StaticFeed(job_snapshot(job))))
    plan = spark._jvm.PythonSQLUtils.explainString(query.frame._jdf.queryExecution(), "simple")
    lines = [line.strip(" :+-*()0123456789") for line in plan.splitlines()]
    below_total = lines[next(i for i, line in enumerate(lines) if "MapInPandas" in line) + 1]
    assert below_total.startswith("Exchange hashpartitioning(customer"), plan
    keyed = next(i for i, line in enumerate(lines) if "TransformWithState" in line)
    assert lines[keyed + 1].startswith("Sort [customer"), plan
