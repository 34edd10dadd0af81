"""A StreamJob's dataflow -> one streaming DataFrame.

Walking the operators in topological order:
- consecutive stateless operators on forward edges fuse into one `mapInPandas` (one Python
  worker per task runs the chain; no extra serialisation between them);
- a `hash` edge into a stateless operator is a `repartition(bins, key)`;
- a keyed operator is `groupBy(key).transformWithStateInPandas(...)` (append output, no
  timers): Spark hash-partitions by the key into `spark.sql.shuffle.partitions` = `bins`
  state partitions, so a job's bin *is* a state partition: bin(key) =
  pmod(murmur3(key), bins), fixed by the checkpoint;
- the source and sink come from `spec.source` / `spec.sink` (sources.py, sinks.py).

The source is followed by one tag column per possible MCS component (choosing.tag_columns,
0 = "before any switch"); heads fill them during a Fries transition. Supported shapes: one source, a chain of operators, one sink (no fan-out,
union or join yet: CompileError names the operator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import DoubleType, StructField, StructType, _parse_datatype_string

from swivel.api.dataflow import OperatorKind, OperatorSpec
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.graph import Partitioning
from swivel.jobs.control.snapshots import OperatorConfig, Snapshot
from swivel.jobs.runtime.choosing import tag_columns
from swivel.jobs.runtime.functions import emitted_columns, resolve
from swivel.jobs.runtime.keyed import KeyedOperator
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
    run_stateless_chain,
)
from swivel.jobs.runtime.sources import build_source

DEFAULT_MAX_RECORDS_PER_BATCH = 64


class CompileError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class CompiledQuery:
    frame: DataFrame
    operators: tuple[OperatorPlan, ...]
    chain: tuple[str, ...]  # operator names, source first, sink last


def job_snapshot(job: StreamJobSpec) -> Snapshot:
    """The job's configuration version 1: every function at version 1, no transition."""
    return Snapshot(
        config_version=1,
        revision=1,
        operators={
            op.name: OperatorConfig(op.function, 1, dict(op.params))
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
    """The operators source-first; CompileError if the dataflow is not one chain."""
    ops = job.dataflow.operators
    consumers: dict[str, list[str]] = {op.name: [] for op in ops}
    for op in ops:
        for edge in op.inputs:
            consumers[edge.from_].append(op.name)
    sources = [op for op in ops if op.kind is OperatorKind.SOURCE]
    if len(sources) != 1:
        raise CompileError("spec.dataflow.operators", "the runtime needs exactly one source")
    by_name = {op.name: op for op in ops}
    chain = [sources[0]]
    while consumers[chain[-1].name]:
        following = consumers[chain[-1].name]
        if len(following) > 1:
            raise CompileError(
                f"spec.dataflow.operators[{chain[-1].name}]",
                f"fan-out to {following} is not supported by the runtime yet",
            )
        chain.append(by_name[following[0]])
    if len(chain) != len(ops):
        missing = sorted(set(by_name) - {op.name for op in chain})
        raise CompileError("spec.dataflow.operators", f"not one chain (also {missing})")
    if chain[-1].kind is not OperatorKind.SINK:
        raise CompileError(
            f"spec.dataflow.operators[{chain[-1].name}]", "the chain must end in a sink"
        )
    for op in chain[1:-1]:
        if op.kind in {
            OperatorKind.JOIN,
            OperatorKind.UNION,
            OperatorKind.SOURCE,
            OperatorKind.SINK,
        }:
            raise CompileError(
                f"spec.dataflow.operators[{op.name}]", f"{op.kind.value} is not supported yet"
            )
        if op.function is None:
            raise CompileError(f"spec.dataflow.operators[{op.name}].function", "needs a function")
        if op.kind is OperatorKind.KEYED and not op.key:
            raise CompileError(
                f"spec.dataflow.operators[{op.name}].key", "a keyed operator needs a key"
            )
        if any(edge.partitioning is Partitioning.BROADCAST for edge in op.inputs):
            raise CompileError(
                f"spec.dataflow.operators[{op.name}].inputs", "broadcast edges are not supported"
            )
    return chain


def compile_job(
    spark: SparkSession,
    job: StreamJobSpec,
    settings: WorkerSettings,
    source: DataFrame | None = None,
) -> CompiledQuery:
    """Build the streaming DataFrame (not started). `source` overrides `spec.source`."""
    chain = linear_chain(job)
    for key, value in session_conf(job).items():
        spark.conf.set(key, value)
    frame = source if source is not None else build_source(spark, job.source)
    function_operators = sum(1 for op in chain if op.function is not None)
    frame = frame.select(
        "*", *(F.lit(0).cast("long").alias(c) for c in tag_columns(function_operators))
    )
    allow = settings.allow
    plans: list[OperatorPlan] = []
    pending: list[OperatorRunner] = []
    schema = frame.schema
    for op in chain[1:-1]:
        function = resolve(op.function or "", allow, f"spec.dataflow.operators[{op.name}].function")
        out_schema = _output_schema(schema, op.name, emitted_columns(function))
        plan = OperatorPlan(
            name=op.name,
            keyed=op.kind is OperatorKind.KEYED,
            key=op.key,
            input_columns=tuple(schema.fieldNames()),
            output_columns=tuple(out_schema.fieldNames()),
            initial=OperatorConfig(op.function, 1, dict(op.params)),
        )
        plans.append(plan)
        runner = OperatorRunner(plan, settings)
        hashed = _hash_key(op)
        if plan.keyed:
            frame = _flush(frame, pending, schema)
            frame = frame.groupBy(op.key or "").transformWithStateInPandas(
                statefulProcessor=KeyedOperator(runner),
                outputStructType=out_schema,
                outputMode="append",
                timeMode="None",
            )
        else:
            if hashed is not None:
                frame = _flush(frame, pending, schema)
                frame = frame.repartition(job.dataflow.bins, hashed)
            pending.append(runner)
        schema = out_schema
    frame = _flush(frame, pending, schema)
    return CompiledQuery(frame, tuple(plans), tuple(op.name for op in chain))


def _hash_key(op: OperatorSpec) -> str | None:
    for edge in op.inputs:
        if edge.partitioning is Partitioning.HASH:
            return edge.key or op.key
    return None


def _flush(frame: DataFrame, pending: list[OperatorRunner], schema: StructType) -> DataFrame:
    """Emit the pending stateless chain as one mapInPandas."""
    if not pending:
        return frame
    runners = list(pending)
    pending.clear()

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
