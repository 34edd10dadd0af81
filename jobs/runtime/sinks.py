"""Sinks: where a job's output rows go. Every sink receives Swivel's columns too
(`_swivel_record`, `_swivel_ts`, `_swivel_emitted_at`, the tag columns), so latency and
consistency can be measured downstream.

- `memory` - Spark's in-memory table named `options.queryName` (default: the job's name);
  for tests and demos (the driver keeps every row: bounded runs only).
- `console` - prints each micro-batch (`numRows`, `truncate` options passed through).
- `files` - `format` (parquet, json, csv; default parquet) files under `options.path`;
  exactly-once with the checkpoint.
- `noop` - discards rows (benchmarks: measures processing, not writing).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamWriter

from swivel.api.streamjob import SinkKind, SinkSpec
from swivel.jobs.runtime.sources import SourceError


def build_sink(frame: DataFrame, spec: SinkSpec, query_name: str) -> DataStreamWriter:
    options = dict(spec.options)
    writer = frame.writeStream.outputMode("append").queryName(options.pop("queryName", query_name))
    if spec.kind is SinkKind.MEMORY:
        return writer.format("memory")
    if spec.kind is SinkKind.CONSOLE:
        return writer.format("console").options(**options)
    if spec.kind is SinkKind.NOOP:
        return writer.format("noop")
    if spec.kind is SinkKind.FILES:
        path = options.pop("path", None)
        if not path:
            raise SourceError("spec.sink.options.path", "a files sink needs a path")
        return (
            writer.format(options.pop("format", "parquet")).option("path", path).options(**options)
        )
    raise SourceError("spec.sink.kind", f"{spec.kind.value} sinks are not supported yet")
