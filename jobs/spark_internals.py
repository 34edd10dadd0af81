"""The ONE adapter around private Spark APIs that bin migration and rescaling rely on.

Everything Swivel does to a running query's placement goes through here, so a Spark upgrade
changes this file only:

- state-store placement: the driver's `StateStoreCoordinator` (`getLocation`,
  `reportActiveInstance`: a locality *hint* that the next micro-batch follows when the
  executor is free within `spark.locality.wait`);
- executors of a running application: `SparkContext.requestTotalExecutors` /
  `killExecutors` (developer APIs; standalone and Kubernetes scheduler backends);
- the locality wait, changed at runtime through the live `SparkConf`;
- prewarmed moves: a bin loaded on its target ahead of the switch (`prewarm`,
  `switch_prewarmed`; jobs/spark_prewarm.py and its JVM helper);
- which executor ran each task, and executor metrics, from the status REST API
  (`/api/v1/applications/...`, needs `spark.ui.enabled`; `SparkStatus`, jobs/spark_status.py:
  a public API, kept apart from the private ones here).

Supported: Spark 4.3.x (pinned; `SUPPORTED` below). For 3.5 the coordinator call differs:
`reportActiveInstance(providerId, host, executorId)` takes no list of other loaded
providers and returns nothing, and checkpoint `repartition` does not exist (4.2+). Add a
branch in `_report_active`, and in the prewarm helper's `point` (jobs/jvm: `switchStep`
re-points a prewarmed step's bins through it in one call, and `releaseShadows` points
shadow ids away), and widen `SUPPORTED` after checking
the signatures with
`javap -cp spark-sql_*.jar org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef`.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from py4j.java_gateway import JavaClass  # type: ignore[import-untyped]

from swivel.jobs.spark_status import SparkStatus

if TYPE_CHECKING:
    from swivel.jobs.spark_prewarm import StatePrewarm
    from swivel.jobs.spark_snapshot_phases import SnapshotPhases

SUPPORTED = ("4.3.",)
STORE_DEFAULT = "default"
_NOT_STORES = ("SSTs", "checkpoint", "logs", "archive")

# a file source's metadata log compacts every this many entries (jobs/migration/source_log.py)
COMPACT_INTERVAL_KEY = "spark.sql.streaming.fileSource.log.compactInterval"
COMPACT_INTERVAL_DEFAULT = 10  # Spark 4.3's default


class UnsupportedSparkError(RuntimeError):
    """The running Spark is not one this adapter was checked against."""


def check_version(version: str) -> None:
    if os.environ.get("SWIVEL_SPARK_INTERNALS_UNCHECKED") == "1":
        return
    if not version.startswith(SUPPORTED):
        raise UnsupportedSparkError(
            f"Spark {version} is not supported by swivel's bin migration (needs "
            f"{' or '.join(v + 'x' for v in SUPPORTED)}): the StateStoreCoordinator and "
            "executor-request calls are private APIs whose signatures change between "
            "releases (3.5's reportActiveInstance takes 3 arguments). Set "
            "SWIVEL_SPARK_INTERNALS_UNCHECKED=1 to try anyway."
        )


class SparkInternals(SparkStatus):
    """Bound to one SparkSession. Cheap to construct; every call is a py4j or REST call."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        check_version(spark.version)
        self._jsc = self.sc._jsc.sc()
        state = "org.apache.spark.sql.execution.streaming.state."
        self._store_id = self.java_class(state + "StateStoreId")
        self._provider_id_class = self.java_class(state + "StateStoreProviderId")
        self._utils = self.java_class("org.apache.spark.api.python.PythonUtils")
        self._uuid = self.java_class("java.util.UUID")
        self._path = self.java_class("org.apache.hadoop.fs.Path")

    def java_class(self, name: str) -> Any:
        """The JVM class `name` (fully qualified) as py4j's JavaClass. Not `jvm.org.apache...`:
        py4j resolves each step of that walk with `Class.forName`, and every package step
        fails only after looking through all ~280 jars of the class path (~1 ms each), on
        every call (docs/migration.md, "The driver's class look-ups")."""
        return JavaClass(name, self.sc._gateway._gateway_client)

    # -- placement ----------------------------------------------------------------------

    def _coordinator(self) -> Any:
        return self.spark._jsparkSession.streams().stateStoreCoordinator()

    def _provider_id(self, query: Any, root: str, operator: int, partition: int, store: str) -> Any:
        store_id = self._store_id(root, operator, partition, store)
        run_id = self._uuid.fromString(str(query.runId))
        return self._provider_id_class(store_id, run_id)

    def query_session(self, query: Any) -> Any:
        """The query's own (JVM) session: its SQL conf carries the checkpoint's state-store
        settings, e.g. the provider class; the user's session before its first batch."""
        execution = query._jsq.streamingQuery().lastExecution()
        if execution is not None:
            return execution.sparkSession()
        return self.spark._jsparkSession

    def query_setting(self, query: Any, key: str) -> str:
        """SQL setting `key` of the query's own session; "" when unset."""
        found = self.query_session(query).conf().getOption(key)
        return str(found.get()) if found.isDefined() else ""

    def state_root(self, query: Any) -> str:
        checkpoint = query._jsq.streamingQuery().resolvedCheckpointRoot()
        return str(self._path(checkpoint, "state").toString())

    def state_stores(self, query: Any) -> list[tuple[int, str]]:
        """(operator id, store name) of every state store in the query's checkpoint.

        Bin p is partition p of every one of them; they move together. Only local (file:)
        checkpoints are listed; elsewhere operator 0's default store is assumed."""
        root = self.state_root(query)
        local = urllib.parse.urlparse(root).path if root.startswith("file:") else root
        if not os.path.isdir(local):
            return [(0, STORE_DEFAULT)]
        stores: list[tuple[int, str]] = []
        for operator in sorted(int(n) for n in os.listdir(local) if n.isdigit()):
            stores.append((operator, STORE_DEFAULT))
            first = os.path.join(local, str(operator), "0")
            if not os.path.isdir(first):
                continue
            for name in sorted(os.listdir(first)):
                named_store = os.path.isdir(os.path.join(first, name)) and not name.startswith(
                    ("_", ".")
                )
                if named_store and name not in _NOT_STORES:
                    stores.append((operator, name))
        return stores or [(0, STORE_DEFAULT)]

    def location(self, query: Any, partition: int, operator: int = 0) -> str | None:
        """The executor id the coordinator holds for bin `partition` (None: not loaded yet)."""
        return self._locations(query, [partition], operator)[partition]

    def placement(self, query: Any, bins: int, operator: int = 0) -> dict[int, str | None]:
        return self._locations(query, range(bins), operator)

    def _locations(
        self, query: Any, partitions: Iterable[int], operator: int, run_id: str | None = None
    ) -> dict[int, str | None]:
        """The executor the coordinator points each bin's provider id at: the query's run
        (`run_id` None) or another run id, e.g. a prewarm's shadow. The root, the
        coordinator, the run id and the two classes are looked up once, then four py4j calls
        per bin: the boundary that begins a migration reads every bin (bin by bin, with all
        look-ups repeated, that boundary took 0.27-0.76 s with 64 bins in diagnostic runs;
        docs/migration.md, "The switch in one JVM call")."""
        root = self.state_root(query)
        coordinator = self._coordinator()
        run = self._uuid.fromString(run_id or str(query.runId))
        store_id, provider_id = self._store_id, self._provider_id_class
        out: dict[int, str | None] = {}
        for partition in partitions:
            provider = provider_id(store_id(root, operator, partition, STORE_DEFAULT), run)
            out[partition] = executor_in_option(str(coordinator.getLocation(provider).toString()))
        return out

    def set_location(
        self,
        query: Any,
        partition: int,
        executor: str,
        host: str,
        stores: Sequence[tuple[int, str]] = ((0, STORE_DEFAULT),),
    ) -> None:
        """Point bin `partition` (of every store) at `executor` for the next batch (~4 ms)."""
        root = self.state_root(query)
        for operator, store in stores:
            provider = self._provider_id(query, root, operator, partition, store)
            self._report_active(provider, host, executor)

    def _report_active(self, provider_id: Any, host: str, executor: str) -> None:
        empty = self._utils.toSeq(self.java_class("java.util.ArrayList")())
        self._coordinator().reportActiveInstance(provider_id, host, executor, empty)

    # -- prewarmed moves (jobs/spark_prewarm.py: a JVM helper, docs/migration.md) ----------

    def prewarmer(self) -> StatePrewarm:
        if getattr(self, "_prewarmer", None) is None:
            from swivel.jobs.spark_prewarm import StatePrewarm

            self._prewarmer = StatePrewarm(self)
        return self._prewarmer

    def prewarm(
        self,
        query: Any,
        bins: Iterable[int],
        target: str,
        host: str,
        stores: Sequence[tuple[int, str]] = ((0, STORE_DEFAULT),),
        *,
        load_id: str | None = None,
        timeout_s: float | None = None,
    ) -> list[dict[str, Any]]:
        """Load `bins` on executor `target` at the last committed version while their owners
        keep serving them (on `target`'s loader thread, started over Spark's RPC or, before
        the target's helper endpoint is registered, by a short Spark job; each load
        announces its answer through the block manager; call it off the batch path).
        `load_id` names the load for its release (default: a new one); `timeout_s` bounds
        the wait for its answers (default: the prewarmer's)."""
        return self.prewarmer().prewarm(
            query, bins, target, host, stores=stores, load_id=load_id, timeout_s=timeout_s
        )

    def switch_prewarmed(
        self,
        query: Any,
        moves: Sequence[tuple[int, str, str]],
        stores: Sequence[tuple[int, str]] = ((0, STORE_DEFAULT),),
        *,
        version: int | None = None,
    ) -> list[dict[str, Any]]:
        """At a boundary: `set_location` for each (bin, target, host) of `moves` and hand
        the prewarmed copies to them (topped up to `version`, the one the next batch reads,
        on RocksDB), every target at once."""
        return self.prewarmer().switch(query, moves, stores=stores, version=version)

    def register_prewarm_endpoints(self) -> dict[str, str]:
        """Set up the executors' prewarm helper endpoints ahead of the first prewarm, when
        the session carries the helper jar (nothing is attached otherwise): executor id ->
        `registered` or why not; {} when there was nothing to do."""
        from swivel.jobs.spark_helper_jar import jar_on_session

        if not jar_on_session(self):
            return {}
        return self.prewarmer().register_endpoints()

    # -- staggered RocksDB snapshots (jobs/spark_snapshot_phases.py) -----------------------

    def snapshot_phases(self) -> SnapshotPhases:
        if getattr(self, "_snapshot_phases", None) is None:
            from swivel.jobs.spark_snapshot_phases import SnapshotPhases

            self._snapshot_phases = SnapshotPhases(self)
        return self._snapshot_phases

    # -- locality wait ------------------------------------------------------------------

    def locality_wait(self) -> str:
        return str(self._jsc.conf().get("spark.locality.wait", "3s"))

    def source_log_compact_interval(self) -> int:
        """Every how many entries a file source's metadata log compacts (a session setting,
        read when the source is created; jobs/migration/source_log.py)."""
        raw = self.spark.conf.get(COMPACT_INTERVAL_KEY, str(COMPACT_INTERVAL_DEFAULT))
        try:
            return int(str(raw).strip())
        except ValueError:
            return COMPACT_INTERVAL_DEFAULT

    def set_locality_wait(self, value: str) -> None:
        """Read by the task scheduler per task set, so a change applies from the next stage."""
        self._jsc.conf().set("spark.locality.wait", value)

    # -- executors ----------------------------------------------------------------------

    def request_total_executors(self, total: int) -> bool:
        """Ask the cluster manager for exactly `total` executors (absolute, not additive)."""
        hosts = self._utils.toScalaMap(self.java_class("java.util.HashMap")())
        return bool(self._jsc.requestTotalExecutors(total, 0, hosts))

    def kill_executors(self, ids: Iterable[str]) -> bool:
        """Remove executors and lower the target, so they are not replaced."""
        listed = self.java_class("java.util.ArrayList")()
        for executor in ids:
            listed.add(str(executor))
        return bool(self._jsc.killExecutors(self._utils.toSeq(listed)))

    # -- checkpoints ----------------------------------------------------------------------

    def repartition_checkpoint(self, checkpoint: str, bins: int) -> None:
        """Offline: change a stopped query's bin count (RocksDB checkpoints, Spark 4.2+)."""
        manager = getattr(self.spark, "_streamingCheckpointManager", None)
        if manager is None:
            raise UnsupportedSparkError("this Spark has no streaming checkpoint manager")
        manager.repartition(checkpoint, bins)


def executor_in_option(text: str) -> str | None:
    """The executor id in the coordinator's answer as Scala prints it: `Some(executor_h_1)`
    -> `"1"`, `None` -> None (one py4j call, `toString`, instead of `isEmpty` and `get`)."""
    if text.startswith("Some(") and text.endswith(")"):
        return executor_of_location(text[len("Some(") : -1])
    if text == "None":
        return None
    raise ValueError(f"not a printed Option[String]: {text!r}")


def executor_of_location(location: str) -> str:
    """`executor_127.0.0.1_1` (an ExecutorCacheTaskLocation) -> `"1"`; a bare host stays."""
    if location.startswith("executor_"):
        return location.rsplit("_", 1)[1]
    return location
