"""CPU time per thread kind of each executor JVM, per batch, from `/proc` (Linux): which
work a migration's worst batch competed with on a core (docs/migration.md, "Per-thread CPU").

Batch durations say a batch was slow; they do not say what else ran on its executor's core.
A background thread samples every `interval_s`:

- each executor JVM's threads (`/proc/<pid>/task/<tid>/stat`: utime + stime, and the
  thread's name as the JVM set it, cut to 15 characters), grouped by `thread_kind`;
- its Python workers (processes under the JVM, with their reaped children);
- the driver: its JVM and this Python process, each as a whole (`jvm`, `python`).

A thread's CPU since the last sample goes to the kind of its current name (Spark renames a
task thread for each task). The last interval of a thread that ended between two samples
goes to `unattributed` (the process's CPU in the interval minus its live threads'), so the
kinds add up to the JVM's CPU. The sampler's own CPU is reported beside the figures: it runs in
the driver's Python process, on the same two cores.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from swivel_tools.bench.process_cpu import descendants, processes

# (prefix of the 15-character thread name, kind), first match wins
_KINDS = (
    ("Executor task l", "task"),
    ("swivel-prewarm-", "prewarm_loader"),
    ("rocksdb:", "rocksdb_background"),
    ("state-store-mai", "state_maintenance"),
    ("GC Thread", "gc"),
    ("G1 ", "gc"),
    ("VM Thread", "gc"),
    ("C1 CompilerThre", "jit"),
    ("C2 CompilerThre", "jit"),
)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def thread_kind(name: str) -> str:
    """The kind of an executor JVM thread from its (15-character) name."""
    return next((kind for prefix, kind in _KINDS if name.startswith(prefix)), "other_jvm")


def _stat(path: str) -> tuple[str, float] | None:
    """(name, CPU seconds: utime + stime + reaped children's) of a /proc stat file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stat:
            raw = stat.read()
    except OSError:
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return name, sum(int(value) for value in fields[11:15]) / _TICKS


def _executor_id(pid: int) -> str | None:
    """The `--executor-id` on an executor JVM's command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            args = cmdline.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    if "--executor-id" in args and args.index("--executor-id") + 1 < len(args):
        return args[args.index("--executor-id") + 1]
    return None


@dataclass
class ThreadCpuRecorder:
    """Samples in a background thread between `start()` and `stop()`; `per_batch()` then
    attributes the CPU to batches by their start and end times."""

    worker_pids: Iterable[int]  # the standalone Worker JVMs (LocalCluster.pids())
    interval_s: float = 0.25
    samples: list[tuple[float, dict[str, dict[str, float]]]] = field(default_factory=list)
    sampler_cpu_s: float = 0.0
    _last: dict[tuple[int, int], float] = field(default_factory=dict)
    _totals: dict[str, dict[str, float]] = field(default_factory=dict)
    _executors: dict[int, str | None] = field(default_factory=dict)  # JVM pid -> executor id
    # (executor, thread name without its number) -> CPU seconds over the whole recording
    by_name: dict[tuple[str, str], float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        if not os.path.isdir("/proc"):
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="thread-cpu", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _loop(self) -> None:
        began = time.thread_time()
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)
        self.sampler_cpu_s += time.thread_time() - began

    def _add(self, owner: str, kind: str, key: tuple[int, int], cpu: float) -> float:
        """Add a thread's (or process's) CPU since the last sample to `kind`; returns it.

        One first seen after the first sample started since the last one: all of its CPU
        is new."""
        before = self._last.get(key, cpu if not self.samples else 0.0)
        self._last[key] = cpu
        spent = max(cpu - before, 0.0)
        totals = self._totals.setdefault(owner, {})
        totals[kind] = totals.get(kind, 0.0) + spent
        return spent

    def sample(self) -> None:
        """One reading: every kind's CPU seconds so far, per executor (and the driver)."""
        table = processes()
        me = os.getpid()
        for root in self.worker_pids:
            for pid in descendants(table, root):
                _, command, cpu = table[pid]
                if command == "java" and (executor := self._executor(pid)) is not None:
                    self._sample_jvm(executor, pid, cpu)
        for pid, (parent, command, cpu) in table.items():
            if parent == me and command == "java":
                self._add("driver", "jvm", (pid, 0), cpu)
        self._add("driver", "python", (me, 0), _own_cpu())
        for root in self.worker_pids:
            for pid in descendants(table, root):
                _, command, cpu = table[pid]
                if command != "java":
                    owner = self._jvm_owner(table, pid)
                    if owner is not None:
                        self._add(owner, "python_workers", (pid, 0), cpu)
        snapshot = {owner: dict(kinds) for owner, kinds in self._totals.items()}
        self.samples.append((time.time(), snapshot))

    def _jvm_owner(self, table: dict[int, tuple[int, str, float]], pid: int) -> str | None:
        """The executor whose JVM a Python worker runs under."""
        parent = table[pid][0]
        while parent in table:
            if table[parent][1] == "java":
                return self._executor(parent)
            parent = table[parent][0]
        return None

    def _executor(self, pid: int) -> str | None:
        if pid not in self._executors:
            self._executors[pid] = _executor_id(pid)
        return self._executors[pid]

    def _sample_jvm(self, executor: str, pid: int, process_cpu: float) -> None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        attributed = 0.0
        for tid in tids:
            found = _stat(f"/proc/{pid}/task/{tid}/stat")
            if found is not None:
                name, cpu = found
                spent = self._add(executor, thread_kind(name), (pid, int(tid)), cpu)
                attributed += spent
                named = (executor, name.rstrip("0123456789#-"))
                self.by_name[named] = self.by_name.get(named, 0.0) + spent
        # the process's CPU since the last sample that no live thread holds: the last
        # interval of threads that ended since
        key = (pid, -1)
        before = self._last.get(key, process_cpu)
        self._last[key] = process_cpu
        totals = self._totals.setdefault(executor, {})
        unattributed = max(process_cpu - before - attributed, 0.0)
        totals["unattributed"] = totals.get("unattributed", 0.0) + unattributed

    def per_batch(self, batches: Iterable[tuple[int, float, float]]) -> list[dict[str, Any]]:
        """For each (batch, start, end) in epoch seconds: CPU ms per owner and kind in it,
        interpolated between the samples around its start and its end."""
        out = []
        for batch, start, end in batches:
            at_start, at_end = self._at(start), self._at(end)
            if at_start is None or at_end is None:
                continue
            cpu = {
                owner: {
                    kind: round((ms - at_start.get(owner, {}).get(kind, 0.0)) * 1e3, 1)
                    for kind, ms in kinds.items()
                    if ms - at_start.get(owner, {}).get(kind, 0.0) > 0
                }
                for owner, kinds in at_end.items()
            }
            out.append({"batch": batch, "wall_ms": round((end - start) * 1e3), "cpu_ms": cpu})
        return out

    def _at(self, moment: float) -> dict[str, dict[str, float]] | None:
        """Every owner's and kind's CPU seconds at `moment`, linear between two samples."""
        for (t0, before), (t1, after) in zip(self.samples, self.samples[1:], strict=False):
            if t0 <= moment <= t1:
                share = (moment - t0) / (t1 - t0) if t1 > t0 else 1.0
                return {
                    owner: {
                        kind: (old := before.get(owner, {}).get(kind, 0.0)) + (new - old) * share
                        for kind, new in kinds.items()
                    }
                    for owner, kinds in after.items()
                }
        return None


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


BatchSpan = tuple[int, float, float]  # batch id, duration ms, end (epoch s)


def thread_cpu_report(
    recorder: ThreadCpuRecorder,
    steady: Iterable[BatchSpan],
    window: Iterable[BatchSpan],
    worst_batch: int,
) -> dict[str, Any]:
    """The JSON's `thread_cpu` of one strategy: every window batch's CPU per executor and
    thread kind, the worst batch's on its own, and the median of the steady batches before
    the migration, to read the worst batch against."""

    def spans(batches: Iterable[BatchSpan]) -> list[tuple[int, float, float]]:
        return [(batch, end - ms / 1e3, end) for batch, ms, end in batches]

    before = recorder.per_batch(spans(steady))
    during = recorder.per_batch(spans(window))
    median: dict[str, dict[str, float]] = {}
    for owner in sorted({o for entry in before for o in entry["cpu_ms"]}):
        kinds = {k for entry in before for k in entry["cpu_ms"].get(owner, {})}
        median[owner] = {
            kind: statistics.median(e["cpu_ms"].get(owner, {}).get(kind, 0.0) for e in before)
            for kind in sorted(kinds)
        }
    return {
        "interval_s": recorder.interval_s,
        "sampler_cpu_ms": round(recorder.sampler_cpu_s * 1e3),
        "steady_median": median,
        # the busiest thread names over the whole recording: what `other_jvm` holds
        "busiest_threads_ms": {
            f"{executor}/{name}": round(seconds * 1e3)
            for (executor, name), seconds in sorted(
                recorder.by_name.items(), key=lambda item: -item[1]
            )[:20]
        },
        "worst_batch": next((e for e in during if e["batch"] == worst_batch), None),
        "window": during,
    }
