"""The agent refuses a function reference outside the allow-list with 422, before anything
is published (issue 11 §1): the configuration version and the plan list do not move."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.api.functions import PREFIXES_ENV

BYPASSES = [
    ("function", "swivel.jobs.examples.fraud:pd.DataFrame.to_csv"),
    ("function", "swivel.jobs.examples.labels:time.sleep"),
    ("function", "swivel.jobs.testing.probes:counting"),  # the tests' probes: not by default
    ("function", "swivel.jobs.examples.fraud:pd.read_pickle"),
    ("function", "os:system"),
    ("function", "swivel.jobs.examples.nope:parse"),
    ("stateTransform", "swivel.jobs.examples.fraud:parse.__globals__"),
]


@pytest.fixture(autouse=True)
def _the_default_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installation's default, not the tests' wider list (tests/conftest.py): the agent
    reads it at every submission."""
    monkeypatch.delenv(PREFIXES_ENV, raising=False)


@pytest.mark.parametrize(("key", "ref"), BYPASSES)
def test_a_refused_reference_is_422_and_nothing_is_published(
    agent: Any, call: Any, swap_model: Any, key: str, ref: str
) -> None:
    before = call(agent.url + "/v1/config")[1]
    body = swap_model()
    body["spec"]["functionUpdates"][0][key] = ref
    status, answer, _ = call(agent.url + "/v1/plans", "POST", body)
    assert status == 422, answer
    (error,) = answer["errors"]
    assert error["field"] == f"spec.functionUpdates[0].{key}"
    assert repr(ref) in error["reason"]
    assert "allowed: functions defined in modules under [swivel.jobs.examples]" in error["reason"]
    assert call(agent.url + "/v1/config")[1] == before
    assert agent.call(lambda: dict(agent.hub._state.plans)) == {}  # no plan record either


def test_an_allowed_reference_is_accepted(agent: Any, call: Any, swap_model: Any) -> None:
    body = swap_model()
    body["spec"]["functionUpdates"][0]["function"] = "swivel.jobs.examples.fraud:customer_model"
    status, answer, _ = call(agent.url + "/v1/plans", "POST", body)
    assert status == 202, answer
