"""The driver pod (the Spark container and the agent sidecar), the executor pod template
Spark starts executors from, and the driver's Service.

The pods are where least privilege and the credentials meet: each container gets only its
own token (the agent the operator's, the driver the driver's, executors the workers'), the
service account token only reaches the container that creates executors, and every
container runs as a non-root user without capabilities. docs/operator.md ("The pod
contract") states the contract these functions render.
"""

from __future__ import annotations

import yaml

from swivel.api.functions import PREFIXES_ENV, AllowList
from swivel.api.streamjob import StreamJob
from swivel.operator.access import api_access_mount, api_access_volume
from swivel.operator.credentials import (
    CA_KEY,
    CERT_KEY,
    DRIVER_TOKEN_KEY,
    PRIVATE_KEY_KEY,
    TOKEN_KEY,
    WORKER_TOKEN_KEY,
)
from swivel.operator.jobconfigs import (
    CONFIG_DIR,
    EXECUTOR_TEMPLATE_DIR,
    EXECUTOR_TEMPLATE_FILE,
    JOB_FILE,
    runs_migrations,
)
from swivel.operator.naming import (
    AGENT_PORT,
    BLOCK_MANAGER_PORT,
    DRIVER_PORT,
    JOB_LABEL,
    UI_PORT,
    Manifest,
    Names,
    Owner,
    child_metadata,
    labels,
)
from swivel.operator.restarts import (
    CHECKPOINT_ROOT,
    CHECKPOINT_VOLUME,
    RESTART_HASH_ANNOTATION,
    SINK_ANNOTATION,
    STATE_DIR,
    restart_hash,
    uses_checkpoint_claim,
)

TOKEN_DIR = "/var/run/swivel/agent-token"
AGENT_STATE_DIR = f"{STATE_DIR}/agent"
# SIGTERM → `swivel driver` stops the query at a batch boundary, waiting at most this long;
# the pod's grace period leaves room for Spark to shut down after it.
BOUNDARY_TIMEOUT_S = 45
TERMINATION_GRACE_S = BOUNDARY_TIMEOUT_S + 15
RUN_AS_USER = 1000
AGENT_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "96Mi"},
    "limits": {"memory": "256Mi"},
}


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
        "metadata": child_metadata(Names(owner.name).service, owner, "driver"),
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
    """SWIVEL_AGENT_MIGRATIONS=1 when the driver runs a MigrationDriver (`runs_migrations`):
    the agent then accepts moves, rescales and coordination intervals, and serves the
    driver's loads to the policies."""
    if not runs_migrations(job, owner):
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


def _pod_security() -> Manifest:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


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
        "metadata": child_metadata(Names(owner.name).executor_template, owner, "executor"),
        "data": {EXECUTOR_TEMPLATE_FILE: yaml.safe_dump(pod, sort_keys=False)},
    }


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
        "metadata": child_metadata(
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
