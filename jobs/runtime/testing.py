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
from swivel.jobs.runtime.driver import JobRuntime
from swivel.jobs.runtime.feeds import SnapshotFeed

_names = itertools.count()


def bounded(
    job: StreamJobSpec, rows_per_batch: int = 100, name: str | None = None, **options: str
) -> StreamJobSpec:
    """`job` with a generator source of `rows_per_batch` rows per batch and a memory sink."""
    source_options = {"rowsPerBatch": str(rows_per_batch), **job.source.options, **options}
    if job.source.kind is not SourceKind.GENERATOR:
        source_options = {"rowsPerBatch": str(rows_per_batch), **options}
    query_name = name or f"swivel_test_{next(_names)}"
    return job.model_copy(
        update={
            "source": SourceSpec(kind=SourceKind.GENERATOR, options=source_options),
            "sink": SinkSpec(kind=SinkKind.MEMORY, options={"queryName": query_name}),
            "trigger": TriggerSpec(interval_ms=0),
        }
    )


def memory_rows(spark: SparkSession, job: StreamJobSpec) -> list[dict[str, Any]]:
    """Every row the memory sink of `job` holds, as dicts."""
    table = job.sink.options["queryName"]
    return [row.asDict() for row in spark.table(table).collect()]


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
