"""The job's configuration as its containers read it: the StreamJob with the Spark on
Kubernetes settings the operator owns merged into `sparkConf`, in a ConfigMap.

The driver and the agent both read this one file, so they decide alike (whether bin
migrations run, where the checkpoint is) without the operator telling each separately.
"""

from __future__ import annotations

import yaml

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.streamjob import StreamJob
from swivel.controllers.planning import migrates_bins
from swivel.operator.access import KUBERNETES_API_CONF
from swivel.operator.naming import (
    BLOCK_MANAGER_PORT,
    DRIVER_PORT,
    Manifest,
    Names,
    Owner,
    child_metadata,
)
from swivel.operator.restarts import CHECKPOINT_ROOT

CONFIG_DIR = "/etc/swivel"
JOB_FILE = "job.yaml"
EXECUTOR_TEMPLATE_DIR = "/etc/swivel/executor"
EXECUTOR_TEMPLATE_FILE = "executor-pod-template.yaml"


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


def runs_migrations(job: StreamJob, owner: Owner) -> bool:
    """Whether the driver runs a MigrationDriver: the same decision as `swivel driver`'s,
    on the master this job config gives it."""
    return migrates_bins(spark_conf(job, owner)["spark.master"])


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
        "metadata": child_metadata(Names(owner.name).job_config, owner, "config"),
        "data": {JOB_FILE: document},
    }


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
