"""PATCH: JSON merge patch, JSON patch (a failed `test` is 422), strategic merge patch."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

GROUP, VERSION = "swivel.dev", "v1alpha1"
JSON_PATCH = "application/json-patch+json"


def _patch_job(kube: Any, name: str, patch: Any, content_type: str | None = None) -> dict[str, Any]:
    extra = {"_content_type": content_type} if content_type else {}
    patched: dict[str, Any] = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name, patch, **extra
    )
    return patched


def test_merge_patch_merges_objects_replaces_lists_and_deletes_nulls(kube: Any) -> None:
    body = kube.streamjob()
    body["metadata"]["labels"] = {"team": "fraud", "tier": "gold"}
    name = kube.create_streamjob(body)["metadata"]["name"]
    patched = _patch_job(
        kube,
        name,
        {
            "metadata": {"labels": {"tier": None, "owner": "ana"}},
            "spec": {"executor": {"instances": 5}},
        },
    )
    assert patched["metadata"]["labels"] == {"team": "fraud", "owner": "ana"}
    assert patched["spec"]["executor"] == {"instances": 5, "cores": 1, "memory": "1Gi"}
    assert patched["spec"]["source"]["rowsPerSecond"] == 200  # untouched siblings stay


def test_merge_patch_with_a_stale_resource_version_is_409(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name, version = job["metadata"]["name"], job["metadata"]["resourceVersion"]
    _patch_job(kube, name, {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(client.ApiException) as caught:
        _patch_job(kube, name, {"metadata": {"resourceVersion": version, "labels": {"a": "c"}}})
    assert caught.value.status == 409 and json.loads(caught.value.body)["reason"] == "Conflict"


def test_json_patch_applies_operations_guarded_by_a_test(kube: Any) -> None:
    """kopf edits finalizers exactly like this."""
    job = kube.create_streamjob(kube.streamjob())
    name, version = job["metadata"]["name"], job["metadata"]["resourceVersion"]
    patched = _patch_job(
        kube,
        name,
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/metadata/finalizers", "value": ["contract.swivel.dev/a"]},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "contract.swivel.dev/b"},
            {"op": "replace", "path": "/spec/executor/instances", "value": 7},
        ],
        JSON_PATCH,
    )
    assert patched["metadata"]["finalizers"] == ["contract.swivel.dev/a", "contract.swivel.dev/b"]
    assert patched["spec"]["executor"]["instances"] == 7
    removed = _patch_job(
        kube, name, [{"op": "remove", "path": "/metadata/finalizers/0"}], JSON_PATCH
    )
    assert removed["metadata"]["finalizers"] == ["contract.swivel.dev/b"]
    _patch_job(kube, name, [{"op": "remove", "path": "/metadata/finalizers"}], JSON_PATCH)


def test_a_failed_json_patch_test_is_422_and_changes_nothing(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name = job["metadata"]["name"]
    with pytest.raises(client.ApiException) as caught:
        _patch_job(
            kube,
            name,
            [
                {"op": "replace", "path": "/spec/executor/instances", "value": 9},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
            ],
            JSON_PATCH,
        )
    assert caught.value.status == 422
    body = json.loads(caught.value.body)
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    after = kube.get_streamjob(name)
    assert after["spec"]["executor"]["instances"] == 2
    assert after["metadata"]["resourceVersion"] == job["metadata"]["resourceVersion"]


def test_json_patch_on_a_missing_path_is_422(kube: Any) -> None:
    name = kube.create_streamjob(kube.streamjob())["metadata"]["name"]
    with pytest.raises(client.ApiException) as caught:
        _patch_job(kube, name, [{"op": "remove", "path": "/spec/nope"}], JSON_PATCH)
    assert caught.value.status == 422


def test_strategic_merge_patch_on_a_builtin_kind(kube: Any) -> None:
    name = kube.unique("cm")
    kube.core.create_namespaced_config_map(
        kube.namespace, {"metadata": {"name": name}, "data": {"a": "1", "b": "2"}}
    )
    # The client sends dict patches of built-in kinds as strategic merge patches.
    patched = kube.core.patch_namespaced_config_map(
        name, kube.namespace, {"data": {"b": None, "c": "3"}}
    )
    assert patched.data == {"a": "1", "c": "3"}


def test_strategic_merge_patch_on_a_custom_resource_is_415(kube: Any) -> None:
    """As on a real server: custom resources have no patch strategies to merge by."""
    name = kube.create_streamjob(kube.streamjob())["metadata"]["name"]
    with pytest.raises(client.ApiException) as caught:
        _patch_job(
            kube,
            name,
            {"spec": {"executor": {"instances": 3}}},
            "application/strategic-merge-patch+json",
        )
    assert caught.value.status == 415
    assert json.loads(caught.value.body)["reason"] == "UnsupportedMediaType"
