"""`POST /v1/control/acks` bodies: validated whole (`acks.Ack`), refused field by field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from swivel.jobs.agent.acks import AcksRejected, parse_acks
from swivel.protocol.acks import Ack, AckKind

OPENAPI = Path(__file__).resolve().parents[3] / "jobs/agent/openapi.yaml"
GOOD = {"pid": 7, "operator": "a", "version": 2}


def test_a_full_ack_and_a_minimal_one() -> None:
    full = {**GOOD, "configVersion": 3, "partition": 1, "batchId": 9, "at": 5.5, "kind": "armed"}
    first, second = parse_acks([full, GOOD])
    assert (first.config_version, first.batch_id, first.at, first.kind) == (3, 9, 5.5, "armed")
    assert (second.at, second.batch_id, second.kind) == (None, None, AckKind.PROCESSED)


# (ack fields, the field refused, a word of the reason)
REFUSED = [
    ({"at": "x"}, "[1].at", "number"),
    ({"at": float("inf")}, "[1].at", "finite"),
    ({"at": -1}, "[1].at", "greater"),
    ({"batchId": "7"}, "[1].batchId", "integer"),  # strict: no numeric strings
    ({"batchId": 1.5}, "[1].batchId", "integer"),
    ({"kind": "done"}, "[1].kind", "'processed' or 'armed'"),
    ({"kind": None}, "[1].kind", "'processed' or 'armed'"),
    ({"version": True}, "[1].version", "integer"),  # strict: no booleans
    ({"configVersion": "3"}, "[1].configVersion", "integer"),
    ({"operator": ""}, "[1].operator", "at least 1"),
    ({"pid": None}, "[1].pid", "integer"),
    ({"extra": 1}, "[1].extra", "unknown field"),
]


@pytest.mark.parametrize(("fields", "field", "reason"), REFUSED, ids=[str(r[0]) for r in REFUSED])
def test_each_bad_field_is_named(fields: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(AcksRejected) as refused:
        parse_acks([GOOD, {**GOOD, **fields}])
    (problem,) = refused.value.problems
    assert problem.field == field and reason in problem.reason


@pytest.mark.parametrize(
    ("body", "field"),
    [({"pid": 1}, "body"), (None, "body"), ([3], "[0]"), ([{"pid": 1}], "[0].operator")],
)
def test_a_body_that_is_no_array_of_objects(body: Any, field: str) -> None:
    with pytest.raises(AcksRejected) as refused:
        parse_acks(body)
    assert refused.value.problems[0].field == field


def test_the_openapi_document_describes_the_model() -> None:
    model = Ack.model_json_schema(by_alias=True)
    documented = yaml.safe_load(OPENAPI.read_text())["components"]["schemas"]["Ack"]
    assert sorted(documented["required"]) == sorted(model["required"])
    assert documented["additionalProperties"] is False
    for name, field in model["properties"].items():
        wire = documented["properties"][name]
        if "$ref" in field:
            kind = model["$defs"][field["$ref"].rsplit("/", 1)[-1]]
            assert (wire["type"], wire["enum"]) == (kind["type"], kind["enum"]), name
            continue
        branches = [b for b in field.get("anyOf", [field]) if b.get("type") != "null"]
        (schema,) = branches
        assert wire["type"] == schema["type"], name
        assert wire.get("nullable", False) == ("anyOf" in field), name
        for facet in ("minimum", "minLength"):
            assert wire.get(facet) == schema.get(facet), (name, facet)
    assert set(documented["properties"]) == set(model["properties"])
