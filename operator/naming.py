"""What a StreamJob's children are called and labelled, and who owns them.

Every child's name derives from the job's name alone, so a reconcile finds what an earlier
one created without remembering anything. Owner references are rendered here rather than
by `kopf.adopt`, which would also copy every label of the StreamJob onto its children (an
`argocd.argoproj.io/instance` label copied that way makes Argo CD claim them). The ports
live here too: the driver Service, the pod and the agent's URL must agree on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swivel.api.base import API_GROUP, API_VERSION

Manifest = dict[str, Any]

AGENT_PORT = 8470
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040
# The job a child (or an automatic Reconfiguration) belongs to: `kubectl get ... -l`.
JOB_LABEL = f"{API_GROUP}/job"
AUTOMATIC_LABEL = f"{API_GROUP}/automatic"
TRIGGER_LABEL = f"{API_GROUP}/trigger"
MAX_SERVICE_NAME = 63


@dataclass(frozen=True)
class Owner:
    """The StreamJob as an owner reference: enough to render children without a client."""

    name: str
    namespace: str
    uid: str

    def reference(self) -> Manifest:
        return {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": "StreamJob",
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class Names:
    """Every child's name, derived from the job's name only (stable across reconciles)."""

    job: str

    @property
    def driver_pod(self) -> str:
        return f"{self.job}-driver"

    @property
    def service(self) -> str:
        return f"{self.job}-driver"

    @property
    def job_config(self) -> str:
        return f"{self.job}-job"

    @property
    def executor_template(self) -> str:
        return f"{self.job}-executor-template"

    @property
    def token_secret(self) -> str:
        return f"{self.job}-agent-token"

    @property
    def service_account(self) -> str:
        return f"{self.job}-driver"

    @property
    def checkpoints(self) -> str:
        return f"{self.job}-checkpoints"

    def service_host(self, namespace: str) -> str:
        return f"{self.service}.{namespace}.svc"

    def agent_url(self, namespace: str, tls: bool = False) -> str:
        scheme = "https" if tls else "http"
        return f"{scheme}://{self.service_host(namespace)}:{AGENT_PORT}"

    @property
    def network_policy(self) -> str:
        return f"{self.job}-ingress"


def name_problems(name: str) -> list[str]:
    """Why a job name cannot be rendered (a Service name is a 63-character DNS label)."""
    service = Names(name).service
    if len(service) > MAX_SERVICE_NAME:
        return [f"too long: the driver Service {service!r} must be at most 63 characters"]
    return []


def labels(job: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "swivel",
        "app.kubernetes.io/instance": job,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "swivel-operator",
        JOB_LABEL: job,
    }


def child_metadata(name: str, owner: Owner, component: str, **extra: Any) -> Manifest:
    """A child's metadata: its name, the job's namespace and labels, owned by the job."""
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels(owner.name, component),
        "ownerReferences": [owner.reference()],
        **extra,
    }
