"""The agent's side of `POST /v1/driver/loads`: a refused body names every bad field (the
400's `errors`) and changes nothing kept, neither `GET /v1/loads` nor the gauges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.loads import LoadsRejected, parse_loads
from swivel.jobs.agent.store import StateStore

JOB = load_streamjob(
    Path(__file__).resolve().parents[3] / "examples/fraud-detection/streamjob.yaml"
)


def measurement(busy: dict[str, float]) -> dict[str, Any]:
    return {
        "measuredAt": 1_700_000_000.0,
        "windowSeconds": 10.0,
        "executors": [
            {"executor": e, "busySeconds": s, "windowSeconds": 10.0} for e, s in busy.items()
        ],
        "bins": [
            {"bin": b, "executor": sorted(busy)[b % len(busy)], "records": b} for b in range(16)
        ],
        "coordinationIntervalSeconds": 30.0,
    }


def rejected(body: Any) -> list[tuple[str, str]]:
    with pytest.raises(LoadsRejected) as caught:
        parse_loads(body, bins=16)
    return [(p.field, p.reason) for p in caught.value.problems]


def test_every_bad_field_is_named_with_its_reason() -> None:
    bad = measurement({"0": 9})
    bad["bins"][2]["bin"] = 99
    bad["executors"][0]["busySeconds"] = -1
    assert rejected(bad) == [
        ("executors[0].busySeconds", "input should be greater than or equal to 0"),
        ("bins[2].bin", "not a bin of this job (its bins are 0..15)"),
    ]
    assert rejected([bad]) == [("body", "expected a JSON object")]
    assert rejected({"bins": []}) == [("executors", "required field is missing")]


def test_the_kept_document_is_the_body_given() -> None:
    body = measurement({"0": 9, "1": 1})
    assert parse_loads(body, bins=16) == body


BAD_BODIES = [
    pytest.param({"executors": [{"executor": "0", "busySeconds": -1}], "bins": []}, id="negative"),
    pytest.param({"executors": [], "bins": [{"bin": 16, "executor": "0"}]}, id="bin-range"),
    pytest.param({"executors": [], "bins": [], "windowSeconds": "10"}, id="string-number"),
    pytest.param({"executors": [{"executor": "0"}, {"executor": "0"}], "bins": []}, id="repeat"),
    pytest.param({"executors": [], "bins": [], "receivedAt": 1.0}, id="unknown-field"),
    pytest.param({"bins": []}, id="missing"),
    pytest.param([], id="not-an-object"),
]


@pytest.mark.parametrize("body", BAD_BODIES)
def test_a_refused_post_changes_nothing_kept(tmp_path: Path, body: Any) -> None:
    agent = Hub(JOB.spec, JOB.name, store=StateStore(tmp_path), clock=lambda: 1000.0)
    agent.record_loads(measurement({"0": 9, "1": 1}))
    kept, exported = agent.loads(), gauges(agent)
    with pytest.raises(LoadsRejected):
        agent.record_loads(body)
    assert agent.loads() == kept and gauges(agent) == exported


def gauges(agent: Hub) -> str:
    return agent.metrics.exposition().decode()  # gauges and the count of reports kept
