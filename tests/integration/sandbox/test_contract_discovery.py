"""Discovery: what kopf and kubectl read to find kinds, scopes and subresources."""

from __future__ import annotations

from typing import Any

from tests.polling import wait_for

GROUP, VERSION = "swivel.dev", "v1alpha1"


def _resources(kube: Any, group_version: str) -> dict[str, dict[str, Any]]:
    prefix = "/api" if group_version == "v1" else "/apis"
    status, listing = kube.get_json(f"{prefix}/{group_version}")
    assert status == 200 and listing["kind"] == "APIResourceList"
    assert listing["groupVersion"] == group_version
    return {r["name"]: r for r in listing["resources"]}


def test_version_and_api_roots(kube: Any) -> None:
    status, version = kube.get_json("/version")
    assert status == 200 and version["major"] == "1" and version["gitVersion"]
    status, core = kube.get_json("/api")
    assert status == 200 and core["kind"] == "APIVersions" and "v1" in core["versions"]
    status, groups = kube.get_json("/apis")
    assert status == 200 and groups["kind"] == "APIGroupList"
    names = {g["name"]: g for g in groups["groups"]}
    for group in ("apps", "apiextensions.k8s.io", "coordination.k8s.io", "events.k8s.io",
                  "rbac.authorization.k8s.io", GROUP):  # fmt: skip
        assert group in names, group
        assert names[group]["preferredVersion"]["groupVersion"].startswith(group + "/")
    status, swivel = kube.get_json(f"/apis/{GROUP}")
    assert status == 200 and swivel["kind"] == "APIGroup"
    assert swivel["preferredVersion"] == {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}


def test_core_and_builtin_resources_are_listed(kube: Any) -> None:
    core = _resources(kube, "v1")
    for name in (
        "namespaces",
        "pods",
        "services",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "events",
    ):
        assert name in core, name
    assert core["namespaces"]["namespaced"] is False
    assert core["configmaps"]["namespaced"] is True and "cm" in core["configmaps"]["shortNames"]
    assert {"get", "list", "watch", "create", "patch", "delete"} <= set(core["pods"]["verbs"])
    assert "pods/status" in core
    assert "deployments" in _resources(kube, "apps/v1")
    assert "leases" in _resources(kube, "coordination.k8s.io/v1")
    assert {"roles", "rolebindings"} <= set(_resources(kube, "rbac.authorization.k8s.io/v1"))
    assert "events" in _resources(kube, "events.k8s.io/v1")
    crds = _resources(kube, "apiextensions.k8s.io/v1")["customresourcedefinitions"]
    assert crds["namespaced"] is False and crds["kind"] == "CustomResourceDefinition"


def test_swivel_kinds_are_served_with_their_names_and_status_subresource(kube: Any) -> None:
    resources = _resources(kube, f"{GROUP}/{VERSION}")
    job = resources["streamjobs"]
    assert job["kind"] == "StreamJob" and job["singularName"] == "streamjob"
    assert job["namespaced"] is True
    assert "sj" in job["shortNames"] and "swivel" in job["categories"]
    assert "streamjobs/status" in resources
    assert resources["reconfigurations"]["kind"] == "Reconfiguration"


def test_a_crd_created_at_run_time_is_served_and_withdrawn_when_deleted(kube: Any) -> None:
    group = f"{kube.unique('contract')}.swivel.dev"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "shortNames": ["wdg"],
                "categories": ["contract"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    kube.extensions.create_custom_resource_definition(crd)

    def established() -> bool:
        found = kube.extensions.read_custom_resource_definition(f"widgets.{group}")
        conditions = {c.type: c.status for c in (found.status.conditions or [])}
        return conditions.get("Established") == "True"

    wait_for(established, timeout=30)
    widget = wait_for(lambda: _resources_or_none(kube, f"{group}/v1"), timeout=30)["widgets"]
    assert widget["namespaced"] is False and widget["shortNames"] == ["wdg"]
    assert "widgets/status" not in _resources(kube, f"{group}/v1")
    created = kube.custom.create_cluster_custom_object(
        group,
        "v1",
        "widgets",
        {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}},
    )
    assert created["metadata"]["uid"] and "namespace" not in created["metadata"]

    kube.extensions.delete_custom_resource_definition(f"widgets.{group}")
    wait_for(lambda: kube.get_json(f"/apis/{group}/v1")[0] == 404, timeout=60)


def _resources_or_none(kube: Any, group_version: str) -> dict[str, Any] | None:
    status, listing = kube.get_json(f"/apis/{group_version}")
    return {r["name"]: r for r in listing["resources"]} if status == 200 else None
