"""Everything a StreamJob owns, rendered as plain dicts in the order to create them.

One StreamJob owns: the driver Pod (the Spark container running the job runtime, and the
agent sidecar) and a Service for the driver and agent ports (`pods`), a ConfigMap with the
job manifest both containers read (`jobconfigs`), a Secret with the agent's credentials (a
token per role and, with TLS, the agent's certificate: `credentials`), a NetworkPolicy
letting only the job's own pods and the operator in and the ServiceAccount, Role and
RoleBinding the driver needs to manage its executors (`access`), a ConfigMap with the
executor pod template Spark on Kubernetes creates executors from (`pods`), and (unless
`spec.checkpoint.location` is set) a PersistentVolumeClaim holding the checkpoint, so a
restart keeps it (`restarts`). Names, labels and owner references: `naming`.
docs/operator.md states the contract.

Nothing here talks to a cluster or reads the clock; the credentials are an argument
(issued once by the caller and kept across reconciles), so the whole set is a pure function
of the job, table-tested and validated with `kubernetes-validate`.
"""

from __future__ import annotations

from swivel.api.streamjob import StreamJob
from swivel.operator.access import (
    render_network_policy,
    render_role,
    render_role_binding,
    render_service_account,
)
from swivel.operator.credentials import JobCredentials, as_credentials, render_token_secret
from swivel.operator.jobconfigs import render_job_config
from swivel.operator.naming import Manifest, Owner
from swivel.operator.pods import render_driver_pod, render_executor_template, render_service
from swivel.operator.restarts import render_checkpoint_claim, uses_checkpoint_claim


def render_children(
    job: StreamJob,
    owner: Owner,
    credentials: JobCredentials | str,
    *,
    operator_namespace: str | None = None,
) -> list[Manifest]:
    """Everything a StreamJob owns, in the order to create it (the pod last: it mounts the
    rest). A bare token means credentials without TLS (the agent serves plain HTTP)."""
    credentials = as_credentials(credentials)
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
