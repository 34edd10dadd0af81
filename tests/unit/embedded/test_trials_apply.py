"""`trials.apply`: the benchmark's submit-and-follow over `BlockingAgent` retries a 409 (the
previous plan's transition is still being retired) and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from swivel.embedded import trials
from swivel.embedded.agents import BlockingAgent
from swivel.jobs.agent.client import AgentRejected

BUSY = AgentRejected(409, [{"field": "", "reason": "busy"}], {"runningPlan": "p-1"})


class ScriptedAgent(BlockingAgent):
    """Answers each submission from `answers` in turn (an exception is raised)."""

    def __init__(self, answers: list[Any]) -> None:
        super().__init__("http://127.0.0.1:9", "token")
        self.answers, self.submitted, self.followed = answers, [], []

    def submit(self, name: str, spec: Mapping[str, Any], **options: Any) -> dict[str, Any]:
        self.submitted.append((name, options))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    def wait_for_completion(self, plan_id: str, timeout_s: float = 300.0) -> dict[str, Any]:
        self.followed.append(plan_id)
        return {"id": plan_id, "phase": "Completed"}


def test_a_busy_agent_is_asked_again_until_it_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trials.time, "sleep", lambda _: None)
    agent = ScriptedAgent([BUSY, BUSY, {"id": "p-2", "phase": "Applying"}])
    plan = trials.apply(agent, "swap", {"jobRef": {"name": "j"}}, scheduler_override="naive")
    assert plan == {"id": "p-2", "phase": "Completed"} and agent.followed == ["p-2"]
    assert [options["scheduler_override"] for _, options in agent.submitted] == ["naive"] * 3


def test_a_refusal_is_not_retried() -> None:
    refused = AgentRejected(422, [{"field": "spec.functionUpdates[0].operator", "reason": "?"}])
    agent = ScriptedAgent([refused])
    with pytest.raises(AgentRejected) as raised:
        trials.apply(agent, "swap", {})
    assert raised.value.status == 422 and len(agent.submitted) == 1 and agent.followed == []


def test_busy_for_longer_than_the_retry_window_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trials.time, "sleep", lambda _: None)
    agent = ScriptedAgent([BUSY, BUSY])
    with pytest.raises(AgentRejected):
        trials.apply(agent, "swap", {}, retry_s=-1.0)
