"""Sources: where a job's records come from, as a streaming DataFrame with Swivel's columns.

Every source adds `_swivel_record` (a record id, the unit of the consistency checker) and
`_swivel_ts` (the source timestamp, for end-to-end latency).

- `generator` - deterministic payments for demos, tests and benchmarks. Built on Spark's
  `rate` source (`rowsPerSecond`, wall-clock timestamps) or, when the option `rowsPerBatch`
  is given, on `rate-micro-batch` (exactly that many rows per micro-batch: reproducible
  tests). Fields: `payment` (id), `customer`, `merchant`, `amount`, all derived from the
  rate counter by integer hashing in SQL, so no Python runs at the source. Options:
  `customers` (default 64), `merchants` (16), `numPartitions` (2).
- `rate` - Spark's rate source as is (`timestamp`, `value`).
- `files` - a directory of `format` (json, csv, parquet; default json) files with a
  declared `schema` (DDL) at `path`; `maxFilesPerTrigger` is passed through. The record id
  is the column named by `recordId`, else a generated uuid (not stable across replays).
Kafka is not wired yet (see docs/runtime.md, "Limits").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from swivel.api.streamjob import SourceKind, SourceSpec
from swivel.jobs.runtime.operators import RECORD_COLUMN, SOURCE_TS_COLUMN


class SourceError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def build_source(spark: SparkSession, spec: SourceSpec) -> DataFrame:
    if spec.kind is SourceKind.GENERATOR:
        return _payments(spark, spec)
    if spec.kind is SourceKind.RATE:
        rate = _rate(spark, spec)
        return rate.select(
            F.col("value").cast("string").alias(RECORD_COLUMN),
            F.col("timestamp").alias(SOURCE_TS_COLUMN),
            "timestamp",
            "value",
        )
    if spec.kind is SourceKind.FILES:
        return _files(spark, spec)
    raise SourceError("spec.source.kind", f"{spec.kind.value} sources are not supported yet")


def _rate(spark: SparkSession, spec: SourceSpec) -> DataFrame:
    options = spec.options
    partitions = options.get("numPartitions", "2")
    if "rowsPerBatch" in options:
        return (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", options["rowsPerBatch"])
            .option("numPartitions", partitions)
            .option("advanceMillisPerBatch", options.get("advanceMillisPerBatch", "1000"))
            .load()
        )
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", spec.rows_per_second)
        .option("numPartitions", partitions)
        .load()
    )


def _hashed(value: Column, salt: int, modulo: int) -> Column:
    # Knuth's multiplicative hash, in SQL longs: a fixed, well-spread function of the counter.
    return F.pmod((value + salt) * F.lit(2654435761) % F.lit(4294967296), F.lit(modulo))


def _payments(spark: SparkSession, spec: SourceSpec) -> DataFrame:
    options = spec.options
    customers = int(options.get("customers", "64"))
    merchants = int(options.get("merchants", "16"))
    rate = _rate(spark, spec)
    # rate-micro-batch timestamps are synthetic; the batch's start time is the honest one.
    timestamp = F.current_timestamp() if "rowsPerBatch" in options else F.col("timestamp")
    value = F.col("value")
    return rate.select(
        F.concat(F.lit("p"), value.cast("string")).alias(RECORD_COLUMN),
        timestamp.alias(SOURCE_TS_COLUMN),
        value.alias("payment"),
        _hashed(value, 17, customers).alias("customer"),
        _hashed(value, 7919, merchants).alias("merchant"),
        (_hashed(value, 104729, 100_000) / F.lit(100.0)).alias("amount"),
    )


def _files(spark: SparkSession, spec: SourceSpec) -> DataFrame:
    options = dict(spec.options)
    path, schema = options.pop("path", None), options.pop("schema", None)
    if not path or not schema:
        raise SourceError("spec.source.options", "a files source needs `path` and `schema`")
    file_format = options.pop("format", "json")
    record_id = options.pop("recordId", None)
    frame = spark.readStream.format(file_format).schema(schema).options(**options).load(path)
    ident = F.col(record_id).cast("string") if record_id else F.expr("uuid()")
    return frame.select(
        ident.alias(RECORD_COLUMN), F.current_timestamp().alias(SOURCE_TS_COLUMN), "*"
    )
