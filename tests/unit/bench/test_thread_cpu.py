"""The per-thread CPU sampler of `swivel bench migration --thread-cpu`: thread names to
kinds, batches read between samples, and a live reading of real processes' threads."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from swivel_tools.bench.process_cpu import descendants, processes
from swivel_tools.bench.thread_cpu import (
    NAMED,
    NAMED_KEPT,
    ThreadCpuRecorder,
    thread_cpu_report,
    thread_kind,
)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Executor task l", "task"),
        ("Executor task i", "task"),  # a task thread between tasks, renamed "idle worker"
        ("swivel-prewarm-", "prewarm_loader"),
        ("rocksdb:low", "rocksdb_background"),
        ("state-store-mai", "state_maintenance"),
        ("GC Thread#0", "gc"),
        ("G1 Conc#0", "gc"),
        ("C2 CompilerThre", "jit"),
        ("dispatcher-Exec", "other_jvm"),
    ],
)
def test_a_thread_name_has_a_kind(name: str, kind: str) -> None:
    assert thread_kind(name) == kind


def _recorded(samples: list[tuple[float, dict[str, dict[str, float]]]]) -> ThreadCpuRecorder:
    recorder = ThreadCpuRecorder(daemon_pids=())
    recorder.samples = samples
    return recorder


def test_a_batch_gets_the_cpu_between_its_start_and_end_interpolated() -> None:
    recorder = _recorded([
        (100.0, {"0": {"task": 0.0}}),
        (101.0, {"0": {"task": 1.0, "prewarm_loader": 0.2}}),  # the loader first seen here
        (102.0, {"0": {"task": 1.5, "prewarm_loader": 0.6}}),
    ])  # fmt: skip
    (batch,) = recorder.per_batch([(7, 100.5, 101.5)])
    assert batch["batch"] == 7 and batch["wall_ms"] == 1000
    assert batch["cpu_ms"]["0"]["task"] == pytest.approx(750.0)  # 0.5 -> 1.25 s
    assert batch["cpu_ms"]["0"]["prewarm_loader"] == pytest.approx(300.0)  # 0.1 -> 0.4 s


def test_a_batch_outside_the_samples_is_left_out() -> None:
    recorder = _recorded([(100.0, {"0": {"task": 0.0}}), (101.0, {"0": {"task": 1.0}})])
    assert recorder.per_batch([(1, 99.0, 100.5), (2, 100.2, 100.8)])[0]["batch"] == 2


def test_the_report_sets_the_worst_batch_against_the_steady_median() -> None:
    samples = [(100.0 + t, {"0": {"task": 0.5 * t, "gc": 0.0 if t < 4 else 0.3}}) for t in range(6)]
    recorder = _recorded(samples)
    steady = [(1, 1000.0, 101.0), (2, 1000.0, 102.0), (3, 1000.0, 103.0)]
    window = [(4, 1000.0, 104.0), (5, 1000.0, 105.0)]
    report = thread_cpu_report(recorder, steady, window, worst_batch=4)
    assert report["steady_median"] == {"0": {"task": pytest.approx(500.0)}}  # no gc: left out
    assert report["worst_batch"]["batch"] == 4
    assert report["worst_batch"]["cpu_ms"]["0"]["gc"] == pytest.approx(300.0)
    assert [entry["batch"] for entry in report["window"]] == [4, 5]


def test_the_worst_batch_names_its_busiest_threads_and_the_window_does_not() -> None:
    """By-name owners (`NAMED`) reach the worst batch and the steady median, cut to the
    NAMED_KEPT busiest names; the window's batches carry the kinds only."""
    names = {f"t{i}": float(i) for i in range(NAMED_KEPT + 3)}
    samples = [
        (100.0 + t, {"0": {"other_jvm": 1.0 * t}, "0" + NAMED: {n: v * t for n, v in names.items()}})
        for t in range(4)
    ]  # fmt: skip
    report = thread_cpu_report(_recorded(samples), [(1, 1000.0, 101.0)], [(2, 1000.0, 102.0)], 2)
    named = report["worst_batch"]["cpu_ms"]["0" + NAMED]
    assert list(named) == [f"t{i}" for i in range(NAMED_KEPT + 2, 2, -1)]  # busiest first
    assert named[f"t{NAMED_KEPT + 2}"] == pytest.approx((NAMED_KEPT + 2) * 1e3)
    assert len(report["steady_median"]["0" + NAMED]) == NAMED_KEPT
    assert set(report["window"][0]["cpu_ms"]) == {"0"}


_EXECUTOR = """
import ctypes, subprocess, sys, threading, time
prctl = ctypes.CDLL(None).prctl
prctl(15, b"java", 0, 0, 0)  # PR_SET_NAME: named as a JVM is

def task() -> None:
    prctl(15, b"Executor task launch worker", 0, 0, 0)  # cut to 15 characters
    end = time.time() + 6
    while time.time() < end:
        pass

threading.Thread(target=task).start()
end = time.time() + 6
while time.time() < end:  # a child that burns CPU and is reaped, again and again
    subprocess.run([sys.executable, "-c", "import time\\ne = time.time() + 0.3\\nwhile time.time() < e: pass"])
"""


def _direct(pid: int) -> tuple[float, float]:
    """(the JVM's own CPU, everything under it: reaped and live), straight from /proc."""
    table = processes()
    under = table[pid].children + sum(table[c].cpu for c in descendants(table, pid))
    return table[pid].own, under


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")
def test_the_sampler_process_accounts_for_threads_and_reaped_children_once() -> None:
    """A process tree shaped like a standalone worker's: the worker, an executor "JVM"
    (`java`, `--executor-id 3`) with a busy task thread, and children it starts and reaps.
    The thread kinds add up to the JVM's own CPU, and the children's CPU is counted once
    (a thread's stat repeats its process's reaped children: counting it per thread was the
    16x of review helper-34)."""
    launcher = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {_EXECUTOR!r}, '--executor-id', '3'])"
    worker = subprocess.Popen([sys.executable, "-c", launcher])
    try:
        _wait_for_descendants(worker.pid, 2)  # the "JVM" and its first child
        table = processes()
        jvm = next(pid for pid in descendants(table, worker.pid) if table[pid].command == "java")
        with ThreadCpuRecorder((worker.pid,), interval_s=0.1) as recorder:
            own_before, under_before = _direct(jvm)
            time.sleep(3.0)
        own_after, under_after = _direct(jvm)  # straight after the sampler's last sample
    finally:
        worker.wait(timeout=60)
    (t0, first), (t1, last) = recorder.samples[0], recorder.samples[-1]
    gained = {k: v - first["3"].get(k, 0.0) for k, v in last["3"].items()}
    # the live threads' kinds alone: `unattributed` closes any gap to the JVM's own CPU by
    # construction, so it must stay small (threads that ended: none here but the children)
    threads = sum(v for k, v in gained.items() if k not in {"child_processes", "unattributed"})
    assert abs(gained.get("unattributed", 0.0)) < 0.2, gained
    own, under = own_after - own_before, under_after - under_before
    assert gained["task"] > 0.1 * (t1 - t0), gained
    assert threads == pytest.approx(own, abs=0.2 + 0.15 * own), (gained, own)
    assert gained["child_processes"] == pytest.approx(under, abs=0.4 + 0.15 * under), (
        gained,
        under,
    )
    assert recorder.sampler_cpu_s > 0
    assert ("3", "Executor task l") in {(e, n) for e, n, _ in recorder.busiest}


def _wait_for_descendants(pid: int, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(descendants(processes(), pid)) < count:
        assert time.monotonic() < deadline, f"{pid} has not started {count} processes"
        time.sleep(0.05)
