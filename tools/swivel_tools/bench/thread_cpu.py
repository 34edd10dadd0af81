"""CPU time per thread kind of each executor JVM, per batch, from `/proc` (Linux): which
work a migration's worst batch competed with on a core (docs/migration.md, "Running it":
`--thread-cpu`).

Batch durations say a batch was slow; they do not say what else ran on its executor's core.
A sampler process (`python -m swivel_tools.bench.thread_cpu`, so that it takes no GIL from
the driver whose boundaries are measured) reads every `interval_s`:

- each executor JVM's threads (`/proc/<pid>/task/<tid>/stat`: utime + stime, and the name
  the JVM gave the thread, cut to 15 characters), grouped by `thread_kind`;
- `unattributed`: the JVM's own CPU that no live thread holds (threads that ended between
  two samples), so an executor's thread kinds add up to its JVM's own CPU;
- `child_processes`: the processes under the JVM, live or reaped: PySpark's Python
  workers, and e.g. the `chmod` Hadoop runs where its native library is missing;
- the driver: its Python process (`driver`: `python`, as a whole) and its JVM
  (`driver_jvm`: by thread kind, as an executor's);
- the local cluster's master and worker JVMs (`cluster_daemons`, by thread kind: e.g. the
  worker's "File appending" threads that copy the executors' logs into files).

Each kind is a running total; a batch's share is the difference at its end and its start,
interpolated between the two samples around each (stamped at the middle of their reads).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swivel_tools.bench.process_cpu import ProcStat, descendants, processes, read_stat

# (prefix of the 15-character thread name, kind), first match wins
_KINDS = (
    # a task thread is "Executor task launch worker for task N" while it runs one and
    # "Executor task idle worker-N" between tasks: its CPU goes to the kind of its name at
    # the sample, so both names are `task` (before c0d0b60 only the first was)
    ("Executor task ", "task"),
    ("swivel-prewarm-", "prewarm_loader"),
    ("rocksdb:", "rocksdb_background"),
    ("state-store-mai", "state_maintenance"),
    ("GC Thread", "gc"),
    ("G1 ", "gc"),
    ("VM Thread", "vm_thread"),
    ("C1 CompilerThre", "jit"),
    ("C2 CompilerThre", "jit"),
)
if TYPE_CHECKING:  # not imported at run time: the sampler process imports this module
    from swivel_tools.bench.migration_figures import BatchTime

# owner (an executor's id, "driver", "driver_jvm", "cluster_daemons") -> kind -> CPU s; an
# owner + NAMED holds the same JVM's CPU by thread name (digits cut) instead of by kind
NAMED = "/threads"
# thread names kept per JVM in the report's worst batch and steady median (the busiest)
NAMED_KEPT = 12
Totals = dict[str, dict[str, float]]


def thread_kind(name: str) -> str:
    """The kind of a JVM thread (an executor's, the driver's, a daemon's) from its
    (15-character) name."""
    return next((kind for prefix, kind in _KINDS if name.startswith(prefix)), "other_jvm")


def _executor_id(pid: int) -> str | None:
    """The `--executor-id` on an executor JVM's command line."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    at = args.index("--executor-id") if "--executor-id" in args else -1
    return args[at + 1] if 0 <= at < len(args) - 1 else None


class Sampler:
    """Running totals per owner and kind; `sample()` brings them up to now."""

    def __init__(self, daemon_pids: tuple[int, ...], driver_pid: int) -> None:
        """`daemon_pids`: the local cluster's master and worker (`LocalCluster.pids()`); the
        executors are the worker's children, and both are java children of `driver_pid`."""
        self.daemon_pids, self.driver_pid = daemon_pids, driver_pid
        self.totals: Totals = {}
        self._last: dict[tuple[str, int, int], float] = {}  # running figure per source
        self._executors: dict[int, str | None] = {}
        self._first = True

    def _add(self, owner: str, kind: str, key: tuple[str, int, int], now: float) -> float:
        """Add what `key`'s running figure gained since the last sample to `kind`.

        On the first sample every figure is a baseline; a source first seen later started
        since the last sample, so all of its figure is new. A figure that dropped (a child
        left the live tree) adds nothing."""
        before = self._last.get(key, now if self._first else 0.0)
        self._last[key] = now
        gained = max(now - before, 0.0)
        kinds = self.totals.setdefault(owner, {})
        kinds[kind] = kinds.get(kind, 0.0) + gained
        return gained

    def sample(self) -> None:
        table = processes()
        for root in self.daemon_pids:
            for pid in descendants(table, root):
                if table[pid].command == "java" and (executor := self._executor(pid)):
                    self._sample_jvm(executor, pid, table)
        self._add("driver", "python", ("driver", self.driver_pid, 0), _own(table, self.driver_pid))
        for pid, stat in table.items():  # the driver's JVM (py4j's child), thread by thread
            if stat.parent == self.driver_pid and stat.command == "java":
                # the local cluster's master and worker are java children of the driver's
                # Python process too; the worker's children are the executors
                daemon = pid in self.daemon_pids
                self._sample_jvm("cluster_daemons" if daemon else "driver_jvm", pid, table)
        self._first = False

    def _executor(self, pid: int) -> str | None:
        if pid not in self._executors:
            self._executors[pid] = _executor_id(pid)
        return self._executors[pid]

    def _sample_jvm(self, owner: str, pid: int, table: dict[int, ProcStat]) -> None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        attributed = 0.0
        for tid in tids:
            thread = read_stat(f"/proc/{pid}/task/{tid}/stat")
            if thread is not None:  # own only: a thread's children field is its process's
                gained = self._add(
                    owner, thread_kind(thread.command), ("t", pid, int(tid)), thread.own
                )
                attributed += gained
                # by name too, so a batch's `other_jvm` can be read thread by thread
                name = thread.command.rstrip("0123456789#-")
                named = self.totals.setdefault(owner + NAMED, {})
                named[name] = named.get(name, 0.0) + gained
        jvm = read_stat(f"/proc/{pid}/stat")  # read after its threads: the skew stays small
        if jvm is None:
            return
        # unclamped, so that a sample's read skew is given back in the next one
        before = self._last.get(("jvm", pid, 0), jvm.own if self._first else 0.0)
        self._last[("jvm", pid, 0)] = jvm.own
        kinds = self.totals.setdefault(owner, {})
        kinds["unattributed"] = kinds.get("unattributed", 0.0) + (jvm.own - before - attributed)
        if owner == "cluster_daemons":  # its children are the executors, counted above
            return
        # one running figure for everything under the JVM, live or reaped: a child that
        # ends moves from the live sum into its parent's `children`, and is counted once
        under = jvm.children + sum(table[child].cpu for child in descendants(table, pid))
        self._add(owner, "child_processes", ("children", pid, 0), under)


def _own(table: dict[int, ProcStat], pid: int) -> float:
    stat = table.get(pid)
    return stat.own if stat is not None else 0.0


def main(argv: list[str] | None = None) -> None:
    """The sampler process: one JSON line per sample on --out until stdin closes, then a
    last sample and a summary line (its own CPU, the busiest thread names)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--driver-pid", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("daemon_pids", type=int, nargs="*")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def wait_for_eof() -> None:  # the recorder closes our stdin to stop us
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    sampler = Sampler(tuple(args.daemon_pids), args.driver_pid)
    with args.out.open("w", encoding="utf-8") as out:

        def write_sample() -> None:
            began = time.time()
            sampler.sample()
            at = (began + time.time()) / 2  # the middle of its reads
            out.write(json.dumps({"at": at, "totals": sampler.totals}) + "\n")
            out.flush()

        while not stop.is_set():
            write_sample()
            stop.wait(args.interval)
        write_sample()  # the last batch may end after the previous sample
        by_name = {
            (owner.removesuffix(NAMED), name): seconds
            for owner, names in sampler.totals.items()
            if owner.endswith(NAMED)
            for name, seconds in names.items()
        }
        busiest = sorted(by_name.items(), key=lambda item: -item[1])[:20]
        own = os.times()
        out.write(json.dumps({
            "sampler_cpu_s": own.user + own.system,
            "busiest": [[executor, name, seconds] for (executor, name), seconds in busiest],
        }) + "\n")  # fmt: skip


class ThreadCpuRecorder:
    """Runs the sampler process between `start()` and `stop()` (or as a context manager);
    `per_batch()` then attributes its totals to batches by their start and end times."""

    def __init__(self, daemon_pids: Iterable[int], interval_s: float = 0.25) -> None:
        self.daemon_pids, self.interval_s = tuple(daemon_pids), interval_s
        self.samples: list[tuple[float, Totals]] = []
        self.sampler_cpu_s = 0.0
        self.busiest: list[tuple[str, str, float]] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._out: Path | None = None

    def __enter__(self) -> ThreadCpuRecorder:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 30.0) -> None:
        """Start sampling; returns once the first sample is written (the baseline)."""
        if not os.path.isdir("/proc"):
            return
        handle, name = tempfile.mkstemp(prefix="swivel-thread-cpu-", suffix=".jsonl")
        os.close(handle)
        self._out = Path(name)
        command = [
            sys.executable, "-m", "swivel_tools.bench.thread_cpu", "--interval", str(self.interval_s),
            "--driver-pid", str(os.getpid()), "--out", str(self._out), *map(str, self.daemon_pids),
        ]  # fmt: skip
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        while self._out.stat().st_size == 0 and self._process.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the sampler after one last sample, and read what it wrote."""
        process, self._process = self._process, None
        if process is None or self._out is None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for line in self._out.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if "totals" in entry:
                self.samples.append((float(entry["at"]), entry["totals"]))
            else:
                self.sampler_cpu_s = float(entry["sampler_cpu_s"])
                self.busiest = [(str(e), str(n), float(s)) for e, n, s in entry["busiest"]]
        self._out.unlink(missing_ok=True)

    def per_batch(self, batches: Iterable[tuple[int, float, float]]) -> list[dict[str, Any]]:
        """For each (batch, start, end) in epoch seconds: CPU ms per owner and kind in it.
        A batch not inside the samples is left out."""
        out = []
        for batch, start, end in batches:
            at_start, at_end = self._at(start), self._at(end)
            if at_start is None or at_end is None:
                continue
            cpu: dict[str, dict[str, float]] = {}
            for owner, kinds in at_end.items():
                began = at_start.get(owner, {})
                spent = {k: round((v - began.get(k, 0.0)) * 1e3, 1) for k, v in kinds.items()}
                cpu[owner] = {kind: ms for kind, ms in spent.items() if ms != 0}
            out.append({"batch": batch, "wall_ms": round((end - start) * 1e3), "cpu_ms": cpu})
        return out

    def _at(self, moment: float) -> Totals | None:
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


def thread_cpu_report(
    recorder: ThreadCpuRecorder,
    steady: Iterable[BatchTime],
    window: Iterable[BatchTime],
    worst_batch: int,
) -> dict[str, Any]:
    """The JSON's `thread_cpu` of one strategy: every window batch's CPU per executor and
    thread kind, the worst batch's on its own, and the median of the steady batches before
    the migration, to read the worst batch against."""

    def spans(batches: Iterable[BatchTime]) -> list[tuple[int, float, float]]:
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
    worst = next((e for e in during if e["batch"] == worst_batch), None)
    if worst is not None:
        worst = {**worst, "cpu_ms": _busiest_names(worst["cpu_ms"])}
    return {
        "interval_s": recorder.interval_s,
        "sampler_cpu_ms": round(recorder.sampler_cpu_s * 1e3),
        "steady_median": _busiest_names(median),
        # the busiest thread names over the whole recording: what `other_jvm` holds
        "busiest_threads_ms": {f"{e}/{n}": round(s * 1e3) for e, n, s in recorder.busiest},
        "worst_batch": worst,
        "window": [{**e, "cpu_ms": _by_kind(e["cpu_ms"])} for e in during],
    }


def _by_kind(cpu: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """`cpu` without the by-name owners (a window batch's entry stays small)."""
    return {owner: kinds for owner, kinds in cpu.items() if not owner.endswith(NAMED)}


def _busiest_names(cpu: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """`cpu` with each by-name owner cut to its NAMED_KEPT busiest thread names."""
    return {
        owner: dict(sorted(kinds.items(), key=lambda item: -item[1])[:NAMED_KEPT])
        if owner.endswith(NAMED) else kinds
        for owner, kinds in cpu.items()
    }  # fmt: skip


if __name__ == "__main__":
    main()
