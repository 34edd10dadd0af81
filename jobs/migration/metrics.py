"""Metrics for the bin policies, measured on the running query.

- Per bin: records processed (shuffle records read by the bin's task) and task time, from
  the task lists of recent batches; state rows per bin from the `statestore` reader and
  state bytes estimated from the query progress (`memoryUsedBytes / numRowsTotal`).
- Per executor: busy time (its tasks' run time over the window, per core), idle = window -
  busy, state bytes held (its bins), JVM storage memory from the REST executors endpoint.

`collect_loads` turns them into Flux's `ExecutorLoad` / `BinLoad`; `to_prometheus` renders
them in the Prometheus text format; `loads_document` is the wire form the driver posts to
the agent (`POST /v1/driver/loads`), which serves it at `GET /v1/loads` and as gauges in
its `/metrics` (docs/control-protocol.md, "Loads").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swivel.api.loads import BinMeasurement, ExecutorMeasurement, LoadMeasurement
from swivel.controllers.flux import BinLoad, ExecutorLoad
from swivel.jobs.spark_internals import SparkInternals


@dataclass
class BinStats:
    bin: int
    executor: str
    records: int = 0
    task_ms: float = 0.0
    state_rows: int = 0
    state_bytes: int = 0


@dataclass
class ExecutorStats:
    executor: str
    busy_s: float = 0.0
    window_s: float = 0.0
    state_bytes: int = 0
    jvm_memory_used: int = 0
    jvm_memory_max: int = 0
    cores: int = 1

    @property
    def idle_s(self) -> float:
        return max(0.0, self.window_s - self.busy_s)


@dataclass
class LoadSnapshot:
    batches: list[int]
    window_s: float
    bins: dict[int, BinStats] = field(default_factory=dict)
    executors: dict[str, ExecutorStats] = field(default_factory=dict)
    state_error: str | None = None  # why state rows/bytes are missing, if they are

    def to_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "windowS": self.window_s,
            "bins": [vars(b) for b in self.bins.values()],
            "executors": [{**vars(e), "idle_s": e.idle_s} for e in self.executors.values()],
        }


def measure(
    internals: SparkInternals,
    query: Any,
    bins: int,
    batch_ids: Iterable[int],
    *,
    checkpoint: str | None = None,
) -> LoadSnapshot:
    """Per-bin and per-executor load over `batch_ids` (completed batches of `query`)."""
    batches = sorted(batch_ids)
    durations = _batch_durations(query, batches)
    window_s = sum(durations.values()) / 1000.0
    snapshot = LoadSnapshot(batches, window_s)
    run_id = str(query.runId)
    for batch in batches:
        for task in internals.batch_tasks(run_id, batch, bins):
            stats = snapshot.bins.setdefault(
                task.partition, BinStats(task.partition, task.executor)
            )
            stats.executor = task.executor  # the latest batch's placement wins
            stats.records += task.records
            stats.task_ms += task.run_time_ms
            executor = snapshot.executors.setdefault(task.executor, ExecutorStats(task.executor))
            executor.busy_s += task.run_time_ms / 1000.0
    infos = {e.id: e for e in internals.executors() if e.active}
    for executor_id, info in infos.items():
        held = snapshot.executors.setdefault(executor_id, ExecutorStats(executor_id))
        held.cores = max(1, info.cores)
        held.busy_s /= held.cores
        held.window_s = window_s
        held.jvm_memory_used, held.jvm_memory_max = info.memory_used, info.max_memory
    snapshot.executors = {e: s for e, s in snapshot.executors.items() if e in infos}
    if checkpoint is not None:
        try:
            _add_state(internals, query, checkpoint, snapshot)
        except Exception as error:  # state sizes are an extra: the busy times still count
            snapshot.state_error = str(error).splitlines()[0][:300]
    return snapshot


def _batch_durations(query: Any, batches: list[int]) -> dict[int, float]:
    wanted = set(batches)
    return {
        int(p["batchId"]): float(p["durationMs"].get("triggerExecution", 0))
        for p in query.recentProgress
        if int(p["batchId"]) in wanted
    }


def _add_state(
    internals: SparkInternals, query: Any, checkpoint: str, snapshot: LoadSnapshot
) -> None:
    apply_state_rows(query, state_rows_per_bin(internals.spark, checkpoint), snapshot)


def apply_state_rows(query: Any, rows: Mapping[int, int], snapshot: LoadSnapshot) -> None:
    """Per-bin state rows (`state_rows_per_bin`, maybe from an earlier measurement: a bin's
    rows do not move with its placement) into `snapshot`: bytes from the latest progress'
    bytes per row, summed per executor of the snapshot's placement."""
    progress = query.lastProgress or {}
    operators = progress.get("stateOperators") or [{}]
    total_rows = sum(int(op.get("numRowsTotal", 0)) for op in operators)
    total_bytes = sum(int(op.get("memoryUsedBytes", 0)) for op in operators)
    per_row = total_bytes / total_rows if total_rows else 0.0
    for bin_id, count in rows.items():
        stats = snapshot.bins.get(bin_id)
        if stats is None:
            continue
        stats.state_rows = count
        stats.state_bytes = int(count * per_row)
        snapshot.executors.setdefault(stats.executor, ExecutorStats(stats.executor))
        snapshot.executors[stats.executor].state_bytes += stats.state_bytes


def state_rows_per_bin(spark: Any, checkpoint: str) -> dict[int, int]:
    """State rows per partition (bin) over every stateful operator of the checkpoint.

    The `statestore` reader reads one operator's default store; TransformWithState
    operators need one read per state variable (`stateVarName`), which the
    `state-metadata` reader lists in `operatorProperties`."""
    reader = spark.read
    rows: dict[int, int] = {}

    def add(frame: Any) -> None:
        for row in frame.groupBy("partition_id").count().collect():
            rows[int(row[0])] = rows.get(int(row[0]), 0) + int(row[1])

    metadata = reader.format("state-metadata").load(checkpoint).collect()
    for operator in metadata:
        properties = json.loads(operator["operatorProperties"] or "{}")
        variables = [v.get("stateName") for v in properties.get("stateVariables") or []]
        base = reader.format("statestore").option("operatorId", int(operator["operatorId"]))
        if not variables:
            add(base.option("storeName", operator["stateStoreName"]).load(checkpoint))
        for name in variables:
            add(base.option("stateVarName", name).load(checkpoint))
    if not metadata:  # a checkpoint written before operator metadata existed
        add(reader.format("statestore").load(checkpoint))
    return rows


def collect_loads(
    snapshot: LoadSnapshot, memory_limit_bytes: int | None = None
) -> tuple[list[ExecutorLoad], list[BinLoad], dict[int, str]]:
    """Flux's inputs from a snapshot: executor loads, bin loads and the placement."""
    window = snapshot.window_s or 1e-3
    executors = [
        ExecutorLoad(
            executor=e.executor,
            busy_s=min(e.busy_s, window),
            window_s=window,
            memory_bytes=e.state_bytes,
            memory_limit_bytes=memory_limit_bytes,
        )
        for e in snapshot.executors.values()
    ]
    bins = [BinLoad(b.bin, b.executor, b.records, b.state_bytes) for b in snapshot.bins.values()]
    assignment = {b.bin: b.executor for b in snapshot.bins.values()}
    return executors, bins, assignment


def to_prometheus(snapshot: LoadSnapshot, job: str = "job") -> str:
    """The snapshot as Prometheus text exposition (gauges labelled by job/bin/executor)."""
    lines = [
        "# TYPE swivel_bin_records gauge",
        "# TYPE swivel_bin_state_rows gauge",
        "# TYPE swivel_bin_state_bytes gauge",
        "# TYPE swivel_executor_busy_seconds gauge",
        "# TYPE swivel_executor_idle_seconds gauge",
        "# TYPE swivel_executor_state_bytes gauge",
        "# TYPE swivel_executor_memory_used_bytes gauge",
    ]
    for b in snapshot.bins.values():
        labels = f'job="{job}",bin="{b.bin}",executor="{b.executor}"'
        lines += [
            f"swivel_bin_records{{{labels}}} {b.records}",
            f"swivel_bin_state_rows{{{labels}}} {b.state_rows}",
            f"swivel_bin_state_bytes{{{labels}}} {b.state_bytes}",
        ]
    for e in snapshot.executors.values():
        labels = f'job="{job}",executor="{e.executor}"'
        lines += [
            f"swivel_executor_busy_seconds{{{labels}}} {e.busy_s:.3f}",
            f"swivel_executor_idle_seconds{{{labels}}} {e.idle_s:.3f}",
            f"swivel_executor_state_bytes{{{labels}}} {e.state_bytes}",
            f"swivel_executor_memory_used_bytes{{{labels}}} {e.jvm_memory_used}",
        ]
    return "\n".join(lines) + "\n"


def placement_gauges(assignment: Mapping[int, str]) -> dict[str, int]:
    """Bins per executor (the StreamJob status shows it)."""
    counts: dict[str, int] = {}
    for executor in assignment.values():
        counts[executor] = counts.get(executor, 0) + 1
    return counts


def loads_document(
    snapshot: LoadSnapshot,
    *,
    measured_at: float,
    coordination_s: float = 0.0,
    processing_s: float = 0.0,
    interval_s: float | None = None,
    memory_limit_bytes: int | None = None,
) -> dict[str, Any]:
    """The body of `POST /v1/driver/loads` (a `LoadMeasurement`): one collection phase.

    `coordination_s` / `processing_s` are Drizzle's inputs over the same period (time the
    driver spent coordinating - measuring, stepping migrations at boundaries - and time
    the batches took); `interval_s` is the coordination interval in force."""
    window = snapshot.window_s
    executors = [
        ExecutorMeasurement(
            executor=e.executor,
            busy_seconds=round(min(e.busy_s, window) if window else e.busy_s, 6),
            window_seconds=round(window, 6),
            busy_fraction=round(min(1.0, e.busy_s / window) if window else 0.0, 6),
            memory_bytes=e.state_bytes,
            memory_limit_bytes=memory_limit_bytes,
            jvm_memory_used_bytes=e.jvm_memory_used,
            jvm_memory_max_bytes=e.jvm_memory_max,
            cores=e.cores,
        )
        for e in snapshot.executors.values()
    ]
    bins = [
        BinMeasurement(
            bin=b.bin,
            executor=b.executor,
            records=b.records,
            task_ms=round(b.task_ms, 3),
            state_rows=b.state_rows,
            state_bytes=b.state_bytes,
        )
        for b in sorted(snapshot.bins.values(), key=lambda b: b.bin)
    ]
    return LoadMeasurement(
        measured_at=measured_at,
        batches=list(snapshot.batches),
        window_seconds=round(window, 6),
        executors=executors,
        bins=bins,
        coordination_seconds=round(coordination_s, 6),
        processing_seconds=round(processing_s, 6),
        coordination_interval_seconds=interval_s,
        state_error=snapshot.state_error or None,
    ).to_wire()
