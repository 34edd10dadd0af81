"""`LocalCluster` leaves no orphans: a process that started a cluster and then dies without
calling `stop()` -- SIGKILL (the kernel's parent-death signal ends the daemons), SIGTERM
(the handler stops the cluster, then the process still dies of SIGTERM), or a plain exit
(atexit) -- takes the master and worker JVMs (and their process groups) with it. A
`start()` that fails (a worker exits early) stops what it started before it raises.

Each test starts a cluster (~45 s on the 2-core machine): `make test` runs the SIGKILL and
the failed start, `make test-slow` the SIGTERM handler and the plain exit too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from swivel.jobs.migration.cluster import LocalCluster
from tests.polling import PollTimeoutError, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

CHILD = """
import json, sys, time
from pathlib import Path
from swivel.jobs.migration.cluster import LocalCluster
cluster = LocalCluster(workers=1, worker_memory="1g", root=Path(sys.argv[1]))
cluster.start()
print(json.dumps(cluster.pids()), flush=True)
if sys.argv[2] == "exit":
    sys.exit(0)
time.sleep(600)
"""


def _groups_alive(groups: list[int]) -> list[int]:
    """Processes (not zombies) whose process group is one of `groups`."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "(comm)": state, ppid, pgrp, ...
        if fields[0] != "Z" and int(fields[2]) in groups:
            alive.append(int(entry.name))
    return alive


def _start(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], list[int]]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "cluster"), mode],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert child.stdout is not None
    with child.stdout:  # nothing else is printed
        line = child.stdout.readline()
    assert line, f"the child did not start its cluster (exit {child.wait()})"
    pids = json.loads(line)
    assert len(pids) == 2 and not set(_groups_alive(pids)).isdisjoint(pids)
    return child, pids


def _assert_gone(groups: list[int], timeout: float = 45.0) -> None:
    try:
        wait_for(
            lambda: not _groups_alive(groups), timeout, "the cluster's processes gone", every=0.5
        )
    except PollTimeoutError:
        left = _groups_alive(groups)
        for pid in left:  # do not leave them behind for the next test
            os.kill(pid, signal.SIGKILL)
        pytest.fail(f"orphaned cluster processes: {left}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_sigkill_of_the_parent_ends_the_daemons(tmp_path: Path) -> None:
    child, pids = _start(tmp_path, "sleep")
    child.kill()
    assert child.wait(timeout=10) == -signal.SIGKILL
    _assert_gone(pids)


@pytest.mark.slow  # ~45 s each (a cluster start); SIGKILL of the parent stays in `make test`
def test_sigterm_stops_the_cluster_and_chains(tmp_path: Path) -> None:
    child, pids = _start(tmp_path, "sleep")
    child.send_signal(signal.SIGTERM)
    # the default disposition is restored and the signal re-raised after the cleanup
    assert child.wait(timeout=40) == -signal.SIGTERM
    _assert_gone(pids, timeout=10)


@pytest.mark.slow  # ~45 s each (a cluster start); SIGKILL of the parent stays in `make test`
def test_exit_without_stop_ends_the_daemons(tmp_path: Path) -> None:
    child, pids = _start(tmp_path, "exit")
    assert child.wait(timeout=40) == 0
    _assert_gone(pids, timeout=10)


def test_a_failed_start_stops_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker refuses its memory and exits at once, while the master comes up.
    cluster = LocalCluster(workers=1, worker_memory="lots", root=tmp_path / "cluster")
    spawned: list[int] = []
    spawn = cluster._spawn

    def spawn_and_note(name: str, *args: str) -> Any:
        process = spawn(name, *args)
        spawned.append(process.popen.pid)
        return process

    monkeypatch.setattr(cluster, "_spawn", spawn_and_note)
    with pytest.raises(RuntimeError, match="worker-0 exited early"):
        cluster.start(timeout=60.0)
    assert len(spawned) == 2
    _assert_gone(spawned, timeout=10)
