"""The status subresource and metadata.generation, as controllers (kopf) depend on them."""

from __future__ import annotations

from typing import Any

GROUP, VERSION = "swivel.dev", "v1alpha1"
READY = {"type": "Ready", "status": "True", "reason": "Running", "message": "",
         "lastTransitionTime": "2024-05-01T10:00:00Z"}  # fmt: skip


def _patch(kube: Any, name: str, patch: Any) -> dict[str, Any]:
    found: dict[str, Any] = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name, patch
    )
    return found


def _patch_status(kube: Any, name: str, patch: Any) -> dict[str, Any]:
    found: dict[str, Any] = kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, kube.namespace, "streamjobs", name, patch
    )
    return found


def test_status_in_a_create_is_ignored(kube: Any) -> None:
    body = kube.streamjob()
    body["status"] = {"phase": "Running"}
    created = kube.create_streamjob(body)
    assert "status" not in created or created["status"].get("phase") != "Running"


def test_status_subresource_writes_status_only(kube: Any) -> None:
    name = kube.create_streamjob(kube.streamjob())["metadata"]["name"]
    written = _patch_status(
        kube,
        name,
        {"status": {"phase": "Running", "conditions": [READY]}, "spec": {"executor": {"instances": 9}},
         "metadata": {"labels": {"via": "status"}}},
    )  # fmt: skip
    assert written["status"]["phase"] == "Running"
    assert written["status"]["conditions"][0]["type"] == "Ready"
    assert written["spec"]["executor"]["instances"] == 2  # spec changes are ignored on /status
    assert written["metadata"]["generation"] == 1
    assert "via" not in (written["metadata"].get("labels") or {})
    read = kube.custom.get_namespaced_custom_object_status(
        GROUP, VERSION, kube.namespace, "streamjobs", name
    )
    assert read["status"]["phase"] == "Running"


def test_the_main_resource_ignores_status(kube: Any) -> None:
    name = kube.create_streamjob(kube.streamjob())["metadata"]["name"]
    _patch_status(kube, name, {"status": {"phase": "Running"}})
    patched = _patch(
        kube, name, {"status": {"phase": "Failed"}, "metadata": {"labels": {"x": "y"}}}
    )
    assert patched["status"]["phase"] == "Running"
    assert patched["metadata"]["labels"] == {"x": "y"}


def test_generation_counts_spec_changes_only(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name = job["metadata"]["name"]
    assert job["metadata"]["generation"] == 1
    assert _patch(kube, name, {"metadata": {"labels": {"a": "b"}}})["metadata"]["generation"] == 1
    assert (
        _patch(kube, name, {"metadata": {"annotations": {"n": "1"}}})["metadata"]["generation"] == 1
    )
    assert (
        _patch_status(kube, name, {"status": {"phase": "Running"}})["metadata"]["generation"] == 1
    )
    assert (
        _patch(kube, name, {"spec": {"executor": {"instances": 3}}})["metadata"]["generation"] == 2
    )
    assert (
        _patch(kube, name, {"spec": {"executor": {"instances": 4}}})["metadata"]["generation"] == 3
    )


def test_a_patch_that_changes_nothing_writes_nothing(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name, version = job["metadata"]["name"], job["metadata"]["resourceVersion"]
    same = _patch(kube, name, {"spec": {"executor": {"instances": 2}}})
    assert same["metadata"]["resourceVersion"] == version
    assert same["metadata"]["generation"] == 1


def test_status_is_validated_against_the_schema(kube: Any) -> None:
    from kubernetes import client

    name = kube.create_streamjob(kube.streamjob())["metadata"]["name"]
    try:
        _patch_status(kube, name, {"status": {"phase": "Sleeping"}})
    except client.ApiException as error:
        assert error.status == 422 and "status.phase" in error.body
    else:
        raise AssertionError("an unknown phase was accepted")
