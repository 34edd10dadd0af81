"""Field-by-field classification of StreamJob edits (live control < live migration < restart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swivel.api.base import Disruption
from swivel.api.changes import diff_specs
from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJobSpec

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fraud-detection" / "streamjob.yaml"


def edited(change: dict[str, Any]) -> tuple[StreamJobSpec, StreamJobSpec]:
    old = load_streamjob(EXAMPLE).spec
    wire = old.to_manifest()
    for path, value in change.items():
        node = wire
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[leaf] = value
    return old, StreamJobSpec.model_validate(wire)


def test_no_change_is_no_disruption() -> None:
    old, new = edited({})
    assert diff_specs(old, new).disruption is Disruption.NONE


def test_function_params_are_live_control_messages() -> None:
    diff = diff_specs(*edited({"dataflow.operators.2.params": {"model": "cheap"}}))
    assert diff.disruption is Disruption.LIVE_CONTROL
    assert diff.fields(Disruption.LIVE_CONTROL) == ("spec.dataflow.operators[2].params",)


def test_executor_count_is_a_live_migration_and_wins_over_params() -> None:
    diff = diff_specs(
        *edited({"executor.instances": 3, "dataflow.operators.4.params": {"rule": "both"}})
    )
    assert diff.disruption is Disruption.LIVE_MIGRATION
    assert diff.fields(Disruption.LIVE_MIGRATION) == ("spec.executor.instances",)


def test_source_bins_image_and_shape_need_a_restart() -> None:
    for change in (
        {"source.rowsPerSecond": 5},
        {"dataflow.bins": 32},
        {"image": "example.com/other:1"},
        {
            "dataflow.operators.3.parallelism": 8,
            "dataflow.operators.4.parallelism": 8,
            "dataflow.operators.5.parallelism": 8,
        },
    ):
        assert diff_specs(*edited(change)).disruption is Disruption.RESTART, change


def test_policies_change_nothing_that_runs() -> None:
    diff = diff_specs(*edited({"policies": {"rebalance": {"enabled": True}}}))
    assert diff.disruption is Disruption.NONE and diff.changes


def test_operators_are_matched_by_name_not_position() -> None:
    old = load_streamjob(EXAMPLE).spec
    wire = old.to_manifest()
    wire["dataflow"]["operators"].reverse()
    assert diff_specs(old, StreamJobSpec.model_validate(wire)).disruption is Disruption.NONE
    wire["dataflow"]["operators"][0]["name"] = "sink2"
    wire["dataflow"]["operators"][0]["inputs"] = [{"from": "combine"}]
    diff = diff_specs(old, StreamJobSpec.model_validate(wire))
    assert diff.disruption is Disruption.RESTART
    assert diff.fields(Disruption.RESTART) == ("spec.dataflow.operators",)
