"""A keyed streaming job with a known answer, for the cluster tests and the benchmarks.

Input: parquet files, one per micro-batch (`maxFilesPerTrigger=1`). File 0 holds every key
once with a `payload_bytes` string (it builds the state: `payload_bytes` per key, so
`keys * payload_bytes / bins` bytes per bin); files 1.. hold `rows_per_batch` keys each
(no payload), spread over all bins. The query counts rows per key and keeps the payload
(`groupBy(key).agg(count, max(payload))`, update mode) and writes each batch to Spark's
`noop` sink through `foreachBatch`, the boundary hook of the migration executor.

`reference()` is the exact count per key computed from the files, to compare with the
state rows read back through the `statestore` reader (`state_counts()`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PRIME = 2_654_435_761


@dataclass
class KeyedWorkload:
    spark: Any
    root: Path
    bins: int
    keys: int = 20_000
    payload_bytes: int = 200
    rows_per_batch: int = 2_000
    hot_keys: tuple[int, ...] = ()  # added to every batch after the first (a hot bin)
    written: int = 0
    query: Any = None
    _mtime: float = field(default_factory=lambda: time.time() - 100_000)
    _feeding: threading.Event | None = None

    @property
    def input_dir(self) -> Path:
        return self.root / "input"

    @property
    def checkpoint(self) -> str:
        return str(self.root / "checkpoint")

    def batch_keys(self, index: int) -> list[int]:
        if index == 0:
            return list(range(self.keys))
        start = index * self.rows_per_batch
        spread = [((start + j) * _PRIME) % self.keys for j in range(self.rows_per_batch)]
        return spread + list(self.hot_keys)

    def write_inputs(self, count: int) -> None:
        """Append `count` more input files (one micro-batch each)."""
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        self.input_dir.mkdir(parents=True, exist_ok=True)
        for index in range(self.written, self.written + count):
            keys = self.batch_keys(index)
            if index == 0:
                pad = "x" * max(0, self.payload_bytes - 12)
                payloads: list[str | None] = [f"{pad}{k:012d}" for k in keys]
            else:
                payloads = [None] * len(keys)
            table = pa.table(
                {"key": pa.array(keys, pa.int64()), "payload": pa.array(payloads, pa.string())}
            )
            path = self.input_dir / f"part-{index:06d}.parquet"
            tmp = self.root / f".tmp-{index}.parquet"
            pq.write_table(table, tmp)
            self._mtime += 1.0  # the file source orders by modification time
            os.utime(tmp, (self._mtime, self._mtime))
            os.replace(tmp, path)
        self.written += count

    def feed(self, ahead: int = 6) -> None:
        """Keep `ahead` unread input files in front of the query (a daemon thread), so a
        long migration or rescale never runs out of batches; `stop()` ends it."""
        stopping = self._feeding = threading.Event()

        def run() -> None:
            while not stopping.is_set():
                missing = self.batches_done() + 1 + ahead - self.written
                if missing > 0:
                    self.write_inputs(missing)
                time.sleep(0.05)

        threading.Thread(target=run, daemon=True, name="swivel-feed").start()

    def processed_files(self) -> int:
        """Files the stopped query has processed: one per batch, batch b = file b."""
        return self.batches_done() + 1

    def frame(self) -> Any:
        from pyspark.sql import functions as F  # noqa: N812

        source = (
            self.spark.readStream.schema("key long, payload string")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(self.input_dir))
        )
        return source.groupBy("key").agg(
            F.count(F.lit(1)).alias("n"), F.max("payload").alias("payload")
        )

    def start(
        self,
        boundary: Callable[[Callable[[Any, int], None]], Callable[[Any, int], None]] | None = None,
        trigger_ms: int = 0,
        query_name: str | None = None,
    ) -> Any:
        """Start the query; `boundary` wraps the foreachBatch function (`BinMover.wrap`)."""

        def write(frame: Any, batch_id: int) -> None:
            frame.write.format("noop").mode("overwrite").save()

        function = boundary(write) if boundary is not None else write
        writer = (
            self.frame()
            .writeStream.outputMode("update")
            .foreachBatch(function)
            .option("checkpointLocation", self.checkpoint)
        )
        if query_name:
            writer = writer.queryName(query_name)
        if trigger_ms:
            writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
        self.query = writer.start()
        return self.query

    def batches_done(self) -> int:
        progress = self.query.lastProgress if self.query is not None else None
        return -1 if not progress else int(progress["batchId"])

    def wait_for_batch(self, batch_id: int, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while self.batches_done() < batch_id:
            query = self.query
            if query is not None and query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"batch {self.batches_done()} of {batch_id} after {timeout}s")
            time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop between two batches (a stop inside a batch's write aborts it noisily)."""
        if self._feeding is not None:
            self._feeding.set()
        query = self.query
        if query is None or not query.isActive:
            return
        deadline = time.monotonic() + timeout
        while query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.01)
        query.stop()

    def reference(self, files: int | None = None) -> dict[int, int]:
        """Exact count per key over input files `0..files-1` (default: all written)."""
        counts: Counter[int] = Counter()
        for index in range(self.written if files is None else files):
            counts.update(self.batch_keys(index))
        return dict(counts)

    def state_counts(self) -> dict[int, int]:
        """Count per key as the state store holds it (latest committed batch)."""
        frame = self.spark.read.format("statestore").load(self.checkpoint)
        rows = frame.selectExpr("key.key AS key", "value.count AS n").collect()
        return {int(r["key"]): int(r["n"]) for r in rows}

    def keys_in_bin(self, bin_id: int, count: int, offset: int = 0) -> tuple[int, ...]:
        """`count` keys (from `offset` upwards) that Spark's hash partitioning sends to bin
        `bin_id` (`pmod(hash(key), bins)`, as the aggregation's shuffle does)."""
        frame = self.spark.range(offset, offset + count * self.bins * 4).where(
            f"pmod(hash(id), {self.bins}) = {bin_id}"
        )
        return tuple(int(r[0]) for r in frame.limit(count).collect())

    def state_rows_per_bin(self) -> dict[int, int]:
        frame = self.spark.read.format("statestore").load(self.checkpoint)
        rows = frame.groupBy("partition_id").count().collect()
        return {int(r["partition_id"]): int(r["count"]) for r in rows}
