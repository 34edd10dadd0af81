"""`swivel bench coordination`: the driver time Swivel's own per-batch coordination costs at
g = 1 against the g AIMD tunes (swivel.jobs.runtime.grouping, controllers/aimd.py).

One StreamJob (the overhead benchmark's keyed query, `runtime_overhead.overhead_job`) runs
under the full runtime -- the agent as a subprocess (`EmbeddedJob`), `JobRuntime` with
`CoordinationGroups`, `MigrationDriver` sharing them -- on a 2-executor standalone cluster
(or on a given session: the smoke test). One query runs throughout; the phases only switch
the groups between a fixed g = 1 (A: every batch end a coordination point, as before
grouping) and AIMD's g (B), in ABBA order so a drift of the machine's load hits both alike.
Each phase drops `warmup` batches after the switch, then records `batches` batches:

- `coordination_ms_per_batch`: the wall time the driver spent in Swivel's coordination
  (the listener hooks and the reports to the agent; `CoordinationGroups.totals`) per batch;
- `batch_ms`: the batches' median triggerExecution;
- `points_per_batch` and, for B, the g in force at the phase's end;
- CPU per batch of the driver's Python process and of the agent (`ProcessCpu`).

`ratio` = B's median coordination time per batch over A's (below 1: grouping saves);
`pair_ratios` the same per round.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from swivel_tools.bench.process_cpu import ProcessCpu, per_batch_ms
from swivel_tools.bench.runtime_overhead import ROCKSDB, overhead_job

MODES = ("g1", "tuned")


class _Job:
    """The StreamJob under the full runtime with coordination groups."""

    def __init__(self, spark: Any, job: Any, workdir: Path) -> None:
        from swivel.embedded.running import EmbeddedJob
        from swivel.jobs.runtime.grouping import CoordinationGroups

        self.spark = spark
        self.groups = CoordinationGroups()
        self.embedded = EmbeddedJob(job, workdir, spark, groups=self.groups)
        self.driver: Any = None  # swivel.jobs.migration.driver.MigrationDriver

    def start(self) -> None:
        from swivel.jobs.control.driver_channel import AgentDriverChannel
        from swivel.jobs.migration.driver import MigrationDriver

        self.embedded.start()
        agent, runtime = self.embedded.agent, self.embedded.runtime
        assert agent is not None and runtime is not None
        self.driver = MigrationDriver(
            self.spark,
            self.embedded.job.spec.dataflow.bins,
            lambda: runtime.query,
            AgentDriverChannel(agent.url, agent.driver_token),
            checkpoint=runtime.checkpoint,
            groups=self.groups,
        ).start()

    def agent_pid(self) -> int | None:
        return None if self.embedded.agent is None else self.embedded.agent.pid

    def completed(self) -> int:
        runtime = self.embedded.runtime
        if runtime is None:
            return 0
        query = runtime.query
        if query is not None and not query.isActive and query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        return int(runtime.batches_completed())

    def durations_ms(self, last: int) -> list[float]:
        runtime = self.embedded.runtime
        return [float(e.get("durationMs") or 0.0) for e in runtime.progress[-last:]]

    def close(self) -> None:
        if self.driver is not None:
            self.driver.stop()
        if self.embedded.runtime is not None:
            self.embedded.stop()


def _wait_batches(job: _Job, count: int, timeout_s: float) -> None:
    target = job.completed() + count
    deadline = time.monotonic() + timeout_s
    while job.completed() < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} batches not completed within {timeout_s:.0f}s")
        time.sleep(0.05)


def _phase(  # noqa: PLR0917 - the phase's settings
    job: _Job, mode: str, warmup: int, batches: int, cpu: ProcessCpu, timeout_s: float
) -> dict[str, Any]:
    groups = job.groups
    groups.set_fixed(1 if mode == "g1" else None)
    _wait_batches(job, warmup, timeout_s)
    groups.reset_totals()
    before = cpu.sample()
    _wait_batches(job, batches, timeout_s)
    spent = per_batch_ms(before, cpu.sample(), batches)
    totals = groups.totals
    measured = max(1, totals.batches)
    return {
        "mode": mode,
        "coordination_ms_per_batch": round(totals.coordination_ms_per_batch, 3),
        "batch_ms": statistics.median(job.durations_ms(batches)),
        "points_per_batch": round(totals.points / measured, 3),
        "group_at_end": groups.group,
        "cpu_ms_per_batch": {k: spent[k] for k in ("driver_python", "agent") if k in spent},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _summary(phases: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """Medians per mode, the ratio tuned / g1 overall and per round (pure: tested)."""

    def median(mode: str, key: str) -> float:
        return float(statistics.median(p[key] for p in phases if p["mode"] == mode))

    by_round = [
        {p["mode"]: p["coordination_ms_per_batch"] for p in phases if p["round"] == r}
        for r in range(rounds)
    ]
    g1 = median("g1", "coordination_ms_per_batch")
    tuned = median("tuned", "coordination_ms_per_batch")
    return {
        "g1": {
            "coordination_ms_per_batch": g1,
            "batch_ms": median("g1", "batch_ms"),
            "points_per_batch": median("g1", "points_per_batch"),
        },
        "tuned": {
            "coordination_ms_per_batch": tuned,
            "batch_ms": median("tuned", "batch_ms"),
            "points_per_batch": median("tuned", "points_per_batch"),
            "groups_at_end": [p["group_at_end"] for p in phases if p["mode"] == "tuned"],
        },
        "ratio": round(tuned / g1, 3) if g1 else None,
        "pair_ratios": [round(r["tuned"] / r["g1"], 3) if r.get("g1") else None for r in by_round],
    }


def run_coordination_bench(
    *,
    bins: int = 16,
    rows_per_batch: int = 1_000,
    customers: int = 200,
    batches: int = 16,
    warmup: int = 4,
    rounds: int = 4,
    warmup_rounds: int = 1,
    spark: Any = None,  # a session to run on (the smoke test); None: a standalone cluster
    workdir: Path | None = None,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    from swivel.api.manifests import parse_manifest
    from swivel.api.streamjob import StreamJob
    from swivel.jobs.migration.cluster import LocalCluster

    root = workdir or Path(tempfile.mkdtemp(prefix="swivel-bench-coordination-"))
    manifest = parse_manifest(overhead_job(bins, rows_per_batch, customers), StreamJob)
    cluster = None if spark is not None else LocalCluster(workers=1, root=root / "cluster")
    began = time.monotonic()
    session, job = spark, None
    try:
        if cluster is not None:
            cluster.start()
            session = cluster.session(
                executors=2,
                bins=bins,
                app_name="swivel-bench-coordination",
                conf={
                    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
                    "spark.python.worker.reuse": "true",
                },
            )
        job = _Job(session, manifest, root / "job")
        job.start()
        cpu = ProcessCpu(cluster.pids() if cluster is not None else [], job.agent_pid)
        _wait_batches(job, 1, timeout_s)  # the first batch starts the Python workers
        for _ in range(warmup_rounds):  # not recorded: the JVMs' JIT settles first
            for mode in MODES:
                _phase(job, mode, warmup, batches, cpu, timeout_s)
        phases = []
        for round_index in range(rounds):
            order = MODES if round_index % 2 == 0 else MODES[::-1]  # ABBA
            for mode in order:
                phase = _phase(job, mode, warmup, batches, cpu, timeout_s)
                phases.append({"round": round_index, **phase})
        return {
            **_summary(phases, rounds),
            "group_config": _config(job.groups),
            "phases": phases,
            "setup": {
                "bins": bins,
                "rows_per_batch": rows_per_batch,
                "customers": customers,
                "cluster": "standalone, 2 executors" if cluster is not None else "given session",
                "rounds": rounds,
                "warmup_rounds": warmup_rounds,
                "batches_per_phase": batches,
                "warmup_batches": warmup,
                "run_s": round(time.monotonic() - began, 1),
                "load_average_1m": round(os.getloadavg()[0], 2),
            },
        }
    finally:
        if job is not None:
            job.close()
        if cluster is not None:
            if session is not None:
                session.stop()
            cluster.stop()


def _config(groups: Any) -> dict[str, Any]:
    config = groups.config
    return {
        "overhead_band": [config.lower_overhead, config.upper_overhead],
        "increase_factor": config.increase_factor,
        "decrease_step": config.decrease_step,
        "max_group": config.max_group,
    }
