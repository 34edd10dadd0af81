"""Random JSON against every body route of a real agent: never a 5xx, and every refusal has
the `{"errors": [{"field", "reason"}]}` shape. Field names come from the wire models, so the
documents reach deep into validation (and, when valid, into the hub)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swivel.api.manifests import load_streamjob

from .conftest import JOB_PATH, AgentServer, http, register

KEYS = [
    "name", "spec", "jobRef", "functionUpdates", "operator", "function", "params", "scheduler",
    "requestedAt", "idempotencyKey", "schedulerOverride", "moves", "bins", "to", "rescale",
    "executors", "coordination", "intervalSeconds", "pid", "version", "configVersion",
    "partition", "batchId", "at", "kind", "event", "planId", "phase", "message", "seq",
    "executor", "busySeconds", "windowSeconds", "records", "stateBytes", "measuredAt",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["fraud-detection", "combine", "customer-detector", "fries", "epoch",
                     "started", "completed", "Failed", "Completed", "processed", "armed"]),
)  # fmt: skip
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=6),
    ),
    max_leaves=30,
)
SPEC = {
    "jobRef": {"name": "fraud-detection"},
    "functionUpdates": [{"operator": "combine", "params": {"rule": "both"}}],
}
# A valid body per route; the fuzz replaces or adds one field anywhere in it.
VALID: dict[str, Any] = {
    "/v1/plans": {"name": "fuzz", "spec": SPEC, "requestedAt": 1.7e9},
    "/v1/control/acks": [{"pid": 1, "operator": "combine", "version": 1, "configVersion": 1}],
    "/v1/driver/progress": {"batchId": 3, "event": "started", "at": 1.7e9},
    "/v1/driver/migration": {"planId": "fuzz-2", "phase": "Running", "binsMoved": 0},
    "/v1/driver/loads": {"executors": [{"executor": "1"}], "bins": [{"bin": 0, "executor": "1"}]},
    "/v1/driver/coordination": {"intervalSeconds": 5.0},
    "/v1/driver/prewarm-check": {"executors": {"0": "answered"}, "checkedAt": 1.7e9},
    "/v1/driver/actions/done": {"seq": 1},
}
ROUTES = list(VALID)


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _paths(value, (*prefix, index))
    return found


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(document))
    node = copy
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copy


@st.composite
def near_valid(draw: st.DrawFn, route: str) -> Any:
    base = VALID[route]
    path = draw(st.sampled_from(_paths(base)[1:]))
    return _replaced(base, path, draw(DOCUMENTS))


@pytest.fixture(scope="module")
def fuzzed_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentServer]:
    job = load_streamjob(JOB_PATH)
    server = AgentServer(job, Path(tmp_path_factory.mktemp("fuzz")) / "state", migrations=True)
    register(server.url, 1, "combine")
    yield server
    server.stop()


@pytest.mark.parametrize("route", ROUTES)
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_no_document_gets_a_5xx(fuzzed_agent: AgentServer, route: str, data: st.DataObject) -> None:
    document = data.draw(st.one_of(DOCUMENTS, near_valid(route)))
    raw = json.dumps(document).encode()
    status, body, _ = http(fuzzed_agent.url + route, "POST", raw=raw)
    assert status < 500, (route, document, body)
    if status >= 400:
        assert isinstance(body, dict) and body["errors"], (route, document, body)
        assert all(set(e) >= {"field", "reason"} for e in body["errors"])
    # a busy agent refuses the next plan (409) - keep every plan path reachable
    fuzzed_agent.call(_finish_active_plan, fuzzed_agent)


def _finish_active_plan(server: AgentServer) -> None:
    state = server.hub._state
    state.active_plan, state.transition = None, None
