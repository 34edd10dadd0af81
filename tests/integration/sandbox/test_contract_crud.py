"""Create, read, replace, delete; generateName; 409 AlreadyExists and Conflict; 404."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

GROUP, VERSION = "swivel.dev", "v1alpha1"


def _status(error: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == error.status
    return body


def test_create_sets_system_metadata_and_get_returns_the_object(kube: Any) -> None:
    name = kube.unique("cm")
    created = kube.core.create_namespaced_config_map(
        kube.namespace, {"metadata": {"name": name}, "data": {"a": "1"}}
    )
    meta = created.metadata
    assert meta.uid and meta.creation_timestamp and int(meta.resource_version) > 0
    assert meta.namespace == kube.namespace
    fetched = kube.core.read_namespaced_config_map(name, kube.namespace)
    assert fetched.data == {"a": "1"} and fetched.metadata.uid == meta.uid


def test_custom_resource_round_trip_with_generation(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    assert job["apiVersion"] == f"{GROUP}/{VERSION}" and job["kind"] == "StreamJob"
    assert job["metadata"]["generation"] == 1
    listed = kube.custom.list_namespaced_custom_object(GROUP, VERSION, kube.namespace, "streamjobs")
    assert listed["kind"] == "StreamJobList" and int(listed["metadata"]["resourceVersion"]) > 0
    assert job["metadata"]["name"] in {i["metadata"]["name"] for i in listed["items"]}


def test_resource_versions_increase_with_every_write_across_kinds(kube: Any) -> None:
    first = kube.core.create_namespaced_config_map(
        kube.namespace, {"metadata": {"generateName": "rv-"}}
    )
    second = kube.core.create_namespaced_secret(
        kube.namespace, {"metadata": {"generateName": "rv-"}}
    )
    third = kube.core.patch_namespaced_config_map(
        first.metadata.name, kube.namespace, {"data": {"x": "y"}}
    )
    versions = [int(o.metadata.resource_version) for o in (first, second, third)]
    assert versions == sorted(versions) and len(set(versions)) == 3


def test_generate_name_appends_a_random_suffix(kube: Any) -> None:
    names = {
        kube.core.create_namespaced_config_map(
            kube.namespace, {"metadata": {"generateName": "gen-"}}
        ).metadata.name
        for _ in range(3)
    }
    assert len(names) == 3
    assert all(n.startswith("gen-") and len(n) == len("gen-") + 5 for n in names)


def test_creating_an_existing_name_is_409_already_exists(kube: Any) -> None:
    body = kube.streamjob()
    kube.create_streamjob(body)
    with pytest.raises(client.ApiException) as caught:
        kube.create_streamjob(body)
    status = _status(caught.value)
    assert caught.value.status == 409 and status["reason"] == "AlreadyExists"
    assert status["details"]["name"] == body["metadata"]["name"]


def test_a_missing_object_is_404_not_found(kube: Any) -> None:
    with pytest.raises(client.ApiException) as caught:
        kube.get_streamjob("no-such-job")
    status = _status(caught.value)
    assert caught.value.status == 404 and status["reason"] == "NotFound"
    assert status["details"]["name"] == "no-such-job"


def test_a_name_is_required(kube: Any) -> None:
    with pytest.raises(client.ApiException) as caught:
        kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {}})
    assert caught.value.status == 422 and _status(caught.value)["reason"] == "Invalid"


def test_replace_with_a_stale_resource_version_is_409_conflict(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name = job["metadata"]["name"]
    job["spec"]["executor"]["instances"] = 3
    updated = kube.custom.replace_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name, job
    )
    assert updated["spec"]["executor"]["instances"] == 3
    assert int(updated["metadata"]["resourceVersion"]) > int(job["metadata"]["resourceVersion"])
    job["spec"]["executor"]["instances"] = 4  # still carries the old resourceVersion
    with pytest.raises(client.ApiException) as caught:
        kube.custom.replace_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "streamjobs", name, job
        )
    assert caught.value.status == 409 and _status(caught.value)["reason"] == "Conflict"
    assert kube.get_streamjob(name)["spec"]["executor"]["instances"] == 3


def test_delete_removes_the_object(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name = job["metadata"]["name"]
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, kube.namespace, "streamjobs", name)
    with pytest.raises(client.ApiException) as caught:
        kube.get_streamjob(name)
    assert caught.value.status == 404


def test_cluster_scoped_namespaces_and_content_in_a_missing_namespace(kube: Any) -> None:
    names = {ns.metadata.name for ns in kube.core.list_namespace().items}
    assert {"default", kube.namespace} <= names
    with pytest.raises(client.ApiException) as caught:
        kube.core.create_namespaced_config_map("no-such-namespace", {"metadata": {"name": "x"}})
    assert caught.value.status == 404


def test_dry_run_validates_without_storing(kube: Any) -> None:
    body = kube.streamjob()
    answer = kube.custom.create_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", body, dry_run="All"
    )
    assert answer["metadata"]["name"] == body["metadata"]["name"]
    with pytest.raises(client.ApiException) as caught:
        kube.get_streamjob(body["metadata"]["name"])
    assert caught.value.status == 404


def test_the_default_namespace_cannot_be_deleted(kube: Any) -> None:
    with pytest.raises(client.ApiException) as caught:
        kube.core.delete_namespace("default")
    assert caught.value.status == 403
