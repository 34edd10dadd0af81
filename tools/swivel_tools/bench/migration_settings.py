"""What one `swivel bench migration` run is configured with: its settings (`BenchConfig`,
filled by the CLI), the Spark session settings they imply, the strategies it can run, and
the JSON's description of the checkpoint storage. Apart from the run (`migration.py`) so that file stays the run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swivel.jobs.migration.prewarming import PREWARM_AHEAD
from swivel_tools.bench import migration_figures as figures

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PLAIN = ("all-at-once", "fluid", "batched")  # the state loaded at the switch, as Spark does
PREWARMED = "batched-prewarmed"  # the state loaded ahead of the switch (the product's prewarm)
STEADY_RUN_MARGIN = 8  # the longest window then fits 9 times in the steady run


@dataclass(frozen=True)
class BenchConfig:
    bins: int = 64
    sweep_keys: tuple[int, ...] = (80_000, 320_000, 640_000)
    payload_bytes: int = 3_000
    rows_per_batch: int = 2_000
    load_batches: int = 8
    steady_batches: int = 6
    # no-migration batches recorded at the end of each size for `steady_window_excess_ms`;
    # None: the size's longest migration window + STEADY_RUN_MARGIN; 0: none
    steady_run_batches: int | None = None
    swap: int = 0  # bins each executor gives; 0: bins // 4 (half of the bins move)
    batch_size: int = 2
    gap_batches: int = 0
    # a processing-time trigger (ms; 0: batches back to back): headroom beside the batches
    trigger_ms: int = 0
    executor_cores: int = 1  # one slot per core of a 2-core machine (docs, "setup")
    executor_memory_gb: int = 5
    storage: str = "throttled"  # or "local"
    state_store: str = "hdfs"  # or "rocksdb" (off-heap, changelog checkpointing)
    read_mb_per_s: float = 150.0
    open_latency_ms: float = 20.0
    snapshot_every: int = 10  # Spark's default minDeltasForSnapshot
    # the file source's log compacts every N batches (Spark's default 10): on throttled://
    # that batch reads the last N log files at 20 ms an open, ~225 ms before its job
    source_log_compact_interval: int = 10
    # Spark's cleanup batching matched to the snapshot interval (`cleanup_ratio`)
    cleanup_batched_by_snapshots: bool = True
    prewarmed: bool = True
    chosen_keys: int | None = None  # the size of the top-level `strategies` (default: largest)
    timeout_s: float = 900.0
    settle_s: float = 5.0  # after a migration: maintenance rounds (every 2 s) unload moved bins
    thread_cpu: bool = False  # each strategy's JVMs' CPU per thread kind and batch
    thread_cpu_interval_s: float = 0.25  # its sampler's period (25-45 ms of CPU per sample)
    py4j_calls: bool = False  # the driver's py4j round trips per thread and command
    warm_up_prewarm: bool = False  # an unmeasured prewarmed migration before the strategies
    prewarm_ahead: int = PREWARM_AHEAD  # steps whose bins load ahead of their switch
    # unread input files kept in front of the query (its end reads every one written)
    feed_ahead: int = 12

    @property
    def per_executor(self) -> int:
        return self.swap or max(1, self.bins // 4)


SPARK_MIN_BATCHES_TO_RETAIN = 100  # spark.sql.streaming.minBatchesToRetain's default
SPARK_CLEANUP_RATIO = 0.3  # spark.sql.streaming.ratioExtraSpaceAllowedInCheckpoint's default


def cleanup_ratio(config: BenchConfig) -> float:
    """Spark's `ratioExtraSpaceAllowedInCheckpoint` for the bench's snapshot interval.

    Spark 4.3's maintenance lists a RocksDB bin's checkpoint folder (to delete old versions)
    only once `minBatchesToRetain x ratio` versions beyond those kept have gathered since
    the oldest it knows of, and learns the oldest only from a listing that deleted
    something. A deletion needs a snapshot past the oldest: up to two snapshot intervals
    after that threshold. With Spark's defaults (10 and 0.3, 30 versions) a listing always
    finds one; with `--snapshot-every 50` and 0.3 it finds none for up to 50 versions, and
    every bin's folder is listed on every maintenance pass (every 2 s here) meanwhile, in
    every executor, migration or not (docs/migration.md, "Spark's futile cleanup listings").
    Matched: 2 x the interval, so a listing is due only when a deletion is."""
    if not config.cleanup_batched_by_snapshots:
        return SPARK_CLEANUP_RATIO
    return max(SPARK_CLEANUP_RATIO, 2 * config.snapshot_every / SPARK_MIN_BATCHES_TO_RETAIN)


def migration_conf(config: BenchConfig) -> dict[str, str]:
    """Session settings (docs/migration.md, "Migration benchmark: setup").

    - HDFS-backed store (default): a bin's rows live in its executor's heap, a batch on a
      new executor first reads all of the bin's files (the reload). `--state-store rocksdb`:
      Swivel's own operators' store, off-heap, with changelog checkpointing (a reload
      downloads the newest snapshot's files and replays the changelogs after it); the heap
      then holds no state, so collector pauses of the state maps leave the batches.
    - Snapshots every `snapshot_every` deltas (Spark's default 10): a reload reads one
      snapshot and at most that many deltas whichever strategy runs first or last; without
      snapshots the later strategies would open more delta files (20 ms each on throttled).
    - Maintenance every 2 s: the bins an executor no longer serves are unloaded soon, so a
      bin moved back later is a real reload, not a cache hit.
    - The input's file-source log compacts every `source_log_compact_interval` batches
      (Spark's default 10). On `throttled://` a compacting batch first reads the last ten
      log files, 20 ms an open: its `latestOffset` takes ~225 ms instead of ~5, every tenth
      batch, migration or not (docs/migration.md, "The input's log compaction").
    - Old versions deleted in batches matched to the snapshot interval (`cleanup_ratio`).
    - `spark.locality.wait` 30 s: the placement is Swivel's; with 3 s an idle executor
      takes a busy one's bins and the strategies would not start alike.
    - The status store keeps 20 000 jobs and stages (Spark keeps 1 000): the worst
      batches' breakdowns and task lists are read from it after the runs, and every
      prewarm, staggering pass and switch is a job of its own.
    """
    return {
        "spark.sql.streaming.numRecentProgressUpdates": "2000",
        "spark.ui.retainedJobs": "20000",
        "spark.ui.retainedStages": "20000",
        "spark.executor.memory": f"{config.executor_memory_gb}g",
        "spark.executor.cores": str(config.executor_cores),
        "spark.driver.memory": "2g",
        "spark.memory.fraction": "0.3",
        **_store_conf(config),
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(config.snapshot_every),
        "spark.sql.streaming.stateStore.maintenanceInterval": "2s",
        "spark.sql.streaming.ratioExtraSpaceAllowedInCheckpoint": f"{cleanup_ratio(config):g}",
        "spark.sql.streaming.fileSource.log.compactInterval": str(
            config.source_log_compact_interval
        ),
        "spark.locality.wait": "30s",
    }


def _store_conf(config: BenchConfig) -> dict[str, str]:
    if config.state_store == "rocksdb":
        return {
            "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        }
    return {"spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER}


def session_conf(config: BenchConfig, log: Path | None, jar: str | None) -> dict[str, str]:
    """The bench session's settings: `migration_conf`, the checkpoint storage's, and the
    prewarm helper's jar (on `throttled://` it is on the class path already)."""
    conf = {
        **migration_conf(config),
        **figures.storage_conf(
            config.storage,
            read_mb_per_s=config.read_mb_per_s,
            open_latency_ms=config.open_latency_ms,
            log=log,
            jar=jar,
        ),
    }
    if jar is not None and config.storage == "local":
        conf["spark.jars"] = jar
    return conf


def storage_description(config: BenchConfig, log: Path | None) -> dict[str, Any]:
    """The JSON's `storage`: what the checkpoint storage emulates and what it does not."""
    out: dict[str, Any] = {"kind": config.storage}
    if config.storage == "throttled":
        out.update(
            scheme="throttled://",
            filesystem=figures.THROTTLED_CLASS,
            read_mb_per_s=config.read_mb_per_s,
            open_latency_ms=config.open_latency_ms,
            emulates="per-open latency and per-stream read bandwidth of a remote store",
            not_emulated="write/list/rename latency, request limits, shared-link contention",
            log=str(log),
        )
    return out


def strategies_to_run(spark: Any, config: BenchConfig) -> tuple[tuple[str, ...], str | None]:
    """The strategies to run, and why `batched-prewarmed` is not among them (None: it is)."""
    if not config.prewarmed:
        return PLAIN, "switched off (--no-prewarmed)"
    from swivel.jobs.spark_internals import SparkInternals

    if not SparkInternals(spark).prewarmer().available():
        return PLAIN, "the prewarm helper jar is not built (make setup needs a JDK)"
    return (*PLAIN, PREWARMED), None
