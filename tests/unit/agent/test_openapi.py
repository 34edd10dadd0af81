"""The agent's OpenAPI document is generated from the protocol models and the route table
(`swivel openapi`): the committed file is what they produce, every `$ref` resolves, and a
route cannot go undocumented."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from swivel.cli.openapi import command
from swivel.jobs.agent import openapi, operations
from swivel.jobs.agent.app import ROUTES
from swivel.protocol.answers import Errors
from swivel.protocol.schemas import openapi_schema

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_document_is_what_the_models_generate() -> None:
    assert not openapi.is_stale(ROOT), "regenerate with `swivel openapi`"


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_reference_names_a_component() -> None:
    document = openapi.document()
    for ref in set(_refs(document)):
        section, name = ref.removeprefix("#/components/").split("/")
        assert name in document["components"][section], ref


def test_every_route_is_documented_with_its_roles() -> None:
    paths = openapi.document()["paths"]
    for method, path, _, roles in ROUTES:
        operation = paths[path][method.lower()]
        if "security" not in operation:
            assert sorted(operation["x-swivel-roles"]) == sorted(r.value for r in roles)


def test_a_route_without_a_description_fails_the_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    described = dict(operations.OPERATIONS)
    del described[("GET", "/v1/topology")]
    monkeypatch.setattr(openapi, "OPERATIONS", described)
    with pytest.raises(ValueError, match="/v1/topology"):
        openapi.document()


def test_nullable_fields_and_exclusive_bounds_read_as_openapi_3_0() -> None:
    schema = openapi_schema(Errors, "serialization", frozenset())
    assert schema["properties"]["runningPlan"] == {"type": "string", "nullable": True}
    assert schema["additionalProperties"] is False
    coordination = openapi.document()["components"]["schemas"]["CoordinationReport"]
    interval = coordination["properties"]["intervalSeconds"]
    assert (interval["minimum"], interval["exclusiveMinimum"]) == (0, True)


def test_check_fails_on_a_stale_document_and_the_command_rewrites_it(tmp_path: Path) -> None:
    target = tmp_path / openapi.RELATIVE_PATH
    target.parent.mkdir(parents=True)
    target.write_text("openapi: 3.0.3\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(command, ["--check", "--root", str(tmp_path)]).exit_code == 1
    assert runner.invoke(command, ["--root", str(tmp_path)]).exit_code == 0
    assert runner.invoke(command, ["--check", "--root", str(tmp_path)]).exit_code == 0
    assert target.read_text(encoding="utf-8") == openapi.render()
