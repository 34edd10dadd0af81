"""`swivel bench overhead`: one keyed query written in plain PySpark against the same
StreamJob run by the full Swivel runtime, on the same 2-executor standalone cluster.

- **plain**: the generator's payments (`rate-micro-batch`, the same SQL columns) ->
  `groupBy(customer).transformWithStateInPandas(PlainKeyed)` calling the user's function
  (`fraud.customer_model`, cheap model) with the same JSON ValueState -> `noop` sink.
- **swivel**: the StreamJob below as `swivel run` runs it (`EmbeddedJob`): the real agent as
  a subprocess, `JobRuntime` compiling the dataflow (record ids, tag columns, the keyed
  operator with the worker control client checking its configuration per Arrow batch,
  version bookkeeping, observations), progress posted to the agent, the action long-poll;
  plus `MigrationDriver` (boundary listener, loads measured and posted every
  `coordination_interval_s`). No reconfiguration.

After `warmup_rounds` unrecorded rounds (plain, swivel: the JVMs' JIT settles over the first
minutes), phases alternate plain, swivel, swivel, plain, plain, ... (ABBA, so a drift of
the machine's load hits both sides alike) on the same session; each phase
resumes its own query from its checkpoint, drops `warmup` batches (a resumed query reloads
its state stores) and records the next `batches` batch durations (triggerExecution). The
medians of all phases are compared.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from swivel.jobs.examples.fraud import customer_model
from swivel.jobs.migration.cluster import LocalCluster
from swivel_tools.bench.process_cpu import ProcessCpu, per_batch_ms

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
USER_COLUMNS = ("payment", "customer", "merchant", "amount")
EMITTED = "customer_score double, customer_flag boolean, customer_model string"


def overhead_job(bins: int, rows_per_batch: int, customers: int) -> dict[str, Any]:
    """The StreamJob manifest both sides run."""
    return {
        "apiVersion": "swivel.dev/v1alpha1",
        "kind": "StreamJob",
        "metadata": {"name": "overhead"},
        "spec": {
            "source": {
                "kind": "generator",
                "options": {
                    "rowsPerBatch": str(rows_per_batch),
                    "customers": str(customers),
                    "numPartitions": "2",
                },
            },
            "sink": {"kind": "noop"},
            "trigger": {"intervalMs": 0},
            "dataflow": {
                "bins": bins,
                "operators": [
                    {"name": "payments", "kind": "source", "parallelism": 2},
                    {
                        "name": "customer-detector",
                        "kind": "keyed",
                        "key": "customer",
                        "inputs": [{"from": "payments", "partitioning": "hash", "key": "customer"}],
                        "parallelism": bins,
                        "function": "swivel.jobs.examples.fraud:customer_model",
                        "params": {"model": "cheap"},
                    },
                    {
                        "name": "out",
                        "kind": "sink",
                        "inputs": ["customer-detector"],
                        "parallelism": bins,
                    },
                ],
            },
        },
    }


class PlainKeyed(StatefulProcessor):
    """The user's keyed function on Spark's state store, nothing of Swivel around it."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        schema = StructType(
            [StructField("state", StringType()), StructField("version", LongType())]
        )
        self.state = handle.getValueState("plain", schema)

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        stored = self.state.get() if self.state.exists() else None
        value = json.loads(stored[0]) if stored is not None else {}
        for chunk in rows:
            out, value = customer_model(key[0], chunk, value, model="cheap")
            yield out
        self.state.update((json.dumps(value), 0))

    def close(self) -> None:
        return None


class _Plain:
    def __init__(self, spark: Any, job: Any, checkpoint: str) -> None:
        self.spark, self.job, self.checkpoint = spark, job, checkpoint
        self.query: Any = None

    def start(self) -> None:
        from pyspark.sql.types import StructType, _parse_datatype_string

        from swivel.jobs.runtime.sources import build_source

        source = build_source(self.spark, self.job.spec.source).select(*USER_COLUMNS)
        emitted = _parse_datatype_string(EMITTED)
        assert isinstance(emitted, StructType)
        schema = StructType([*source.schema.fields, *emitted.fields])
        frame = source.groupBy("customer").transformWithStateInPandas(
            statefulProcessor=PlainKeyed(),
            outputStructType=schema,
            outputMode="Append",
            timeMode="None",
        )
        self.query = (
            frame.writeStream.format("noop")
            .outputMode("append")
            .queryName("plain_overhead")
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime="0 milliseconds")
            .start()
        )

    def stop(self) -> None:
        _stop_between_batches(self.query)


class _Swivel:
    """The StreamJob under the full runtime: `EmbeddedJob` (agent subprocess, JobRuntime with
    the agent as feed and driver channel) and `MigrationDriver` (boundaries, loads)."""

    def __init__(self, spark: Any, job: Any, workdir: Path, interval_s: float) -> None:
        from swivel.embedded.running import EmbeddedJob

        self.spark, self.interval_s = spark, interval_s
        self.embedded = EmbeddedJob(job, workdir, spark)
        self.driver: Any = None  # swivel.jobs.migration.driver.MigrationDriver

    @property
    def query(self) -> Any:
        runtime = self.embedded.runtime
        return None if runtime is None else runtime.query

    def agent_pid(self) -> int | None:
        return None if self.embedded.agent is None else self.embedded.agent.pid

    def start(self) -> None:
        from swivel.jobs.control.driver_channel import AgentDriverChannel
        from swivel.jobs.migration.driver import MigrationDriver

        if self.embedded.runtime is not None:
            self.embedded.runtime.start()  # resume from its checkpoint
            return
        self.embedded.start()  # the agent, the runtime, the first query
        agent, runtime = self.embedded.agent, self.embedded.runtime
        assert agent is not None and runtime is not None
        bins = self.embedded.job.spec.dataflow.bins
        channel = AgentDriverChannel(agent.url, agent.driver_token)
        self.driver = MigrationDriver(  # as `swivel run --master` starts it: state rows too
            self.spark,
            bins,
            lambda: self.query,
            channel,
            checkpoint=runtime.checkpoint,
            coordination_interval_s=self.interval_s,
        ).start()

    def pause(self) -> None:
        if self.embedded.runtime is not None:
            self.embedded.runtime.stop_at_boundary()

    def close(self) -> None:
        if self.driver is not None:
            self.driver.stop()
        if self.embedded.runtime is not None:
            self.embedded.stop()


def _stop_between_batches(query: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    done = _last_batch(query)
    while (
        query.isActive
        and query.status.get("isTriggerActive")
        and _last_batch(query) == done
        and time.monotonic() < deadline
    ):
        time.sleep(0.005)
    query.stop()


def _last_batch(query: Any) -> int:
    progress = query.lastProgress
    return -1 if not progress else int(progress["batchId"])


def _phase(
    query_of: Any, warmup: int, batches: int, cpu: ProcessCpu, timeout: float = 600.0
) -> tuple[list[float], dict[str, float]]:
    """Durations of `batches` batches after `warmup` ones of the running query, and the CPU
    per batch of each process group over those batches (sampled when the last warm-up batch
    and the last measured batch are first seen, polling every 0.25 s).

    Polls `lastProgress` (one py4j call), `recentProgress` only when a batch was skipped:
    the poll runs on the same cores as the query, for both sides alike."""
    deadline = time.monotonic() + timeout
    seen: dict[int, float] = {}
    first: int | None = None
    before: dict[str, float] | None = None
    while True:
        query = query_of()
        if query is not None:
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            progress = query.lastProgress
            updates = [progress] if progress else []
            if progress and int(progress["batchId"]) - 1 not in seen:
                updates = query.recentProgress  # the first poll, or a batch was missed
            for update in updates:
                batch = int(update["batchId"])
                first = batch if first is None else min(first, batch)
                seen[batch] = float(update["durationMs"]["triggerExecution"])
        if first is not None:
            if before is None and first + warmup - 1 in seen:
                before = cpu.sample()
            wanted = range(first + warmup, first + warmup + batches)
            if all(b in seen for b in wanted):
                spent = per_batch_ms(before or {}, cpu.sample(), batches)
                return [seen[b] for b in wanted], spent
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(seen)} batches after {timeout}s")
        time.sleep(0.25)


def run_overhead_bench(
    *,
    bins: int = 16,
    rows_per_batch: int = 1_000,
    customers: int = 200,
    batches: int = 8,
    warmup: int = 2,
    rounds: int = 4,
    warmup_rounds: int = 1,
    coordination_interval_s: float = 60.0,
    workdir: Path | None = None,
) -> dict[str, Any]:
    from swivel.api.manifests import parse_manifest
    from swivel.api.streamjob import StreamJob

    root = workdir or Path(tempfile.mkdtemp(prefix="swivel-bench-overhead-"))
    job = parse_manifest(overhead_job(bins, rows_per_batch, customers), StreamJob)
    cluster = LocalCluster(workers=1, root=root / "cluster")
    cluster.start()
    began = time.monotonic()
    spark = None
    samples: dict[str, list[float]] = {"plain": [], "swivel": []}
    phases: list[dict[str, Any]] = []
    swivel: _Swivel | None = None
    try:
        spark = cluster.session(
            executors=2,
            bins=bins,
            app_name="swivel-bench-overhead",
            conf={
                "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
                "spark.sql.streaming.numRecentProgressUpdates": "200",
                "spark.python.worker.reuse": "true",
            },
        )
        plain = _Plain(spark, job, str(root / "plain-checkpoint"))
        swivel = _Swivel(spark, job, root / "swivel", coordination_interval_s)
        cpu = ProcessCpu(cluster.pids(), swivel.agent_pid)
        for _ in range(warmup_rounds):  # not recorded: the JVMs' JIT settles over the first
            # minutes (executor CPU per batch fell ~2.5x), which ABBA does not cancel
            for side in (plain, swivel):
                side.start()
                _phase(lambda side=side: side.query, warmup, batches, cpu)
                if isinstance(side, _Plain):
                    side.stop()
                else:
                    side.pause()
        for round_index in range(rounds):
            order = (("plain", plain), ("swivel", swivel))
            for mode, side in order if round_index % 2 == 0 else order[::-1]:  # ABBA: a trend
                # in the machine's load hits both sides alike
                side.start()
                durations, cpu_ms = _phase(lambda side=side: side.query, warmup, batches, cpu)
                if isinstance(side, _Plain):
                    side.stop()
                else:
                    side.pause()
                samples[mode] += durations
                phases.append(
                    {
                        "round": round_index,
                        "mode": mode,
                        "median_ms": statistics.median(durations),
                        "batch_ms": durations,
                        "cpu_ms_per_batch": cpu_ms,
                        "load_average_1m": round(os.getloadavg()[0], 2),
                    }
                )
        loads_posted = swivel.driver is not None and swivel.driver.latest_loads is not None
        plain_ms = statistics.median(samples["plain"])
        swivel_ms = statistics.median(samples["swivel"])
        pairs = [  # swivel / plain per round: robust to the machine's load drifting
            round(by["swivel"] / by["plain"], 3)
            for by in (
                {p["mode"]: p["median_ms"] for p in phases if p["round"] == r}
                for r in range(rounds)
            )
        ]
        cpu_ms = {
            mode: statistics.median(
                p["cpu_ms_per_batch"]["total"]
                for p in phases
                if p["mode"] == mode and p["cpu_ms_per_batch"]
            )
            for mode in ("plain", "swivel")
            if all(p["cpu_ms_per_batch"] for p in phases)
        }
        return {
            "plain_batch_ms": plain_ms,
            "swivel_batch_ms": swivel_ms,
            "ratio": round(swivel_ms / plain_ms, 3),
            "goal": 1.10,
            "pair_ratios": pairs,
            "pair_ratio_median": statistics.median(pairs),
            # CPU of every process of the run per batch (medians over phases): moves far
            # less with the machine's load than wall time
            "cpu_ms_per_batch": cpu_ms,
            "cpu_ratio": round(cpu_ms["swivel"] / cpu_ms["plain"], 3) if cpu_ms else None,
            "samples": {k: len(v) for k, v in samples.items()},
            "phases": phases,
            "swivel_runtime": {
                "agent": "swivel agent subprocess (EmbeddedJob)",
                "control_client": True,
                "tags": True,
                "loads_posted_to_agent": loads_posted,
                "coordination_interval_s": coordination_interval_s,
            },
            "setup": {
                "bins": bins,
                "executors": 2,
                "rows_per_batch": rows_per_batch,
                "customers": customers,
                "function": "fraud.customer_model (cheap)",
                "state_store": "RocksDB",
                "rounds": rounds,
                "warmup_rounds": warmup_rounds,
                "batches_per_phase": batches,
                "warmup_batches": warmup,
                "run_s": round(time.monotonic() - began, 1),
                "load_average_1m": round(os.getloadavg()[0], 2),
            },
        }
    finally:
        if swivel is not None:
            swivel.close()
        if spark is not None:
            spark.stop()
        cluster.stop()
