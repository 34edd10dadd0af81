"""The per-thread CPU sampler of `swivel bench migration --thread-cpu`: thread names to
kinds, batches read between samples, and a live reading of real processes' threads."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from swivel_tools.bench.thread_cpu import ThreadCpuRecorder, thread_cpu_report, thread_kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Executor task l", "task"),
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
    recorder = ThreadCpuRecorder(worker_pids=())
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


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")
def test_a_live_reading_finds_a_busy_python_worker_under_an_executor() -> None:
    """A process tree shaped like a standalone worker's: the worker, an executor JVM named
    `java` with `--executor-id 3` (here a Python process whose name is set to `java`), and
    a busy Python worker under it; the worker's CPU goes to executor 3's `python_workers`."""
    busy = "import time\nend = time.time() + 4\nwhile time.time() < end: pass\n"
    executor = (
        "import ctypes, subprocess, sys, time\n"
        "ctypes.CDLL(None).prctl(15, b'java', 0, 0, 0)\n"  # PR_SET_NAME
        f"child = subprocess.Popen([sys.executable, '-c', {busy!r}])\n"
        "child.wait()\n"
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {executor!r}, '--executor-id', '3'])"]
    )  # fmt: skip
    recorder = ThreadCpuRecorder(worker_pids=(worker.pid,), interval_s=0.1)
    try:
        _wait_for_descendants(worker.pid, 2)  # the "executor" and its busy worker
        began = time.time()
        recorder.start()
        time.sleep(1.5)
        ended = time.time()
        recorder.stop()
    finally:
        worker.wait(timeout=30)
    (batch,) = recorder.per_batch([(1, began + 0.2, ended - 0.2)])
    # a busy loop: most of a core on an idle machine, much less beside a test run
    assert batch["cpu_ms"]["3"]["python_workers"] > 20, batch
    assert batch["cpu_ms"]["driver"].get("python", 0.0) >= 0.0
    assert recorder.sampler_cpu_s > 0
    assert ("3", "java") in recorder.by_name  # the "JVM"'s own (idle) thread, by its name


def _wait_for_descendants(pid: int, count: int, timeout_s: float = 30.0) -> None:
    from swivel_tools.bench.process_cpu import descendants, processes

    deadline = time.monotonic() + timeout_s
    while len(descendants(processes(), pid)) < count:
        assert time.monotonic() < deadline, f"{pid} has not started {count} processes"
        time.sleep(0.05)
