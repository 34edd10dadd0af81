"""The generated CRDs on a real API server: installed, served, validating the examples."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION = "swivel.dev", "v1alpha1"


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    from kubernetes import client, config

    config.load_kube_config(config_file=os.environ["SWIVEL_E2E_KUBECONFIG"])
    extensions = client.ApiextensionsV1Api()
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        try:
            extensions.create_custom_resource_definition(body)
        except client.ApiException as error:
            if error.status != 409:
                raise
    time.sleep(3)  # let the API server start serving the new kinds
    yield client.CustomObjectsApi()


def _example(name: str) -> dict[str, Any]:
    return yaml.safe_load(
        (ROOT / "examples" / "fraud-detection" / name).read_text(encoding="utf-8")
    )


def test_examples_are_admitted(api: Any) -> None:
    for plural, name in (
        ("streamjobs", "streamjob.yaml"),
        ("reconfigurations", "reconfiguration.yaml"),
    ):
        body = _example(name)
        body["metadata"]["name"] = f"e2e-{body['metadata']['name']}"
        api.create_namespaced_custom_object(GROUP, VERSION, "default", plural, body, dry_run="All")


def test_power_of_two_bins_are_enforced_by_the_server(api: Any) -> None:
    from kubernetes import client

    body = _example("streamjob.yaml")
    body["spec"]["dataflow"]["bins"] = 48
    with pytest.raises(client.ApiException) as caught:
        api.create_namespaced_custom_object(
            GROUP, VERSION, "default", "streamjobs", body, dry_run="All"
        )
    assert caught.value.status == 422 and "bins" in caught.value.body
