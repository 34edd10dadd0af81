"""The function allow-list travels from chart values to the operator's environment, and from
there to every job's agent and driver (operator/pods.py `function_env`), so every
process of an installation refuses the same references (issue 11 §1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from swivel.api.functions import PREFIXES_ENV, AllowList, FunctionRefused, check_reference
from swivel.api.manifests import load_streamjob
from swivel.operator import pods
from swivel.operator.naming import Owner

Objects = list[dict[str, Any]]
Render = Callable[..., Objects]
ROOT = Path(__file__).resolve().parents[2]
OWNER = Owner(name="fraud-detection", namespace="streams", uid="0b9f6a3e-1111-2222-3333-4444")


def _operator_env(objects: Objects) -> dict[str, str]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_the_default_allows_the_examples_only(render: Render) -> None:
    env = _operator_env(render())
    assert env[PREFIXES_ENV] == "swivel.jobs.examples"


def test_the_values_reach_the_operator_and_every_job_pod(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {"functions": {"allowedPrefixes": ["acme.functions", "swivel.jobs.examples"]}}
    env = _operator_env(render(values))
    assert env[PREFIXES_ENV] == "acme.functions,swivel.jobs.examples"
    # The operator process, started with that environment:
    monkeypatch.setenv(PREFIXES_ENV, env[PREFIXES_ENV])
    allow = AllowList()
    assert allow.prefixes == ("acme.functions", "swivel.jobs.examples")
    with pytest.raises(FunctionRefused) as refused:
        check_reference("acme.functionsX:score", allow, "spec.f")
    assert "[acme.functions, swivel.jobs.examples]" in refused.value.reason
    # ... hands the same list to the job's agent and driver containers.
    job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
    pod = pods.render_driver_pod(job, OWNER)
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    assert len(containers) >= 2
    for name, container in containers.items():
        passed = {e["name"]: e.get("value") for e in container["env"]}
        assert passed[PREFIXES_ENV] == "acme.functions,swivel.jobs.examples", name


def test_an_empty_list_allows_entry_points_only(render: Render) -> None:
    env = _operator_env(render({"functions": {"allowedPrefixes": []}}))
    assert env[PREFIXES_ENV] == ""
    assert AllowList(prefixes=()).allows_module("swivel.jobs.examples.fraud") is False


def test_a_malformed_prefix_is_refused_by_the_chart(render: Render) -> None:
    with pytest.raises(Exception, match="allowedPrefixes"):
        render({"functions": {"allowedPrefixes": ["os; rm -rf /"]}})
