"""`Planning`: the operator's plan of an admitted Reconfiguration is made after the submit,
once, and a planner failure leaves `status.plan` empty instead of failing every retry."""

from __future__ import annotations

from pathlib import Path

import pytest

from swivel.api.manifests import load_streamjob
from swivel.api.reconfiguration import ReconfigurationSpec
from swivel.operator import reconciling
from swivel.operator.reconciling import Planning

ROOT = Path(__file__).resolve().parents[3]
SPEC = ReconfigurationSpec.model_validate(
    {
        "jobRef": {"name": "fraud-detection"},
        "functionUpdates": [{"operator": "combine", "params": {"rule": "both"}}],
    }
)


def test_the_plan_is_made_once_when_first_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
    calls: list[int] = []
    real = reconciling.plan_reconfiguration

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reconciling, "plan_reconfiguration", counting)
    planning = Planning(job, SPEC, 2)
    assert calls == []  # admitted, not planned: nothing on the way to the agent
    first = planning.fields()
    assert first["kind"] == "live-control" and first["plan"]["kind"] == "live-control"
    assert planning.fields() == first
    assert calls == [1]


def test_a_failing_planner_leaves_the_plan_out(monkeypatch: pytest.MonkeyPatch) -> None:
    job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")

    def failing(*_: object, **__: object) -> object:
        raise ValueError("no plan")

    monkeypatch.setattr(reconciling, "plan_reconfiguration", failing)
    assert Planning(job, SPEC, 2).fields() == {}
