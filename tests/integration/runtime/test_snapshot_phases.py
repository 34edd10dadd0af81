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


def test_a_giver_snapshots_the_bins_it_is_asked_to_at_its_next_commit(
    spark: Any, tmp_path: Path
) -> None:
    """Ahead of a prewarmed switch the givers snapshot the step's bins (the switch's RocksDB
    top-up then replays from there): with snapshots every 100 versions nothing flushes in
    the first six, and the version after the request does."""
    from swivel.jobs.spark_internals import SparkInternals

    session, workload = rocksdb_workload(spark, tmp_path, every=100)
    workload.write_inputs(6)
    query = workload.start()
    try:
        workload.wait_for_batch(5)  # version 6 committed
        report = SparkInternals(session).snapshot_phases().snapshot_next(query, {"driver": [2]})
        workload.write_inputs(2)
        workload.wait_for_batch(7)
        flushed = flushed_per_version(query)
    finally:
        workload.stop()
    assert (report.stores, report.offset, report.missed) == (1, 1, []), report
    assert [flushed[v] for v in range(1, 7)] == [0] * 6, flushed
    assert flushed[7] > 0, flushed


def test_the_upload_watch_reads_every_store_folder_of_the_bins(spark: Any, tmp_path: Path) -> None:
    """A prewarmed step's wait for its givers' snapshots: a bin counts once every one of its
    stores has a snapshot newer than the version asked (`<v>.zip`; not a changelog, a v2
    `<v>_<id>.zip` or a temporary file), and a folder not created yet holds none. The helper
    lists all the folders in one call (`SnapshotPhases.fileNames`)."""
    from swivel.jobs.spark_helper_jar import helper_class
    from swivel.jobs.spark_internals import SparkInternals
    from swivel.jobs.spark_snapshot_phases import HELPER_API, HELPER_CLASS, UploadWatch

    root = tmp_path / "state"
    folders = {
        (0, "default"): [*(f"{v}.changelog" for v in range(1, 121)), "50.zip", "100.zip"],
        (0, "left"): ["100.zip", "101.changelog"],
        (1, "default"): ["10.zip", "12_0f3a.zip", ".11.zip.1b2c.tmp", "13.changelog"],
        (1, "left"): ["20.zip"],
        (2, "default"): ["90.zip"],  # bin 2 has no "left" folder yet
    }
    for (bin_id, store), names in folders.items():
        folder = root / "0" / str(bin_id) / ("" if store == "default" else store)
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            (folder / name).touch()
    internals = SparkInternals(spark)
    conf = spark._jsc.hadoopConfiguration()
    watch = UploadWatch(
        helper=helper_class(internals, HELPER_CLASS, HELPER_API),
        fs=spark._jvm.org.apache.hadoop.fs.Path(str(root)).getFileSystem(conf),
        root=str(root),
        stores=[(0, "default"), (0, "left")],
    )
    assert watch.uploaded_after([0, 1, 2, 3], 60) == {0}
    assert watch.uploaded_after([0, 1, 2, 3], 9) == {0, 1}
    assert watch.uploaded_after([0, 1], 100) == set()
    # bin 1's own folder: the v2 id and the temporary file are no snapshots newer than 10
    assert watch.uploaded_after([1], 10) == set()
    assert watch.uploaded_after([], 0) == set()
