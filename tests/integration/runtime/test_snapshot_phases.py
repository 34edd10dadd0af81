"""Staggered RocksDB snapshots on real Spark (local mode, the shared session; the helper jar
attached to it as `ADD JAR` does): once the migration executor's first boundary has run
its pass, every batch flushes some bin's memtable for its snapshot, instead of every bin in
one batch out of `minDeltasForSnapshot` (docs/migration.md, "Staggered snapshots").
Without the jar (no JDK at `make setup`) it skips, and fails in CI (tests/prerequisites.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from swivel.jobs.jvm import jar_path
from swivel.jobs.migration.executor import BinMover
from swivel_tools.bench.workload import KeyedWorkload
from tests.prerequisites import require

pytestmark = pytest.mark.timeout(300)
require(
    None if jar_path() else "jobs/jvm/swivel-spark.jar (`make setup` builds it with javac)",
    "the staggered snapshots test",
)

BINS = 4
EVERY = 4  # one bin per phase


def rocksdb_workload(spark: Any, root: Path, every: int) -> tuple[Any, KeyedWorkload]:
    """A session of its own on RocksDB with changelogs, a snapshot every `every` versions,
    and a small keyed workload on it."""
    session = spark.newSession()
    for key, value in {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(every),
        "spark.sql.shuffle.partitions": str(BINS),
    }.items():
        session.conf.set(key, value)
    workload = KeyedWorkload(
        session, root, bins=BINS, keys=2_000, payload_bytes=50, rows_per_batch=200
    )
    return session, workload


def flushed_per_version(query: Any) -> dict[int, int]:
    """Bytes RocksDB flushed in each committed version (batch b commits version b + 1): a
    store flushes its memtable only for a snapshot at this size."""
    return {
        int(p["batchId"]) + 1: p["stateOperators"][0]["customMetrics"].get(
            "rocksdbTotalBytesWrittenByFlush", 0
        )
        for p in query.recentProgress
    }


def test_each_batch_snapshots_its_own_phase_of_the_bins(spark: Any, tmp_path: Path) -> None:
    session, workload = rocksdb_workload(spark, tmp_path, every=EVERY)
    mover = BinMover(session, BINS)
    workload.write_inputs(2)
    query = workload.start(boundary=mover.wrap)
    mover.attach(query)
    try:
        workload.wait_for_batch(1)
        deadline = time.monotonic() + 60
        while mover.snapshots.passes == 0:
            assert mover.snapshots.reason is None and mover.snapshots.error is None, (
                mover.snapshots.reason or mover.snapshots.error
            )
            assert time.monotonic() < deadline, "no staggering pass after the first boundary"
            time.sleep(0.1)
        workload.write_inputs(10)
        workload.wait_for_batch(11)
        flushed = flushed_per_version(query)
    finally:
        workload.stop()
        mover.close()
    report = mover.snapshots.report
    assert report is not None and report.stores == BINS and report.offset >= BINS - 2, report
    # Spark's schedule would flush all four bins at versions 4, 8 and 12 and none between;
    # staggered, one bin snapshots at every version from the first pass on
    later = {version: flushed[version] for version in range(5, 13)}
    assert all(bytes_ > 0 for bytes_ in later.values()), later
    assert workload.count_mismatches(workload.processed_files()) == 0
