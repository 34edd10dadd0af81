"""Schemathesis over the agent's OpenAPI document, against a real agent on 127.0.0.1 (issue 11 §5).

Every operation in `jobs/agent/openapi.yaml` gets generated requests, valid and invalid
(schemathesis' positive and negative modes), sent with a real bearer token:

- with the **operator's** token: never a 5xx, and each answer conforms to the document (its
  status code is listed, its content type and body match the declared schema), so the
  document the operator and the CLI are written against tells the truth;
- with a **worker's** token (what a user function can read from its environment): never a
  5xx, and every route that is not the workers' answers 403, whatever the input (the role
  check comes before any parsing; docs/agent.md "Credentials").

The run is bounded for CI (a few derandomized examples per operation, long-poll waits
clamped to 0.1 s); `SWIVEL_SCHEMATHESIS_EXAMPLES=200` runs a deeper one. The totals per role
(inputs tried, 2xx/3xx, 4xx, 5xx) are printed at the end of the module (`-s`) and recorded in
docs/reliability.md.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, settings

from swivel.api.manifests import load_streamjob
from swivel.jobs.agent.app import OPENAPI_PATH, ROUTES
from swivel.jobs.agent.auth import Role

from .conftest import DRIVER_TOKEN, JOB_PATH, TOKEN, WORKER_TOKEN, AgentServer

EXAMPLES = int(os.environ.get("SWIVEL_SCHEMATHESIS_EXAMPLES", "12"))
LONG_POLL_S = 0.1  # the watch and actions routes wait up to `timeout` (60 s at most)
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
]
ROLES = {(method, path): roles for method, path, _, roles in ROUTES}
TALLY: dict[str, Counter[str]] = {"operator": Counter(), "driver": Counter(), "worker": Counter()}

schema = schemathesis.openapi.from_dict(
    yaml.safe_load(Path(OPENAPI_PATH).read_text(encoding="utf-8"))
)
bounded = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def agent_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = AgentServer(load_streamjob(JOB_PATH), tmp_path_factory.mktemp("schemathesis"))
    yield server.url
    server.stop()
    for role, tally in TALLY.items():
        print(f"\nschemathesis {role}: {dict(sorted(tally.items()))}")


def _bounded_long_poll(case: Any) -> None:
    """A long-poll waits for as long as it is asked (a watch 20 s by default, 60 s at most; a
    plan 30 s at most); a wait
    that is absent or reads as more than LONG_POLL_S is clamped so the run stays bounded.
    Values that are no number (or negative) are sent as generated."""
    if case.operation.path not in (
        "/v1/control/watch",
        "/v1/driver/actions",
        "/v1/plans/{plan_id}",
    ):
        return
    if case.query is None:
        case.query = {}
    timeout = case.query.get("timeout")
    if timeout is None:
        case.query["timeout"] = LONG_POLL_S
        return
    try:
        seconds = float(timeout)
    except (TypeError, ValueError, OverflowError):
        return
    if seconds > LONG_POLL_S:  # NaN and 1e400 are sent as generated: both are refused
        case.query["timeout"] = LONG_POLL_S if not isinstance(timeout, str) else str(LONG_POLL_S)


def _count(role: str, case: Any, status: int) -> list[Any]:
    """Tally the answer; the checks that apply to it. `/readyz` answers a documented 503
    until the driver's first progress report (kubelet readiness, not a server error); it
    is tallied apart and still checked against the document."""
    tally = TALLY[role]
    tally["tried"] += 1
    if case.operation.path == "/readyz" and status == 503:
        tally["503 not ready (documented)"] += 1
        return [c for c in CHECKS if c is not schemathesis.checks.not_a_server_error]
    tally[f"{status // 100}xx"] += 1
    tally[str(status)] += 1
    return CHECKS


def _sent_another_authorization(response: Any, token: str) -> bool:
    """Negative cases may replace or drop the Authorization header (security negated):
    such a request is not the role's and must be a 401 on any route that needs a token."""
    sent = response.request.headers.get("Authorization")
    return bool(sent != f"Bearer {token}")


def _check_roles(case: Any, response: Any, role: Role, token: str) -> None:
    """A request without this role's token is a 401; a method the route lacks a 405; a
    route the role may not call a 403 naming `Authorization`, whatever else was sent."""
    status = response.status_code
    roles = ROLES.get((case.method.upper(), case.operation.path))
    if _sent_another_authorization(response, token):
        assert status in (401, 405) or case.operation.path in ("/healthz", "/readyz"), status
    elif roles is None:  # a method the route does not have (schemathesis tries TRACE, ...)
        assert status == 405, (case.method, case.path, status)
    elif role not in roles:
        assert status == 403, (case.method, case.path, status)
        assert response.json()["errors"][0]["field"] == "Authorization"


@schema.parametrize()
@bounded
def test_operator_token_no_5xx_and_answers_conform(case: Any, agent_url: str) -> None:
    _bounded_long_poll(case)
    response = case.call(base_url=agent_url, headers={"Authorization": f"Bearer {TOKEN}"})
    case.validate_response(response, checks=_count("operator", case, response.status_code))
    _check_roles(case, response, Role.OPERATOR, TOKEN)


@schema.parametrize()
@bounded
def test_worker_token_no_5xx_and_403_off_its_routes(case: Any, agent_url: str) -> None:
    _bounded_long_poll(case)
    response = case.call(base_url=agent_url, headers={"Authorization": f"Bearer {WORKER_TOKEN}"})
    case.validate_response(response, checks=_count("worker", case, response.status_code))
    _check_roles(case, response, Role.WORKER, WORKER_TOKEN)


@schema.parametrize()
@bounded
def test_driver_token_no_5xx_and_403_off_its_routes(case: Any, agent_url: str) -> None:
    """The driver's routes are the ones with the richest bodies (progress, migration,
    loads, coordination): only its token gets past the role check to their validation."""
    _bounded_long_poll(case)
    response = case.call(base_url=agent_url, headers={"Authorization": f"Bearer {DRIVER_TOKEN}"})
    case.validate_response(response, checks=_count("driver", case, response.status_code))
    _check_roles(case, response, Role.DRIVER, DRIVER_TOKEN)
