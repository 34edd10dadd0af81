"""Least privilege for a StreamJob's pods: the driver's Role, the settings that keep Spark
inside it, and the service account token only where it is used.

Pure data, no cluster: `rendering` puts these into the children it renders. Spark's
Kubernetes backend decides what the driver calls; docs/security.md ("Permissions") lists
each verb with the Spark call that needs it, read from Spark 4.x's source
(`ExecutorPodsAllocator`, `ExecutorPodsLifecycleManager`, the watch and polling snapshot
sources, `KubernetesClusterSchedulerBackend`).
"""

from __future__ import annotations

from typing import Any

Manifest = dict[str, Any]

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


__all__ = ["DRIVER_RULES", "KUBERNETES_API_CONF", "api_access_mount", "api_access_volume"]
