"""The Argo CD health checks, executed as real Lua (lupa) the way Argo CD runs them: `obj` is a
global holding the resource, the chunk returns `{status, message}`.

Argo CD embeds gopher-lua with only the safe standard libraries, so the runtime here has
`os`, `io`, `require`, `load*` and `debug` removed: a check that needed them would fail here
as it would in Argo CD.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.prerequisites import require_module

lupa = require_module("lupa", "pip install lupa")

ARGOCD = Path(__file__).resolve().parents[2] / "charts" / "swivel" / "argocd"
UNSAFE_GLOBALS = ("os", "io", "require", "dofile", "loadfile", "load", "debug", "package")


def health(script: str, obj: dict[str, Any]) -> tuple[str, str]:
    runtime = lupa.LuaRuntime(unpack_returned_tuples=True)
    for name in UNSAFE_GLOBALS:
        runtime.globals()[name] = None
    runtime.globals()["obj"] = runtime.table_from(obj, recursive=True)
    result = runtime.execute((ARGOCD / script).read_text(encoding="utf-8"))
    status, message = result["status"], result["message"]
    assert isinstance(status, str) and isinstance(message, str), dict(result)
    return status, message


def cond(kind: str, status: str, reason: str = "Reason", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def job(status: dict[str, Any] | None, generation: int = 3) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "swivel.dev/v1alpha1",
        "kind": "StreamJob",
        "metadata": {"name": "fraud-detection", "generation": generation},
        "spec": {},
    }
    if status is not None:
        body["status"] = {"observedGeneration": 3, **status}
    return body


READY = cond("Ready", "True", "Running", "2 executors, 16 bins")
NOT_READY = cond("Ready", "False", "DriverPending", "driver pod is Pending")

JOB_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("no status yet", job(None), "Progressing", "observe the job"),
    (
        "stale status",
        job({"phase": "Running", "conditions": [READY]}, generation=4),
        "Progressing",
        "generation 4",
    ),
    (
        "stale status hides an old failure",
        job({"phase": "Failed", "conditions": [cond("Degraded", "True")]}, generation=4),
        "Progressing",
        "generation 4",
    ),
    ("pending", job({"phase": "Pending", "conditions": []}), "Progressing", "Pending"),
    (
        "starting, driver pending",
        job({"phase": "Starting", "conditions": [NOT_READY]}),
        "Progressing",
        "Starting",
    ),
    (
        "running and ready",
        job({"phase": "Running", "conditions": [READY]}),
        "Healthy",
        "Running: 2 executors, 16 bins",
    ),
    (
        "reconfiguring live",
        job(
            {
                "phase": "Reconfiguring",
                "conditions": [READY, cond("Reconfiguring", "True", "Applying", "swap-model")],
            }
        ),
        "Progressing",
        "Applying: swap-model",
    ),
    (
        "reconfiguring phase without the condition yet",
        job({"phase": "Reconfiguring", "conditions": [READY]}),
        "Progressing",
        "Reconfiguring",
    ),
    (
        "restarting from the checkpoint",
        job({"phase": "Restarting", "conditions": [READY]}),
        "Progressing",
        "Restarting",
    ),
    (
        "finished reconfiguring",
        job(
            {
                "phase": "Running",
                "conditions": [READY, cond("Reconfiguring", "False", "Idle")],
            }
        ),
        "Healthy",
        "Running",
    ),
    (
        "degraded condition wins over ready",
        job(
            {
                "phase": "Running",
                "conditions": [
                    READY,
                    cond("Degraded", "True", "AgentUnreachable", "no answer from the agent"),
                ],
            }
        ),
        "Degraded",
        "AgentUnreachable: no answer from the agent",
    ),
    (
        "degraded false is not degraded",
        job({"phase": "Running", "conditions": [READY, cond("Degraded", "False")]}),
        "Healthy",
        "Running",
    ),
    (
        "failed phase",
        job({"phase": "Failed", "message": "query failed", "conditions": [NOT_READY]}),
        "Degraded",
        "query failed",
    ),
    (
        "degraded phase",
        job({"phase": "Degraded", "conditions": [cond("Degraded", "True", "QueryFailed")]}),
        "Degraded",
        "QueryFailed",
    ),
    (
        "running but not ready",
        job({"phase": "Running", "conditions": [NOT_READY]}),
        "Progressing",
        "DriverPending: driver pod is Pending",
    ),
    ("running without conditions", job({"phase": "Running"}), "Progressing", "Ready"),
]


@pytest.mark.parametrize(
    ("obj", "expected", "fragment"),
    [case[1:] for case in JOB_CASES],
    ids=[case[0] for case in JOB_CASES],
)
def test_streamjob_health(obj: dict[str, Any], expected: str, fragment: str) -> None:
    status, message = health("health-streamjob.lua", obj)
    assert status == expected
    assert fragment in message


def reconf(status: dict[str, Any] | None, generation: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "swivel.dev/v1alpha1",
        "kind": "Reconfiguration",
        "metadata": {"name": "swap-model", "generation": generation},
        "spec": {"jobRef": {"name": "fraud-detection"}},
    }
    if status is not None:
        body["status"] = {"observedGeneration": 1, **status}
    return body


RECONF_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("no status yet", reconf(None), "Progressing", "observe the reconfiguration"),
    ("stale", reconf({"phase": "Completed"}, generation=2), "Progressing", "generation 2"),
    ("pending", reconf({"phase": "Pending"}), "Progressing", "Reconfiguration is Pending"),
    (
        "queued behind another, visibly",
        reconf(
            {
                "phase": "Queued",
                "conditions": [
                    cond("Succeeded", "False", "Queued", "waiting for scale-out to finish")
                ],
            }
        ),
        "Progressing",
        "Queued: waiting for scale-out to finish",
    ),
    (
        "job missing waits",
        reconf({"phase": "Pending", "message": "StreamJob fraud-detection not found"}),
        "Progressing",
        "not found",
    ),
    ("planned", reconf({"phase": "Planned"}), "Progressing", "Planned"),
    (
        "applying with progress",
        reconf({"phase": "Applying", "progress": {"step": 2, "steps": 8}}),
        "Progressing",
        "Applying (step 2/8)",
    ),
    (
        "applying, no steps yet",
        reconf({"phase": "Applying", "progress": {"step": 0, "steps": 0}}),
        "Progressing",
        "Applying",
    ),
    (
        "completed",
        reconf(
            {
                "phase": "Completed",
                "conditions": [cond("Succeeded", "True", "Completed", "delay 412 ms")],
            }
        ),
        "Healthy",
        "Completed: delay 412 ms",
    ),
    ("completed without conditions", reconf({"phase": "Completed"}), "Healthy", "Completed"),
    (
        "failed phase",
        reconf(
            {
                "phase": "Failed",
                "conditions": [
                    cond("Succeeded", "False", "Invalid"),
                    cond("Failed", "True", "UnknownOperator", "spec.functionUpdates[0].operator"),
                ],
            }
        ),
        "Degraded",
        "UnknownOperator: spec.functionUpdates[0].operator",
    ),
    (
        "failed condition before the phase catches up",
        reconf({"phase": "Applying", "conditions": [cond("Failed", "True", "AgentUnreachable")]}),
        "Degraded",
        "AgentUnreachable",
    ),
    (
        "failed phase without conditions",
        reconf({"phase": "Failed", "message": "plan rejected"}),
        "Degraded",
        "plan rejected",
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected", "fragment"),
    [case[1:] for case in RECONF_CASES],
    ids=[case[0] for case in RECONF_CASES],
)
def test_reconfiguration_health(obj: dict[str, Any], expected: str, fragment: str) -> None:
    status, message = health("health-reconfiguration.lua", obj)
    assert status == expected
    assert fragment in message


@pytest.mark.parametrize("script", ["health-streamjob.lua", "health-reconfiguration.lua"])
def test_every_phase_of_the_models_is_handled(script: str) -> None:
    """Every phase the API declares maps to one of Argo CD's statuses, never an error."""
    from swivel.api.phases import ReconfigurationPhase
    from swivel.api.streamjob import JobPhase

    phases = JobPhase if script == "health-streamjob.lua" else ReconfigurationPhase
    make = job if script == "health-streamjob.lua" else reconf
    for phase in phases:
        status, _ = health(script, make({"phase": phase.value}))
        assert status in {"Healthy", "Progressing", "Degraded"}, phase


def test_status_as_the_models_serialise_it() -> None:
    """The keys the Lua reads are the ones the pydantic status models write (camelCase)."""
    from datetime import UTC, datetime

    from swivel.api.conditions import Condition, ConditionStatus
    from swivel.api.phases import ReconfigurationPhase
    from swivel.api.reconfiguration import ReconfigurationStatus
    from swivel.api.streamjob import JobPhase, StreamJobStatus

    now = datetime(2025, 1, 1, tzinfo=UTC)
    ready = Condition(
        type="Ready", status=ConditionStatus.TRUE, reason="Running", last_transition_time=now
    )
    job_status = StreamJobStatus(phase=JobPhase.RUNNING, observed_generation=3, conditions=[ready])
    body = job(None)
    body["status"] = job_status.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert health("health-streamjob.lua", body)[0] == "Healthy"
    body["metadata"]["generation"] = 4
    assert health("health-streamjob.lua", body)[0] == "Progressing"

    failed = Condition(
        type="Failed", status=ConditionStatus.TRUE, reason="QueryFailed", last_transition_time=now
    )
    reconf_status = ReconfigurationStatus(
        phase=ReconfigurationPhase.FAILED, observed_generation=1, conditions=[failed]
    )
    body = reconf(None)
    body["status"] = reconf_status.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert health("health-reconfiguration.lua", body) == ("Degraded", "QueryFailed")


def test_docs_snippet_is_the_scripts_verbatim() -> None:
    import re

    import yaml

    doc = (ARGOCD.parents[2] / "docs" / "argocd.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)]
    (config_map,) = [b for b in blocks if b.get("metadata", {}).get("name") == "argocd-cm"]
    assert config_map["data"] == {
        "resource.customizations.health.swivel.dev_StreamJob": (
            (ARGOCD / "health-streamjob.lua").read_text(encoding="utf-8")
        ),
        "resource.customizations.health.swivel.dev_Reconfiguration": (
            (ARGOCD / "health-reconfiguration.lua").read_text(encoding="utf-8")
        ),
    }


@pytest.mark.parametrize("script", ["health-streamjob.lua", "health-reconfiguration.lua"])
def test_scripts_stay_in_the_lua_5_1_subset_argo_cd_runs(script: str) -> None:
    """Argo CD runs gopher-lua (Lua 5.1); lupa runs 5.4. Refuse what only 5.2+ understands."""
    import re

    code = "\n".join(
        line.split("--", 1)[0]
        for line in (ARGOCD / script).read_text(encoding="utf-8").splitlines()
    )
    for construct in (r"\bgoto\b", r"//", r"::\w+::", r"[^~=<>]=?[&|]", r"<<|>>", r"\butf8\."):
        assert not re.search(construct, code), construct
