"""The kind of a plan (status.kind, the Kind printer column) for each sort of change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.api.reconfiguration import ReconfigurationSpec
from swivel.controllers.planning import plan_reconfiguration

ROOT = Path(__file__).resolve().parents[3]
JOB = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml").spec

UPDATE = {"functionUpdates": [{"operator": "customer-detector", "params": {"model": "cheap"}}]}
COORDINATION = {"coordination": {"intervalSeconds": 20}}
MOVE = {"moves": [{"bins": [0], "to": "1"}]}


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        (COORDINATION, "live-control"),
        ({**COORDINATION, "scheduler": "epoch"}, "live-control"),
        (UPDATE, "live-control"),
        ({**UPDATE, **COORDINATION}, "live-control"),
        ({**MOVE, **COORDINATION}, "live-migration"),
        ({**UPDATE, "scheduler": "restart"}, "restart"),
    ],
)
def test_plan_kind(changes: dict[str, Any], kind: str) -> None:
    spec = ReconfigurationSpec.model_validate({"jobRef": {"name": "fraud-detection"}, **changes})
    plan = plan_reconfiguration(JOB, spec)
    assert plan.to_dict()["kind"] == kind


def test_coordination_only_plan_has_no_components_or_migration() -> None:
    spec = ReconfigurationSpec.model_validate(
        {"jobRef": {"name": "fraud-detection"}, **COORDINATION}
    )
    document = plan_reconfiguration(JOB, spec).to_dict()
    assert document["components"] == [] and document["migration"] is None
