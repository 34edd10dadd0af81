"""The in-effect delay read off a recorded schedule, the switch timeline, and the cold
restart's stopping of the old driver's Python workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from swivel.embedded.cold import stop_python_workers
from swivel.embedded.effect import measure
from swivel_tools.bench.timeline import plot_switch
from tests.polling import wait_for

REQUEST = 1000.0


def _write(directory: Path, pid: int, events: list[tuple[str, str, int, int, float]]) -> None:
    """(record, operator, version, batch, at) per line, as the runtime writes them."""
    lines = [
        json.dumps(
            {"event": "process", "operator": op, "version": v, "batch": b, "at": at, "record": r}
        )
        for r, op, v, b, at in events
    ]
    with (directory / f"process-{pid}.jsonl").open("a") as out:
        out.write("\n".join(lines) + "\n")


def test_in_effect_waits_for_the_last_old_record_of_a_tag_follower(tmp_path: Path) -> None:
    """The head runs new records 20 ms after the request; the tail (behind a shuffle) runs
    the rows tagged before the switch under its old version until 600 ms."""
    _write(tmp_path, 11, [("r1", "head", 1, 7, 999.0), ("r2", "head", 2, 7, 1000.02)])
    _write(tmp_path, 12, [("r3", "head", 2, 7, 1000.05)])
    _write(tmp_path, 13, [("r1", "tail", 4, 7, 1000.4), ("r2", "tail", 5, 7, 1000.45),
                          ("r0", "tail", 4, 7, 1000.6), ("r9", "mid", 1, 7, 1000.3)])  # fmt: skip
    effect = measure(tmp_path, {"head": (1, 2), "tail": (4, 5)}, REQUEST)
    assert effect.first_new == {"head": pytest.approx(1000.02), "tail": pytest.approx(1000.45)}
    assert effect.last_old == {"tail": pytest.approx(1000.6)}  # head's old one was before
    assert effect.delay_ms == pytest.approx(600.0)
    assert effect.worker_first_new[(12, "head")] == pytest.approx(1000.05)
    tail = effect.spans[("tail", 7)]
    assert (tail.old, tail.new, tail.start, tail.end) == (2, 1, 1000.4, 1000.6)
    assert effect.spans[("mid", 7)].other == 1
    assert effect.summary()["last_old_ms"] == {"tail": 600.0}


def test_not_in_effect_until_every_target_ran_a_new_record(tmp_path: Path) -> None:
    _write(tmp_path, 11, [("r2", "head", 2, 7, 1000.02)])
    (tmp_path / "process-12.jsonl").write_text('{"event":"process","operator":"tail"')  # cut
    effect = measure(tmp_path, {"head": (1, 2), "tail": (4, 5)}, REQUEST)
    assert effect.in_effect_at is None and effect.delay_ms is None


def test_the_timeline_is_written(tmp_path: Path) -> None:
    _write(tmp_path, 11, [("r1", "head", 1, 7, 999.9), ("r2", "head", 2, 7, 1000.02)])
    _write(tmp_path, 13, [("r1", "tail", 4, 7, 1000.4), ("r2", "tail", 5, 7, 1000.45)])
    effect = measure(tmp_path, {"head": (1, 2), "tail": (4, 5)}, REQUEST)
    png = plot_switch(effect, ["head", "mid", "tail"], tmp_path / "t.png", title="t",
                      marks={"armed (agent)": 1000.01, "nothing": None})  # fmt: skip
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cold_restart_stops_the_daemons_workers_and_keeps_the_daemon() -> None:
    """A stand-in `pyspark.daemon` (its command line names it) that forks one worker."""
    code = (
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    time.sleep(60)\n    sys.exit(0)\n"
        "print(pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    daemon = subprocess.Popen([sys.executable, "-c", code, "pyspark.daemon"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert daemon.stdout is not None
        worker = int(daemon.stdout.readline())
        stopped = stop_python_workers(os.getpid())
        assert stopped == [worker]

        def gone() -> bool:
            try:  # a zombie until the stand-in daemon reaps it: it is gone
                return Path(f"/proc/{worker}/stat").read_text().split(")")[1].split()[0] == "Z"
            except FileNotFoundError:
                return True

        wait_for(gone, 5, f"worker {worker} gone")
        assert daemon.poll() is None  # the daemon itself is left running
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        if daemon.stdout is not None:
            daemon.stdout.close()


def test_the_aligned_plot_covers_the_slowest_swap(tmp_path: Path) -> None:
    import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

    from swivel.embedded.plotting import plot_aligned

    rows = pd.DataFrame({"emitted_at": [100.5, 101.0, 119.0], "latency_s": [3.0, 4.0, 1.0],
                         "customer_model": ["expensive", "cheap", "cheap"]})  # fmt: skip
    swaps = [("fries", 100.0, 100.3), ("restart", 100.0, 118.0), ("epoch", 100.0, None)]
    png = plot_aligned(rows, swaps, tmp_path / "aligned.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
