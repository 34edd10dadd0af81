"""Each worker process speaks only for itself (issue 11, the wire-protocol residual).

Every Python worker holds the same workers' token; what tells them apart is the secret each
gets when it enrols (`POST /v1/control/workers`). Over HTTP against a real agent: a worker
cannot ack or heartbeat for another (403 naming the field, the plan does not move), an id
that is taken is never handed to another process (pid reuse, another executor's pid), a
restarted agent or a forked worker gets the worker enrolled anew, and a made-up worker
that hosts a target and never acks holds a plan no longer than the plan timeout.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from swivel.jobs.agent.workers import ALIAS_BASE
from swivel.jobs.control import client as control
from swivel.jobs.control.client import ControlClient
from swivel.jobs.control.identity import WORKER_SECRET_HEADER

from .conftest import WORKER_TOKEN, enrol, register, wait_until

TARGETS = "customer-detector,combine"


def _acks(pid: int, version: int = 2) -> list[dict[str, Any]]:
    return [
        {"pid": pid, "operator": op, "version": version, "configVersion": 2}
        for op in TARGETS.split(",")
    ]


def _plan(call: Any, url: str, plan_id: str) -> dict[str, Any]:
    status, plan, _ = call(f"{url}/v1/plans/{plan_id}")
    assert status == 200
    return dict(plan)


def test_a_worker_cannot_ack_or_watch_for_another(agent: Any, call: Any, swap_model: Any) -> None:
    register(agent.url, 5001, TARGETS)  # the honest worker, still on the old version
    _, mine = enrol(agent.url, 5002)  # the worker whose code forges
    status, plan, _ = call(agent.url + "/v1/plans", "POST", swap_model())
    assert status == 202
    acks = agent.url + "/v1/control/acks"
    for presented in (mine, "", "x" * 43, "é"):
        status, body, _ = call(acks, "POST", _acks(5001), headers={WORKER_SECRET_HEADER: presented})
        assert status == 403, (presented, body)
        assert body["errors"][0]["field"] == "[0].pid"
        assert "registered to another process" in body["errors"][0]["reason"]
    # Mixed in with its own acks, the forged one refuses the whole body.
    mixed = _acks(5002) + _acks(5001)
    status, body, _ = call(acks, "POST", mixed, headers={WORKER_SECRET_HEADER: mine})
    assert status == 403 and [e["field"] for e in body["errors"]] == ["[2].pid"]
    # Nor can it keep the other alive or say what it hosts.
    watch = f"{agent.url}/v1/control/watch?pid=5001&operators=parse&timeout=0"
    status, body, _ = call(watch, headers={WORKER_SECRET_HEADER: mine})
    assert status == 403 and body["errors"][0]["field"] == "pid"
    assert agent.hub.workers[5001].operators == set(TARGETS.split(","))
    forged = _plan(call, agent.url, plan["id"])
    assert forged["phase"] == "Applying"
    assert forged["progress"]["workersSwitched"] == 0
    assert 'swivel_agent_rejected_total{source="identity"} 6.0' in call(agent.url + "/metrics")[1]
    # The honest worker's own acks (its secret: `register` kept it) complete the plan.
    assert call(acks, "POST", _acks(5001))[0] == 202
    wait_until(lambda: _plan(call, agent.url, plan["id"])["phase"] == "Completed")


def test_an_id_that_is_taken_is_never_handed_to_another_process(
    start_agent: Any, call: Any
) -> None:
    agent = start_agent(worker_ttl_s=0.2, forget_after_s=0.6)
    first = register(agent.url, 5001, "combine")
    # Another process with the same pid (another executor, or a reused pid): another id.
    other, second = enrol(agent.url, 5001)
    assert other >= ALIAS_BASE and second != first
    status, body, _ = call(
        agent.url + "/v1/control/acks",
        "POST",
        _acks(5001, 1),
        headers={WORKER_SECRET_HEADER: second},
    )
    assert status == 403 and body["errors"][0]["field"] == "[0].pid"
    assert enrol(agent.url, 5001)[0] not in (5001, other)
    # Once the registry forgot the silent worker, its pid is free again, and the old
    # secret speaks for nobody: the old process, were it alive, enrols again.
    wait_until(
        lambda: 5001 not in agent.call(lambda: (agent.hub.registry.forget(), agent.hub.workers)[1])
    )
    again, third = enrol(agent.url, 5001)
    assert again == 5001 and third not in (first, second)
    status, body, _ = call(
        agent.url + "/v1/control/acks",
        "POST",
        _acks(5001, 1),
        headers={WORKER_SECRET_HEADER: first},
    )
    assert status == 403


def test_a_worker_the_agent_forgot_enrols_again_under_its_pid(
    agent: Any, call: Any, swap_model: Any
) -> None:
    """What a worker meets after an agent restart (an empty registry; the restart itself is
    `test_control_channel.test_an_agent_restart_mid_plan_resumes_it`) or after the registry
    forgot it: its id is unknown (409 naming `pid`), and it enrols again, getting its pid
    back with a new secret; its acks then count."""
    worker = ControlClient(agent.url, WORKER_TOKEN, pid=6001, watch_timeout_s=0.2)
    try:
        for operator in TARGETS.split(","):
            worker.register(operator)
        worker.start()
        wait_until(lambda: worker._identity.held() is not None)  # the first fetch may time out
        before = worker._identity.held()
        assert before is not None and before[0] == 6001
        agent.call(agent.hub.workers.pop, 6001)  # as after a restart
        wait_until(lambda: worker._identity.held() not in (None, before))
        after = worker._identity.held()
        assert after is not None and after[0] == 6001 and after[1] != before[1]
        wait_until(lambda: 6001 in {w.pid for w in agent.call(agent.hub.live_workers)})
        status, plan, _ = call(agent.url + "/v1/plans", "POST", swap_model())
        assert status == 202
        assert worker.wait_for_revision(2, 5) is not None
        for operator in TARGETS.split(","):
            worker.ack(operator, 2, 2)
        wait_until(lambda: _plan(call, agent.url, plan["id"])["phase"] == "Completed")
    finally:
        worker.stop()


def test_a_forked_child_enrols_anew_and_never_presents_the_parents_secret(
    agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(control.ENV_URL, agent.url)
    monkeypatch.setenv(control.ENV_TOKEN, WORKER_TOKEN)
    control.reset()
    try:
        parent = control.get_client()
        assert parent is not None
        held = parent._identity.held()
        assert held is not None and held[0] == os.getpid()
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                os.close(read_end)
                inherited = parent._identity.held()  # the parent's object, in the child
                mine = control.get_client()
                assert mine is not None and mine is not parent
                mine.register("combine")
                mine.refresh()  # enrols, then watches with its own secret
                own = mine._identity.held()
                report = f"{inherited} {own is not None and own[0] == os.getpid()} "
                report += f"{own is not None and own[1] != held[1]}"
                os.write(write_end, report.encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        report = os.read(read_end, 200).decode()
        os.close(read_end)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert report == "None True True"
        assert agent.hub.workers[child].operators == {"combine"}
        assert agent.hub.workers[child].secret != held[1]
    finally:
        control.reset()


def test_a_made_up_worker_cannot_complete_a_plan_for_the_honest_ones(
    agent: Any, call: Any, swap_model: Any
) -> None:
    register(agent.url, 7001, TARGETS)  # honest, still on the old version
    register(agent.url, 7002, TARGETS)  # made up by a worker's code
    status, plan, _ = call(agent.url + "/v1/plans", "POST", swap_model())
    assert status == 202
    assert call(agent.url + "/v1/control/acks", "POST", _acks(7002))[0] == 202  # for itself
    time.sleep(0.3)  # ticks
    waiting = _plan(call, agent.url, plan["id"])
    assert waiting["phase"] == "Applying"  # 7001 has not switched
    assert waiting["progress"]["workersSwitched"] == 1
    assert call(agent.url + "/v1/control/acks", "POST", _acks(7001))[0] == 202
    wait_until(lambda: _plan(call, agent.url, plan["id"])["phase"] == "Completed")


def test_a_made_up_worker_that_never_acks_holds_a_plan_only_until_its_timeout(
    start_agent: Any, call: Any, swap_model: Any
) -> None:
    """The bound of what the workers' credential can still do to a plan: a made-up worker
    (enrolled and watching with a target, never acking) is a live worker the plan waits for,
    as for a real worker whose function hangs. It holds the plan until the plan timeout,
    which fails it naming that worker; the job runs on, and the next plan may be submitted."""
    agent = start_agent(plan_timeout_s=1.0)
    register(agent.url, 7001, TARGETS)  # honest
    register(agent.url, 7003, TARGETS)  # made up, never acks
    status, plan, _ = call(agent.url + "/v1/plans", "POST", swap_model())
    assert status == 202
    assert call(agent.url + "/v1/control/acks", "POST", _acks(7001))[0] == 202
    failed: dict[str, Any] = {}

    def timed_out() -> bool:
        failed.update(_plan(call, agent.url, plan["id"]))
        return bool(failed["phase"] == "Failed")

    wait_until(timed_out, timeout=5)
    assert "at pid 7003" in failed["message"] and "at pid 7001" not in failed["message"]
