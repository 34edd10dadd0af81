"""The migration and overhead benchmarks (`swivel bench migration`, `swivel bench overhead`).

Both start their own local standalone cluster (master + workers, 2 executors of 1 core and
1 GiB) and run the keyed workload of `workload.py`.

Migration (Megaphone §5, Fig. 1): one query; after a steady phase, half the bins of one
executor move to the other with each strategy in turn -- all-at-once, fluid, batched --
alternating direction so every strategy moves the same number of bins, each starting
from a settled query. Recorded per strategy: the worst batch duration (triggerExecution)
from the first batch that runs moved bins to the last one, the migration's
duration (boundary of its first step to the batch in which its last move was verified),
and a latency timeline PNG.

The overhead benchmark (`swivel bench overhead`) is in `runtime_overhead.py`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from swivel.controllers.assignments import bins_by_executor, rebalance_for_executors
from swivel.jobs.migration.cluster import LocalCluster
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.migration.migrations import Migration
from swivel_tools.bench.workload import KeyedWorkload

STRATEGIES = ("all-at-once", "fluid", "batched")


def _durations(query: Any, first: int, last: int) -> list[tuple[int, float, float]]:
    """(batch id, duration ms, completion time) for batches first..last."""
    out = []
    for progress in query.recentProgress:
        batch = int(progress["batchId"])
        if first <= batch <= last:
            at = _epoch(progress["timestamp"]) + progress["durationMs"]["triggerExecution"] / 1e3
            out.append((batch, float(progress["durationMs"]["triggerExecution"]), at))
    return sorted(out)


def _reload_figures(mover: BinMover, migration: Migration) -> dict[str, Any]:
    """Moved bins' task times (each includes its reload on the new executor) and the most
    reload work one batch carried (their sum per batch)."""
    per_batch: dict[int, float] = {}
    reloads: list[float] = []
    for outcome in migration.outcomes.values():
        record = mover.batches.get(outcome.verified_in_batch or -1)
        if record is None:
            continue
        task_ms = record.task_ms.get(outcome.move.bin, 0.0)
        reloads.append(task_ms)
        per_batch[record.batch_id] = per_batch.get(record.batch_id, 0.0) + task_ms
    return {
        "max_moved_task_ms_per_batch": max(per_batch.values(), default=0.0),
        "moved_bin_task_ms": {
            "max": max(reloads, default=0.0),
            "median": statistics.median(reloads) if reloads else 0.0,
        },
    }


def _epoch(timestamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _session_conf() -> dict[str, str]:
    return {"spark.sql.streaming.numRecentProgressUpdates": "2000"}


HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def migration_conf(executor_memory_gb: int) -> dict[str, str]:
    """Session settings of the migration benchmark (docs/migration.md, "Setup").

    - The HDFS-backed store keeps a bin's rows in its executor's heap: a batch on the bin's
      own executor touches only the rows it updates, a batch on a new executor first
      reads and deserialises all of the bin's files (the reload).
    - No snapshots during the run (`minDeltasForSnapshot` out of reach): maintenance then
      writes nothing, so no snapshot of a big bin burns a core next to a migration step;
      a reload replays the bin's delta files (the load batches' big ones, then small ones).
    - Maintenance every 2 s only unloads the bins an executor no longer serves, so moving a
      bin back later is a real reload, not a cache hit.
    - `spark.memory.fraction` 0.3: the state maps live outside Spark's unified memory.
    - `spark.locality.wait` 30 s for the whole run (below).
    """
    return {
        **_session_conf(),
        "spark.executor.memory": f"{executor_memory_gb}g",
        "spark.driver.memory": "2g",
        "spark.memory.fraction": "0.3",
        "spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER,
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000000",
        "spark.sql.streaming.stateStore.maintenanceInterval": "2s",
        # Placement is Swivel's: with the default 3 s an idle executor takes a busy one's
        # bins and the placement drifts back after every migration (measured: 48/16 ->
        # 46/18 within three batches), so the strategies would not start alike.
        "spark.locality.wait": "30s",
    }


def stateful_tasks(internals: Any, run_id: str, batch_id: int, bins: int) -> list[dict[str, Any]]:
    """The successful tasks of one batch's stateful stage with their launch times (status
    REST API): partition, executor, launch (epoch s), duration ms."""
    suffix = f"batch = {batch_id}"
    stage_ids: set[int] = set()
    for job in internals._rest("/jobs"):
        if job.get("jobGroup") == run_id and str(job.get("description") or "").rstrip().endswith(
            suffix
        ):
            stage_ids.update(int(s) for s in job.get("stageIds", []))
    for stage_id in sorted(stage_ids, reverse=True):
        for attempt in internals._rest(f"/stages/{stage_id}"):
            if int(attempt.get("numTasks", -1)) != bins or attempt["status"] == "SKIPPED":
                continue
            tasks = internals._rest(
                f"/stages/{stage_id}/{attempt['attemptId']}/taskList?length={bins * 8}"
            )
            return [
                {
                    "bin": int(t["index"]),
                    "executor": str(t["executorId"]),
                    "launch": _epoch(str(t["launchTime"]).replace("GMT", "+00:00")),
                    "ms": float(t.get("duration", 0)),
                }
                for t in tasks
                if t.get("status") == "SUCCESS"
            ]
    return []


def batch_anatomy(
    internals: Any, run_id: str, batch_id: int, bins: int, moved: set[int]
) -> dict[str, Any]:
    """Where one batch's stateful stage spent its time, per executor: tasks, busy ms (sum of
    task durations), span ms (first launch to last end), and the tasks of the bins that
    moved in this batch (`moved`: their first batch on the new executor, reload included).
    An executor of 1 core runs its tasks one after another, so its busy time is its share
    of the batch."""
    tasks = stateful_tasks(internals, run_id, batch_id, bins)
    out: dict[str, Any] = {}
    for executor in sorted({t["executor"] for t in tasks}):
        own = [t for t in tasks if t["executor"] == executor]
        moving = [t["ms"] for t in own if t["bin"] in moved]
        others = [t["ms"] for t in own if t["bin"] not in moved]
        start = min(t["launch"] for t in own)
        end = max(t["launch"] + t["ms"] / 1e3 for t in own)
        out[executor] = {
            "tasks": len(own),
            "busy_ms": round(sum(t["ms"] for t in own)),
            "span_ms": round((end - start) * 1e3),
            "moved_in_bins": len(moving),
            "moved_in_busy_ms": round(sum(moving)),
            "moved_in_task_ms_median": statistics.median(moving) if moving else 0.0,
            "other_task_ms_median": statistics.median(others) if others else 0.0,
        }
    return out


def run_migration_bench(  # noqa: PLR0915 (one scripted run, top to bottom)
    *,
    bins: int = 64,
    keys: int = 1_000_000,
    payload_bytes: int = 3_000,
    rows_per_batch: int = 2_000,
    batch_size: int = 1,
    gap_batches: int = 0,
    steady_batches: int = 10,
    load_batches: int = 8,
    executor_memory_gb: int = 5,
    plot_dir: Path | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    root = workdir or Path(tempfile.mkdtemp(prefix="swivel-bench-migration-"))
    began = time.monotonic()
    # one worker hosts both 1-core executors (docs/migration.md, "The local cluster")
    cluster = LocalCluster(
        workers=1, root=root / "cluster", worker_memory=f"{2 * executor_memory_gb + 1}g"
    )
    cluster.start()
    conf = migration_conf(executor_memory_gb)
    spark = None
    try:
        spark = cluster.session(
            executors=2, bins=bins, app_name="swivel-bench-migration", conf=conf
        )
        workload = KeyedWorkload(
            spark,
            root / "job",
            bins,
            keys,
            payload_bytes,
            rows_per_batch=rows_per_batch,
            load_batches=load_batches,
            random_payload=True,
        )
        steps = -(-(bins // 4) // batch_size) * (1 + gap_batches)
        workload.write_inputs(load_batches + 30 + steady_batches + 3 * (steps + 30))
        mover = BinMover(spark, bins)
        query = workload.start(boundary=mover.wrap)
        workload.feed(ahead=12)  # never runs dry; idle while the written files last
        mover.attach(query)
        run_id = str(query.runId)
        workload.wait_for_batch(load_batches + 1, timeout=900)
        loaded_s = time.monotonic() - began

        def settle(migration: Migration) -> int:
            mover.wait(migration, timeout=900)
            if migration.landed_elsewhere:
                raise RuntimeError(f"moves did not land: {migration.to_dict()}")
            last = max(
                (o.verified_in_batch or 0 for o in migration.outcomes.values()),
                default=workload.batches_done(),
            )
            workload.wait_for_batch(last + 2)
            time.sleep(5)  # maintenance rounds: executors unload the bins they left
            workload.wait_for_batch(workload.batches_done() + 2)
            return last

        # Start from an even placement (the first batch places bins by who is free).
        executors = sorted(mover.executors())
        current = mover.current_assignment()
        balanced = rebalance_for_executors(current, executors)
        if balanced != current:
            settle(mover.migrate(balanced, "all-at-once"))
        rows_before = sum(workload.state_rows_per_bin().values())
        start = workload.batches_done() + 2
        workload.wait_for_batch(start + steady_batches - 1)
        steady = [d for _, d, _ in _durations(query, start, start + steady_batches - 1)]
        steady_p50 = statistics.median(steady)
        original = mover.current_assignment()
        owned = bins_by_executor(original)
        giver, taker = sorted(owned, key=lambda e: (-len(owned[e]), e))
        moving = owned[giver][: len(owned[giver]) // 2]
        moved_placement = {**original, **{b: taker for b in moving}}
        results: dict[str, Any] = {}
        timelines: dict[str, list[tuple[int, float, float]]] = {}
        for strategy in STRATEGIES:  # each from the same even, settled placement
            migration = mover.migrate(
                moved_placement, strategy, batch_size=batch_size, gap_batches=gap_batches
            )
            mover.wait(migration, timeout=900)
            if migration.landed_elsewhere:
                raise RuntimeError(f"{strategy}: moves did not land: {migration.to_dict()}")
            first = migration.first_batch or 0
            last_move = max(o.verified_in_batch or first for o in migration.outcomes.values())
            workload.wait_for_batch(last_move + 3)
            window = _durations(query, first, last_move)  # the batches that ran moved bins
            timelines[strategy] = _durations(query, first - 3, last_move + 3)
            worst = max(window, key=lambda w: w[1])
            moved_in = {  # the bins whose first batch on the new executor was the worst one
                o.move.bin for o in migration.outcomes.values() if o.verified_in_batch == worst[0]
            }
            results[strategy] = {
                "max_batch_ms": worst[1],
                **_reload_figures(mover, migration),
                "duration_s": round(window[-1][2] - (window[0][2] - window[0][1] / 1e3), 3),
                "moved_bins": migration.moved,
                "steps": migration.plan.step_count,
                "batches": [first, last_move],
                "worst_batch": {
                    "batch": worst[0],
                    "stateful_stage": batch_anatomy(
                        mover.internals, run_id, worst[0], bins, moved_in
                    ),
                },
            }
            # back to the even placement (not measured), then let maintenance unload
            settle(mover.migrate(original, "all-at-once"))
        workload.stop()
        rows_after = sum(workload.state_rows_per_bin().values())
        mismatched = workload.count_mismatches(workload.processed_files())
        report: dict[str, Any] = {
            "steady_batch_ms": {"p50": steady_p50, "max": max(steady), "samples": len(steady)},
            "strategies": results,
            "state_rows": {"before": rows_before, "after": rows_after},
            "counts_match_reference": mismatched == 0,
            "ratios": {
                "batched_over_all_at_once": round(
                    results["batched"]["max_batch_ms"] / results["all-at-once"]["max_batch_ms"], 3
                ),
                "batched_over_steady": round(results["batched"]["max_batch_ms"] / steady_p50, 3),
                "all_at_once_over_steady": round(
                    results["all-at-once"]["max_batch_ms"] / steady_p50, 3
                ),
            },
            "goals": {"batched_over_all_at_once": 0.2, "batched_over_steady": 2.0},
            "setup": {
                "bins": bins,
                "executors": 2,
                "executor_cores": 1,
                "executor_memory_gb": executor_memory_gb,
                "state_store": "HDFSBackedStateStoreProvider, no snapshots during the run",
                "payload": "random letters (incompressible)",
                "keys": keys,
                "payload_bytes": payload_bytes,
                "state_mb_per_bin": round(keys * payload_bytes / bins / 2**20, 2),
                "load_batches": load_batches,
                "rows_per_batch": rows_per_batch,
                "batch_size": batch_size,
                "gap_batches": gap_batches,
                "moved_bins": len(moving),
                "from": giver,
                "to": taker,
                "load_s": round(loaded_s, 1),
                "run_s": round(time.monotonic() - began, 1),
                "load_average_1m": round(os.getloadavg()[0], 2),
            },
        }
        if plot_dir is not None:
            windows = {name: tuple(r["batches"]) for name, r in results.items()}
            report["plots"] = plot_timelines(timelines, steady_p50, plot_dir, windows)
        mover.close()
        return report
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()


def plot_timelines(
    timelines: dict[str, list[tuple[int, float, float]]],
    steady_ms: float,
    folder: Path,
    windows: dict[str, tuple[int, ...]] | None = None,
) -> list[str]:
    """One PNG per strategy: batch duration against completion time (Megaphone Fig. 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    top = max((d for points in timelines.values() for _, d, _ in points), default=1.0)
    for strategy, points in timelines.items():
        if not points:
            continue
        t0 = points[0][2]
        figure, axes = plt.subplots(figsize=(6, 3))
        axes.plot([p[2] - t0 for p in points], [p[1] for p in points], marker="o")
        axes.axhline(steady_ms, linestyle="--", color="grey", label="steady p50")
        first, last = (windows or {}).get(strategy, (-1, -1))
        moving = [p for p in points if first <= p[0] <= last]
        if moving:  # from the start of the first migration batch to the end of the last
            start = min(p[2] - p[1] / 1e3 for p in moving) - t0
            axes.axvspan(start, max(p[2] for p in moving) - t0, alpha=0.15, label="migration")
        axes.set_ylim(0, top * 1.1)
        axes.set_xlabel("time (s)")
        axes.set_ylabel("batch duration (ms)")
        axes.set_title(f"bin migration: {strategy}")
        axes.legend()
        figure.tight_layout()
        path = folder / f"migration-{strategy}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        paths.append(str(path))
    return paths
