"""The pure parts of `swivel bench migration`: placements, excess latency, the throttled
storage's settings and its read log (docs/migration.md, "Migration benchmark").

Kept apart from the run (`migration.py`) so they are unit-tested without Spark: the
figures the issue's goals are judged on are computed here, from plain numbers.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

THROTTLED_CLASS = "io.swivel.spark.ThrottledFileSystem"
THROTTLED_SCHEME = "throttled"

# (batch id, triggerExecution ms, completion time in epoch seconds)
BatchTime = tuple[int, float, float]


def swap_placement(placement: Mapping[int, str], per_executor: int) -> dict[int, str]:
    """A target in which every executor gives `per_executor` of its bins to the next
    executor (sorted, cyclic) and so takes as many from the previous one.

    Why a cycle: every executor keeps its share before and after (no imbalance created by
    the migration itself), and the moves come from every executor as a giver. With two
    executors it is a swap. The bins given are each executor's highest-numbered ones, so
    the choice is deterministic and spread over the key space like the hash partitioning.
    """
    owned: dict[str, list[int]] = {}
    for bin_id, executor in sorted(placement.items()):
        owned.setdefault(executor, []).append(bin_id)
    executors = sorted(owned)
    if len(executors) < 2:
        raise ValueError("a swap needs at least two executors with bins")
    if per_executor < 1 or any(len(bins) < per_executor for bins in owned.values()):
        raise ValueError(f"every executor must own at least {per_executor} bins to give")
    target = dict(placement)
    for index, executor in enumerate(executors):
        taker = executors[(index + 1) % len(executors)]
        for bin_id in owned[executor][-per_executor:]:
            target[bin_id] = taker
    return target


def moved_bins(current: Mapping[int, str], target: Mapping[int, str]) -> list[int]:
    return sorted(b for b in current if current[b] != target[b])


def steady_p50(durations: Sequence[float]) -> float:
    if not durations:
        raise ValueError("no steady batches to take a median of")
    return float(statistics.median(durations))


@dataclass(frozen=True)
class Excess:
    """The latency a migration adds: its worst batch against the steady median of the same
    query just before it (Megaphone Fig. 1's spike above the baseline)."""

    max_batch_ms: float
    steady_p50_ms: float
    worst_batch: int

    @property
    def excess_ms(self) -> float:
        return self.max_batch_ms - self.steady_p50_ms

    @property
    def excess_over_steady(self) -> float | None:
        """The excess in steady batches of the same baseline (the prewarm goal: <= 0.5);
        None for a baseline of 0 ms."""
        if self.steady_p50_ms <= 0:
            return None
        return round(self.excess_ms / self.steady_p50_ms, 3)


def excess(window: Sequence[BatchTime], steady: Sequence[float]) -> Excess:
    """`window`: the batches that ran during the migration (the batch whose boundary began
    it to the batch of its last move); `steady`: durations of the same query's batches
    before it."""
    if not window:
        raise ValueError("the migration window holds no batch")
    worst = max(window, key=lambda w: w[1])
    return Excess(worst[1], steady_p50(steady), worst[0])


def contiguous_runs(batches: Sequence[BatchTime]) -> list[list[float]]:
    """The durations of `batches` cut where a batch id is missing: a window of the query's
    own batches must not span a gap (other work ran there, e.g. a migration)."""
    runs: list[list[float]] = []
    previous: int | None = None
    for batch, ms, _ in sorted(batches):
        if previous is None or batch != previous + 1:
            runs.append([])
        runs[-1].append(ms)
        previous = batch
    return runs


def steady_window_excess(
    steady: Iterable[Sequence[BatchTime]], window_batches: int
) -> dict[str, Any]:
    """What `excess` reads on the query with no migration, over a window as long as the
    strategy's: in every run of consecutive steady batches, each window of `window_batches`
    batches' worst batch minus that run's p50; the median and the max over all windows.

    Why: the worst of 16-32 batches of a steady query exceeds its p50 by the query's own
    spread, which the worst of one batch does not; this is that spread at the strategy's
    window length, so a strategy's `excess_ms` can be read against it. None (with a
    reason) when no run of steady batches is as long as the window."""
    if window_batches < 1:
        raise ValueError("a window holds at least one batch")
    runs = [run for batches in steady for run in contiguous_runs(batches)]
    worsts: list[float] = []
    for run in runs:
        p50 = steady_p50(run)
        worsts += [
            max(run[i : i + window_batches]) - p50 for i in range(len(run) - window_batches + 1)
        ]
    out: dict[str, Any] = {
        "median": round(statistics.median(worsts), 1) if worsts else None,
        "max": round(max(worsts), 1) if worsts else None,
        "window_batches": window_batches,
        "windows": len(worsts),
        "steady_batches": sum(len(run) for run in runs),
    }
    if not worsts:
        longest = max((len(run) for run in runs), default=0)
        out["reason"] = (
            f"the longest run of steady batches holds {longest}, "
            f"fewer than the window's {window_batches}"
        )
    return out


def moved_task_extra(
    task_ms: Mapping[int, Mapping[int, float]], moved_in: Mapping[int, Collection[int]]
) -> dict[str, Any]:
    """The migration's own cost in task time, apart from the query's slow batches: per
    batch, the sum over the bins moved into it (their first batch on the new executor,
    reload included) of their task's ms minus the median task ms of the batch's other bins;
    the max over batches and the sum over the window. A batch in which every task was slow
    (the query's own slowness) adds nothing here; a reload does.

    `task_ms`: batch -> bin -> its stateful-stage task's ms; `moved_in`: batch -> the bins
    moved into it. Batches whose task list is missing, or that have no other bin to
    compare with, are listed, not guessed; None (with a reason) if no batch could be read.
    """
    per_batch: dict[int, float] = {}
    unread: list[int] = []
    moved_tasks = 0
    for batch, bins in sorted(moved_in.items()):
        if not bins:
            continue
        tasks, moving = task_ms.get(batch, {}), set(bins)
        moved = [tasks[b] for b in moving if b in tasks]
        others = [ms for b, ms in tasks.items() if b not in moving]
        if not moved or not others:
            unread.append(batch)
            continue
        baseline = statistics.median(others)
        per_batch[batch] = round(sum(ms - baseline for ms in moved), 1)
        moved_tasks += len(moved)
    read = bool(per_batch) or not unread  # nothing moved: no cost, 0
    out: dict[str, Any] = {
        "max": max(per_batch.values(), default=0.0) if read else None,
        "sum": round(sum(per_batch.values()), 1) if read else None,
        "moved_tasks": moved_tasks,
        "per_batch": per_batch,
    }
    if unread:
        out["unread_batches"] = unread
    if not read:
        out["reason"] = "no batch with moved-in bins had both their tasks and other bins' tasks"
    return out


def window_duration_s(window: Sequence[BatchTime], started_at: float | None = None) -> float:
    """From `started_at` (epoch s; default: the start of the window's first batch) to the
    completion of its last batch."""
    first = window[0]
    start = started_at if started_at is not None else first[2] - first[1] / 1e3
    return round(window[-1][2] - start, 3)


def expected_read_s(nbytes: float, opens: int, read_mb_per_s: float, latency_ms: float) -> float:
    """What the throttle makes `opens` files of `nbytes` in all cost when read one after
    another: the per-open latency plus the bytes at one stream's bandwidth (MiB/s)."""
    bandwidth = read_mb_per_s * 2**20
    transfer = nbytes / bandwidth if read_mb_per_s > 0 else 0.0
    return opens * latency_ms / 1e3 + transfer


def storage_conf(
    kind: str, *, read_mb_per_s: float, open_latency_ms: float, log: Path | None, jar: str | None
) -> dict[str, str]:
    """Session settings for the checkpoint storage. `throttled`: the Java wrapper on every
    JVM's class path (the Hadoop FileSystem is resolved through the system class loader
    when the driver's file manager or an executor's state store first opens a path)."""
    if kind == "local":
        return {}
    if kind != "throttled":
        raise ValueError(f"storage must be 'local' or 'throttled', not {kind!r}")
    if jar is None:
        raise ValueError("the throttled storage needs the helper jar (make setup, a JDK)")
    conf = {
        f"spark.hadoop.fs.{THROTTLED_SCHEME}.impl": THROTTLED_CLASS,
        "spark.hadoop.fs.throttled.read.mb.per.s": str(read_mb_per_s),
        "spark.hadoop.fs.throttled.open.latency.ms": str(int(open_latency_ms)),
        "spark.driver.extraClassPath": jar,
        "spark.executor.extraClassPath": jar,
    }
    if log is not None:
        conf["spark.hadoop.fs.throttled.log"] = str(log)
    return conf


def checkpoint_uri(kind: str, folder: Path) -> str:
    return f"{THROTTLED_SCHEME}://{folder.resolve()}" if kind == "throttled" else str(folder)


@dataclass(frozen=True)
class Read:
    """One stream closed on the throttled file system (a line of its log)."""

    pid: str
    closed_ms: int
    path: str
    nbytes: int
    open_ns: int
    slept_ns: int

    @property
    def kind(self) -> str:
        return "state" if "/state/" in self.path else "metadata"


def parse_reads(lines: Iterable[str]) -> list[Read]:
    out = []
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 6:
            continue  # a torn line (should not happen with O_APPEND): not counted
        pid, closed, path, nbytes, nanos, slept = parts
        out.append(Read(pid, int(closed), path, int(nbytes), int(nanos), int(slept)))
    return out


def summarise_reads(
    reads: Sequence[Read], driver_pid: str, between: tuple[float, float] | None = None
) -> dict[str, Any]:
    """Opens, bytes and time slept per kind of file and per JVM role, optionally only the
    streams closed between two epoch-second times: the proof that the state store's
    reloads (executors, `state/` files) went through the throttle."""
    if between is not None:
        lo, hi = between[0] * 1e3, between[1] * 1e3
        reads = [r for r in reads if lo <= r.closed_ms <= hi]
    out: dict[str, Any] = {}
    for read in reads:
        role = "driver" if read.pid == driver_pid else "executors"
        entry = out.setdefault(f"{read.kind}_{role}", {"opens": 0, "bytes": 0, "slept_s": 0.0})
        entry["opens"] += 1
        entry["bytes"] += read.nbytes
        entry["slept_s"] += read.slept_ns / 1e9
    for entry in out.values():
        entry["slept_s"] = round(entry["slept_s"], 3)
    out["executor_pids"] = sorted({r.pid for r in reads if r.pid != driver_pid})
    return out


def reload_bytes(files: Mapping[str, int]) -> int:
    """Bytes an HDFS-backed store reads to load a bin's newest version from its files
    (name -> size): the newest `<v>.snapshot` and every `<v>.delta` after it (all deltas
    when there is no snapshot). Older retained versions are not read."""
    snapshots = [int(n.split(".")[0]) for n in files if n.endswith(".snapshot")]
    base = max(snapshots, default=0)
    total = files.get(f"{base}.snapshot", 0)
    for name, size in files.items():
        if name.endswith(".delta") and int(name.split(".")[0]) > base:
            total += size
    return total


def reload_bytes_on_disk(checkpoint_folder: Path, bins: Iterable[int], operator: int = 0) -> int:
    """`reload_bytes` of the bins' folders in a local checkpoint (checksum files aside)."""
    total = 0
    for bin_id in bins:
        folder = checkpoint_folder / "state" / str(operator) / str(bin_id)
        if folder.is_dir():
            names = {f.name: f.stat().st_size for f in folder.iterdir() if f.is_file()}
            total += reload_bytes(names)
    return total


def sweep_row(keys: int, strategies: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of `sweep`: the size and the per-strategy contract figures, with the two
    diagnostics that tell the migration from the query's own slow batches."""
    figures = (
        "max_batch_ms",
        "excess_ms",
        "steady_p50_ms",
        "excess_over_steady",
        "duration_s",
        "moved_bins",
        "moved_bytes",
        "steady_window_excess_ms",
        "moved_task_extra_ms",
    )
    return {
        "keys": keys,
        "strategies": {
            name: None if result is None else {k: result.get(k) for k in figures}
            for name, result in strategies.items()
        },
    }


def noise_lines(strategies: Mapping[str, Any]) -> list[str]:
    """One line per strategy for the CLI's text output: the goal's `excess_ms` beside the
    two diagnostics that say how much of it the query's own slow batches explain."""

    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.0f} ms"

    lines = []
    for name, result in strategies.items():
        if result is None:
            lines.append(f"{name}: not run")
            continue
        steady = result.get("steady_window_excess_ms") or {}
        extra = result.get("moved_task_extra_ms") or {}
        noise = (
            f"median {ms(steady.get('median'))}, max {ms(steady.get('max'))}"
            if steady.get("median") is not None
            else f"n/a ({steady.get('reason', 'not recorded')})"
        )
        lines.append(
            f"{name}: excess {ms(result.get('excess_ms'))}; without migration over "
            f"{steady.get('window_batches', '?')} batches: {noise}; moved-in task extra: "
            f"max {ms(extra.get('max'))} per batch, {ms(extra.get('sum'))} in all"
        )
    return lines


def bounded_ratio(sweep: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's goal, read off the sweep: at the sizes where all-at-once's excess is
    at least one steady batch (its own steady p50, the baseline of that excess), batched's
    excess over all-at-once's (goal <= 0.2)."""
    out = []
    for row in sweep:
        strategies = row["strategies"]
        whole, batched = strategies.get("all-at-once"), strategies.get("batched")
        if not whole or not batched:
            continue
        qualifies = whole["excess_ms"] >= whole["steady_p50_ms"]
        ratio = batched["excess_ms"] / whole["excess_ms"] if whole["excess_ms"] > 0 else None
        out.append({"keys": row["keys"], "qualifies": qualifies, "batched_over_all_at_once": ratio})
    return {"goal": 0.2, "per_size": out}


def prewarm_ratio(sweep: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The prewarm goal per size: batched-prewarmed's excess in steady batches, each over
    the steady p50 of the batches just before its own migration (goal <= 0.5)."""
    out = [
        {"keys": row["keys"], "excess_over_steady": prewarmed["excess_over_steady"]}
        for row in sweep
        if (prewarmed := row["strategies"].get("batched-prewarmed"))
    ]
    return {"goal": 0.5, "per_size": out}
