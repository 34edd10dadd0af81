"""Rendering a StreamJob into the Kubernetes objects that run it: pure functions, plain dicts.

One StreamJob owns: the driver Pod (the Spark container running the job runtime, and the
agent sidecar), a Service for the driver and agent ports, a ConfigMap with the job manifest
(what both containers read), a Secret with the agent's credentials (a token per role and,
with TLS, the agent's certificate: operator/credentials.py), a NetworkPolicy letting only
the job's own pods and the operator in, the ServiceAccount, Role and
RoleBinding the driver needs to manage its executors, a ConfigMap with the executor pod
template Spark on Kubernetes creates executors from, and (unless `spec.checkpoint.location`
is set) a PersistentVolumeClaim holding the checkpoint, so a restart keeps it.
docs/operator.md states the contract.

Nothing here talks to a cluster or reads the clock; the token is an argument (generated once
by the caller and kept across reconciles). Owner references are rendered here rather than by
`kopf.adopt`, which would also copy every label of the StreamJob onto its children (an
`argocd.argoproj.io/instance` label copied that way makes Argo CD claim them).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import yaml

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.functions import PREFIXES_ENV, AllowList
from swivel.api.streamjob import SinkKind, StreamJob, StreamJobSpec
from swivel.controllers.planning import migrates_bins
from swivel.operator.access import (
    DRIVER_RULES,
    KUBERNETES_API_CONF,
    api_access_mount,
    api_access_volume,
)
from swivel.operator.credentials import (
    CA_KEY,
    CERT_KEY,
    DRIVER_TOKEN_KEY,
    PRIVATE_KEY_KEY,
    TOKEN_KEY,
    WORKER_TOKEN_KEY,
    JobCredentials,
    agent_hosts,
    new_credentials,
)

Manifest = dict[str, Any]

AGENT_PORT = 8470
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040
CONFIG_DIR = "/etc/swivel"
JOB_FILE = "job.yaml"
EXECUTOR_TEMPLATE_DIR = "/etc/swivel/executor"
EXECUTOR_TEMPLATE_FILE = "executor-pod-template.yaml"
TOKEN_DIR = "/var/run/swivel/agent-token"
OPERATOR_LABELS = {"app.kubernetes.io/part-of": "swivel", "app.kubernetes.io/component": "operator"}
STATE_DIR = "/var/lib/swivel"
AGENT_STATE_DIR = f"{STATE_DIR}/agent"
CHECKPOINT_ROOT = f"{STATE_DIR}/checkpoints"
CHECKPOINT_VOLUME = "checkpoints"
# SIGTERM → `swivel driver` stops the query at a batch boundary, waiting at most this long;
# the pod's grace period leaves room for Spark to shut down after it.
BOUNDARY_TIMEOUT_S = 45
TERMINATION_GRACE_S = BOUNDARY_TIMEOUT_S + 15
RUN_AS_USER = 1000
AGENT_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "96Mi"},
    "limits": {"memory": "256Mi"},
}
JOB_LABEL = f"{API_GROUP}/job"
AUTOMATIC_LABEL = f"{API_GROUP}/automatic"
TRIGGER_LABEL = f"{API_GROUP}/trigger"
RESTART_HASH_ANNOTATION = f"{API_GROUP}/restart-hash"
SINK_ANNOTATION = f"{API_GROUP}/sink"  # on the driver pod: the sink kind its query writes to
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


def _metadata(name: str, owner: Owner, component: str, **extra: Any) -> Manifest:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels(owner.name, component),
        "ownerReferences": [owner.reference()],
        **extra,
    }


def spark_conf(job: StreamJob, owner: Owner) -> dict[str, str]:
    """Spark on Kubernetes settings the operator owns, over the user's `spec.sparkConf`."""
    spec, names = job.spec, Names(owner.name)
    return {
        **spec.spark_conf,
        "spark.master": "k8s://https://kubernetes.default.svc",
        "spark.submit.deployMode": "client",
        "spark.app.name": owner.name,
        "spark.kubernetes.namespace": owner.namespace,
        "spark.kubernetes.driver.pod.name": names.driver_pod,
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.authenticate.driver.serviceAccountName": names.service_account,
        "spark.kubernetes.executor.podTemplateFile": f"{EXECUTOR_TEMPLATE_DIR}/{EXECUTOR_TEMPLATE_FILE}",
        "spark.kubernetes.executor.podTemplateContainerName": "executor",
        "spark.driver.host": names.service_host(owner.namespace),
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
        # Executors and driver authenticate each other's RPC (Spark on Kubernetes generates
        # the secret and hands it to the executors it creates).
        "spark.authenticate": "true",
        # The UI (inside the job only: NetworkPolicy) reads; it does not kill stages or jobs.
        "spark.ui.killEnabled": "false",
        "spark.executor.instances": str(spec.executor.instances),
        "spark.executor.cores": str(spec.executor.cores),
        "spark.executor.memory": _jvm_memory(spec.executor.memory),
        **KUBERNETES_API_CONF,
    }


def job_manifest(job: StreamJob, owner: Owner) -> Manifest:
    """The StreamJob the containers read: the spec with Kubernetes Spark settings merged in."""
    spec = job.spec.model_copy(update={"spark_conf": spark_conf(job, owner)})
    if spec.checkpoint.location is None:
        checkpoint = spec.checkpoint.model_copy(
            update={"location": f"{CHECKPOINT_ROOT}/{owner.name}"}
        )
        spec = spec.model_copy(update={"checkpoint": checkpoint})
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "StreamJob",
        "metadata": {"name": owner.name, "namespace": owner.namespace},
        "spec": spec.to_manifest(),
    }


def render_job_config(job: StreamJob, owner: Owner) -> Manifest:
    document = yaml.safe_dump(job_manifest(job, owner), sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(Names(owner.name).job_config, owner, "config"),
        "data": {JOB_FILE: document},
    }


def uses_checkpoint_claim(job: StreamJob) -> bool:
    """The default checkpoint lives on the job's claim; an explicit location is the user's.

    Not for a `memory` sink: its rows live in the driver's memory and die with it, and Spark
    refuses to resume such a query from a checkpoint ("does not support recovering"), so a
    kept checkpoint would only make the restarted driver fail; it stays on the pod's volume.
    """
    return job.spec.checkpoint.location is None and job.spec.sink.kind is not SinkKind.MEMORY


def restart_refusal(running_sink: str | None, job: StreamJob) -> str | None:
    """Why the driver pod (whose query writes to `running_sink`, None when unknown) must not
    be replaced by one for `job`; None when a graceful restart is safe.

    A graceful restart stops the query at a batch boundary and resumes it from its
    checkpoint. A memory-sink query cannot be resumed (Spark refuses in append mode, the
    only one the runtime uses, so it gets no claim above): with a memory sink on either
    side, a restart can only start over, losing the keyed state of the stateful operators,
    the offsets and the rows. The operator refuses that instead of doing it silently;
    deleting and re-creating the job starts over on purpose.
    """
    memory = SinkKind.MEMORY.value
    if running_sink != memory and job.spec.sink.kind is not SinkKind.MEMORY:
        return None
    which = "the running query writes to" if running_sink == memory else "the new spec has"
    return (
        f"restart refused: {which} a memory sink, which Spark cannot resume from a "
        "checkpoint, so the restarted query would start over (keyed state, offsets and rows "
        "lost); the driver keeps running the previous spec. Use a files/kafka/noop/console "
        "sink for jobs that must survive restarts, or delete and re-create the job"
    )


def render_checkpoint_claim(job: StreamJob, owner: Owner) -> Manifest:
    """The PersistentVolumeClaim under CHECKPOINT_ROOT: outlives the driver pod (a restart
    resumes from it), collected with the job. ReadWriteOnce: one driver mounts it at a time,
    so the old driver must be gone before the new one starts (`_ensure_pod`)."""
    checkpoint = job.spec.checkpoint
    spec: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": checkpoint.volume_size}},
    }
    if checkpoint.storage_class_name is not None:
        spec["storageClassName"] = checkpoint.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(Names(owner.name).checkpoints, owner, "checkpoints"),
        "spec": spec,
    }


def _credentials(credentials: JobCredentials | str) -> JobCredentials:
    return JobCredentials(credentials) if isinstance(credentials, str) else credentials


def render_token_secret(owner: Owner, credentials: JobCredentials | str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(Names(owner.name).token_secret, owner, "agent"),
        "type": "Opaque",
        "data": _credentials(credentials).secret_data(),
    }


def job_credentials(secret: Manifest | None, owner: Owner, *, tls: bool = True) -> JobCredentials:
    """The credentials an existing Secret holds (never rotated), else new ones (with a
    certificate when `tls`). A Secret an older operator wrote without a certificate gets
    none: its driver pod's agent serves plain HTTP, and the operator must not speak HTTPS
    to it (nor fall back to HTTP when TLS fails: that would be a downgrade). Such a job
    gains TLS when it is re-created (docs/agent.md)."""
    existing = JobCredentials.of_secret(secret)
    if existing is not None:
        return existing
    names = Names(owner.name)
    return new_credentials(agent_hosts(names.service, owner.namespace), tls=tls)


def secret_outdated(existing: Manifest | None, rendered: Manifest) -> bool:
    """Whether the existing Secret lacks keys the rendered one has (written by an older
    operator): only then is a Secret patched, with the same token."""
    have = set((existing or {}).get("data") or {})
    return not set(rendered.get("data") or {}) <= have


def token_of(secret: Manifest) -> str | None:
    """The token kept in an existing Secret (so a reconcile never rotates it)."""
    encoded = (secret.get("data") or {}).get(TOKEN_KEY)
    return base64.b64decode(encoded).decode() if encoded else None


def render_service(owner: Owner) -> Manifest:
    selector = {JOB_LABEL: owner.name, "app.kubernetes.io/component": "driver"}
    # No Spark UI: the MigrationDriver reads it on localhost, nothing outside the pod needs it.
    ports = [
        ("driver-rpc", DRIVER_PORT),
        ("blockmanager", BLOCK_MANAGER_PORT),
        ("agent", AGENT_PORT),
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(Names(owner.name).service, owner, "driver"),
        "spec": {
            # Headless: executors reach the driver by its stable DNS name, port for port.
            "clusterIP": "None",
            "selector": selector,
            "ports": [
                {"name": name, "port": port, "targetPort": port, "protocol": "TCP"}
                for name, port in ports
            ],
        },
    }


def render_service_account(owner: Owner) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(Names(owner.name).service_account, owner, "driver"),
    }


def render_role(owner: Owner) -> Manifest:
    """What Spark's driver does with executors: create, watch and delete their pods."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(Names(owner.name).service_account, owner, "driver"),
        "rules": [dict(rule) for rule in DRIVER_RULES],
    }


def render_role_binding(owner: Owner) -> Manifest:
    name = Names(owner.name).service_account
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(name, owner, "driver"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": owner.namespace}],
    }


def _agent_env(owner: Owner, key: str, tls: bool) -> list[Manifest]:
    """How a job container reaches the agent: its own credential (`key` of the Secret: the
    driver's or the workers'), never the operator's."""
    names = Names(owner.name)

    def secret(secret_key: str) -> Manifest:
        return {"secretKeyRef": {"name": names.token_secret, "key": secret_key}}

    env: list[Manifest] = [
        {"name": "SWIVEL_JOB_NAME", "value": owner.name},
        # Through the Service, so the same URL works from the driver and from executors
        # (the runtime hands it to Python workers with spark.executorEnv.*).
        {"name": "SWIVEL_AGENT_URL", "value": names.agent_url(owner.namespace, tls)},
        {"name": "SWIVEL_AGENT_TOKEN", "valueFrom": secret(key)},
    ]
    if key == DRIVER_TOKEN_KEY:  # handed on to the Python workers a local master forks
        env.append({"name": "SWIVEL_AGENT_WORKER_TOKEN", "valueFrom": secret(WORKER_TOKEN_KEY)})
    if tls:  # the per-job CA the agent's certificate is verified against (not secret)
        env.append({"name": "SWIVEL_AGENT_CA", "valueFrom": secret(CA_KEY)})
    return env


def function_env() -> list[Manifest]:
    """The installation's function allow-list (chart `functions.allowedPrefixes`, in the
    operator's environment) for the agent, which refuses a plan naming anything else (422),
    and the driver, which pickles it into the workers: one list for every process of a job."""
    return [{"name": PREFIXES_ENV, "value": ",".join(AllowList().prefixes)}]


def _agent_migration_env(job: StreamJob, owner: Owner) -> list[Manifest]:
    """SWIVEL_AGENT_MIGRATIONS=1 when the driver runs a MigrationDriver (the same decision as
    `swivel driver`'s, on the master the job config gives it): the agent then accepts moves,
    rescales and coordination intervals, and serves the driver's loads to the policies."""
    if not migrates_bins(spark_conf(job, owner)["spark.master"]):
        return []
    return [{"name": "SWIVEL_AGENT_MIGRATIONS", "value": "1"}]


def _container_security() -> Manifest:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": False,
        "capabilities": {"drop": ["ALL"]},
    }


def _resources(cores: int, memory: str) -> Manifest:
    return {"requests": {"cpu": str(cores), "memory": memory}, "limits": {"memory": memory}}


def render_executor_template(job: StreamJob, owner: Owner, *, tls: bool = False) -> Manifest:
    """The executor pod template (a Pod manifest in a ConfigMap) Spark starts executors from."""
    spec = job.spec
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": labels(owner.name, "executor")},
        "spec": {
            # Spark runs executors under the driver's service account (its fallback when
            # spark.kubernetes.authenticate.executor.serviceAccountName is unset); they call
            # no Kubernetes API, so they get no token: job code cannot create pods with it.
            "automountServiceAccountToken": False,
            "securityContext": _pod_security(),
            "containers": [
                {
                    "name": "executor",
                    "image": spec.image,
                    "env": _agent_env(owner, WORKER_TOKEN_KEY, tls),
                    "resources": _resources(spec.executor.cores, spec.executor.memory),
                    "securityContext": _container_security(),
                }
            ],
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(Names(owner.name).executor_template, owner, "executor"),
        "data": {EXECUTOR_TEMPLATE_FILE: yaml.safe_dump(pod, sort_keys=False)},
    }


def _pod_security() -> Manifest:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restart_view(spec: StreamJobSpec) -> Manifest:
    """The spec without the fields that change live (function, params, executor count,
    policies): what a running driver cannot take without a restart."""
    view = spec.to_manifest()
    view.get("executor", {}).pop("instances", None)
    view.pop("policies", None)
    for claim_only in ("volumeSize", "storageClassName"):  # the claim is created once
        view.get("checkpoint", {}).pop(claim_only, None)
    for operator in view["dataflow"]["operators"]:
        operator.pop("function", None)
        operator.pop("params", None)
    return view


def restart_hash(spec: StreamJobSpec) -> str:
    canonical = json.dumps(restart_view(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def render_driver_pod(job: StreamJob, owner: Owner, *, tls: bool = False) -> Manifest:
    spec, names = job.spec, Names(owner.name)
    job_path = f"{CONFIG_DIR}/{JOB_FILE}"
    mounts = [
        {"name": "job-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "state", "mountPath": STATE_DIR},
    ]
    checkpoint_mounts: list[Manifest] = []
    checkpoint_volumes: list[Manifest] = []
    if uses_checkpoint_claim(job):
        checkpoint_mounts = [{"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_ROOT}]
        checkpoint_volumes = [
            {
                "name": CHECKPOINT_VOLUME,
                "persistentVolumeClaim": {"claimName": names.checkpoints},
            }
        ]
    spark = {
        "name": "spark",
        "image": spec.image,
        "command": [
            "swivel",
            "driver",
            "--job-config",
            job_path,
            "--boundary-timeout",
            str(BOUNDARY_TIMEOUT_S),
        ],
        "env": [
            *_agent_env(owner, DRIVER_TOKEN_KEY, tls),
            *function_env(),
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "ports": [
            {"name": "driver-rpc", "containerPort": DRIVER_PORT},
            {"name": "blockmanager", "containerPort": BLOCK_MANAGER_PORT},
            {"name": "spark-ui", "containerPort": UI_PORT},
        ],
        "resources": _resources(spec.driver.cores, spec.driver.memory),
        "volumeMounts": [
            *mounts,
            {"name": "executor-template", "mountPath": EXECUTOR_TEMPLATE_DIR, "readOnly": True},
            *checkpoint_mounts,
            api_access_mount(),
        ],
        "securityContext": _container_security(),
    }
    probe_path = {"port": "agent", "path": "/healthz", "scheme": "HTTPS" if tls else "HTTP"}
    agent_files = [{"key": TOKEN_KEY, "path": TOKEN_KEY}]  # never the job's tokens
    tls_env: list[Manifest] = []
    if tls:
        agent_files += [{"key": k, "path": k} for k in (CERT_KEY, PRIVATE_KEY_KEY)]
        tls_env = [
            {"name": "SWIVEL_AGENT_TLS_CERT", "value": f"{TOKEN_DIR}/{CERT_KEY}"},
            {"name": "SWIVEL_AGENT_TLS_KEY", "value": f"{TOKEN_DIR}/{PRIVATE_KEY_KEY}"},
        ]
    agent = {
        "name": "agent",
        "image": spec.image,
        "command": [
            "swivel",
            "agent",
            "--job",
            job_path,
            "--host",
            "0.0.0.0",
            "--port",
            str(AGENT_PORT),
            "--state-dir",
            AGENT_STATE_DIR,
        ],
        "env": [
            {"name": "SWIVEL_AGENT_TOKEN_FILE", "value": f"{TOKEN_DIR}/{TOKEN_KEY}"},
            {"name": "SWIVEL_AGENT_STATE_DIR", "value": AGENT_STATE_DIR},
            *tls_env,
            *_agent_migration_env(job, owner),
            *function_env(),
        ],
        "ports": [{"name": "agent", "containerPort": AGENT_PORT}],
        # A Python process on a busy node can take seconds to import and bind: no liveness
        # verdict before it had the chance (a restart would only start it over).
        "livenessProbe": {
            "httpGet": probe_path,
            "initialDelaySeconds": 15,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "readinessProbe": {"httpGet": {**probe_path, "path": "/readyz"}, "periodSeconds": 5},
        "resources": AGENT_RESOURCES,
        "volumeMounts": [
            *mounts,
            {"name": "agent-token", "mountPath": TOKEN_DIR, "readOnly": True},
        ],
        "securityContext": _container_security(),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata(
            names.driver_pod,
            owner,
            "driver",
            annotations={
                RESTART_HASH_ANNOTATION: restart_hash(spec),
                SINK_ANNOTATION: spec.sink.kind.value,
            },
        ),
        "spec": {
            "serviceAccountName": names.service_account,
            # Only the spark container needs the token (it creates executors): it gets it
            # through API_ACCESS_VOLUME; the agent sidecar gets none.
            "automountServiceAccountToken": False,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
            "securityContext": _pod_security(),
            "containers": [spark, agent],
            "volumes": [
                {"name": "job-config", "configMap": {"name": names.job_config}},
                {"name": "executor-template", "configMap": {"name": names.executor_template}},
                {
                    "name": "agent-token",
                    "secret": {"secretName": names.token_secret, "items": agent_files},
                },
                {"name": "state", "emptyDir": {}},
                *checkpoint_volumes,
                api_access_volume(),
            ],
        },
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
        "metadata": _metadata(Names(owner.name).network_policy, owner, "network"),
        "spec": {
            "podSelector": job_pods,
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": job_pods}]},
                {"from": [operator], "ports": [{"protocol": "TCP", "port": AGENT_PORT}]},
            ],
        },
    }


def render_children(
    job: StreamJob,
    owner: Owner,
    credentials: JobCredentials | str,
    *,
    operator_namespace: str | None = None,
) -> list[Manifest]:
    """Everything a StreamJob owns, in the order to create it (the pod last: it mounts the
    rest). A bare token means credentials without TLS (the agent serves plain HTTP)."""
    credentials = _credentials(credentials)
    tls = credentials.tls
    claim = [render_checkpoint_claim(job, owner)] if uses_checkpoint_claim(job) else []
    return [
        *claim,
        render_service_account(owner),
        render_role(owner),
        render_role_binding(owner),
        render_token_secret(owner, credentials),
        render_network_policy(owner, operator_namespace),
        render_job_config(job, owner),
        render_executor_template(job, owner, tls=tls),
        render_service(owner),
        render_driver_pod(job, owner, tls=tls),
    ]


_QUANTITY_FACTORS = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "m": 10**-3, "": 1,
}  # fmt: skip


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (the model's pattern: a number and a suffix) in bytes."""
    for suffix in sorted(_QUANTITY_FACTORS, key=len, reverse=True):
        number = quantity.removesuffix(suffix) if suffix else quantity
        if number != quantity or not suffix:
            return int(float(number) * _QUANTITY_FACTORS[suffix])
    raise AssertionError("unreachable")


def _jvm_memory(quantity: str) -> str:
    """A Kubernetes quantity as Spark's memory string, in whole mebibytes (`1536m`)."""
    return f"{max(1, quantity_bytes(quantity) // 2**20)}m"
