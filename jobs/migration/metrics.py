"""Metrics for the bin policies, measured on the running query.

- Per bin: records processed (shuffle records read by the bin's task) and task time, from
  the task lists of the measured batches; state rows per bin and operator from the
  `statestore` reader, and state bytes *attributed* per bin from each operator's own
  `memoryUsedBytes / numRowsTotal` (Spark reports state memory per operator, not per
  partition: `state_memory`).
- Per executor: busy time (its tasks' run time over the window, per core), idle = window -
  busy, state bytes held (its bins), JVM storage memory from the REST executors endpoint.

A measurement covers the batches it is given; `collection.CollectionPhase` adds them up
over Flux's collection phase. `collect_loads` turns them into Flux's `ExecutorLoad` /
`BinLoad`; `to_prometheus` renders them in the Prometheus text format; `loads_document` is
the wire form the driver posts to the agent (`POST /v1/driver/loads`), which serves it at
`GET /v1/loads` and as gauges in its `/metrics` (docs/control-protocol.md, "Loads").

Records and busy time measured here are the fallback: the workers report their own per
bin, seconds old, through the control plane (Chi §5; `swivel.controllers.worker_loads`),
and the policies use those when fresh. Placement, cores, JVM memory and state size per bin
are only measured here (no Python worker can see them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swivel.controllers.flux import BinLoad, ExecutorLoad
from swivel.jobs.migration.state_memory import OperatorRows, bin_state, read_state_rows
from swivel.jobs.spark_internals import SparkInternals
from swivel.protocol.loads import BinMeasurement, ExecutorMeasurement, LoadMeasurement


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
    state_rows: tuple[OperatorRows, ...] | None = None  # as read, for reuse (driver)

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
    tasks = internals.batches_tasks(run_id, batches, bins) if batches else {}
    for batch in batches:
        for task in tasks.get(batch, []):
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
    apply_state_rows(query, read_state_rows(internals.spark, checkpoint), snapshot)


def apply_state_rows(query: Any, rows: Sequence[OperatorRows], snapshot: LoadSnapshot) -> None:
    """Per-operator state rows per bin (`read_state_rows`, maybe from an earlier
    measurement: a bin's rows do not move with its placement) into `snapshot`: bytes
    attributed with each operator's bytes per row in the latest progress
    (`state_memory.ATTRIBUTION`), summed per executor of the snapshot's placement."""
    progress = (query.lastProgress or {}).get("stateOperators") or []
    snapshot.state_rows = tuple(rows)
    for bin_id, (count, attributed) in bin_state(progress, rows).items():
        stats = snapshot.bins.get(bin_id)
        if stats is None:
            continue
        stats.state_rows, stats.state_bytes = count, attributed
        snapshot.executors.setdefault(stats.executor, ExecutorStats(stats.executor))
        snapshot.executors[stats.executor].state_bytes += attributed


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
