"""A StreamJob's dataflow -> one streaming DataFrame.

`shapes.plan_shape` checks the dataflow (a DAG: fan-out, merges, several sinks) and cuts
it into steps; this module builds them, in topological order:
- a **region** of stateless operators on forward edges is one `mapInPandas` (one Python
  worker per task runs them; no serialisation between them). A linear region is a fused
  chain, as before; a region with a fan-out and a merge (`parse -> {a, b} -> union`) runs
  the sub-DAG over each Arrow chunk (`regions.run_region`), so every operator sees each row
  once;
- a `hash` edge into a stateless operator is a `repartition(bins, key)` of its input;
- a stateless blocking operator (an `aggregate`) is a shuffle (`repartition(bins, key)`,
  or one partition without a key) and a `mapInPandas` that takes its partition's whole
  input before calling the function once (`regions.run_blocking`): behind the stage barrier
  it emits nothing before every upstream task of the micro-batch has ended;
- a keyed operator is `groupBy(key).transformWithStateInPandas(...)` (append output, no
  timers) over the union of its inputs: Spark hash-partitions by the key into
  `spark.sql.shuffle.partitions` = `bins` state partitions, so a job's bin *is* a state
  partition: bin(key) = pmod(murmur3(key), bins), fixed by the checkpoint;
- a merge outside a region (the inputs of a keyed operator, of a region's first operator,
  or of the sinks) is a `union` of the inputs' DataFrames, aligned by `shapes.merged_columns`:
  the same user columns with the same types on every input (else a CompileError naming the
  input), in the first input's order, `_swivel_*` columns one input lacks filled with nulls;
- the source and sink come from `spec.source` / `spec.sink` (sources.py, sinks.py); every
  sink operator's input goes to the one sink.

The source is followed by one tag column per possible MCS component (choosing.tag_columns,
0 = "before any switch"); heads fill them during a Fries transition and unions keep them
(every branch starts at the one source, so every input carries all of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    DoubleType,
    StructField,
    StructType,
    TimestampType,
    _parse_datatype_string,
)

from swivel.api.dataflow import OperatorKind, OperatorSpec
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.shapes import (
    BlockingStep,
    CompileError,
    KeyedStep,
    Region,
    Shape,
    merged_columns,
    plan_shape,
)
from swivel.jobs.runtime.choosing import tag_columns
from swivel.jobs.runtime.functions import emitted_columns, resolve
from swivel.jobs.runtime.keyed import KeyedOperator
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    SOURCE_TS_COLUMN,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
    run_stateless_chain,
)
from swivel.jobs.runtime.regions import CHUNK, ChunkView, RegionStep, run_blocking, run_region
from swivel.jobs.runtime.sources import build_source
from swivel.protocol.snapshots import OperatorConfig, Snapshot

DEFAULT_MAX_RECORDS_PER_BATCH = 64

__all__ = [
    "CompileError",
    "CompiledQuery",
    "compile_job",
    "job_snapshot",
    "linear_chain",
    "operator_configs",
    "session_conf",
]


@dataclass(frozen=True)
class CompiledQuery:
    frame: DataFrame
    operators: tuple[OperatorPlan, ...]  # function operators, topological order
    chain: tuple[str, ...]  # every operator, topological: source first, sinks last
    shape: Shape | None = None  # the steps, splits and replicated operators it was built from


def job_snapshot(job: StreamJobSpec) -> Snapshot:
    """The job's configuration version 1: every function at version 1, no transition."""
    return Snapshot(
        config_version=1,
        revision=1,
        operators={
            op.name: OperatorConfig(function=op.function, version=1, params=dict(op.params))
            for op in job.dataflow.operators
            if op.function is not None
        },
    )


def session_conf(job: StreamJobSpec) -> dict[str, str]:
    """Runtime SQL settings the compiled query relies on (set before it starts)."""
    conf = {
        "spark.sql.shuffle.partitions": str(job.dataflow.bins),
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(DEFAULT_MAX_RECORDS_PER_BATCH),
    }
    conf.update({k: v for k, v in job.spark_conf.items() if k.startswith("spark.sql.")})
    return conf


def linear_chain(job: StreamJobSpec) -> list[OperatorSpec]:
    """The operators source-first, when the dataflow is one chain; CompileError otherwise."""
    shape = plan_shape(job)
    by_name = {op.name: op for op in job.dataflow.operators}
    for name in shape.order:
        if len(shape.inputs[name]) > 1 or len(shape.consumers[name]) > 1:
            raise CompileError(_field(name), "not one chain (a fan-out or a merge)")
    if len(shape.sinks) != 1:
        raise CompileError("spec.dataflow.operators", f"not one chain (sinks {list(shape.sinks)})")
    return [by_name[name] for name in shape.order]


def compile_job(
    spark: SparkSession,
    job: StreamJobSpec,
    settings: WorkerSettings,
    source: DataFrame | None = None,
) -> CompiledQuery:
    """Build the streaming DataFrame (not started). `source` overrides `spec.source`."""
    shape = plan_shape(job)
    for key, value in session_conf(job).items():
        spark.conf.set(key, value)
    frame = source if source is not None else build_source(spark, job.source)
    frame, ts_as_micros = _source_ts_as_micros(frame)
    frame = frame.select(
        "*", *(F.lit(0).cast("long").alias(c) for c in tag_columns(shape.function_operators))
    )
    builder = _Builder(job, settings, shape)
    builder.frames[shape.source] = frame
    builder.schemas[shape.source] = frame.schema
    for step in shape.steps:
        if isinstance(step, KeyedStep):
            builder.keyed(step)
        elif isinstance(step, BlockingStep):
            builder.blocking(step)
        else:
            builder.region(step)
    sink_inputs = [
        (_field(sink, f".inputs[{i}]"), name)
        for sink in shape.sinks
        for i, name in enumerate(shape.inputs[sink])
    ]
    final, _ = builder.union("the sink", sink_inputs)
    if ts_as_micros:
        final = final.withColumn(SOURCE_TS_COLUMN, F.timestamp_micros(F.col(SOURCE_TS_COLUMN)))
    plans = sorted(builder.plans, key=lambda plan: shape.order.index(plan.name))
    return CompiledQuery(final, tuple(plans), shape.order, shape)


def _source_ts_as_micros(frame: DataFrame) -> tuple[DataFrame, bool]:
    """`_swivel_ts` as epoch microseconds (a long) between the source and the sink.

    PySpark converts a timestamp column between Arrow and pandas with time-zone handling on
    every call: in `transformWithStateInPandas`, once per key group each way, ~0.5 ms per
    group against ~0.05-0.1 ms for a long (docs/migration.md, overhead). The sink gets the
    timestamp back (exact: both casts are in microseconds)."""
    field = next((f for f in frame.schema.fields if f.name == SOURCE_TS_COLUMN), None)
    if field is None or not isinstance(field.dataType, TimestampType):
        return frame, False
    return frame.withColumn(SOURCE_TS_COLUMN, F.unix_micros(F.col(SOURCE_TS_COLUMN))), True


def _field(name: str, suffix: str = "") -> str:
    return f"spec.dataflow.operators[{name}]{suffix}"


def merged_schema(merge: str, inputs: Sequence[tuple[str, StructType]]) -> StructType:
    """The schema of a merge of `inputs` [(field, schema)]; CompileError on a mismatch."""
    if len(inputs) == 1:
        return inputs[0][1]
    described = [
        (field_name, [(f.name, f.dataType.simpleString()) for f in schema.fields])
        for field_name, schema in inputs
    ]
    columns = merged_columns(merge, described)
    types = {f.name: f.dataType for _, schema in inputs for f in schema.fields}
    return StructType([StructField(name, types[name]) for name, _ in columns])


class _Builder:
    """Turns the shape's steps into DataFrames: each step's output frame (by the operator
    whose output it is) and the output schema of every operator built so far."""

    def __init__(self, job: StreamJobSpec, settings: WorkerSettings, shape: Shape) -> None:
        self.job = job
        self.settings = settings
        self.shape = shape
        self.by_name = {op.name: op for op in job.dataflow.operators}
        self.frames: dict[str, DataFrame] = {}
        self.schemas: dict[str, StructType] = {}
        self.plans: list[OperatorPlan] = []

    def _inputs(self, name: str) -> list[tuple[str, str]]:
        return [(_field(name, f".inputs[{k}]"), i) for k, i in enumerate(self.shape.inputs[name])]

    def union(self, merge: str, inputs: list[tuple[str, str]]) -> tuple[DataFrame, StructType]:
        """The union of the input frames [(field, operator)], aligned to the merged schema."""
        schema = merged_schema(merge, [(f, self.schemas[name]) for f, name in inputs])
        frames = [self.frames[name] for _, name in inputs]
        if len(frames) == 1:
            return frames[0], schema
        merged: DataFrame | None = None
        for frame in frames:
            aligned = frame.select(
                *(
                    F.col(f.name)
                    if f.name in frame.columns
                    else F.lit(None).cast(f.dataType).alias(f.name)
                    for f in schema.fields
                )
            )
            merged = aligned if merged is None else merged.union(aligned)
        assert merged is not None
        return merged, schema

    def _plan(self, op: OperatorSpec, schema: StructType) -> tuple[OperatorPlan, StructType]:
        function = resolve(op.function or "", self.settings.allow, _field(op.name, ".function"))
        out_schema = _output_schema(schema, op.name, emitted_columns(function))
        plan = OperatorPlan(
            name=op.name,
            keyed=op.kind is OperatorKind.KEYED,
            key=op.key,
            input_columns=tuple(schema.fieldNames()),
            output_columns=tuple(out_schema.fieldNames()),
            initial=OperatorConfig(function=op.function, version=1, params=dict(op.params)),
        )
        self.plans.append(plan)
        return plan, out_schema

    def keyed(self, step: KeyedStep) -> None:
        op = self.by_name[step.operator]
        frame, schema = self.union(op.name, self._inputs(op.name))
        plan, out_schema = self._plan(op, schema)
        runner = OperatorRunner(plan, self.settings)
        self.frames[op.name] = frame.groupBy(op.key or "").transformWithStateInPandas(
            statefulProcessor=KeyedOperator(runner),
            outputStructType=out_schema,
            outputMode="append",
            timeMode="None",
        )
        self.schemas[op.name] = out_schema

    def blocking(self, step: BlockingStep) -> None:
        op = self.by_name[step.operator]
        frame, schema = self.union(op.name, self._inputs(op.name))
        # A real exchange even when the input is already partitioned this way: Spark keeps a
        # user repartition whose child's partitioning is on other attributes, and every
        # step's output has fresh ones (test_blocking.py checks the plan after a keyed step).
        bins = self.job.dataflow.bins
        frame = frame.repartition(bins, step.key) if step.key else frame.repartition(1)
        if op.function is None:  # a blocking union only merges: the shuffle is the barrier
            self.frames[op.name], self.schemas[op.name] = frame, schema
            return
        plan, out_schema = self._plan(op, schema)
        self.frames[op.name] = frame.mapInPandas(
            _blocking_body(OperatorRunner(plan, self.settings)), out_schema
        )
        self.schemas[op.name] = out_schema

    def region(self, region: Region) -> None:
        entry = region.operators[0]
        if region.producer is not None:
            frame, chunk_schema = self.frames[region.producer], self.schemas[region.producer]
        else:
            frame, chunk_schema = self.union(entry, self._inputs(entry))
        if region.hashed is not None:
            frame = frame.repartition(self.job.dataflow.bins, region.hashed)
        view = None if region.linear else ChunkView(self.settings.feed)
        settings = self.settings if view is None else replace(self.settings, feed=view)
        members = set(region.operators)
        steps: list[RegionStep] = []
        for name in region.operators:
            op = self.by_name[name]
            if name == entry and region.producer is None:
                ins: tuple[str, ...] = (CHUNK,)
                in_schema = chunk_schema
            else:
                ins = tuple(i if i in members else CHUNK for i in self.shape.inputs[name])
                in_schema = merged_schema(
                    name,
                    [
                        (
                            _field(name, f".inputs[{k}]"),
                            self.schemas[i] if i != CHUNK else chunk_schema,
                        )
                        for k, i in enumerate(ins)
                    ],
                )
            runner = None
            out_schema = in_schema  # a union without a function only merges
            if op.function is not None:
                plan, out_schema = self._plan(op, in_schema)
                runner = OperatorRunner(plan, settings)
            steps.append(RegionStep(name, ins, tuple(in_schema.fieldNames()), runner))
            self.schemas[name] = out_schema
        out_schema = self.schemas[region.exit]
        runners = [step.runner for step in steps if step.runner is not None]
        if not runners:
            self.frames[region.exit] = frame
        elif view is None:
            self.frames[region.exit] = _flush(frame, runners, out_schema)
        else:
            self.frames[region.exit] = frame.mapInPandas(
                _region_body(tuple(steps), region.exit, view), out_schema
            )


def _region_body(steps: tuple[RegionStep, ...], exit_name: str, view: ChunkView) -> Any:
    def body(chunks: Any) -> Any:
        return run_region(steps, exit_name, view, chunks)

    return body


def _blocking_body(runner: OperatorRunner) -> Any:
    def body(chunks: Any) -> Any:
        return run_blocking(runner, chunks)

    return body


def _flush(frame: DataFrame, runners: list[OperatorRunner], schema: StructType) -> DataFrame:
    """A linear chain of stateless operators as one mapInPandas."""

    def chain(chunks: Any) -> Any:
        return run_stateless_chain(runners, chunks)

    return frame.mapInPandas(chain, schema)


def _output_schema(schema: StructType, operator: str, emitted_ddl: str) -> StructType:
    fields = list(schema.fields)
    names = {f.name for f in fields}
    if emitted_ddl:
        added = _parse_datatype_string(emitted_ddl)
        assert isinstance(added, StructType), f"{operator}: @emits needs a column list"
        fields += [f for f in added.fields if f.name not in names]
        names |= {f.name for f in added.fields}
    if EMITTED_COLUMN not in names:
        fields.append(StructField(EMITTED_COLUMN, DoubleType()))
    return StructType(fields)


def operator_configs(job: StreamJobSpec) -> Mapping[str, OperatorSpec]:
    return {op.name: op for op in job.dataflow.operators if op.function is not None}
