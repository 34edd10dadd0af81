"""`GET /v1/plans/{id}` only reads, and long-polls with `since`/`timeout` (docs/agent.md).

The plan moves on where the agent learns something (acks, driver reports) and through the
app's periodic task (timeouts); reads return the document as the last change left it, with
a `revision` a follower hands back as `since` to wait for the next change.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.integration.agent.conftest import register
from tests.polling import wait_for

ACKS = [
    {"pid": 7, "operator": op, "version": 2, "configVersion": 2}
    for op in ("customer-detector", "combine")
]


def _submit(agent: Any, call: Any, swap_model: Any) -> str:
    status, plan, _ = call(agent.url + "/v1/plans", "POST", swap_model())
    assert status == 202, plan
    return f"{agent.url}/v1/plans/{plan['id']}"


def test_two_reads_with_nothing_in_between_return_the_same_document(
    agent: Any, call: Any, swap_model: Any
) -> None:
    plan_url = _submit(agent, call, swap_model)
    first, second = call(plan_url), call(plan_url)
    assert first[0] == second[0] == 200
    assert first[1] == second[1] and first[1]["phase"] == "Applying"
    assert isinstance(first[1]["revision"], int)
    register(agent.url, 7)
    assert call(agent.url + "/v1/control/acks", "POST", ACKS)[0] == 202
    done = call(plan_url)[1]  # the acks completed it, not the read
    assert done["phase"] == "Completed" and done["revision"] != first[1]["revision"]


def test_a_plan_times_out_without_any_read(start_agent: Any, call: Any, swap_model: Any) -> None:
    agent = start_agent(plan_timeout_s=0.3)
    plan_id = _submit(agent, call, swap_model).rsplit("/", 1)[1]
    failed = wait_for(
        lambda: (record := agent.call(agent.hub.plan, plan_id)).phase.value == "Failed" and record,
        5.0,
        "the periodic task fails the plan",
        every=0.02,
    )
    assert "timed out" in failed.message


def test_a_long_poll_returns_when_the_plan_changes(agent: Any, call: Any, swap_model: Any) -> None:
    plan_url = _submit(agent, call, swap_model)
    seen = call(plan_url)[1]["revision"]
    answers: list[tuple[float, Any]] = []

    def poll() -> None:
        started = time.monotonic()
        answer = call(f"{plan_url}?since={seen}&timeout=20")
        answers.append((time.monotonic() - started, answer))

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.3)  # let it wait: a change before it asks would answer at once anyway
    assert not answers, "answered before the plan changed"
    register(agent.url, 7)
    assert call(agent.url + "/v1/control/acks", "POST", ACKS)[0] == 202
    poller.join(10)
    ((took, (status, document, _)),) = answers
    assert status == 200 and document["phase"] == "Completed"
    assert document["revision"] != seen and took < 10


def test_a_long_poll_answers_the_same_document_after_its_timeout(
    agent: Any, call: Any, swap_model: Any
) -> None:
    plan_url = _submit(agent, call, swap_model)
    current = call(plan_url)[1]
    started = time.monotonic()
    status, same, _ = call(f"{plan_url}?since={current['revision']}&timeout=0.4")
    assert status == 200 and same == current
    assert time.monotonic() - started >= 0.4
    started = time.monotonic()  # a revision the caller holds that is not the current one
    status, answer, _ = call(f"{plan_url}?since={current['revision'] - 1}&timeout=20")
    assert status == 200 and answer == current and time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("query", "field"),
    [("since=abc", "since"), ("since=-1", "since"), ("since=1&timeout=nan", "timeout"),
     ("since=1&timeout=soon", "timeout")],
)  # fmt: skip
def test_a_bad_long_poll_parameter_is_400_naming_it(
    agent: Any, call: Any, swap_model: Any, query: str, field: str
) -> None:
    plan_url = _submit(agent, call, swap_model)
    status, answer, _ = call(f"{plan_url}?{query}")
    assert status == 400 and answer["errors"][0]["field"] == field


def test_an_unknown_plan_is_404_before_any_wait(agent: Any, call: Any) -> None:
    started = time.monotonic()
    status, _, _ = call(f"{agent.url}/v1/plans/nope-2?since=1&timeout=20")
    assert status == 404 and time.monotonic() - started < 5
