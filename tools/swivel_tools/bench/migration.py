"""`swivel bench migration`: Megaphone's effect on a real query (issue 13; Megaphone §5,
Fig. 1 and its scaling figure; docs/migration.md, "Migration benchmark").

One local standalone cluster (master + 1 worker, 2 executors), the keyed workload of
`workload.py` (Spark's streaming aggregation on the HDFS-backed state store), its
checkpoint on local disk or on `throttled://` (a Hadoop FileSystem with a remote store's
per-open latency and per-stream bandwidth for reads, `ThrottledFileSystem.java`). For each
state size of the sweep, a fresh query loads the state, then every strategy makes the same
balanced migration from the same settled placement: each executor gives `swap` of its bins
to the other and takes as many (a swap), so the moves come from every executor and no
executor ends up with more bins than before. After each strategy an unmeasured
all-at-once migration puts the bins back and maintenance unloads them from the takers.

Per strategy: the worst batch in the migration's window, the *excess* over the steady p50
of the same query's batches just before it, the duration, the moved bins and their state
bytes (attributed in-memory bytes, `jobs/migration/state_memory.py`; plus the bytes of
their newest snapshot and later deltas, which is what a reload reads), and what the
throttled storage logged as read in that window. Beside the excess, two diagnostics that
tell the migration from the query's own slow batches (the goal stays the excess): the
excess the query shows with no migration over a window as long as the strategy's
(`steady_window_excess_ms`, from the steady batches before each strategy and a run of
no-migration batches at the end of each size), and the moved-in bins' task time beyond
their batch's other bins (`moved_task_extra_ms`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from swivel.controllers.assignments import rebalance_for_executors
from swivel.jobs import jvm
from swivel.jobs.migration.cluster import LocalCluster
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.migration.migrations import Migration
from swivel.jobs.migration.state_memory import bin_state, read_state_rows
from swivel_tools.bench import migration_figures as figures
from swivel_tools.bench.migration_anatomy import (
    batch_times,
    moved_in,
    reload_figures,
    task_times,
    worst_batch_figures,
)
from swivel_tools.bench.migration_plots import plot_excess, plot_timelines
from swivel_tools.bench.migration_report import (
    bench_report,
    keep_size_result,
    load_average,
    prewarm_figures,
    staggering_figures,
)
from swivel_tools.bench.migration_settings import (
    PREWARMED,
    STEADY_RUN_MARGIN,
    BenchConfig,
    session_conf,
    storage_description,
    strategies_to_run,
)
from swivel_tools.bench.py4j_calls import Py4jCalls
from swivel_tools.bench.thread_cpu import ThreadCpuRecorder, thread_cpu_report
from swivel_tools.bench.workload import KeyedWorkload

__all__ = ["BenchConfig", "run_migration_bench"]


class SizeRun:
    """One state size: a fresh query, its state loaded, every strategy measured on it."""

    def __init__(
        self,
        spark: Any,
        config: BenchConfig,
        keys: int,
        root: Path,
        log: Path | None,
        *,
        cluster_pids: tuple[int, ...] = (),
    ):
        self.spark, self.config, self.keys, self.log = spark, config, keys, log
        self.cluster_pids = cluster_pids
        self.workload = KeyedWorkload(
            spark,
            root,
            config.bins,
            keys,
            config.payload_bytes,
            rows_per_batch=config.rows_per_batch,
            load_batches=config.load_batches,
            random_payload=True,
            checkpoint_uri=figures.checkpoint_uri(config.storage, root / "checkpoint"),
        )
        self.mover = BinMover(spark, config.bins, prewarm_ahead=config.prewarm_ahead)
        self.timelines: dict[str, list[figures.BatchTime]] = {}
        self._spans: dict[str, tuple[int, int]] = {}
        self.windows: dict[str, tuple[int, int]] = {}
        self.steady: list[list[figures.BatchTime]] = []  # runs of no-migration batches

    def start(self) -> None:
        self.workload.write_inputs(self.config.load_batches + self.config.feed_ahead)
        query = self.workload.start(boundary=self.mover.wrap, trigger_ms=self.config.trigger_ms)
        self.workload.feed(ahead=self.config.feed_ahead)
        self.mover.attach(query)
        self.workload.wait_for_batch(self.config.load_batches + 1, timeout=self.config.timeout_s)

    def settle(self, migration: Migration) -> None:
        self.mover.wait(migration, timeout=self.config.timeout_s)
        if migration.landed_elsewhere:
            raise RuntimeError(f"moves did not land: {migration.to_dict()}")
        last = max((o.verified_in_batch or 0 for o in migration.outcomes.values()), default=0)
        self.workload.wait_for_batch(max(last + 2, self.workload.batches_done() + 1))
        time.sleep(self.config.settle_s)  # maintenance: executors unload the bins they left
        self.workload.wait_for_batch(self.workload.batches_done() + 2)

    def state(self) -> dict[int, tuple[int, int]]:
        """Bin -> (rows, attributed bytes) from the store's own figures."""
        operators = read_state_rows(self.spark, self.workload.checkpoint)
        progress = self.workload.query.lastProgress or {}
        return bin_state(progress.get("stateOperators") or [], operators)

    def run(self, strategies: tuple[str, ...], driver_pid: str) -> dict[str, Any]:
        self.start()
        executors = sorted(self.mover.executors())
        current = self.mover.current_assignment()
        balanced = rebalance_for_executors(current, executors)
        if balanced != current:
            self.settle(self.mover.migrate(balanced, "all-at-once"))
        original = self.mover.current_assignment()
        target = figures.swap_placement(original, self.config.per_executor)
        moving = figures.moved_bins(original, target)
        state = self.state()
        moved_bytes = sum(state.get(b, (0, 0))[1] for b in moving)
        # the HDFS store's reload is readable off its file names; RocksDB's names its files
        # inside each snapshot's zip (not parsed here: `storage_reads` has what was read)
        on_disk = (
            figures.reload_bytes_on_disk(self.workload.checkpoint_folder, moving)
            if self.config.state_store == "hdfs"
            else None
        )
        if self.config.warm_up_prewarm and PREWARMED in strategies:
            # not measured: every JVM runs the prewarm's code paths once before the first
            # strategy, so no window holds their first use (class loading, JIT)
            warm_up = self._start_migration(PREWARMED, target)
            self.settle(warm_up)
            if warm_up.prewarm_fallback:
                raise RuntimeError(f"warm-up: moved the plain way: {warm_up.prewarm_fallback}")
            self.settle(self.mover.migrate(original, "all-at-once"))
        results: dict[str, Any] = {}
        for strategy in strategies:
            results[strategy] = self.measure(strategy, original, target, driver_pid)
            results[strategy].update(moved_bytes=moved_bytes, moved_reload_bytes=on_disk)
            self.settle(self.mover.migrate(original, "all-at-once"))  # back, not measured
            first, last = self._spans[strategy]
            self.timelines[strategy] = batch_times(self.workload.query, first, last)
        # every steady batch recorded before a strategy's migration, pooled
        before = [d for run in self.steady for _, d, _ in run]
        steady_run = self.record_steady_run()
        for strategy, result in results.items():
            first, last = self.windows[strategy]
            result["steady_window_excess_ms"] = figures.steady_window_excess(
                self.steady, last - first + 1
            )
        self.workload.stop()
        rows_after = sum(self.workload.state_rows_per_bin().values())
        mismatched = self.workload.count_mismatches(self.workload.processed_files())
        phases = staggering_figures(self.mover.snapshots)
        self.mover.close()
        return {
            "keys": self.keys,
            # the median of all of them (until 2026-11-27: the upper middle of the
            # strategies' own medians, docs/migration.md "The steady batch")
            "steady_p50_ms": figures.steady_p50(before) if before else None,
            "strategies": results,
            "state_rows": {"before": sum(r for r, _ in state.values()), "after": rows_after},
            "state_bytes": sum(b for _, b in state.values()),
            "counts_match_reference": mismatched == 0,
            "moved": {"bins": moving, "from_to": {b: [original[b], target[b]] for b in moving}},
            "steady_run": steady_run,
            "snapshot_phases": phases,
        }

    def record_steady_run(self) -> dict[str, Any]:
        """Record the query with no migration for as many batches as the longest window
        and a margin (or `steady_run_batches`): the strategies' own steady batches (6 each
        by default) are too few for a 16-32-batch window's `steady_window_excess_ms`."""
        cfg = self.config
        longest = max((last - first + 1 for first, last in self.windows.values()), default=0)
        count = cfg.steady_run_batches
        count = longest + STEADY_RUN_MARGIN if count is None else count
        if count <= 0:
            return {"batches": None, "p50_ms": None}
        start = self.workload.batches_done() + 1
        self.workload.wait_for_batch(start + count - 1, timeout=cfg.timeout_s)
        run = batch_times(self.workload.query, start, start + count - 1)
        self.steady.append(run)
        if not run:
            return {"batches": [start, start + count - 1], "p50_ms": None}
        worst = max(run, key=lambda batch: batch[1])[0]
        query = self.workload.query
        return {
            "batches": [start, start + count - 1],
            "p50_ms": figures.steady_p50([d for _, d, _ in run]),
            # every batch's ms: are the query's own slow batches periodic (a state snapshot
            # every `snapshot_every` versions)?
            "batch_ms": [[batch, ms] for batch, ms, _ in run],
            # the slowest batch with no migration, taken apart as a strategy's worst is
            "worst_batch": worst_batch_figures(self.mover.internals, query, worst, cfg.bins, set()),
        }

    def _start_migration(self, strategy: str, target: dict[int, str]) -> Migration:
        """Start `strategy`'s migration to `target`. batched-prewarmed is the product's
        prewarm (`spec.migration.prewarm`): the batched plan, each step's bins loaded on
        their targets before the step switches."""
        prewarm = strategy == PREWARMED
        return self.mover.migrate(
            target,
            "batched" if prewarm else strategy,
            batch_size=self.config.batch_size,
            gap_batches=self.config.gap_batches,
            prewarm=prewarm,
        )

    def _migrate(
        self, strategy: str, target: dict[int, str]
    ) -> tuple[list[figures.BatchTime], float, Migration, int, int]:
        """The steady batches, then the migration until its last move's batch is done:
        (steady batches, the wall time it began, the migration, its window's first and
        last batch)."""
        cfg, workload, query = self.config, self.workload, self.workload.query
        start = workload.batches_done() + 1
        workload.wait_for_batch(start + cfg.steady_batches - 1, timeout=cfg.timeout_s)
        steady_batches = batch_times(query, start, start + cfg.steady_batches - 1)
        self.steady.append(steady_batches)
        began = time.time()
        migration = self._start_migration(strategy, target)
        self.mover.wait(migration, timeout=cfg.timeout_s)
        if migration.landed_elsewhere:
            raise RuntimeError(f"{strategy}: moves did not land: {migration.to_dict()}")
        if strategy == PREWARMED and migration.prewarm_fallback:
            raise RuntimeError(f"{strategy}: moved the plain way: {migration.prewarm_fallback}")
        # the window opens with the batch whose boundary began the migration: the begin (and,
        # for the plain strategies, the first step's re-pointing) runs inside that batch's
        # foreachBatch, so its user waits for them there (first_batch is the one after it)
        first = max((migration.first_batch or 1) - 1, 0)
        last = max(o.verified_in_batch or first for o in migration.outcomes.values())
        workload.wait_for_batch(last, timeout=cfg.timeout_s)
        self._spans[strategy] = (start, last + 3)  # read after the settle: 3 more batches
        return steady_batches, began, migration, first, last

    def measure(
        self, strategy: str, original: dict[int, str], target: dict[int, str], driver_pid: str
    ) -> dict[str, Any]:
        cfg, query = self.config, self.workload.query
        prewarm = strategy == PREWARMED
        recorder = (
            ThreadCpuRecorder(self.cluster_pids, cfg.thread_cpu_interval_s)
            if cfg.thread_cpu
            else None
        )
        calls = Py4jCalls() if cfg.py4j_calls else None
        with recorder or contextlib.nullcontext(), calls or contextlib.nullcontext():
            # both stopped however the migration ends
            steady_batches, began, migration, first, last = self._migrate(strategy, target)
        steady = [d for _, d, _ in steady_batches]
        moved, steps = migration.moved, migration.plan.step_count
        extra = reload_figures(self.mover, migration)
        # per step, what its boundary added to the switching batch (the switch's own latency)
        extra["boundary_ms"] = migration.boundary_ms
        extra["boundary_lock_ms"] = migration.boundary_lock_ms
        if prewarm:
            extra |= prewarm_figures(migration)
        moved_into = moved_in(migration)
        started_at: float | None = None
        window = batch_times(query, first, last)
        spike = figures.excess(window, steady)
        if calls is not None:  # over its steady batches and its migration
            extra["py4j_calls"] = calls.report()
        if recorder is not None:
            extra["thread_cpu"] = thread_cpu_report(
                recorder, steady_batches, window, spike.worst_batch
            )
        self.windows[strategy] = (first, last)
        reads: dict[str, Any] = {}
        if self.log is not None and self.log.exists():
            parsed = figures.parse_reads(self.log.read_text().splitlines())
            reads = figures.summarise_reads(parsed, driver_pid, (began, window[-1][2]))
        return {
            "max_batch_ms": spike.max_batch_ms,
            "excess_ms": round(spike.excess_ms, 1),
            "steady_p50_ms": spike.steady_p50_ms,
            # the prewarm goal's figure: in steady batches of the baseline the excess is from
            "excess_over_steady": spike.excess_over_steady,
            # as before the window took in the beginning batch: from the next batch's start
            "duration_s": figures.window_duration_s(
                [w for w in window if w[0] > first] or window, started_at
            ),
            "moved_bins": moved,
            "steps": steps,
            "batches": [first, last],
            # each window batch's duration, from `first` on, and the batches whose boundary
            # switched a step: where in the window the worst batch fell, and what it carried
            "window_ms": [ms for _, ms, _ in window],
            "switch_batches": [b for b in migration.step_batches if b is not None],
            "worst_batch": worst_batch_figures(
                self.mover.internals,
                query,
                spike.worst_batch,
                cfg.bins,
                {b for b in original if original[b] != target[b]},
            ),
            "storage_reads": reads,
            "moved_task_extra_ms": figures.moved_task_extra(
                task_times(self.mover, str(query.runId), sorted(moved_into), cfg.bins), moved_into
            ),
            **extra,
        }


def _driver_pid(spark: Any) -> str:
    jvm_ = spark.sparkContext._jvm
    return str(jvm_.java.lang.management.ManagementFactory.getRuntimeMXBean().getName()).split("@")[
        0
    ]


def run_migration_bench(
    config: BenchConfig, *, plot_dir: Path | None = None, workdir: Path | None = None
) -> dict[str, Any]:
    root = workdir or Path(tempfile.mkdtemp(prefix="swivel-bench-migration-"))
    finished = False
    loads = [load_average("start")]
    began = time.monotonic()
    log = root / "throttled-reads.tsv" if config.storage == "throttled" else None
    jar = jvm.jar_path()
    conf = session_conf(config, log, str(jar) if jar else None)
    cluster = LocalCluster(
        workers=1,
        root=root / "cluster",
        worker_cores=2 * config.executor_cores,
        worker_memory=f"{2 * config.executor_memory_gb + 1}g",
    )
    cluster.start()
    spark = None
    try:
        spark = cluster.session(
            executors=2, bins=config.bins, app_name="swivel-bench-migration", conf=conf
        )
        strategies, prewarm_reason = strategies_to_run(spark, config)
        driver_pid = _driver_pid(spark)
        sweep: list[dict[str, Any]] = []
        runs: dict[int, SizeRun] = {}
        for keys in config.sweep_keys:
            loads.append(load_average(f"keys={keys} start"))
            size = SizeRun(
                spark, config, keys, root / f"keys-{keys}", log, cluster_pids=tuple(cluster.pids())
            )
            sweep.append(size.run(strategies, driver_pid))
            runs[keys] = size
            if prewarm_reason:
                sweep[-1]["strategies"][PREWARMED] = None
            keep_size_result(root, sweep[-1])
            # a size's checkpoint is ~10 snapshots of its whole state (38 GB at 1.28 M keys):
            # kept only in a --workdir the caller chose
            done = root / f"keys-{keys}"
            shutil.rmtree(done / "input" if workdir else done, ignore_errors=True)
        loads.append(load_average("end"))
        chosen_keys = config.chosen_keys or max(config.sweep_keys)
        chosen = next(s for s in sweep if s["keys"] == chosen_keys)
        report = bench_report(
            config,
            sweep,
            chosen,
            loads=loads,
            storage=storage_description(config, log),
            run_s=round(time.monotonic() - began, 1),
            prewarm_reason=prewarm_reason,
        )
        if plot_dir is not None:
            run = runs[chosen_keys]
            paths = plot_timelines(run.timelines, chosen["steady_p50_ms"], plot_dir, run.windows)
            excess_plot = plot_excess(report["sweep"], plot_dir)
            report["plots"] = paths + ([excess_plot] if excess_plot else [])
        finished = True
        return report
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        if workdir is None and finished:  # ours, and the report holds what it measured;
            shutil.rmtree(root, ignore_errors=True)  # after a failure: the sizes measured
