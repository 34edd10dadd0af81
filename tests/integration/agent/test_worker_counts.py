"""Monitoring through the control plane (Chi §5) with the real agent on 127.0.0.1: a real
worker control client reports what its wrappers counted on its acks connection, other
workers post `AckReport` bodies over HTTP, and `GET /v1/loads` serves the sums per bin."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.jobs.control import counting
from swivel.jobs.control.ack_sender import REPORT_EVERY_S
from swivel.jobs.control.identity import WORKER_SECRET_HEADER
from swivel.operator.agents import Loads
from tests.integration.agent.conftest import SECRETS, register
from tests.integration.agent.test_loads import measurement
from tests.polling import wait_for
from tests.worker_counts import counts_report

DETECTOR = "customer-detector"  # keyed in the fraud job: its partitions are bins


@pytest.fixture
def counter() -> counting.WorkCounter:
    """The test's own counter, which only its client drains: the process's counter is also
    drained by any other control client still running in this test process (CI's flake of
    2026-11-27: the counts went to another client and never reached this agent)."""
    return counting.WorkCounter()


def workers_of(agent: Any, call: Any) -> dict[str, Any] | None:
    status, body, _ = call(agent.url + "/v1/loads")
    assert status == 200, body
    workers: dict[str, Any] | None = body.get("workers")
    return workers


def test_a_workers_counts_reach_the_loads_on_its_acks_connection(
    agent: Any, call: Any, clients: Any, counter: counting.WorkCounter
) -> None:
    assert call(agent.url + "/v1/driver/loads", "POST", measurement({"0": 5, "1": 5}))[0] == 202
    assert workers_of(agent, call) is None  # nothing reported yet
    worker = clients(4101, DETECTOR, "parse", counter=lambda: counter)
    wait_for(lambda: agent.call(lambda: agent.hub.registry.registered(worker.pid)), 5.0)
    counter.add(DETECTOR, 3, 120, 0.6)  # as the keyed wrapper counts a key group of bin 3
    counter.add(DETECTOR, 3, 30, 0.15)
    counter.add("parse", 0, 400, 0.2)  # a stateless operator's partition is no bin
    wait_for(lambda: workers_of(agent, call) is not None, 5 * REPORT_EVERY_S)
    workers = workers_of(agent, call)
    assert workers is not None
    assert workers["bins"] == [
        {"bin": 3, "rows": 150, "busySeconds": 0.75, "workers": 1,
         "ageSeconds": workers["bins"][0]["ageSeconds"]}
    ]  # fmt: skip
    assert workers["bins"][0]["ageSeconds"] < 2 * REPORT_EVERY_S + 1
    operators = {o["operator"]: (o["rows"], o["keyed"]) for o in workers["operators"]}
    assert operators == {DETECTOR: (150, True), "parse": (400, False)}
    # The operator's policies read it with the same models (operator/agents.py).
    _, body, _ = call(agent.url + "/v1/loads")
    loads = Loads.from_document(body)
    assert loads.workers is not None and loads.workers.bins[0].rows == 150


def test_several_workers_of_one_bin_add_up_and_a_repeat_counts_once(agent: Any, call: Any) -> None:
    assert call(agent.url + "/v1/driver/loads", "POST", measurement({"0": 5, "1": 5}))[0] == 202
    register(agent.url, 4201, DETECTOR)
    register(agent.url, 4202, DETECTOR)
    url = agent.url + "/v1/control/acks"
    assert (
        call(url, "POST", counts_report(4201, 1, 7, rows=100, busy_s=0.5))[0] == 403
    )  # no secret: see below
    for pid, seq, rows in ((4201, 1, 100), (4202, 1, 60), (4202, 1, 60)):  # the last: resent
        status, answer, _ = call(
            url,
            "POST",
            counts_report(pid, seq, 7, rows=rows, busy_s=0.1),
            headers=_secret(agent, pid),
        )
        assert status == 202, answer
    workers = workers_of(agent, call)
    assert workers is not None
    assert [(b["bin"], b["rows"], b["workers"]) for b in workers["bins"]] == [(7, 160, 2)]
    # ... and the same totals on /metrics, for Prometheus (the resent report once)
    _, text, _ = call(agent.url + "/metrics")
    assert f'swivel_worker_rows_total{{operator="{DETECTOR}",partition="7"}} 160.0' in text
    assert f'swivel_worker_busy_seconds_total{{operator="{DETECTOR}",partition="7"}} 0.2' in text
    assert "swivel_worker_count_reports_total 2.0" in text
    # Counts naming a bin the job does not have are untrue: dropped (a reused Python worker
    # may hold counts of an earlier query), the body still taken.
    status, answer, _ = call(
        url, "POST", counts_report(4201, 2, 16, rows=5, busy_s=0.1), headers=_secret(agent, 4201)
    )
    assert status == 202, answer
    workers = workers_of(agent, call)
    assert workers is not None and [b["bin"] for b in workers["bins"]] == [7]
    # Another worker's counts under this worker's secret: 403.
    status, answer, _ = call(
        url, "POST", counts_report(4202, 3, 7, rows=5, busy_s=0.1), headers=_secret(agent, 4201)
    )
    assert status == 403 and answer["errors"][0]["field"] == "counts[0].pid"


def _secret(agent: Any, pid: int) -> dict[str, str]:
    return {WORKER_SECRET_HEADER: SECRETS[agent.url, pid]}
