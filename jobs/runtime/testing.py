"""Run a job for a few micro-batches in a test and get the sink's rows back.

    from swivel.jobs.runtime.testing import run_for_batches

    def test_fraud_flags(spark, tmp_path):
        job = load_streamjob("examples/fraud-detection/streamjob.yaml")
        rows = run_for_batches(spark, job, tmp_path, batches=2, rows_per_batch=50)
        assert len(rows) == 100
        assert all(row["combine_rule"] == "any" for row in rows)

The source is replaced by the deterministic generator with exactly `rows_per_batch` rows
per micro-batch, the sink by an in-memory table, and the trigger runs batches back to back.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from swivel.api.streamjob import (
    SinkKind,
    SinkSpec,
    SourceKind,
    SourceSpec,
    StreamJobSpec,
    TriggerSpec,
)
from swivel.controllers.checker import Verdict, check_schedule
from swivel.controllers.mcs import plan_mcs
from swivel.controllers.planning import dataflow_of
from swivel.controllers.schedule_parsing import parse_schedule
from swivel.jobs.control.recording import merge_schedule, record_update
from swivel.jobs.runtime.driver import JobRuntime
from swivel.jobs.runtime.feeds import SnapshotFeed
from swivel.protocol.snapshots import (
    Component,
    OperatorConfig,
    Snapshot,
    Transition,
    scheduler_named,
)

_names = itertools.count()


def bounded(
    job: StreamJobSpec, rows_per_batch: int = 100, output: str | Path | None = None, **options: str
) -> StreamJobSpec:
    """`job` with a generator source of `rows_per_batch` rows per batch and a parquet files
    sink under `output` (memory when None; Spark's memory sink cannot resume from a
    checkpoint, so restarts need files)."""
    source_options = {"rowsPerBatch": str(rows_per_batch), **job.source.options, **options}
    if job.source.kind is not SourceKind.GENERATOR:
        source_options = {"rowsPerBatch": str(rows_per_batch), **options}
    query_name = f"swivel_test_{next(_names)}"
    sink = SinkSpec(kind=SinkKind.MEMORY, options={"queryName": query_name})
    if output is not None:
        sink = SinkSpec(kind=SinkKind.FILES, options={"path": str(output), "queryName": query_name})
    return job.model_copy(
        update={
            "source": SourceSpec(kind=SourceKind.GENERATOR, options=source_options),
            "sink": sink,
            "trigger": TriggerSpec(interval_ms=0),
        }
    )


def memory_rows(spark: SparkSession, job: StreamJobSpec) -> list[dict[str, Any]]:
    """Every row the sink of a `bounded` job holds, as dicts."""
    if job.sink.kind is SinkKind.FILES:
        frame = spark.read.parquet(job.sink.options["path"])
    else:
        frame = spark.table(job.sink.options["queryName"])
    return [row.asDict() for row in frame.collect()]


def run_for_batches(
    spark: SparkSession,
    job: StreamJobSpec,
    workdir: str | Path,
    *,
    batches: int = 2,
    rows_per_batch: int = 100,
    feed: SnapshotFeed | None = None,
    recording_dir: str | None = None,
    timeout: float = 120.0,
) -> list[dict[str, Any]]:
    """Run `job` (bounded, in memory) for `batches` micro-batches and return the sink rows."""
    test_job = bounded(job, rows_per_batch)
    runtime = JobRuntime(
        test_job,
        spark,
        checkpoint=str(Path(workdir) / "checkpoint"),
        feed=feed,
        recording_dir=recording_dir,
    )
    runtime.start()
    try:
        runtime.wait_for_batches(batches, timeout)
    finally:
        runtime.stop()
    return memory_rows(spark, test_job)


def start_bounded(
    spark: SparkSession,
    job: StreamJobSpec,
    workdir: str | Path,
    *,
    rows_per_batch: int = 100,
    feed: SnapshotFeed | None = None,
    recording_dir: str | None = None,
) -> JobRuntime:
    """Start `job` (bounded source, memory sink) and return its runtime; stop it yourself."""
    runtime = JobRuntime(
        bounded(job, rows_per_batch, Path(workdir) / "out"),
        spark,
        checkpoint=str(Path(workdir) / "checkpoint"),
        feed=feed,
        recording_dir=recording_dir,
    )
    runtime.start()
    return runtime


def with_transition(
    before: Snapshot,
    updates: Mapping[str, Mapping[str, Any]],
    *,
    scheduler: str = "fries",
    components: Sequence[tuple[Sequence[str], Sequence[str]]] = (),
    apply_from_batch: int | None = None,
    transition_id: str = "test",
) -> Snapshot:
    """The snapshot an agent would publish for `updates` ({operator: {function?, params?,
    stateTransform?}}): each target's function version + 1, `components` as (heads, members)."""
    operators = dict(before.operators)
    for name, change in updates.items():
        old = operators[name]
        operators[name] = OperatorConfig(
            function=change.get("function", old.function),
            version=old.version + 1,
            params=dict(change.get("params", old.params)),
            state_transform=change.get("stateTransform"),
        )
    transition = Transition(
        id=transition_id,
        scheduler=scheduler_named(scheduler),
        from_config_version=before.config_version,
        to_config_version=before.config_version + 1,
        previous={name: before.operators[name] for name in updates},
        components=tuple(
            Component(id=k, heads=tuple(heads), operators=tuple(members))
            for k, (heads, members) in enumerate(components)
        ),
        apply_from_batch=apply_from_batch,
    )
    return Snapshot(
        config_version=before.config_version + 1,
        operators=operators,
        revision=before.revision + 1,
        transition=transition,
    )


def mcs_components(job: StreamJobSpec, targets: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    """(heads, members) of each Fries component the planner finds for `targets`."""
    plan = plan_mcs(dataflow_of(job.dataflow), tuple(targets))
    return [(list(c.heads), list(c.operators)) for c in plan.components]


def record_transition(
    directory: str | Path, before: Snapshot, after: Snapshot, txn: int = 0
) -> None:
    """Write the `update` events the agent writes when it accepts a plan."""
    assert after.transition is not None
    for name in after.transition.previous:
        record_update(
            Path(directory),
            name,
            before.operators[name].version,
            after.operators[name].version,
            txn,
        )


def check_recorded(directory: str | Path) -> Verdict:
    """Merge the recorded schedule in `directory` and run the consistency checker on it."""
    merged = merge_schedule(Path(directory))
    with merged.open(encoding="utf-8") as lines:
        return check_schedule(parse_schedule(lines))
