"""Worker identities (issue 11): the registry's enrolment and authentication, and the
client's side of it (`swivel.jobs.control.identity`), without a network."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from swivel.jobs.agent.workers import ALIAS_BASE, WorkerRegistry
from swivel.jobs.control.identity import WorkerIdentity, identity_problem
from swivel.protocol.documents import BodyRejected


def _registry(capacity: int | None = None) -> tuple[WorkerRegistry, list[float]]:
    now = [1000.0]
    registry = WorkerRegistry(
        ["a"], lambda: now[0], ttl_s=30.0, forget_after_s=120.0, capacity=capacity
    )
    return registry, now


def test_an_id_is_handed_out_once_until_it_is_forgotten() -> None:
    registry, now = _registry()
    first, secret = registry.enrol(57)
    again, other = registry.enrol(57)  # a second process with pid 57
    third, _ = registry.enrol(57)
    assert first == 57 and again == ALIAS_BASE and third == ALIAS_BASE + 1
    assert len({secret, other}) == 2 and len(secret) >= 40
    now[0] += 121.0  # silent past forget_after: the pid is free again
    back, fresh = registry.enrol(57)
    assert back == 57 and fresh not in (secret, other)


def test_only_the_worker_s_own_secret_speaks_for_it() -> None:
    registry, _ = _registry()
    pid, secret = registry.enrol(57)
    _, other = registry.enrol(58)
    assert registry.authenticate(pid, secret, "pid") is None
    for presented in (other, None, "", secret[:-1], "\udcff" * 43):
        problem = registry.authenticate(pid, presented, "[0].pid")
        assert problem is not None and problem.field == "[0].pid"
    assert registry.authenticate(99, None, "pid") is None  # unknown: the route says (409)
    registry.register(100, ["a"])  # made in-process: no secret, nobody speaks for it
    assert registry.authenticate(100, None, "pid") is not None


def test_enrolment_is_bounded() -> None:
    registry, _ = _registry(capacity=2)
    registry.enrol(1)
    registry.enrol(1)
    with pytest.raises(BodyRejected) as refused:
        registry.enrol(1)
    assert refused.value.status == 429


class Agent:
    """A stand-in for the agent's enrol route (what `WorkerIdentity` sends and reads)."""

    def __init__(self, status: int = 201) -> None:
        self.status, self.enrolled = status, 0

    def request(
        self,
        method: str,
        path: str,
        timeout: float,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes]:
        assert (method, path) == ("POST", "/v1/control/workers")
        self.enrolled += 1
        answer = {"pid": body["pid"], "secret": f"s{self.enrolled}"}
        return self.status, json.dumps(answer).encode()


def test_the_client_enrols_once_and_again_only_when_lost() -> None:
    agent, identity = Agent(), WorkerIdentity(7)
    held = identity.ensure(agent, 1.0)
    assert held == (7, "s1") and identity.ensure(agent, 1.0) == held
    identity.lost((7, "stale"))  # another thread's old identity: ours stays
    assert identity.ensure(agent, 1.0) == held
    identity.lost(held)
    assert identity.ensure(agent, 1.0) == (7, "s2") and agent.enrolled == 2


def test_a_stand_in_without_identities_is_followed_under_the_pid() -> None:
    assert WorkerIdentity(7).ensure(Agent(404), 1.0) == (7, None)


@pytest.mark.parametrize(
    ("status", "fields", "identity"),
    [
        (403, ["[0].pid"], True),
        (409, ["pid"], True),
        (403, ["Authorization"], False),  # a role's refusal: enrolling again changes nothing
        (409, ["[0].batchId"], False),
        (422, ["[0].pid"], False),
    ],
)
def test_which_answers_mean_enrol_again(status: int, fields: list[str], identity: bool) -> None:
    body = json.dumps({"errors": [{"field": f, "reason": "r"} for f in fields]}).encode()
    assert identity_problem(status, body) is identity
    assert not identity_problem(403, b"not json")
