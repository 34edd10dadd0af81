"""Custom resources validated, defaulted and pruned by the generated CRDs' schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

GROUP, VERSION = "swivel.dev", "v1alpha1"


@pytest.mark.parametrize(
    ("plural", "example"),
    [
        ("streamjobs", "streamjob.yaml"),
        ("reconfigurations", "reconfiguration.yaml"),
        ("reconfigurations", "rescale.yaml"),
    ],
)
def test_the_examples_are_admitted(kube: Any, plural: str, example: str) -> None:
    body = kube.example(example)
    body["metadata"]["name"] = kube.unique(body["metadata"]["name"])
    created = kube.custom.create_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, plural, body
    )
    assert created["spec"]  # admitted and stored


def test_bins_must_be_a_power_of_two(kube: Any) -> None:
    body = kube.streamjob()
    body["spec"]["dataflow"]["bins"] = 48
    with pytest.raises(client.ApiException) as caught:
        kube.create_streamjob(body)
    assert caught.value.status == 422
    status = json.loads(caught.value.body)
    assert status["reason"] == "Invalid" and status["details"]["kind"] == "StreamJob"
    assert "spec.dataflow.bins" in status["message"]
    fields = [cause["field"] for cause in status["details"]["causes"]]
    assert "spec.dataflow.bins" in fields


def test_every_offending_field_is_named(kube: Any) -> None:
    body = kube.streamjob()
    body["spec"]["executor"]["instances"] = 0
    body["spec"]["source"]["kind"] = "carrier-pigeon"
    del body["spec"]["dataflow"]["operators"][0]["name"]
    with pytest.raises(client.ApiException) as caught:
        kube.create_streamjob(body)
    fields = {cause["field"] for cause in json.loads(caught.value.body)["details"]["causes"]}
    assert {
        "spec.executor.instances",
        "spec.source.kind",
        "spec.dataflow.operators[0].name",
    } <= fields


def test_defaults_are_applied(kube: Any) -> None:
    created = kube.create_streamjob(kube.streamjob())
    spec = created["spec"]
    assert spec["executor"] == {"instances": 2, "cores": 1, "memory": "1Gi"}
    assert spec["image"].startswith("ghcr.io/")
    assert all(op["uniquePerRecord"] is False for op in spec["dataflow"]["operators"])
    assert "driver" not in spec  # defaults fill objects that exist, they do not create them


def test_nullable_fields_accept_null(kube: Any) -> None:
    body = kube.streamjob()
    body["spec"]["checkpoint"] = {"location": None}
    body["spec"]["dataflow"]["operators"][0]["cardinality"] = None
    created = kube.create_streamjob(body)
    # null kept (nullable); the sibling's default filled in
    assert created["spec"]["checkpoint"] == {"location": None, "volumeSize": "1Gi"}


def test_unknown_fields_are_pruned_unless_preserved(kube: Any) -> None:
    body = kube.streamjob()
    body["spec"]["colour"] = "teal"
    body["spec"]["dataflow"]["operators"][2]["params"]["anything"] = {"goes": [1, 2]}
    created = kube.create_streamjob(body)
    assert "colour" not in created["spec"]
    assert created["spec"]["dataflow"]["operators"][2]["params"]["anything"] == {"goes": [1, 2]}


def test_strict_field_validation_refuses_unknown_fields(kube: Any) -> None:
    body = kube.streamjob()
    body["spec"]["colour"] = "teal"
    with pytest.raises(client.ApiException) as caught:
        kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "streamjobs", body, field_validation="Strict"
        )
    assert caught.value.status == 400
    assert 'unknown field "spec.colour"' in json.loads(caught.value.body)["message"]


def test_updates_are_validated_too(kube: Any) -> None:
    name = kube.create_streamjob(kube.streamjob())["metadata"]["name"]
    with pytest.raises(client.ApiException) as caught:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "streamjobs", name, {"spec": {"dataflow": {"bins": 48}}}
        )
    assert caught.value.status == 422 and "spec.dataflow.bins" in caught.value.body
    assert kube.get_streamjob(name)["spec"]["dataflow"]["bins"] == 16
