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

Overhead: the same keyed query with a plain `foreachBatch` and under Swivel (boundary
hook, task-list verifier watching every batch, load metrics collected every 5 batches),
alternated A/B/A/B on fresh checkpoints over the same input, median batch time each.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from swivel.controllers.assignments import bins_by_executor
from swivel.jobs.migration.cluster import LocalCluster
from swivel.jobs.migration.executor import BinMover, Migration
from swivel.jobs.migration.metrics import measure
from swivel.jobs.migration.workload import KeyedWorkload

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


def run_migration_bench(
    *,
    bins: int = 16,
    keys: int = 320_000,
    payload_bytes: int = 1_500,
    rows_per_batch: int = 2_000,
    batch_size: int = 1,
    gap_batches: int = 0,
    steady_batches: int = 8,
    plot_dir: Path | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    root = workdir or Path(tempfile.mkdtemp(prefix="swivel-bench-migration-"))
    cluster = LocalCluster(workers=1, root=root / "cluster")
    cluster.start()
    # 2 GiB executors: the default state store keeps each executor's bins in its heap.
    # Maintenance every 5 s unloads a bin from the executor it left (the coordinator says
    # it is active elsewhere), so moving it back later is a real reload, not a cache hit.
    conf = {
        **_session_conf(),
        "spark.executor.memory": "2g",
        "spark.sql.streaming.stateStore.maintenanceInterval": "5s",
    }
    spark = cluster.session(executors=2, bins=bins, app_name="swivel-bench-migration", conf=conf)
    try:
        workload = KeyedWorkload(
            spark, root / "job", bins, keys, payload_bytes, rows_per_batch=rows_per_batch
        )
        workload.write_inputs(steady_batches + 4 + 3 * (bins + 8) + 20)
        mover = BinMover(spark, bins)
        query = workload.start(boundary=mover.wrap)
        mover.attach(query)
        workload.wait_for_batch(6)  # state built, first snapshots written, JIT warm
        rows_before = sum(workload.state_rows_per_bin().values())
        start = workload.batches_done() + 1
        workload.wait_for_batch(start + steady_batches - 1)
        steady = [d for _, d, _ in _durations(query, start, start + steady_batches - 1)]
        original = mover.current_assignment()
        owned = bins_by_executor(original)
        giver, taker = sorted(owned)
        moving = owned[giver][: len(owned[giver]) // 2]
        moved_placement = {**original, **{b: taker for b in moving}}
        results: dict[str, Any] = {}
        timelines: dict[str, list[tuple[int, float, float]]] = {}
        placements = [moved_placement, original, moved_placement]
        for strategy, target in zip(STRATEGIES, placements, strict=True):
            migration = mover.migrate(
                target, strategy, batch_size=batch_size, gap_batches=gap_batches
            )
            mover.wait(migration, timeout=900)
            if migration.landed_elsewhere:
                raise RuntimeError(f"{strategy}: moves did not land: {migration.to_dict()}")
            first = migration.first_batch or 0
            last_move = max(o.verified_in_batch or first for o in migration.outcomes.values())
            workload.wait_for_batch(last_move + 3)
            time.sleep(6)  # one maintenance round: the executors drop the bins they left
            window = _durations(query, first, last_move)  # the batches that ran moved bins
            context = _durations(query, first - 3, last_move + 3)
            timelines[strategy] = context
            results[strategy] = {
                "max_batch_ms": max(d for _, d, _ in window),
                **_reload_figures(mover, migration),
                "duration_s": round(window[-1][2] - (window[0][2] - window[0][1] / 1e3), 3),
                "moved_bins": migration.moved,
                "steps": migration.plan.step_count,
                "batches": [first, last_move],
            }
        workload.stop()
        rows_after = sum(workload.state_rows_per_bin().values())
        conserved = workload.state_counts() == workload.reference(workload.batches_done() + 1)
        steady_p50 = statistics.median(steady)
        report: dict[str, Any] = {
            "steady_batch_ms": {"p50": steady_p50, "max": max(steady), "samples": len(steady)},
            "strategies": results,
            "state_rows": {"before": rows_before, "after": rows_after},
            "counts_match_reference": conserved,
            "ratios": {
                "batched_over_all_at_once": round(
                    results["batched"]["max_batch_ms"] / results["all-at-once"]["max_batch_ms"], 3
                ),
                "batched_over_steady": round(results["batched"]["max_batch_ms"] / steady_p50, 3),
            },
            "setup": {
                "bins": bins,
                "executors": 2,
                "keys": keys,
                "payload_bytes": payload_bytes,
                "state_mb_per_bin": round(keys * payload_bytes / bins / 2**20, 2),
                "rows_per_batch": rows_per_batch,
                "batch_size": batch_size,
                "gap_batches": gap_batches,
                "moved_bins": len(moving),
                "from": giver,
                "to": taker,
            },
        }
        if plot_dir is not None:
            windows = {name: tuple(r["batches"]) for name, r in results.items()}
            report["plots"] = plot_timelines(timelines, steady_p50, plot_dir, windows)
        mover.close()
        return report
    finally:
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


def run_overhead_bench(
    *,
    bins: int = 16,
    keys: int = 20_000,
    payload_bytes: int = 200,
    rows_per_batch: int = 2_000,
    batches: int = 10,
    rounds: int = 2,
    workdir: Path | None = None,
) -> dict[str, Any]:
    root = workdir or Path(tempfile.mkdtemp(prefix="swivel-bench-overhead-"))
    cluster = LocalCluster(workers=1, root=root / "cluster")
    cluster.start()
    spark = cluster.session(
        executors=2, bins=bins, app_name="swivel-bench-overhead", conf=_session_conf()
    )
    samples: dict[str, list[float]] = {"plain": [], "swivel": []}
    try:
        for round_index in range(rounds):
            for mode in ("plain", "swivel"):
                job = root / f"{mode}-{round_index}"
                workload = KeyedWorkload(
                    spark, job, bins, keys, payload_bytes, rows_per_batch=rows_per_batch
                )
                workload.write_inputs(batches + 4)
                mover = BinMover(spark, bins) if mode == "swivel" else None
                query = workload.start(boundary=mover.wrap if mover else None)
                if mover is not None:
                    mover.attach(query)
                    mover._watch_batches = True  # verify every batch, as during a migration
                workload.wait_for_batch(2)  # the first batches build the state
                first = workload.batches_done() + 1
                next_metrics = first + 5
                while workload.batches_done() < first + batches - 1:
                    if mover is not None and workload.batches_done() >= next_metrics:
                        done = workload.batches_done()
                        measure(mover.internals, query, bins, range(done - 4, done + 1))
                        next_metrics += 5
                    time.sleep(0.05)
                samples[mode] += [d for _, d, _ in _durations(query, first, first + batches - 1)]
                workload.stop()
                if mover is not None:
                    mover.close()
        plain, swivel = statistics.median(samples["plain"]), statistics.median(samples["swivel"])
        return {
            "plain_batch_ms": plain,
            "swivel_batch_ms": swivel,
            "ratio": round(swivel / plain, 3),
            "samples": {k: len(v) for k, v in samples.items()},
            "setup": {"bins": bins, "executors": 2, "rounds": rounds, "batches": batches},
        }
    finally:
        spark.stop()
        cluster.stop()
