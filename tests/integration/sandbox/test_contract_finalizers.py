"""Deletion with finalizers (deletionTimestamp first, removal once they are gone) and GC."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from tests.polling import wait_for

GROUP, VERSION = "swivel.dev", "v1alpha1"
FINALIZER = "contract.swivel.dev/cleanup"


def _gone(kube: Any, name: str) -> bool:
    try:
        kube.get_streamjob(name)
    except client.ApiException as error:
        return bool(error.status == 404)
    return False


def test_a_finalizer_holds_the_object_until_it_is_removed(kube: Any) -> None:
    body = kube.streamjob()
    body["metadata"]["finalizers"] = [FINALIZER]
    name = kube.create_streamjob(body)["metadata"]["name"]

    answer = kube.custom.delete_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name
    )
    assert answer["metadata"]["deletionTimestamp"]
    held = kube.get_streamjob(name)
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == [FINALIZER]

    # A second delete changes nothing; the object keeps waiting for its finalizer.
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, kube.namespace, "streamjobs", name)
    assert (
        kube.get_streamjob(name)["metadata"]["resourceVersion"]
        == held["metadata"]["resourceVersion"]
    )

    # Spec and status still accept writes while terminating.
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name, {"metadata": {"labels": {"t": "1"}}}
    )
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name, {"metadata": {"finalizers": None}}
    )
    wait_for(lambda: _gone(kube, name), 10.0)


def test_no_new_finalizers_once_deletion_started(kube: Any) -> None:
    body = kube.streamjob()
    body["metadata"]["finalizers"] = [FINALIZER]
    name = kube.create_streamjob(body)["metadata"]["name"]
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, kube.namespace, "streamjobs", name)
    with pytest.raises(client.ApiException) as caught:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "streamjobs", name,
            {"metadata": {"finalizers": [FINALIZER, "contract.swivel.dev/late"]}},
        )  # fmt: skip
    assert caught.value.status == 422
    assert "metadata.finalizers" in json.loads(caught.value.body)["message"]
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name, {"metadata": {"finalizers": []}}
    )
    wait_for(lambda: _gone(kube, name), 10.0)


def test_delete_preconditions(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name = job["metadata"]["name"]
    with pytest.raises(client.ApiException) as caught:
        kube.custom.delete_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "streamjobs", name,
            body={"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}},
        )  # fmt: skip
    assert caught.value.status == 409
    kube.custom.delete_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name,
        body={"preconditions": {"uid": job["metadata"]["uid"]}},
    )  # fmt: skip
    wait_for(lambda: _gone(kube, name), 10.0)


def test_dependents_are_collected_after_their_owner(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamJob",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    child = kube.unique("child")
    kube.core.create_namespaced_config_map(
        kube.namespace,
        {"metadata": {"name": child, "ownerReferences": [owner]}, "data": {"a": "b"}},
    )
    kube.custom.delete_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", job["metadata"]["name"]
    )

    def child_gone() -> bool:
        try:
            kube.core.read_namespaced_config_map(child, kube.namespace)
        except client.ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for(child_gone, timeout=30)
