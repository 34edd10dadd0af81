"""What the application's status REST API says: its executors and which executor ran each
task of a batch (`/api/v1/applications/...`, needs `spark.ui.enabled`).

A public API, unlike the private ones `SparkInternals` wraps (jobs/spark_internals.py, which
mixes this in), so it is kept apart: a Spark upgrade that changes the private calls leaves
this file alone. Used by the bin mover (where a bin ran, which executors are live), the
policies' metrics and the migration bench.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from swivel.jobs.control.connection import get_json


@dataclass(frozen=True)
class TaskRun:
    """One task of a stage: which executor ran partition `partition`."""

    stage_id: int
    partition: int
    executor: str
    locality: str
    duration_ms: float
    status: str
    records: int = 0  # shuffle records read: the bin's input in this batch
    run_time_ms: float = 0.0  # executor run time (busy)


@dataclass(frozen=True)
class ExecutorInfo:
    id: str
    host: str
    active: bool
    cores: int
    total_duration_ms: float  # task time so far (busy)
    memory_used: int
    max_memory: int
    added_at: str | None


class SparkStatus:
    """Reads the status REST API of `sc`'s application (a PySpark SparkContext)."""

    sc: Any

    def executor_ids(self, timeout: float = 10.0) -> list[str]:
        """Registered, active executors (not the driver), from the status REST API."""
        return [e.id for e in self.executors(timeout) if e.active]

    def wait_for_executors(self, count: int, timeout: float = 60.0) -> list[str]:
        """Until exactly `count` executors are active, or TimeoutError after `timeout` s.

        A poll that fails counts as "not yet": while the driver and executors start, the
        UI's REST API can take longer than its 10 s to answer on a busy machine, and a
        starting UI can answer 200 with no body (as the master's does: `alive_workers`)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                ids = self.executor_ids(timeout=min(10.0, max(1.0, left)))
            except (OSError, json.JSONDecodeError) as error:
                seen = f"the status API did not answer ({str(error) or type(error).__name__})"
            else:
                if len(ids) == count:
                    return sorted(ids, key=_id_order)
                seen = f"{len(ids)} executors"
            if time.monotonic() > deadline:
                raise TimeoutError(f"{seen} after {timeout}s, wanted {count}")
            time.sleep(0.25)

    def _rest(self, path: str, timeout: float = 10.0) -> Any:
        base = self.sc.uiWebUrl
        if not base:
            raise RuntimeError("the Spark UI is disabled: set spark.ui.enabled=true")
        url = f"{base}/api/v1/applications/{self.sc.applicationId}{path}"
        return get_json(url, timeout=timeout)

    def executors(self, timeout: float = 10.0) -> list[ExecutorInfo]:
        out = []
        for item in self._rest("/executors", timeout):
            if item["id"] == "driver":
                continue
            out.append(
                ExecutorInfo(
                    id=str(item["id"]),
                    host=str(item["hostPort"]).rsplit(":", 1)[0],
                    active=bool(item.get("isActive", True)),
                    cores=int(item.get("totalCores", 0)),
                    total_duration_ms=float(item.get("totalDuration", 0)),
                    memory_used=int(item.get("memoryUsed", 0)),
                    max_memory=int(item.get("maxMemory", 0)),
                    added_at=item.get("addTime"),
                )
            )
        return out

    def executor_host(self, executor: str) -> str:
        for info in self.executors():
            if info.id == executor:
                return info.host
        raise KeyError(f"executor {executor!r} is not registered")

    def batch_tasks_all(self, run_id: str, batch_id: int, partitions: int) -> list[TaskRun]:
        """Every task attempt of batch `batch_id`'s stateful stage: the last stage with
        `partitions` tasks among the jobs of that batch (job group = run id, description
        ends with `batch = N`, as MicroBatchExecution sets them)."""
        jobs = [j for j in self._rest("/jobs") if j.get("jobGroup") == run_id]
        return self._stage_tasks(_stages_of_batch(jobs, batch_id), partitions)

    def batches_tasks(
        self, run_id: str, batch_ids: Iterable[int], partitions: int
    ) -> dict[int, list[TaskRun]]:
        """`batch_tasks` for many batches with one read of the job list (a collection phase
        spans many batches). Batches the UI no longer retains (`spark.ui.retainedJobs`,
        1000 by default) have no tasks."""
        jobs = [j for j in self._rest("/jobs") if j.get("jobGroup") == run_id]
        return {
            batch: _successful(self._stage_tasks(_stages_of_batch(jobs, batch), partitions))
            for batch in batch_ids
        }

    def _stage_tasks(self, stage_ids: set[int], partitions: int) -> list[TaskRun]:
        runs: list[TaskRun] = []
        for stage_id in sorted(stage_ids, reverse=True):
            attempts = [
                a
                for a in self._rest(f"/stages/{stage_id}")
                if int(a.get("numTasks", -1)) == partitions and a["status"] != "SKIPPED"
            ]
            for attempt in attempts:
                tasks = self._rest(
                    f"/stages/{stage_id}/{attempt['attemptId']}/taskList?length={partitions * 8}"
                )
                runs.extend(
                    TaskRun(
                        stage_id=stage_id,
                        partition=int(task["index"]),
                        executor=str(task["executorId"]),
                        locality=str(task.get("taskLocality")),
                        duration_ms=float(task.get("duration", 0)),
                        status=str(task.get("status")),
                        records=int(_metric(task, "shuffleReadMetrics", "recordsRead")),
                        run_time_ms=float(_metric(task, "executorRunTime")),
                    )
                    for task in tasks
                )
            if attempts:
                return runs
        return runs

    def batch_tasks(self, run_id: str, batch_id: int, partitions: int) -> list[TaskRun]:
        """The successful task of each partition in batch `batch_id`'s stateful stage."""
        return _successful(self.batch_tasks_all(run_id, batch_id, partitions))

    def served_by(
        self, run_id: str, batch_id: int, partitions: int, timeout: float = 10.0
    ) -> dict[int, str]:
        """Bin -> the executor that ran it in batch `batch_id`. Waits (up to `timeout`) for
        the status store, which the listener bus fills asynchronously."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.batch_tasks(run_id, batch_id, partitions)
            if len(done) == partitions or time.monotonic() > deadline:
                return {t.partition: t.executor for t in done}
            time.sleep(0.1)


def _stages_of_batch(jobs: Iterable[dict[str, Any]], batch_id: int) -> set[int]:
    suffix = f"batch = {batch_id}"
    stage_ids: set[int] = set()
    for job in jobs:
        if str(job.get("description") or "").rstrip().endswith(suffix):
            stage_ids.update(int(s) for s in job.get("stageIds", []))
    return stage_ids


def _successful(runs: Iterable[TaskRun]) -> list[TaskRun]:
    latest = {t.partition: t for t in runs if t.status == "SUCCESS"}
    return [latest[p] for p in sorted(latest)]


def _metric(task: dict[str, Any], *path: str) -> float:
    value: Any = task.get("taskMetrics") or {}
    for key in path:
        value = value.get(key, 0) if isinstance(value, dict) else 0
    return float(value or 0)


def _id_order(executor: str) -> tuple[int, str]:
    return (int(executor), "") if executor.isdigit() else (1 << 30, executor)
