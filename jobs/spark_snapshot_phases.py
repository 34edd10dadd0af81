"""Staggered RocksDB snapshots: each bin takes its snapshot in its own phase of the
snapshot interval, so no batch pays every bin's snapshot at once (docs/migration.md,
"Staggered snapshots").

Part of the Spark adapter (`SparkInternals`, Spark 4.3.x). The work on the executors is
done by `io.swivel.spark.SnapshotPhases` (jobs/jvm/src/..., in the helper jar); without the
jar `offset()` reports it unavailable and the query snapshots as Spark schedules it.

    phases = SnapshotPhases(internals)
    if phases.applies(query) is None:
        report = phases.offset(query)   # at a boundary: one short task per executor

Only a RocksDB store with changelog checkpointing snapshots on Spark's schedule inside its
task (every `minDeltasForSnapshot` versions; without changelogs it uploads every version).
The HDFS-backed store writes its snapshots in the executors' maintenance thread, off the
batch path, so it needs none of this.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from swivel.jobs.spark_helper_jar import HelperUnavailableError, helper_class, java_list
from swivel.jobs.spark_internals import STORE_DEFAULT, SparkInternals

HELPER_CLASS = "io.swivel.spark.SnapshotPhases"
HELPER_API = 4
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
EVERY_KEY = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
SPARK_DEFAULT_EVERY = 10
MAINTENANCE_KEY = "spark.sql.streaming.stateStore.maintenanceInterval"
SPARK_DEFAULT_MAINTENANCE_S = 60.0


@dataclass
class PhaseReport:
    """What one pass did: per executor, the query's RocksDB stores it holds, how many were
    moved into their phase now and how many already were; `missed` names the executors whose
    task ran elsewhere (their stores are left for the next pass)."""

    every: int  # the query's setting; each store uses its own (the same, unless changed)
    stores: int = 0
    offset: int = 0
    in_phase: int = 0
    missed: list[str] = field(default_factory=list)


class SnapshotPhases:
    """Bound to one SparkInternals (its session and version check)."""

    def __init__(self, internals: SparkInternals) -> None:
        self.internals = internals

    def applies(self, query: Any) -> str | None:
        """None when `query`'s stores snapshot inside their tasks on Spark's schedule;
        otherwise why staggering has nothing to do."""
        provider = self.internals.query_setting(query, PROVIDER_KEY)
        if provider != ROCKSDB_PROVIDER:
            return f"{PROVIDER_KEY}={provider or '(HDFS-backed)'}: snapshots in maintenance"
        if self.internals.query_setting(query, CHANGELOG_KEY).lower() != "true":
            return f"{CHANGELOG_KEY} is off: every version uploads a snapshot"
        every = self.every(query)
        if every < 2:
            return f"{EVERY_KEY}={every}: a snapshot every version"
        return None

    def every(self, query: Any) -> int:
        """The query's snapshot interval in versions (`minDeltasForSnapshot`)."""
        value = self.internals.query_setting(query, EVERY_KEY)
        return int(value) if value.strip().isdigit() else SPARK_DEFAULT_EVERY

    def offset(self, query: Any) -> PhaseReport:
        """Move every RocksDB store of `query` loaded on an active executor into its phase
        (`partition % every`). Call at a boundary; raises HelperUnavailableError without the
        helper jar."""
        return self._run(query, "phase", self._executors())

    def snapshot_next(self, query: Any, bins_by_executor: dict[str, list[int]]) -> PhaseReport:
        """Make `bins_by_executor`'s stores (on the executors that serve them) take a snapshot
        at their next commit: ahead of a prewarmed switch, whose RocksDB top-up replays the
        changelogs since the bin's newest uploaded snapshot. The staggering pass after the
        migration puts them back in their phase."""
        hosts = dict(entry.split("\t") for entry in self._executors())
        entries = [
            f"{executor}\t{hosts[executor]}\t{','.join(str(b) for b in sorted(bins))}"
            for executor, bins in sorted(bins_by_executor.items())
            if executor in hosts and bins
        ]
        return self._run(query, "next", entries)

    def maintenance_interval_s(self, query: Any) -> float:
        """How often the executors' maintenance uploads the snapshots a commit took."""
        value = self.internals.query_setting(query, MAINTENANCE_KEY).strip()
        if not value:
            return SPARK_DEFAULT_MAINTENANCE_S
        utils = self.internals._jvm.org.apache.spark.network.util.JavaUtils
        return float(utils.timeStringAsMs(value)) / 1e3

    def upload_watch(self, query: Any, stores: list[tuple[int, str]]) -> UploadWatch:
        """A reader of which bins' snapshots maintenance has uploaded, for one wait: its
        helper, Hadoop conf and file system are resolved once, not on every check."""
        helper = helper_class(self.internals, HELPER_CLASS, HELPER_API)
        conf = self.internals.query_session(query).sessionState().newHadoopConf()
        root = self.internals.state_root(query)
        fs = self.internals._jvm.org.apache.hadoop.fs.Path(root).getFileSystem(conf)
        return UploadWatch(helper=helper, fs=fs, root=root, stores=list(stores))

    def _executors(self) -> list[str]:
        """`id\thost` of every active executor."""
        if self.internals.sc._jsc.sc().isLocal():
            # local mode (not local-cluster): the stores live in the driver's JVM, its
            # executor "driver" on "localhost" (LocalSchedulerBackend); no UI to ask, maybe
            return ["driver\tlocalhost"]
        return [f"{e.id}\t{e.host}" for e in self.internals.executors() if e.active]

    def _run(self, query: Any, mode: str, executors: list[str]) -> PhaseReport:
        helper = helper_class(self.internals, HELPER_CLASS, HELPER_API)
        every = self.every(query)
        report = PhaseReport(every=every)
        if not executors:
            return report
        answers = helper.run(
            self.internals.sc._jsc.sc(),
            executors,
            self.internals.state_root(query),
            str(query.runId),
            mode,
        )
        for text in java_list(answers):
            answer = json.loads(str(text))
            if answer.get("status") != "done":
                report.missed.append(str(answer.get("wanted", answer.get("executor"))))
                continue
            report.stores += int(answer["stores"])
            report.offset += int(answer["offset"])
            report.in_phase += int(answer["in_phase"])
        return report


@dataclass
class UploadWatch:
    """Reads the checkpoint's store folders on the driver (no Spark job)."""

    helper: Any  # the SnapshotPhases JVM class: it lists the folders in one call
    fs: Any  # the checkpoint's Hadoop FileSystem
    root: str
    stores: list[tuple[int, str]]

    def uploaded_after(self, bins: list[int], version: int) -> set[int]:
        """The bins of `bins` whose every store has a snapshot newer than `version` in the
        checkpoint (`<op>/<bin>[/<store>]/<v>.zip`, uploaded by maintenance). The folders'
        listing, not a look-up of one file: the version the giver snapshotted at is not
        known in advance. All folders in one py4j call and one string (`fileNames`): a file
        at a time, a check of two folders of 120 changelogs took ~150 ms and ~80 ms of the
        driver's Python CPU (and as much of its JVM's), every 0.2 s."""
        folders = [
            (bin_id, store_folder(self.root, operator, bin_id, store))
            for bin_id in bins
            for operator, store in self.stores
        ]
        if not folders:
            return set()
        listed = str(self.helper.fileNames(self.fs, [f for _, f in folders])).split("\n")
        behind = {
            bin_id
            for (bin_id, _), names in zip(folders, listed, strict=True)
            if newest_snapshot(names.split("/") if names else []) <= version
        }
        return {bin_id for bin_id in bins if bin_id not in behind}


def store_folder(root: str, operator: int, partition: int, store: str) -> str:
    """A store's checkpoint folder, as `StateStoreId.storeCheckpointLocation` names it."""
    folder = f"{root}/{operator}/{partition}"
    return folder if store == STORE_DEFAULT else f"{folder}/{store}"


def newest_snapshot(names: Iterable[str]) -> int:
    """The newest RocksDB snapshot version among a store folder's file names (`<v>.zip`,
    checkpoint format v1), -1 without one; changelogs, checksums, temporary files and the
    v2 format's `<v>_<id>.zip` are not snapshots of this kind."""
    versions = [int(n[:-4]) for n in names if n.endswith(".zip") and n[:-4].isdigit()]
    return max(versions, default=-1)


__all__ = ["HelperUnavailableError", "PhaseReport", "SnapshotPhases", "UploadWatch"]
