"""Issue 10 §1 in the operator: a Reconfiguration the agent refuses with 422 ends Failed,
its Failed condition carrying the agent's `field: reason`, and its status.plan says the
same refusal and the scheduler to use instead (both come from the one refusal function)."""

from __future__ import annotations

from datetime import UTC, datetime

from swivel.api.reconfiguration import ReconfigurationSpec, ReconfigurationStatus
from swivel.api.streamjob import StreamJob
from swivel.operator.phases import Phase, Reason
from swivel.operator.reconciling import Planning, after_rejection, apply_decision
from tests.unit.agent.test_submissions import issue_10_body, issue_10_job

REASON = "fries would switch at 'parse', ...; use scheduler: epoch (or restart)"


def test_a_422_ends_failed_with_the_field_and_reason_in_the_failed_condition() -> None:
    decision = after_rejection(422, [{"field": "spec.scheduler", "reason": REASON}], None)
    assert (decision.phase, decision.reason) == (Phase.FAILED, Reason.REJECTED)
    status = apply_decision(
        ReconfigurationStatus(phase=Phase.PLANNED),
        decision,
        now=datetime(2026, 1, 1, tzinfo=UTC),
        generation=1,
    )
    assert status.phase is Phase.FAILED
    failed = {c.type: c for c in status.conditions}["Failed"]
    assert failed.status.value == "True" and failed.reason == "RejectedByAgent"
    assert f"spec.scheduler: {REASON}" in failed.message
    assert f"spec.scheduler: {REASON}" in (status.message or "")


def test_the_operators_plan_carries_the_agents_refusal() -> None:
    job = StreamJob.model_validate(
        {"metadata": {"name": "fanout"}, "spec": issue_10_job().model_dump(by_alias=True)}
    )
    spec = ReconfigurationSpec.model_validate(issue_10_body("fries")["spec"])
    plan = Planning(job, spec, 1).fields()["plan"]
    assert [r["field"] for r in plan["refused"]] == ["spec.scheduler"]
    assert "'parse'" in plan["refused"][0]["reason"]
    assert plan["suggestedScheduler"] == "epoch"
