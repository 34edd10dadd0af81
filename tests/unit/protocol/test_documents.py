"""The JSON reader and the strict wire models: bounded depth, finite numbers, 64-bit
integers, `field: reason` for every refusal."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.protocol.bodies import (
    CoordinationReport,
    MigrationReport,
    ProgressReport,
    SubmissionBody,
)
from swivel.protocol.documents import (
    MAX_DEPTH,
    BodyRejected,
    query_int,
    query_seconds,
    read_json,
)


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
        b"NaN",
        b"-Infinity",
        b"1e999",
        b"18446744073709551616",
        b"-9223372036854775809",
        b"\xff",
        b"",
    ],
)
def test_read_json_refuses_what_no_honest_caller_sends(raw: bytes) -> None:
    with pytest.raises(BodyRejected) as refused:
        read_json(raw)
    assert refused.value.problems[0].field == "body"


def test_read_json_takes_honest_documents() -> None:
    assert read_json(b'{"a": [1, 2.5, -3, 9223372036854775807]}') == {"a": [1, 2.5, -3, 2**63 - 1]}
    depth = MAX_DEPTH
    assert read_json(b"[" * depth + b"]" * depth) is not None


@pytest.mark.parametrize(
    ("model", "body", "field"),
    [
        (ProgressReport, {"batchId": "1", "event": "started"}, "batchId"),
        (ProgressReport, {"batchId": True, "event": "started"}, "batchId"),
        (ProgressReport, {"batchId": 1, "event": "started", "at": 1e300}, "at"),
        (ProgressReport, {"batchId": 1, "event": "started", "extra": 1}, "extra"),
        (MigrationReport, {"planId": "p", "phase": "Exploded"}, "phase"),
        (MigrationReport, {"planId": "", "phase": "Failed"}, "planId"),
        (MigrationReport, {"planId": "p", "phase": "Failed", "message": "x" * 5000}, "message"),
        (CoordinationReport, {"intervalSeconds": 0}, "intervalSeconds"),
        (CoordinationReport, {"intervalSeconds": 1e9}, "intervalSeconds"),
        (SubmissionBody, {"name": "x", "requestedAt": 1e300}, "requestedAt"),
        (SubmissionBody, {"name": 3}, "name"),
        (ProgressReport, [1], "body"),
    ],
)
def test_models_name_the_bad_field(model: Any, body: Any, field: str) -> None:
    with pytest.raises(BodyRejected) as refused:
        model.parse(body)
    assert [p.field for p in refused.value.problems] == [field]


@pytest.mark.parametrize("raw", ["-1", "x", "1e3", "١٢", "9" * 21, str(2**63)])
def test_query_integers(raw: str) -> None:
    with pytest.raises(BodyRejected):
        query_int(raw, "since", 0)


def test_query_seconds_are_finite_and_clamped() -> None:
    assert query_seconds(None, "timeout", 20.0, 60.0) == 20.0
    assert query_seconds("1000", "timeout", 20.0, 60.0) == 60.0
    assert query_seconds("-5", "timeout", 20.0, 60.0) == 0.0
    for raw in ("nan", "inf", "-inf", "x", "1" * 40):
        with pytest.raises(BodyRejected):
            query_seconds(raw, "timeout", 20.0, 60.0)
