"""The control client's synchronous read (`refresh`: GET /v1/control/watch?timeout=0) against
a real agent on 127.0.0.1: what the wrappers call at a task's first check
(swivel.jobs.runtime.freshness) so a worker whose long-poll is broken or late still runs
each micro-batch on every snapshot published before it started.
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from typing import Any

import pytest

from swivel.jobs.control import client as control
from swivel.jobs.control.client import ControlClient, RefreshError
from swivel.jobs.runtime.compiling import job_snapshot
from swivel.jobs.runtime.feeds import AgentFeed
from tests.integration.agent.conftest import WORKER_TOKEN


def _quiet_client(url: str, pid: int) -> ControlClient:
    """A client whose long-poll never runs (not started): its snapshot changes only when it
    reads synchronously, as with a watch that is broken or slower than a batch."""
    worker = ControlClient(url, WORKER_TOKEN, pid=pid)
    worker.register("customer-detector")
    return worker


def test_a_refresh_brings_what_the_long_poll_did_not(
    agent: Any, call: Any, swap_model: Any
) -> None:
    worker = _quiet_client(agent.url, 3001)
    try:
        assert worker.current() is None
        first = worker.refresh()
        assert first is not None and first.config_version == 1
        assert call(agent.url + "/v1/plans", "POST", swap_model())[0] == 202
        assert worker.current() is first  # nothing delivered it: no long-poll runs
        fresh = worker.refresh()
        assert fresh is not None and fresh.config_version == 2
        assert fresh.transition is not None and fresh.transition.scheduler == "fries"
        assert worker.refresh() is fresh  # 304: nothing newer, the snapshot held stays
        # The agent counts the refreshing worker as alive and hosting its operator.
        assert 3001 in {w.pid for w in agent.call(agent.hub.live_workers)}
    finally:
        worker.stop()


def test_one_refresh_is_one_round_trip_on_one_host(agent: Any) -> None:
    """The per-task cost of the batch-start read: printed, not asserted (a shared machine)."""
    worker = _quiet_client(agent.url, 3002)
    try:
        worker.refresh()  # connects; later reads reuse the keep-alive connection
        seconds = []
        for _ in range(300):
            started = time.perf_counter()
            worker.refresh()
            seconds.append(time.perf_counter() - started)
    finally:
        worker.stop()
    ms = sorted(s * 1000 for s in seconds)
    print(
        f"\nrefresh (304, keep-alive) on 127.0.0.1, {len(ms)} calls: p50 "
        f"{statistics.median(ms):.2f} ms, p99 {ms[int(len(ms) * 0.99)]:.2f} ms, "
        f"max {ms[-1]:.2f} ms (load average {os.getloadavg()[0]:.1f})"
    )


def test_a_refresh_that_cannot_reach_the_agent_fails_after_its_deadline() -> None:
    with socket.socket() as placeholder:  # a port nobody listens on
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    worker = ControlClient(f"http://127.0.0.1:{port}", WORKER_TOKEN, pid=3003)
    started = time.monotonic()
    with pytest.raises(RefreshError, match=f"127.0.0.1:{port}"):
        worker.refresh(deadline_s=0.3)
    assert 0.3 <= time.monotonic() - started < 5.0  # retried until the deadline, not forever


def test_a_refresh_retries_through_an_agent_restart(start_agent: Any) -> None:
    first = start_agent()
    port = first.port
    worker = _quiet_client(first.url, 3004)
    try:
        assert worker.refresh() is not None
        first.stop()
        outcome: dict[str, Any] = {}

        def read() -> None:
            try:
                outcome["snapshot"] = worker.refresh(deadline_s=10.0)
            except RefreshError as error:  # reported by the assertion below
                outcome["error"] = error

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.5)  # the reader is retrying against a closed port
        assert reader.is_alive()
        start_agent(port=port)
        reader.join(15)
        assert "snapshot" in outcome, outcome
        assert outcome["snapshot"].config_version == 1
    finally:
        worker.stop()


def test_an_agent_feed_refresh_reads_through_the_process_client(
    agent: Any, call: Any, swap_model: Any, job: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (control.ENV_URL, control.ENV_TOKEN):
        monkeypatch.delenv(name, raising=False)
    control.reset()
    feed = AgentFeed(agent.url, WORKER_TOKEN, job_snapshot(job.spec))
    try:
        assert feed.refresh("customer-detector").config_version == 1
        assert call(agent.url + "/v1/plans", "POST", swap_model())[0] == 202
        # Whether or not the long-poll delivered it yet, the synchronous read has it.
        assert feed.refresh("customer-detector").config_version == 2
        assert feed.current("customer-detector").config_version == 2
    finally:
        control.reset()
