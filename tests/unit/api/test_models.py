"""The API models: defaults, presets, and a clear `field: reason` for every bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from swivel.api.conditions import Condition, ConditionStatus, find_condition, set_condition
from swivel.api.errors import SpecError
from swivel.api.manifests import load_reconfiguration, load_streamjob, parse_manifest
from swivel.api.reconfiguration import Reconfiguration, validate_against_job
from swivel.api.streamjob import StreamJob
from swivel.api.vocabulary import Cardinality, Partitioning
from swivel.controllers.planning import dataflow_of

ROOT = Path(__file__).resolve().parents[3]


def job(*operators: dict[str, Any], bins: int = 8) -> dict[str, Any]:
    return {"kind": "StreamJob", "spec": {"dataflow": {"bins": bins, "operators": list(operators)}}}


SRC = {"name": "src", "kind": "source"}


def problems(
    document: dict[str, Any], model: type[StreamJob] | type[Reconfiguration] = StreamJob
) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_manifest(document, model)
    return [str(p) for p in caught.value.problems]


def test_a_manifest_with_only_a_dataflow_is_valid_and_defaulted() -> None:
    parsed = parse_manifest(job(SRC, {"name": "out", "kind": "sink", "inputs": ["src"]}), StreamJob)
    spec = parsed.spec
    assert spec.executor.instances == 2 and spec.trigger.interval_ms == 1000
    assert spec.image.startswith("ghcr.io/") and spec.source.kind == "generator"
    assert spec.dataflow.operators[1].inputs[0].from_ == "src"
    assert spec.dataflow.operators[1].inputs[0].partitioning is Partitioning.FORWARD


def test_kind_presets_fill_flags_and_explicit_flags_win() -> None:
    parsed = parse_manifest(
        job(
            SRC,
            {"name": "RE", "kind": "replicate", "inputs": ["src"]},
            {"name": "FM", "kind": "flatMap", "inputs": ["RE"], "cardinality": "one-to-one"},
            {"name": "AG", "kind": "aggregate", "inputs": ["FM"]},
        ),
        StreamJob,
    )
    graph = dataflow_of(parsed.spec.dataflow)
    assert graph.by_name["RE"].cardinality is Cardinality.ONE_TO_MANY
    assert graph.by_name["RE"].at_most_one_per_edge
    assert graph.by_name["FM"].cardinality is Cardinality.ONE_TO_ONE
    assert graph.by_name["AG"].blocking and not graph.by_name["RE"].blocking


@pytest.mark.parametrize(
    ("operators", "bins", "expected"),
    [
        ((SRC,), 48, "spec.dataflow.bins: must be a power of two (got 48)"),
        (
            (SRC, {"name": "a", "inputs": ["nope"]}),
            8,
            "spec.dataflow.operators[1].inputs[0].from: unknown operator 'nope'",
        ),
        (
            (SRC, {"name": "src", "inputs": ["src"]}),
            8,
            "spec.dataflow.operators[1].name: duplicate operator name 'src' (first at operators[0])",
        ),
        (
            (SRC, {"name": "a", "inputs": ["src", "b"]}, {"name": "b", "inputs": ["a"]}),
            8,
            "spec.dataflow.operators: the dataflow has a cycle",
        ),
        (
            (SRC, {"name": "a", "inputs": ["src"], "parallelism": 4}),
            8,
            "spec.dataflow.operators[1].inputs[0].partitioning: a forward edge needs equal parallelism",
        ),
        (
            (SRC, {"name": "a"}),
            8,
            "spec.dataflow.operators[1].inputs: map operator 'a' needs an input",
        ),
        (
            (SRC, {"name": "a", "inputs": ["src"], "functoin": "m:f"}),
            8,
            "spec.dataflow.operators[1].functoin: unknown field",
        ),
        (
            (SRC, {"name": "bad name!", "inputs": ["src"]}),
            8,
            "spec.dataflow.operators[1].name: string should match pattern",
        ),
        (
            (SRC, {"name": "a", "inputs": ["src"], "function": "no-colon"}),
            8,
            "spec.dataflow.operators[1].function",
        ),
        (
            (SRC, {"name": "a", "inputs": [{"from": "src", "partitioning": "zigzag"}]}),
            8,
            "spec.dataflow.operators[1].inputs[0].partitioning: input should be 'forward', 'hash' or 'broadcast'",
        ),
    ],
)
def test_bad_dataflows_name_the_field_and_the_reason(
    operators: tuple[dict[str, Any], ...], bins: int, expected: str
) -> None:
    found = problems(job(*operators, bins=bins))
    assert any(p.startswith(expected) for p in found), found


def test_a_hash_edge_between_different_parallelisms_is_fine() -> None:
    parse_manifest(
        job(
            SRC,
            {"name": "a", "inputs": [{"from": "src", "partitioning": "hash"}], "parallelism": 4},
        ),
        StreamJob,
    )


def reconf(**spec: Any) -> dict[str, Any]:
    return {"kind": "Reconfiguration", "spec": {"jobRef": {"name": "j"}, **spec}}


def test_an_empty_reconfiguration_is_refused() -> None:
    assert problems(reconf(), Reconfiguration) == [
        "spec.functionUpdates: an empty reconfiguration: give functionUpdates, rescale or moves"
    ]


def test_reconfiguration_field_errors() -> None:
    found = problems(
        reconf(functionUpdates=[{"operator": "a"}, {"operator": "a"}]), Reconfiguration
    )
    assert found == [
        "spec.functionUpdates[1].operator: operator 'a' is updated twice (also functionUpdates[0])"
    ]
    found = problems(reconf(rescale={"executors": 0}), Reconfiguration)
    assert found == ["spec.rescale.executors: input should be greater than or equal to 1"]
    found = problems(
        reconf(moves=[{"bins": [1], "to": "0"}], scheduler="eventually"), Reconfiguration
    )
    assert found == ["spec.scheduler: input should be 'fries', 'epoch' or 'restart'"]


def test_validation_against_the_job_names_missing_operators_and_bins() -> None:
    the_job = parse_manifest(job(SRC, {"name": "a", "inputs": ["src"]}), StreamJob).spec
    the_reconf = parse_manifest(
        reconf(
            functionUpdates=[{"operator": "ghost", "function": "m:f"}],
            moves=[{"bins": [1, 9], "to": "1"}],
        ),
        Reconfiguration,
    ).spec
    with pytest.raises(SpecError) as caught:
        validate_against_job(the_reconf, the_job)
    assert [str(p) for p in caught.value.problems] == [
        "spec.functionUpdates[0].operator: the job has no operator 'ghost' (operators: a, src)",
        "spec.moves[0].bins: bins [9] out of range [0, 8)",
    ]


def test_wrong_kind_and_api_version() -> None:
    assert problems({"kind": "Pod", "spec": {}}) == ["kind: expected StreamJob, got 'Pod'"]
    assert problems({"apiVersion": "v1", "kind": "StreamJob", "spec": {}}) == [
        "apiVersion: expected swivel.dev/v1alpha1, got 'v1'"
    ]


def test_files_that_are_missing_or_not_yaml(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_streamjob(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"broken.yaml:\d+: not valid YAML"):
        load_streamjob(broken)


def test_the_examples_parse() -> None:
    folder = ROOT / "examples" / "fraud-detection"
    the_job = load_streamjob(folder / "streamjob.yaml")
    for name in ("reconfiguration.yaml", "rescale.yaml"):
        validate_against_job(load_reconfiguration(folder / name).spec, the_job.spec)


def test_manifest_round_trips_through_the_wire_form() -> None:
    parsed = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
    assert parse_manifest(parsed.to_manifest(), StreamJob) == parsed


def test_set_condition_keeps_transition_time_while_status_is_unchanged() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ready = Condition(
        type="Ready", status=ConditionStatus.FALSE, reason="DriverPending", last_transition_time=t0
    )
    conditions = set_condition((), ready)
    later = ready.model_copy(
        update={"reason": "AgentUnreachable", "last_transition_time": t0 + timedelta(minutes=1)}
    )
    conditions = set_condition(conditions, later)
    assert find_condition(conditions, "Ready") == later.model_copy(
        update={"last_transition_time": t0}
    )
    flipped = later.model_copy(update={"status": ConditionStatus.TRUE, "reason": "Running"})
    conditions = set_condition(conditions, flipped)
    assert (
        len(conditions) == 1 and conditions[0].last_transition_time == flipped.last_transition_time
    )


def test_aimd_band_must_be_ordered() -> None:
    document = job(SRC)
    document["spec"]["policies"] = {"aimd": {"lowerOverhead": 0.2, "upperOverhead": 0.1}}
    assert problems(document) == ["spec.policies.aimd.lowerOverhead: must be below upperOverhead"]
