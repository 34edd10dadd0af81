"""A Flux policy's rounds as the operator keeps them in the StreamJob's status: the same
`RoundSchedule` as `swivel run --policy`, carried through RFC 3339 times without loss."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import PolicyRound, StreamJobStatus
from swivel.controllers.flux import LoadBalancePolicy, MemoryPolicy, RoundSchedule
from swivel.operator.contexts import OperatorContext
from swivel.operator.policy_decisions import flux_policy
from swivel.operator.policy_rounds import kept_of, kept_rounds, received_at, schedule_of

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 11, 25, 18, 0, tzinfo=UTC).timestamp()
POLICY = LoadBalancePolicy(min_collection_s=5.0, initial_collection_s=5.0)


def test_a_move_phase_survives_the_status_round_trip() -> None:
    moving = RoundSchedule.start(POLICY, NOW).move_started(NOW + 5)
    kept = kept_of(moving, "job-rebalance-1")
    wire = StreamJobStatus(policy_rounds={"rebalance": kept}).to_manifest()
    assert wire["policyRounds"]["rebalance"]["reconfiguration"] == "job-rebalance-1"
    assert "nextRoundAt" not in wire["policyRounds"]["rebalance"]  # none while moving
    back = StreamJobStatus.model_validate(wire).policy_rounds["rebalance"]
    assert schedule_of(back) == moving
    ended = schedule_of(back).move_ended(NOW + 25, POLICY)
    assert kept_of(ended).reconfiguration is None and ended.round_at == NOW + 45


@given(
    st.floats(min_value=5.0, max_value=86_400.0),
    st.floats(min_value=0.0, max_value=1e6),
    st.booleans(),
)
def test_times_round_trip_to_the_microsecond(
    collection: float, offset: float, moving: bool
) -> None:
    schedule = RoundSchedule(collection, NOW + offset, NOW + offset + collection)
    if moving:
        schedule = schedule.move_started(NOW + offset + collection)
    back = schedule_of(PolicyRound.model_validate(kept_of(schedule, "r").to_manifest()))
    assert abs(back.collecting_since - schedule.collecting_since) < 1e-5
    assert (back.round_at is None) == (schedule.round_at is None)
    assert back.moving == schedule.moving


def test_the_spec_interval_is_fluxs_minimum_and_first_collection_phase() -> None:
    job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
    spec = job.spec.model_copy(
        update={
            "policies": job.spec.policies.model_copy(
                update={
                    "rebalance": job.spec.policies.rebalance.model_copy(
                        update={"interval_seconds": 42}
                    )
                }
            )
        }
    )
    job = job.model_copy(update={"spec": spec})
    rebalance = flux_policy(job, "rebalance")
    assert isinstance(rebalance, LoadBalancePolicy)
    assert rebalance.min_collection_s == rebalance.initial_collection_s == 42.0
    assert isinstance(flux_policy(job, "memory"), MemoryPolicy)


def test_loads_are_dated_by_the_operators_clock() -> None:
    now = datetime.fromtimestamp(NOW, UTC)
    assert received_at(now, 12.5) == NOW - 12.5


def test_a_kept_round_that_does_not_validate_counts_as_absent() -> None:
    good = kept_of(RoundSchedule.start(POLICY, NOW)).to_manifest()
    body = {
        "metadata": {"namespace": "ns", "name": "job", "uid": "u"},
        "status": {"policyRounds": {"rebalance": good, "memory": {"collectionSeconds": -1}}},
    }
    ctx = OperatorContext(cluster=None, agents=None)  # type: ignore[arg-type]
    assert set(kept_rounds(ctx, body)) == {"rebalance"}
