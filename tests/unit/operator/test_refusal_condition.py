"""Issue 10 §1 in the operator: a Reconfiguration the agent refuses with 422 ends Failed,
its Failed condition carrying the agent's `field: reason` (the one refusal function's),
and the operator does not plan for itself: status.plan stays empty, not a plan that
would never run."""

from __future__ import annotations

from datetime import UTC, datetime

from swivel.api.reconfiguration import ReconfigurationStatus
from swivel.operator.phases import Phase, Reason
from swivel.operator.reconciling import after_rejection, apply_decision

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
    assert status.plan is None and status.kind is None
