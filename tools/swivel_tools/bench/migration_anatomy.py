"""Where a migration's worst batch spent its time (status REST API task lists), for the
JSON of `swivel bench migration`: per executor, the stateful stage's tasks and the moved
bins' tasks, whose durations include their reload on the new executor; and the task lists
of the batches bins moved into, from which `moved_task_extra_ms` is computed
(`migration_figures.moved_task_extra`)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from swivel.jobs.migration.executor import BinMover
from swivel.jobs.migration.migrations import Migration
from swivel_tools.bench.migration_figures import BatchTime


def reload_figures(mover: BinMover, migration: Migration) -> dict[str, Any]:
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


def moved_in(migration: Migration) -> dict[int, list[int]]:
    """Batch -> the bins that ran on their new executor for the first time in it (the
    batch each move was verified in)."""
    out: dict[int, list[int]] = {}
    for outcome in migration.outcomes.values():
        if outcome.verified_in_batch is not None:
            out.setdefault(outcome.verified_in_batch, []).append(outcome.move.bin)
    return out


def task_times(
    mover: BinMover, run_id: str, batches: Iterable[int], bins: int
) -> dict[int, dict[int, float]]:
    """Batch -> bin -> its stateful-stage task's ms: the mover's own record of the batch
    when it verified one (a plain strategy's window), else the status REST API (read
    after the window, off the batch path)."""
    out: dict[int, dict[int, float]] = {}
    missing = []
    for batch in batches:
        record = mover.batches.get(batch)
        if record is not None and record.task_ms:
            out[batch] = dict(record.task_ms)
        else:
            missing.append(batch)
    if missing:
        for batch, runs in mover.internals.batches_tasks(run_id, missing, bins).items():
            if runs:
                out[batch] = {t.partition: t.duration_ms for t in runs}
    return out


def epoch(timestamp: str) -> float:
    """Seconds since the epoch of a progress timestamp (`...Z`) or a status REST API one
    (`...GMT`)."""
    from datetime import datetime

    utc = str(timestamp).replace("Z", "+00:00").replace("GMT", "+00:00")
    return datetime.fromisoformat(utc).timestamp()


def stateful_tasks(internals: Any, run_id: str, batch_id: int, bins: int) -> list[dict[str, Any]]:
    """The successful tasks of one batch's stateful stage with their launch times (status
    REST API): partition, executor, launch (epoch s), duration ms, and the JVM's garbage
    collection time during the task (a pause stalls every task of the executor)."""
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
                    "launch": epoch(t["launchTime"]),
                    "ms": float(t.get("duration", 0)),
                    "gc_ms": float((t.get("taskMetrics") or {}).get("jvmGcTime", 0)),
                }
                for t in tasks
                if t.get("status") == "SUCCESS"
            ]
    return []


def batch_anatomy(
    internals: Any, run_id: str, batch_id: int, bins: int, moved: set[int]
) -> dict[str, Any]:
    """Where one batch's stateful stage spent its time, per executor: tasks, busy ms (sum of
    task durations), span ms (first launch to last end), and the tasks of the bins in
    `moved` (`moved_in_*`). The bench passes every bin the migration moves, so in a batch
    after a bin's switch its task is on the new executor (its first batch there: the
    reload, if any), and in a batch before its step, on its giver. An executor of 1 core runs its tasks one after another, so its busy time is its share
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
            # a batch where every task is slow: is it the JVM's collector? (the longest
            # collection any task saw, and the tasks' sum, which counts a shared pause twice)
            "gc_ms_max": max((t.get("gc_ms", 0.0) for t in own), default=0.0),
            "gc_ms_sum": round(sum(t.get("gc_ms", 0.0) for t in own)),
        }
    return out


def batch_times(query: Any, first: int, last: int) -> list[BatchTime]:
    """(batch, its `triggerExecution` ms, its end as epoch seconds) of batches `first` to
    `last` still in the query's `recentProgress`, in batch order."""
    out = []
    for progress in query.recentProgress:
        batch = int(progress["batchId"])
        if first <= batch <= last:
            ms = float(progress["durationMs"]["triggerExecution"])
            out.append((batch, ms, epoch(progress["timestamp"]) + ms / 1e3))
    return sorted(out)


def worst_batch_figures(
    internals: Any, query: Any, batch_id: int, bins: int, moved: set[int]
) -> dict[str, Any]:
    """A slow batch taken apart: its stateful stage per executor (the `moved` bins' tasks
    apart) and where the rest of its wall time went; a strategy's worst batch and the
    no-migration run's are read alike."""
    return {
        "batch": batch_id,
        "stateful_stage": batch_anatomy(internals, str(query.runId), batch_id, bins, moved),
        **batch_breakdown(internals, query, batch_id),
    }


def progress_of(query: Any, batch_id: int) -> dict[str, Any] | None:
    """The query's progress report of one batch (None when it has left `recentProgress`)."""
    for progress in query.recentProgress:
        if int(progress["batchId"]) == batch_id:
            return dict(progress)
    return None


def batch_breakdown(internals: Any, query: Any, batch_id: int) -> dict[str, Any]:
    """Where one batch's wall time went outside its stateful stage: Spark's own phases
    (`durationMs`: addBatch includes the sink and the boundary actions Swivel runs in
    foreachBatch) and every Spark job that ran during the batch, of any group (the batch's
    own stages, and the prewarm loads or switches that competed with it for task slots),
    with its start offset from the batch's trigger and its duration."""
    progress = progress_of(query, batch_id)
    if progress is None:
        return {}
    began = epoch(progress["timestamp"])
    phases = {str(k): float(v) for k, v in (progress.get("durationMs") or {}).items()}
    ended = began + phases.get("triggerExecution", 0.0) / 1e3
    jobs = []
    for job in internals._rest("/jobs"):
        submitted = job.get("submissionTime")
        if not submitted:
            continue
        start = epoch(submitted)
        done = job.get("completionTime")
        end = epoch(done) if done else ended
        if end < began or start > ended:
            continue
        jobs.append(
            {
                "description": str(job.get("description") or job.get("name") or "")[:80],
                "start_ms": round((start - began) * 1e3),
                "ms": round((end - start) * 1e3),
                "tasks": int(job.get("numTasks", 0)),
            }
        )
    return {"duration_ms": phases, "jobs": sorted(jobs, key=lambda j: j["start_ms"])}
