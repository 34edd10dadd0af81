"""A StreamJob's `PrewarmReady` condition (operator/healthchecks.py): from the driver's
prewarm check as the agent serves it. True when every executor answered, False naming the
executors that did not and why, Unknown before any check; kept as it was while the agent
does not answer, and its transition time moves only when its status does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from swivel.api.conditions import ConditionStatus
from swivel.api.streamjob import StreamJobStatus
from swivel.operator.agents import AgentHealth
from swivel.operator.healthchecks import JobObservation, next_status
from swivel.protocol.bodies import PrewarmCheck

NOW = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)
RUNNING_POD: dict[str, Any] = {
    "metadata": {"name": "j-driver"},
    "status": {"phase": "Running", "containerStatuses": [{"name": "spark", "ready": True}]},
}


def _observe(check: PrewarmCheck | None, *, reachable: bool = True) -> JobObservation:
    health = AgentHealth(ready=True, config_version=1, prewarm_check=check) if reachable else None
    return JobObservation(
        generation=1,
        bins=16,
        desired_executors=2,
        pod=RUNNING_POD,
        health=health,
        agent_error=None if reachable else "connection refused",
    )


def _prewarm(status: StreamJobStatus) -> Any:
    found = [c for c in status.conditions if c.type == "PrewarmReady"]
    assert len(found) <= 1
    return found[0] if found else None


def test_unknown_before_any_check() -> None:
    condition = _prewarm(next_status(StreamJobStatus(), _observe(None), NOW))
    assert condition.status is ConditionStatus.UNKNOWN and condition.reason == "NotChecked"


def test_true_when_every_executor_answered() -> None:
    check = PrewarmCheck(executors={"0": "answered", "1": "answered"})
    condition = _prewarm(next_status(StreamJobStatus(), _observe(check), NOW))
    assert condition.status is ConditionStatus.TRUE and condition.reason == "HelperAnswered"
    assert "(2)" in condition.message


def test_false_names_each_executor_that_did_not_answer_and_why() -> None:
    check = PrewarmCheck(executors={"0": "answered", "1": "no helper endpoint registered"})
    condition = _prewarm(next_status(StreamJobStatus(), _observe(check), NOW))
    assert condition.status is ConditionStatus.FALSE and condition.reason == "HelperUnanswered"
    assert "executor 1: no helper endpoint registered" in condition.message
    assert "executor 0" not in condition.message
    assert "plain way" in condition.message


def test_many_unanswered_executors_are_counted_not_listed() -> None:
    check = PrewarmCheck(executors={str(i): "timed out " + "x" * 4000 for i in range(40)})
    condition = _prewarm(next_status(StreamJobStatus(), _observe(check), NOW))
    assert "and 35 more" in condition.message
    assert len(condition.message) < 2000  # each reason cut, five named


def test_no_live_executor_is_unknown() -> None:
    condition = _prewarm(next_status(StreamJobStatus(), _observe(PrewarmCheck(executors={})), NOW))
    assert condition.status is ConditionStatus.UNKNOWN and condition.reason == "NoExecutors"


def test_kept_while_the_agent_does_not_answer_and_moved_only_on_a_change() -> None:
    answered = PrewarmCheck(executors={"0": "answered"})
    first = next_status(StreamJobStatus(), _observe(answered), NOW)
    later = NOW + timedelta(minutes=5)
    unreachable = next_status(first, _observe(None, reachable=False), later)
    assert _prewarm(unreachable) == _prewarm(first)  # not turned Unknown by an outage
    same = next_status(unreachable, _observe(answered), later)
    assert _prewarm(same).last_transition_time == NOW  # same status: no transition
    failed = PrewarmCheck(executors={"0": "timed out"})
    changed = next_status(same, _observe(failed), later)
    assert _prewarm(changed).status is ConditionStatus.FALSE
    assert _prewarm(changed).last_transition_time == later
