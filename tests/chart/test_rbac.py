"""The operator's RBAC is least privilege: exactly the rights it uses, named one by one.

Rules are flattened to (scope, apiGroup, resource, verb) tuples, where scope is a namespace or
"*cluster*" for a ClusterRole. The granted set must equal the needed set — an extra right
fails as surely as a missing one — and the operator must hold every right of the Role it
gives each driver (operator/access.py DRIVER_RULES), or Kubernetes would refuse to create
that Role (RBAC escalation prevention).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

Objects = list[dict[str, Any]]
Render = Callable[..., Objects]
Right = tuple[str, str, str]  # apiGroup, resource, verb
CLUSTER = "*cluster*"
NAMESPACE = "swivel-system"

WATCH = ("get", "list", "watch")


def rights(groups: Iterable[str], resources: Iterable[str], verbs: Iterable[str]) -> set[Right]:
    return {(g, r, v) for g in groups for r in resources for v in verbs}


def driver_rights() -> set[Right]:
    from swivel.operator.access import DRIVER_RULES

    granted: set[Right] = set()
    for rule in DRIVER_RULES:
        granted |= rights(rule["apiGroups"], rule["resources"], rule["verbs"])
    return granted


# What the operator calls (docs/security.md names the call behind each verb), plus what it
# must hold to grant the driver Role. Exact: a verb the code does not use fails the test.
OPERATOR_NEEDS: set[Right] = (
    # kopf watches and patches both kinds; the operator gets one by name and creates
    # Reconfigurations (edits, policies).
    rights(["swivel.dev"], ["streamjobs"], [*WATCH, "patch"])
    | rights(["swivel.dev"], ["reconfigurations"], [*WATCH, "create", "patch"])
    | rights(["swivel.dev"], ["streamjobs/status", "reconfigurations/status"], ["patch"])
    # blockOwnerDeletion on every child (OwnerReferencesPermissionEnforcement)
    | rights(["swivel.dev"], ["streamjobs/finalizers"], ["update"])
    # the driver pod: get, create, delete (replacement, finalizer)
    | rights([""], ["pods"], ["get", "create", "delete"])
    # create, or patch on 409; deleted by the finalizer
    | rights([""], ["services", "configmaps", "serviceaccounts"], ["create", "patch", "delete"])
    | rights(
        ["rbac.authorization.k8s.io"], ["roles", "rolebindings"], ["create", "patch", "delete"]
    )
    | rights([""], ["persistentvolumeclaims"], ["create", "delete"])  # created once
    # the job's credentials: read by name, created once, patched when outdated; collected
    # by the garbage collector, never listed, watched or deleted by the operator
    | rights([""], ["secrets"], ["get", "create"])
    | rights(["networking.k8s.io"], ["networkpolicies"], ["create", "patch"])  # per job
    | rights([""], ["events"], ["create"])  # kopf posts core v1 Events
)
CRD_DISCOVERY: set[Right] = rights(["apiextensions.k8s.io"], ["customresourcedefinitions"], WATCH)


def granted(objects: Objects) -> dict[str, set[Right]]:
    """scope → rights, following each binding to its role (only roles the chart renders)."""
    roles = {
        (o["kind"], o["metadata"].get("namespace", CLUSTER), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    by_scope: dict[str, set[Right]] = {}
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace", CLUSTER)
        role_scope = CLUSTER if ref["kind"] == "ClusterRole" else scope
        role = roles[(ref["kind"], role_scope, ref["name"])]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "swivel", "namespace": NAMESPACE}
        ]
        for rule in role["rules"]:
            assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
            by_scope.setdefault(scope, set()).update(
                rights(rule["apiGroups"], rule["resources"], rule["verbs"])
            )
    return by_scope


def all_rules(objects: Objects) -> list[dict[str, Any]]:
    return [rule for o in objects if o["kind"] in ("Role", "ClusterRole") for rule in o["rules"]]


MODES: dict[str, dict[str, Any]] = {
    "namespaced": {},
    "named namespaces": {"watch": {"namespaces": ["streaming", "analytics"]}},
    "cluster-wide": {"watch": {"clusterWide": True}},
    "peering": {"operator": {"standalone": False}},
    "cluster-wide peering": {"watch": {"clusterWide": True}, "operator": {"standalone": False}},
}


@pytest.mark.parametrize("mode", MODES)
def test_no_wildcards_no_builtin_admin_roles_no_escalation_verbs(render: Render, mode: str) -> None:
    objects = render(MODES[mode])
    for rule in all_rules(objects):
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
            assert not [item for item in rule[field] if "*" in item], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        assert not {"nodes", "namespaces", "pods/exec", "clusterroles", "clusterrolebindings"} & (
            set(rule["resources"])
        ), rule
        assert "nonResourceURLs" not in rule
    for binding in (o for o in objects if o["kind"].endswith("Binding")):
        assert binding["roleRef"]["name"].startswith("swivel"), binding["roleRef"]
        assert binding["roleRef"]["name"] not in {"cluster-admin", "admin", "edit"}


def test_namespaced_rights_are_exactly_the_needed_ones(render: Render) -> None:
    assert granted(render()) == {
        NAMESPACE: OPERATOR_NEEDS | driver_rights(),
        CLUSTER: CRD_DISCOVERY,
    }


def test_named_namespaces_get_the_same_rights_each(render: Render) -> None:
    scopes = granted(render(MODES["named namespaces"]))
    expected = OPERATOR_NEEDS | driver_rights()
    assert scopes == {"streaming": expected, "analytics": expected, CLUSTER: CRD_DISCOVERY}


def test_namespaced_without_discovery_is_cluster_free(render: Render) -> None:
    objects = render({"rbac": {"crdDiscovery": False}})
    assert set(granted(objects)) == {NAMESPACE}
    assert not [o for o in objects if o["kind"].startswith("Cluster")]


def test_cluster_wide_rights_are_the_same_rights_cluster_wide(render: Render) -> None:
    scopes = granted(render(MODES["cluster-wide"]))
    assert scopes == {CLUSTER: OPERATOR_NEEDS | driver_rights() | CRD_DISCOVERY}


def test_operator_can_grant_the_driver_role_in_every_mode(render: Render) -> None:
    """Escalation prevention: a Role can only be created by someone holding all its rights."""
    assert driver_rights(), "DRIVER_RULES is empty?"
    for mode, values in MODES.items():
        for scope, held in granted(render(values)).items():
            if scope == CLUSTER and not values.get("watch", {}).get("clusterWide"):
                continue
            missing = driver_rights() - held
            assert not missing, f"{mode}/{scope}: operator cannot grant {sorted(missing)}"


@pytest.mark.parametrize(
    ("mode", "scope", "resource"),
    [
        ("peering", NAMESPACE, "kopfpeerings"),
        ("cluster-wide peering", CLUSTER, "clusterkopfpeerings"),
    ],
)
def test_peering_rights_only_without_standalone(
    render: Render, mode: str, scope: str, resource: str
) -> None:
    peering = rights(["kopf.dev"], [resource], [*WATCH, "patch"])
    assert peering <= granted(render(MODES[mode]))[scope]
    standalone = MODES[mode] | {"operator": {"standalone": True}}
    assert not [r for r in granted(render(standalone))[scope] if r[0] == "kopf.dev"]


def test_secrets_are_not_in_the_cluster_scope_when_namespaced(render: Render) -> None:
    cluster = granted(render()).get(CLUSTER, set())
    assert not [r for r in cluster if r[1] == "secrets"]


@pytest.mark.parametrize("mode", MODES)
def test_secrets_are_read_by_name_only_in_every_mode(render: Render, mode: str) -> None:
    """No list or watch (no enumerating, no bulk read of a namespace's Secrets), no delete, no
    update, no patch; cluster-wide mode grants the same two verbs cluster-wide
    (docs/security.md)."""
    for scope, held in granted(render(MODES[mode])).items():
        verbs = {verb for group, resource, verb in held if resource == "secrets"}
        if scope == CLUSTER and not MODES[mode].get("watch", {}).get("clusterWide"):
            assert verbs == set()
        else:
            assert verbs == {"get", "create"}, (mode, scope)


def test_the_driver_role_is_pods_only() -> None:
    """The driver manages executor pods and nothing else: no Secrets, ConfigMaps, Services or
    claims (operator/access.py configures Spark so it calls no more)."""
    assert {resource for _, resource, _ in driver_rights()} == {"pods"}
    assert {verb for _, _, verb in driver_rights()} == {
        "get", "list", "watch", "create", "delete", "deletecollection"
    }  # fmt: skip
