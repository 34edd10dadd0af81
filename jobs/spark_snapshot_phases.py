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
from dataclasses import dataclass, field
from typing import Any

from swivel.jobs.spark_helper_jar import HelperUnavailableError, helper_class, java_list
from swivel.jobs.spark_internals import SparkInternals

HELPER_CLASS = "io.swivel.spark.SnapshotPhases"
HELPER_API = 5
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
EVERY_KEY = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
SPARK_DEFAULT_EVERY = 10


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
        return self._run(query, self._executors())

    def _executors(self) -> list[str]:
        """`id\thost` of every active executor."""
        if self.internals.sc._jsc.sc().isLocal():
            # local mode (not local-cluster): the stores live in the driver's JVM, its
            # executor "driver" on "localhost" (LocalSchedulerBackend); no UI to ask, maybe
            return ["driver\tlocalhost"]
        return [f"{e.id}\t{e.host}" for e in self.internals.executors() if e.active]

    def _run(self, query: Any, executors: list[str]) -> PhaseReport:
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


__all__ = ["HelperUnavailableError", "PhaseReport", "SnapshotPhases"]
