"""The pure parts of `swivel bench migration`: placements, excess latency, the throttled
storage's settings and its read log (docs/migration.md, "Migration benchmark").

Kept apart from the run (`migration.py`) so they are unit-tested without Spark: the
figures the issue's goals are judged on are computed here, from plain numbers.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
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


def excess(window: Sequence[BatchTime], steady: Sequence[float]) -> Excess:
    """`window`: the batches that ran during the migration (its first step's batch to the
    batch of its last move); `steady`: durations of the same query's batches before it."""
    if not window:
        raise ValueError("the migration window holds no batch")
    worst = max(window, key=lambda w: w[1])
    return Excess(worst[1], steady_p50(steady), worst[0])


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
    """One entry of `sweep`: the size and the per-strategy contract figures."""
    figures = ("max_batch_ms", "excess_ms", "duration_s", "moved_bins", "moved_bytes")
    return {
        "keys": keys,
        "strategies": {
            name: None if result is None else {k: result.get(k) for k in figures}
            for name, result in strategies.items()
        },
    }


def bounded_ratio(sweep: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's goal, read off the sweep: at the sizes where all-at-once's excess is
    at least one steady batch, batched's excess over all-at-once's (goal <= 0.2)."""
    out = []
    for row in sweep:
        strategies = row["strategies"]
        whole, batched = strategies.get("all-at-once"), strategies.get("batched")
        steady = row.get("steady_p50_ms")
        if not whole or not batched or steady is None:
            continue
        qualifies = whole["excess_ms"] >= steady
        ratio = batched["excess_ms"] / whole["excess_ms"] if whole["excess_ms"] > 0 else None
        out.append({"keys": row["keys"], "qualifies": qualifies, "batched_over_all_at_once": ratio})
    return {"goal": 0.2, "per_size": out}
