"""Flux's damping in the operator (real kopf runtime on the sandbox, a real agent): after a
move phase, the rebalance timer skips every tick until the damped deadline -- the next
collection phase lasts as long as the move phase took -- and a restarted operator honours
the same deadline, kept in the StreamJob's status (`status.policyRounds`)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from swivel.operator.agents import ClientAgentLink
from swivel.operator.clusters import KubernetesCluster
from swivel.operator.contexts import Intervals, OperatorContext
from tests.polling import wait_for

from .conftest import Harness, OperatorThread
from .test_policies import JOB, _automatic, _events, _job, setup, skewed_loads

__all__ = ["setup"]  # the fixture, shared with test_policies

MOVE_PHASE_S = 8.0  # the driver takes this long to move the bins: Δ becomes at least this


def _round(harness: Harness) -> dict[str, Any]:
    status = (harness.get("streamjobs", JOB) or {}).get("status") or {}
    found: dict[str, Any] = (status.get("policyRounds") or {}).get("rebalance") or {}
    return found


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _restart(harness: Harness, agent_url: str, server: str) -> None:
    """A new operator: new kopf memo, new caches, the same cluster and agent."""
    assert harness.operator is not None
    harness.operator.stop()
    ctx = OperatorContext(
        cluster=KubernetesCluster(harness.api),
        agents=ClientAgentLink(lambda namespace, job: agent_url, retries=0, request_timeout_s=2.0),
        intervals=Intervals(health=0.5, reconfiguration=0.2, policies=0.2),
    )
    harness.operator = OperatorThread(ctx, harness.namespace, server)


def test_a_damped_policy_waits_for_its_deadline_across_a_restart(
    setup: tuple[Harness, Any],
) -> None:
    harness, start_agent = setup
    _job(harness, {"rebalance": {"enabled": True, "intervalSeconds": 5}})
    harness.run_driver(JOB)
    agent = start_agent()
    first_round = wait_for(lambda: _round(harness).get("nextRoundAt"), 30, "a first deadline")
    assert _round(harness)["collectionSeconds"] == 5.0  # Δmin, the first collection phase
    assert agent.call("POST", "/v1/driver/loads", skewed_loads())[0] == 202

    # Round 1 at its deadline: the hot bin moves; the move phase begins.
    created = wait_for(lambda: _automatic(harness, "rebalance"), 30, "a rebalance")
    (first,) = created
    assert _at(first["metadata"]["creationTimestamp"]) >= _at(first_round) - 1.0
    moving = wait_for(lambda: _round(harness).get("reconfiguration"), 10, "the move phase")
    assert moving == first["metadata"]["name"] and "nextRoundAt" not in _round(harness)

    # Play the driver: the move takes MOVE_PHASE_S, then completes.
    harness.wait_phase("reconfigurations", moving, "Applying", timeout=20)
    _, action = agent.call("GET", "/v1/driver/actions?since=0&timeout=0")
    assert action["action"] == "move-bins"
    time.sleep(MOVE_PHASE_S)
    report = {"planId": action["planId"], "phase": "Completed", "binsMoved": 1, "binsTotal": 1}
    assert agent.call("POST", "/v1/driver/migration", report)[0] == 202
    harness.wait_phase("reconfigurations", moving, "Completed", timeout=20)

    # Damped: the next collection phase lasts as long as the move phase took.
    deadline_text = wait_for(lambda: _round(harness).get("nextRoundAt"), 20, "the damped deadline")
    kept = _round(harness)
    assert kept["lastMovePhaseSeconds"] >= MOVE_PHASE_S
    assert kept["collectionSeconds"] == kept["lastMovePhaseSeconds"]
    deadline = _at(deadline_text)
    assert abs(deadline - _at(kept["collectingSince"]) - kept["collectionSeconds"]) < 0.01
    wait_for(lambda: _events(harness, "PolicyDamped"), 10, "a PolicyDamped Event")
    # The driver measures the new placement (skewed again); the operator restarts.
    assert agent.call("POST", "/v1/driver/loads", skewed_loads())[0] == 202
    _restart(harness, agent.url, harness.server)

    # Skewed loads, a fresh operator ticking every 0.2 s: still nothing before the deadline.
    while time.time() < deadline - 1.0:
        assert len(_automatic(harness, "rebalance")) == 1, "a round before its deadline"
        time.sleep(0.5)
    second = wait_for(
        lambda: [r for r in _automatic(harness, "rebalance") if r["metadata"]["name"] != moving],
        15,
        "the round after the deadline",
    )
    assert _at(second[0]["metadata"]["creationTimestamp"]) >= deadline - 1.0  # 1 s resolution
    name = second[0]["metadata"]["name"]  # its move phase, written right after creating it
    wait_for(lambda: _round(harness).get("reconfiguration") == name, 10, "the new move phase")
    inputs = json.loads(second[0]["metadata"]["annotations"]["swivel.dev/policy-inputs"])
    assert inputs["collectionSeconds"] == round(kept["collectionSeconds"], 3)
    assert _at(inputs["collectingSince"]) == _at(kept["collectingSince"])
