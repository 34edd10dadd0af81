"""Pure parts of the policy timers: the agent's loads document -> `Loads`, the annotation
with the measured inputs, AIMD's damping, staleness."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJob
from swivel.controllers import aimd
from swivel.operator.agents import Loads
from swivel.operator.naming import Owner
from swivel.operator.policy_decisions import (
    INPUTS_ANNOTATION,
    automatic_reconfiguration,
    decide_memory,
    decide_rebalance,
    interval_change_due,
    moves_of,
    next_aimd,
    round_inputs,
    stale_after_s,
)

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
OWNER = Owner("fraud-detection", "streams", "uid-1")


@pytest.fixture
def job() -> StreamJob:
    return load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")


def document(**changes: object) -> dict[str, object]:
    bins = [
        {"bin": b, "executor": str(b % 2), "records": 4000 if b == 6 else 1000, "stateBytes": 10}
        for b in range(16)
    ]
    base: dict[str, object] = {
        "measuredAt": 1_800_000_000.0,
        "batches": [1, 2],
        "executors": [
            {"executor": "0", "busySeconds": 9.0, "windowSeconds": 10.0, "memoryBytes": 80},
            {"executor": "1", "busySeconds": 1.0, "windowSeconds": 10.0, "memoryBytes": 80},
        ],
        "bins": bins,
        "coordinationSeconds": 0.5,
        "processingSeconds": 1.5,
        "coordinationIntervalSeconds": 4.0,
        "ageSeconds": 3.0,
    }
    return {**base, **changes}


def test_the_agents_document_becomes_loads() -> None:
    loads = Loads.from_document(document())
    assert loads.assignment[6] == "0" and loads.assignment[7] == "1"
    assert loads.interval_seconds == 4.0 and loads.age_seconds == 3.0
    assert loads.batches == (1, 2) and loads.coordination_seconds == 0.5
    with pytest.raises(ValueError, match="not a loads document"):
        Loads.from_document({"executors": []})


def test_a_round_carries_its_inputs_in_an_annotation(job: StreamJob) -> None:
    loads = Loads.from_document(document())
    decision = decide_rebalance(job, loads)
    assert [(m.bin, m.source, m.target) for m in decision.moves] == [(6, "0", "1")]
    recon = automatic_reconfiguration(
        OWNER,
        "rebalance",
        moves_of(decision),
        NOW,
        inputs=round_inputs("rebalance", loads, decision),
    )
    inputs = json.loads(recon["metadata"]["annotations"][INPUTS_ANNOTATION])
    assert inputs["measuredAt"] == "2027-01-15T08:00:00Z"
    assert inputs["moves"] == [
        {"bin": 6, "from": "0", "to": "1", "records": 4000, "stateBytes": 10}
    ]
    assert inputs["pairs"][0]["outcome"] == "moved a bin"


def test_memory_moves_state_off_an_executor_over_its_limit(job: StreamJob) -> None:
    # 1Gi executors, limit 70 %: executor 0 holds 900 MB, executor 1 almost nothing.
    heavy = document(
        executors=[
            {"executor": "0", "busySeconds": 1, "windowSeconds": 10, "memoryBytes": 900_000_000},
            {"executor": "1", "busySeconds": 1, "windowSeconds": 10, "memoryBytes": 10_000_000},
        ],
        bins=[
            {"bin": b, "executor": str(b % 2), "records": 1,
             "stateBytes": 112_500_000 if b % 2 == 0 else 1_250_000}
            for b in range(16)
        ],
    )  # fmt: skip
    decision = decide_memory(job, Loads.from_document(heavy))
    assert decision.moved and all(m.source == "0" and m.target == "1" for m in decision.moves)


def test_aimd_grows_on_overhead_and_is_damped_for_small_changes(job: StreamJob) -> None:
    loads = Loads.from_document(document())  # overhead 0.5 / 2.0 = 25 %: above the band
    state = next_aimd(job, loads, None)
    assert state.interval_s == 8.0 and interval_change_due(4.0, state.interval_s)
    calm = Loads.from_document(document(coordinationSeconds=0.0, processingSeconds=2.0))
    shrunk = next_aimd(job, calm, aimd.AimdState(4.0, 0.0))
    assert shrunk.interval_s == 3.5  # additive decrease: 12.5 %, under the threshold
    assert not interval_change_due(4.0, shrunk.interval_s)
    assert interval_change_due(None, 3.5)


def test_old_loads_are_stale(job: StreamJob) -> None:
    loads = Loads.from_document(document(coordinationIntervalSeconds=100.0))
    assert stale_after_s(job, loads) == 300.0  # 3 coordination intervals
