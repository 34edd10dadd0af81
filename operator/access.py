"""Least privilege for a StreamJob's pods: the driver's ServiceAccount, Role and
RoleBinding, the settings that keep Spark inside it, the service account token only where
it is used, and the NetworkPolicy that lets only the job's pods and the operator in.

Pure data, no cluster: `children` renders these with the rest of a job. Spark's
Kubernetes backend decides what the driver calls; docs/security.md ("Permissions") lists
each verb with the Spark call that needs it, read from Spark 4.x's source
(`ExecutorPodsAllocator`, `ExecutorPodsLifecycleManager`, the watch and polling snapshot
sources, `KubernetesClusterSchedulerBackend`).
"""

from __future__ import annotations

from swivel.operator.naming import (
    AGENT_PORT,
    JOB_LABEL,
    Manifest,
    Names,
    Owner,
    child_metadata,
)

# How the chart labels the operator's pods: the NetworkPolicy lets them reach the agent.
OPERATOR_LABELS = {"app.kubernetes.io/part-of": "swivel", "app.kubernetes.io/component": "operator"}

# What the driver's Spark (4.x, client mode, the default `direct` pods allocator) calls on the
# Kubernetes API for its executors, and nothing else; docs/security.md names the Spark call
# behind each verb. KUBERNETES_API_CONF turns off the calls that would need more (executor
# ConfigMap, Service and PVC clean-up, patches for inactive or decommissioning executors).
DRIVER_RULES: tuple[Manifest, ...] = (
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["get", "list", "watch", "create", "delete", "deletecollection"],
    },
)

# Spark settings the operator fixes so that the driver needs only DRIVER_RULES (users cannot
# set them: swivel.api.sparkconf refuses them). Each one switches off an API call Spark makes
# by default: the executor ConfigMap (create + deletecollection of configmaps; executors
# read the same conf dir from the same image), deleting Services labelled with the app id
# on stop (the driver's Service is the operator's), owning and reusing executor PVCs (a list
# and a deletecollection of persistentvolumeclaims; executors get no claims); executors are
# deleted, not labelled inactive (a patch), and created one by one (`direct`: no
# StatefulSet or Deployment rights).
KUBERNETES_API_CONF: dict[str, str] = {
    "spark.kubernetes.executor.disableConfigMap": "true",
    "spark.kubernetes.driver.service.deleteOnTermination": "false",
    "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
    "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
    "spark.kubernetes.executor.deleteOnTermination": "true",
    "spark.kubernetes.allocation.pods.allocator": "direct",
}

# The service account token, mounted into the spark container only (the agent and the
# executors get none: `automountServiceAccountToken: false` on both pods). The same three
# sources Kubernetes' own automount projects, at the same path, so Spark's client
# (fabric8) finds them as usual.
API_ACCESS_VOLUME = "kube-api-access"
API_ACCESS_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_TOKEN_SECONDS = 3607


def api_access_volume() -> Manifest:
    return {
        "name": API_ACCESS_VOLUME,
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {
                    "serviceAccountToken": {
                        "path": "token",
                        "expirationSeconds": API_TOKEN_SECONDS,
                    }
                },
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {
                                    "apiVersion": "v1",
                                    "fieldPath": "metadata.namespace",
                                },
                            }
                        ]
                    }
                },
            ],
        },
    }


def api_access_mount() -> Manifest:
    return {"name": API_ACCESS_VOLUME, "mountPath": API_ACCESS_DIR, "readOnly": True}


def render_service_account(owner: Owner) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": child_metadata(Names(owner.name).service_account, owner, "driver"),
    }


def render_role(owner: Owner) -> Manifest:
    """What Spark's driver does with executors: create, watch and delete their pods."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": child_metadata(Names(owner.name).service_account, owner, "driver"),
        "rules": [dict(rule) for rule in DRIVER_RULES],
    }


def render_role_binding(owner: Owner) -> Manifest:
    name = Names(owner.name).service_account
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": child_metadata(name, owner, "driver"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": owner.namespace}],
    }


def render_network_policy(owner: Owner, operator_namespace: str | None = None) -> Manifest:
    """Ingress to the job's pods (driver and executors) only from the job's own pods, and
    to the agent port from the operator (in `operator_namespace`; any namespace's pods
    labelled as the chart labels the operator when unknown). The Spark UI and RPC ports
    stay inside the job. Needs a CNI that enforces NetworkPolicy (docs/operator.md)."""
    job_pods = {"matchLabels": {JOB_LABEL: owner.name}}
    namespaces: Manifest = {}
    if operator_namespace:
        namespaces = {"matchLabels": {"kubernetes.io/metadata.name": operator_namespace}}
    operator = {"namespaceSelector": namespaces, "podSelector": {"matchLabels": OPERATOR_LABELS}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": child_metadata(Names(owner.name).network_policy, owner, "network"),
        "spec": {
            "podSelector": job_pods,
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": job_pods}]},
                {"from": [operator], "ports": [{"protocol": "TCP", "port": AGENT_PORT}]},
            ],
        },
    }
