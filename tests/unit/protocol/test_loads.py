"""The load measurement (`POST /v1/driver/loads`): what the driver builds is what the agent
accepts, unchanged; every bad number, entry or repeat is one `field: reason` naming it."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from swivel.api.errors import join_path, problems_from
from swivel.jobs.migration.metrics import BinStats, ExecutorStats, LoadSnapshot, loads_document
from swivel.protocol.loads import LoadMeasurement

BINS = 16
FieldPath = tuple[str | int, ...]

executor_ids = st.sampled_from(["0", "1", "2", "driver-adjacent-7"])
amounts = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=2**40)


@st.composite
def snapshots(draw: st.DrawFn) -> LoadSnapshot:
    window = draw(amounts)
    snapshot = LoadSnapshot(draw(st.lists(counts, max_size=5)), window)
    for b in draw(st.sets(st.integers(0, BINS - 1), max_size=BINS)):
        snapshot.bins[b] = BinStats(
            b, draw(executor_ids), draw(counts), draw(amounts), draw(counts), draw(counts)
        )
    for e in draw(st.sets(executor_ids, max_size=3)):
        snapshot.executors[e] = ExecutorStats(
            e,
            draw(amounts),
            window,
            draw(counts),
            draw(counts),
            draw(counts),
            draw(st.integers(1, 64)),
        )
    snapshot.state_error = draw(st.none() | st.text(min_size=1, max_size=20))
    return snapshot


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    return loads_document(
        draw(snapshots()),
        measured_at=draw(amounts),
        coordination_s=draw(amounts),
        processing_s=draw(amounts),
        interval_s=draw(st.none() | st.floats(min_value=0.001, max_value=3600)),
        memory_limit_bytes=draw(st.none() | counts),
    )


def problems(body: Any, bins: int | None = BINS) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        LoadMeasurement.model_validate(body, context=None if bins is None else {"bins": bins})
    return [str(p) for p in problems_from(caught.value)]


def numeric_paths(document: dict[str, Any]) -> list[FieldPath]:
    """Every number in the document, as a path of wire names and indexes."""
    paths: list[FieldPath] = []
    for key, value in document.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            paths.append((key,))
    paths += [("batches", i) for i in range(len(document["batches"]))]
    for section in ("executors", "bins"):
        for index, entry in enumerate(document[section]):
            paths += [
                (section, index, key)
                for key, value in entry.items()
                if isinstance(value, int | float) and not isinstance(value, bool)
            ]
    return paths


def replaced(document: dict[str, Any], path: FieldPath, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    target: Any = changed
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return changed


@given(documents())
def test_what_the_driver_builds_the_agent_keeps_unchanged(document: dict[str, Any]) -> None:
    measurement = LoadMeasurement.model_validate(document, context={"bins": BINS})
    assert measurement.to_wire() == document


@given(
    documents().filter(lambda d: bool(numeric_paths(d))),
    st.data(),
    st.sampled_from([-1, -0.5, math.nan, math.inf, True, "5", [1], {"n": 1}]),
)
def test_a_bad_number_is_one_problem_naming_its_path(
    document: dict[str, Any], data: st.DataObject, bad: Any
) -> None:
    path = data.draw(st.sampled_from(numeric_paths(document)))
    found = problems(replaced(document, path, bad))
    assert len(found) == 1, found
    assert found[0].startswith(join_path(path) + ": ")


def test_the_reasons_say_what_a_number_must_be() -> None:
    body = {
        "measuredAt": math.nan,
        "coordinationIntervalSeconds": 0,
        "executors": [{"executor": "0", "busySeconds": -1, "busyFraction": 1.5, "cores": 2.0}],
        "bins": [{"bin": 3, "executor": "0", "records": True, "taskMs": "5"}],
    }
    assert problems(body) == [
        "executors[0].busySeconds: input should be greater than or equal to 0",
        "executors[0].busyFraction: input should be less than or equal to 1",
        "executors[0].cores: input should be a valid integer",
        "bins[0].records: input should be a valid integer",
        "bins[0].taskMs: input should be a valid number",
        "measuredAt: input should be a finite number",
        "coordinationIntervalSeconds: input should be greater than 0",
    ]


def test_required_fields_entries_and_unknown_fields_are_named() -> None:
    assert problems({"bins": []}) == ["executors: required field is missing"]
    assert problems({"executors": {}, "bins": [7]}) == [
        "executors: input should be a valid list",
        "bins[0]: expected a JSON object",
    ]
    assert problems({"executors": [{"executor": ""}, {"busySeconds": 1}], "bins": []}) == [
        "executors[0].executor: string should have at least 1 character",
        "executors[1].executor: required field is missing",
    ]
    assert problems({"executors": [], "bins": [], "receivedAt": 1.0}) == [
        "receivedAt: unknown field (check the spelling; fields are camelCase)"
    ]
    assert problems([]) == ["expected a JSON object"]  # the agent calls this field `body`


def test_a_bin_must_be_one_of_the_jobs_and_listed_once() -> None:
    def body(*bins: int) -> dict[str, Any]:
        return {"executors": [], "bins": [{"bin": b, "executor": "0"} for b in bins]}

    assert problems(body(0, 16, -1)) == [
        "bins[1].bin: not a bin of this job (its bins are 0..15)",
        "bins[2].bin: input should be greater than or equal to 0",
    ]
    assert problems(body(0, 5, 5)) == ["bins[2].bin: bin 5 listed twice (first at bins[1])"]
    # Without the job (the driver building it) only the range is not checked.
    assert LoadMeasurement.model_validate(body(99)).bins[0].bin == 99
    assert problems(body(99, 99), bins=None) == [
        "bins[1].bin: bin 99 listed twice (first at bins[0])"
    ]


def test_an_executor_is_listed_once() -> None:
    body = {"executors": [{"executor": "0"}, {"executor": "1"}, {"executor": "0"}], "bins": []}
    assert problems(body) == ["executors[2].executor: '0' listed twice (first at executors[0])"]


def test_fields_left_out_are_not_invented_on_the_wire_but_read_as_defaults() -> None:
    body = {"executors": [{"executor": "0", "busySeconds": 2}], "bins": [], "stateError": None}
    measurement = LoadMeasurement.model_validate(body)
    assert measurement.to_wire() == {
        "executors": [{"executor": "0", "busySeconds": 2.0}],
        "bins": [],
    }
    executor = measurement.executors[0]
    assert (executor.window_seconds, executor.cores, executor.busy_fraction) == (0.0, 1, None)
    assert measurement.coordination_interval_seconds is None and measurement.batches == []


OPENAPI = Path(__file__).resolve().parents[3] / "jobs/agent/openapi.yaml"
SERVED_ONLY = {"receivedAt", "ageSeconds", "workers"}  # the agent adds them to GET /v1/loads
FACETS = ("type", "minimum", "maximum", "exclusiveMinimum", "minLength")


def _facets(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Name -> type and bounds (and the same for array items), in OpenAPI 3.0 terms."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
    (schema,) = branches
    facets = {k: schema[k] for k in FACETS if k in schema}
    if "exclusiveMinimum" in facets and facets["exclusiveMinimum"] is not True:  # 2020-12 form
        facets["minimum"], facets["exclusiveMinimum"] = facets["exclusiveMinimum"], True
    if "properties" in schema:
        facets["required"] = sorted(schema.get("required", []))
        facets["properties"] = {
            name: _facets(field, defs) for name, field in schema["properties"].items()
        }
    if "items" in schema:
        facets["items"] = _facets(schema["items"], defs)
    return facets


def test_the_openapi_document_describes_the_model() -> None:
    model = LoadMeasurement.model_json_schema(by_alias=True)
    documented = yaml.safe_load(OPENAPI.read_text())["components"]["schemas"]["Loads"]
    documented["properties"] = {
        k: v for k, v in documented["properties"].items() if k not in SERVED_ONLY
    }
    assert _facets(documented, {}) == _facets(model, model["$defs"])
