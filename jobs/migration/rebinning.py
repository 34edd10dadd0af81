"""Changing a job's bin count: an OFFLINE operation, a restart path, never a live one.

Bins are fixed per checkpoint (Megaphone chooses a power of two at start; Spark fixes
`spark.sql.shuffle.partitions` in the checkpoint's offset log). Changing them means:

1. stop the query between two micro-batches;
2. `StreamingCheckpointManager.repartition(checkpoint, bins)` (Spark 4.2+, RocksDB state
   store only): rewrites every stateful operator's state into `bins` partitions as a new
   batch N+1 that reads no input;
3. start the query again from the checkpoint (the caller's `restart` callable), now with
   `bins` state partitions.

The job is down from 1 to 3; expect seconds to minutes with large state. Use `BinMover`
for anything that can happen live (moving bins, adding or removing executors).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from swivel.jobs.spark_internals import SparkInternals, check_version


class RebinningError(RuntimeError):
    pass


@dataclass(frozen=True)
class RebinningResult:
    bins_before: int | None
    bins_after: int
    stopped_s: float  # query down: stop -> restarted
    repartition_s: float
    restarted: Any


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def change_bin_count_offline(
    spark: Any,
    query: Any,
    checkpoint: str,
    bins: int,
    restart: Callable[[], Any],
    *,
    bins_before: int | None = None,
    boundary_timeout_s: float = 60.0,
) -> RebinningResult:
    """RESTART PATH: stop `query`, repartition its checkpoint to `bins`, call `restart()`.

    `restart` must build and start the query again from `checkpoint` (it returns the new
    StreamingQuery). Raises `RebinningError` before stopping anything when `bins` is not a
    power of two or equals the current count."""
    check_version(spark.version)
    if not is_power_of_two(bins):
        raise RebinningError(f"bins must be a power of two, got {bins}")
    if bins_before is not None and bins == bins_before:
        raise RebinningError(f"the job already has {bins} bins")
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass", "")
    if "RocksDB" not in provider:
        raise RebinningError(
            "Spark repartitions only RocksDB state: set spark.sql.streaming.stateStore."
            "providerClass to RocksDBStateStoreProvider (when the job starts)"
        )
    started = time.monotonic()
    deadline = started + boundary_timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.01)
    query.stop()
    repartition_started = time.monotonic()
    SparkInternals(spark).repartition_checkpoint(checkpoint, bins)
    repartition_s = time.monotonic() - repartition_started
    spark.conf.set("spark.sql.shuffle.partitions", str(bins))
    restarted = restart()
    return RebinningResult(bins_before, bins, time.monotonic() - started, repartition_s, restarted)
