"""Sandbox behaviour that the contract tests cannot reach portably, driven in-process.

The registry is what in-process components (the planned process kubelet) will use, so its
Python API is exercised here directly: subscriptions, graceful pod deletion, namespace and
CRD draining, orphaning, plus the pure helpers (patches, selectors, paths, tables).
"""

from __future__ import annotations

import asyncio
import json
import pstats
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from swivel_tools.sandbox import patching, routing, schemas, tables
from swivel_tools.sandbox.errors import ApiError
from swivel_tools.sandbox.registry import Registry
from swivel_tools.sandbox.resources import Endpoint
from swivel_tools.sandbox.sampling import summary
from swivel_tools.sandbox.selectors import label_selector
from swivel_tools.sandbox.store import Store

ROOT = Path(__file__).resolve().parents[3]
MERGE = patching.MERGE_PATCH


def _endpoint(
    registry: Registry, group: str, version: str, plural: str, namespace: str = "default"
) -> Endpoint:
    return registry.endpoint(group, version, plural, namespace)


def _with_crds(registry: Registry) -> Registry:
    crds = _endpoint(registry, "apiextensions.k8s.io", "v1", "customresourcedefinitions", "")
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        registry.create(crds, yaml.safe_load(path.read_text(encoding="utf-8")))
    return registry


def _job(name: str = "job", **metadata: Any) -> dict[str, Any]:
    body = yaml.safe_load(
        (ROOT / "examples/fraud-detection/streamjob.yaml").read_text(encoding="utf-8")
    )
    body["metadata"] = {"name": name, **metadata}
    return body


def test_a_component_subscribes_to_pods_and_sees_changes_in_order() -> None:
    """The hook the process kubelet will use: watch pods, write their status back."""

    async def scenario() -> list[tuple[str, str]]:
        registry = Registry()
        pods = _endpoint(registry, "", "v1", "pods")
        seen: list[tuple[str, str]] = []
        async with registry.watch(pods) as subscription:
            registry.create(pods, {"metadata": {"name": "driver"}, "spec": {"containers": []}})
            registry.patch(
                pods, "driver", MERGE, {"status": {"phase": "Running"}}, subresource="status"
            )
            registry.delete(pods, "driver")
            for _ in range(3):
                event = await subscription.next(timeout=1)
                assert event is not None
                seen.append((event.type, event.object.get("status", {}).get("phase", "")))
        return seen

    assert asyncio.run(scenario()) == [
        ("ADDED", "Pending"),
        ("MODIFIED", "Running"),
        ("DELETED", "Running"),
    ]


def test_history_beyond_the_window_is_expired() -> None:
    registry = Registry(Store(history_limit=5))
    cms = _endpoint(registry, "", "v1", "configmaps")
    registry.create(cms, {"metadata": {"name": "c"}})
    for step in range(10):
        registry.patch(cms, "c", MERGE, {"data": {"s": str(step)}})
    with pytest.raises(ApiError) as caught:
        registry.store.events_after(1, cms.key, None)
    assert caught.value.code == 410 and caught.value.reason == "Expired"
    recent = registry.store.events_after(registry.store.resource_version - 2, cms.key, None)
    assert len(recent) == 2


def test_a_bound_pod_waits_for_its_kubelet_to_confirm_deletion() -> None:
    registry = Registry()
    pods = _endpoint(registry, "", "v1", "pods")
    registry.create(
        pods,
        {
            "metadata": {"name": "p"},
            "spec": {"nodeName": "local", "terminationGracePeriodSeconds": 5},
        },
    )
    marked = registry.delete(pods, "p")
    assert (
        marked["metadata"]["deletionTimestamp"]
        and marked["metadata"]["deletionGracePeriodSeconds"] == 5
    )
    assert registry.get(pods, "p")  # still there: the kubelet has to stop the containers first
    registry.delete(pods, "p", {"gracePeriodSeconds": 0})
    with pytest.raises(ApiError):
        registry.get(pods, "p")


def test_an_unbound_pod_goes_at_once() -> None:
    registry = Registry()
    pods = _endpoint(registry, "", "v1", "pods")
    registry.create(pods, {"metadata": {"name": "p"}, "spec": {}})
    registry.delete(pods, "p")
    assert registry.store.get(pods.key, "default", "p") is None


def test_a_namespace_terminates_until_its_last_finalizer_is_gone() -> None:
    registry = _with_crds(Registry())
    namespaces = _endpoint(registry, "", "v1", "namespaces", "")
    registry.create(namespaces, {"metadata": {"name": "team"}})
    jobs = _endpoint(registry, "swivel.dev", "v1alpha1", "streamjobs", "team")
    cms = _endpoint(registry, "", "v1", "configmaps", "team")
    registry.create(jobs, _job(finalizers=["x/y"]))
    registry.create(cms, {"metadata": {"name": "free"}})

    registry.delete(namespaces, "team")
    assert registry.get(namespaces, "team")["status"]["phase"] == "Terminating"
    assert registry.store.get(cms.key, "team", "free") is None
    assert registry.get(jobs, "job")["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiError) as caught:
        registry.create(cms, {"metadata": {"name": "late"}})
    assert caught.value.code == 403

    registry.patch(jobs, "job", MERGE, {"metadata": {"finalizers": None}})
    assert registry.store.get(namespaces.key, "", "team") is None


def test_deleting_a_crd_deletes_its_objects_and_stops_serving_it() -> None:
    registry = _with_crds(Registry())
    jobs = _endpoint(registry, "swivel.dev", "v1alpha1", "streamjobs")
    registry.create(jobs, _job("a"))
    registry.create(jobs, _job("b", finalizers=["x/y"]))
    crds = _endpoint(registry, "apiextensions.k8s.io", "v1", "customresourcedefinitions", "")
    registry.delete(crds, "streamjobs.swivel.dev")
    assert registry.store.get(jobs.key, "default", "a") is None
    with pytest.raises(ApiError) as caught:
        registry.create(jobs, _job("c"))
    assert caught.value.code == 405  # terminating: no new objects
    registry.patch(jobs, "b", MERGE, {"metadata": {"finalizers": []}})
    assert registry.catalogue.lookup("swivel.dev", "v1alpha1", "streamjobs") is None
    assert registry.store.get(crds.key, "", "streamjobs.swivel.dev") is None


def test_orphan_propagation_strips_owner_references() -> None:
    registry = Registry()
    cms = _endpoint(registry, "", "v1", "configmaps")
    owner = registry.create(cms, {"metadata": {"name": "owner"}}).object
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    registry.create(cms, {"metadata": {"name": "child", "ownerReferences": [ref]}})
    registry.delete(cms, "owner", {"propagationPolicy": "Orphan"})
    assert "ownerReferences" not in registry.get(cms, "child")["metadata"]


def test_strategic_merge_patch_merges_containers_by_name() -> None:
    pod = {"spec": {"containers": [{"name": "spark", "image": "a"}, {"name": "agent", "image": "b"}]},
           "metadata": {"finalizers": ["one"]}}  # fmt: skip
    patched = patching.strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [
                    {"name": "agent", "image": "c"},
                    {"name": "spark", "$patch": "delete"},
                ]
            },
            "metadata": {"finalizers": ["two"], "$deleteFromPrimitiveList/finalizers": ["one"]},
            "$setElementOrder/containers": [{"name": "agent"}],
        },
    )
    assert patched["spec"]["containers"] == [{"name": "agent", "image": "c"}]
    assert patched["metadata"]["finalizers"] == ["two"]


def test_json_patch_is_atomic_and_escapes_pointers() -> None:
    doc = {"metadata": {"annotations": {"a/b": "1"}}}
    patched = patching.json_patch(
        doc, [{"op": "replace", "path": "/metadata/annotations/a~1b", "value": "2"}]
    )
    assert (
        patched["metadata"]["annotations"]["a/b"] == "2"
        and doc["metadata"]["annotations"]["a/b"] == "1"
    )
    with pytest.raises(ApiError) as caught:
        patching.json_patch(doc, [{"op": "move", "from": "/nope", "path": "/x"}])
    assert caught.value.code == 422


def test_non_nullable_nulls_take_the_default_or_go() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "integer", "default": 3}, "b": {"type": "string"},
        "c": {"type": "string", "nullable": True}}}}}  # fmt: skip
    obj: dict[str, Any] = {"spec": {"a": None, "b": None, "c": None}}
    assert schemas.admit(obj, schema) == ([], [])
    assert obj["spec"] == {"a": 3, "c": None}


def test_label_selector_grammar_errors_are_400() -> None:
    assert label_selector("a in (x, y),!b")({"metadata": {"labels": {"a": "y"}}})
    with pytest.raises(ApiError) as caught:
        label_selector("a in x")
    assert caught.value.code == 400


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/namespaces", routing.Route("", "v1", "namespaces")),
        ("/api/v1/namespaces/ns1", routing.Route("", "v1", "namespaces", name="ns1")),
        ("/api/v1/namespaces/ns1/status", routing.Route("", "v1", "namespaces", name="ns1", subresource="status")),
        ("/api/v1/namespaces/ns1/pods", routing.Route("", "v1", "pods", namespace="ns1")),
        ("/apis/swivel.dev/v1alpha1/namespaces/d/streamjobs/j/status",
         routing.Route("swivel.dev", "v1alpha1", "streamjobs", "d", "j", "status")),
        ("/apis/apps/v1", routing.Route("apps", "v1")),
        ("/apis/a/v1/x/y/z/w", None),
    ],
)  # fmt: skip
def test_paths(path: str, expected: routing.Route | None) -> None:
    assert routing.parse(path) == expected


def test_printer_column_json_paths() -> None:
    obj = {"status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]},
           "spec": {"items": [{"n": 1}, {"n": 2}]}}  # fmt: skip
    assert tables.json_path(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert tables.json_path(obj, ".spec.items[*].n") == [1, 2]
    assert tables.json_path(obj, ".spec.items[1].n") == [2]
    assert tables.json_path(obj, ".spec.missing") == []


def test_status_bodies_are_json_status_objects() -> None:
    error = ApiError(409, "Conflict", "nope", {"name": "x"})
    assert json.loads(json.dumps(error.status())) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "nope", "reason": "Conflict", "code": 409, "details": {"name": "x"},
    }  # fmt: skip


@pytest.mark.parametrize("trace", [False, True])
def test_the_profiler_runs_a_module_and_leaves_its_profile(tmp_path: Path, trace: bool) -> None:
    """`python -m swivel_tools.sandbox.sampling` (what `operator_reaction.py --profile` uses)."""
    out = tmp_path / ("profile.pstats" if trace else "profile.samples")
    command = [sys.executable, "-m", "swivel_tools.sandbox.sampling", "--out", str(out)]
    command += ["--trace"] if trace else ["--every", "0.001"]
    command += ["--", "-m", "timeit", "-n", "20000", "sorted(range(300), key=str)"]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    if trace:
        assert pstats.Stats(str(out)).total_calls > 0
    else:
        assert summary(out).startswith("busy samples: ") and "timeit" in out.read_text()
