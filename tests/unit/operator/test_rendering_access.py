"""Least privilege in the rendered pods: the driver's Role is exactly what Spark calls for its
executors, only the spark container carries a service account token, executors carry none,
and every Kubernetes Spark setting the operator renders is one a user may not set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from swivel.api.manifests import load_streamjob
from swivel.api.sparkconf import refusal
from swivel.api.streamjob import StreamJob
from swivel.operator import access, jobconfigs, pods
from swivel.operator.naming import Owner

ROOT = Path(__file__).resolve().parents[3]
OWNER = Owner(name="fraud-detection", namespace="streams", uid="0b9f6a3e-1111-2222-3333-4444")
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def job() -> StreamJob:
    return load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")


@pytest.fixture(scope="module")
def pod(job: StreamJob) -> dict[str, Any]:
    return pods.render_driver_pod(job, OWNER)


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def _mounts_at(container: dict[str, Any], path: str) -> list[str]:
    return [m["name"] for m in container.get("volumeMounts") or [] if m["mountPath"] == path]


def test_the_driver_role_is_exactly_what_spark_calls_for_executors(job: StreamJob) -> None:
    role = access.render_role(OWNER)
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    pods = ("get", "list", "watch", "create", "delete", "deletecollection")
    assert granted == {("", "pods", verb) for verb in pods}
    assert role["rules"] == [dict(rule) for rule in access.DRIVER_RULES]


def test_spark_is_configured_to_stay_inside_the_role(job: StreamJob) -> None:
    conf = jobconfigs.spark_conf(job, OWNER)
    assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"  # no configmaps
    assert conf["spark.kubernetes.driver.service.deleteOnTermination"] == "false"  # services
    assert conf["spark.kubernetes.driver.ownPersistentVolumeClaim"] == "false"  # claims
    assert conf["spark.kubernetes.driver.reusePersistentVolumeClaim"] == "false"
    assert conf["spark.kubernetes.executor.deleteOnTermination"] == "true"  # no patch
    assert conf["spark.kubernetes.allocation.pods.allocator"] == "direct"  # no apps rights


def test_only_the_spark_container_gets_a_token(pod: dict[str, Any]) -> None:
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "fraud-detection-driver"
    assert _mounts_at(_container(pod, "spark"), TOKEN_PATH) == [access.API_ACCESS_VOLUME]
    agent = _container(pod, "agent")
    assert not [m for m in agent["volumeMounts"] if m["name"] == access.API_ACCESS_VOLUME]
    assert not [m for m in agent["volumeMounts"] if "serviceaccount" in m["mountPath"]]
    volume = next(v for v in spec["volumes"] if v["name"] == access.API_ACCESS_VOLUME)
    sources = volume["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    assert sources[2]["downwardAPI"]["items"][0]["path"] == "namespace"
    kubernetes_validate.validate(pod, "1.30", strict=True)


def test_executors_carry_no_token(job: StreamJob) -> None:
    template = pods.render_executor_template(job, OWNER)
    executor = yaml.safe_load(template["data"][jobconfigs.EXECUTOR_TEMPLATE_FILE])
    assert executor["spec"]["automountServiceAccountToken"] is False
    for container in executor["spec"]["containers"]:
        mounts = container.get("volumeMounts") or []
        assert not [m for m in mounts if "serviceaccount" in m["mountPath"]]
    assert not executor["spec"].get("volumes")


def test_every_kubernetes_setting_the_operator_renders_is_refused_to_users(
    job: StreamJob,
) -> None:
    """A user cannot set what the operator sets for the driver's identity and reach (and
    would otherwise be silently overridden)."""
    rendered = jobconfigs.spark_conf(job, OWNER)
    kubernetes = [key for key in rendered if key.startswith("spark.kubernetes.")]
    assert len(kubernetes) >= 10
    unrefused = [key for key in kubernetes if refusal(key) is None]
    assert unrefused == []


def test_a_user_spark_conf_cannot_override_the_operator(job: StreamJob) -> None:
    """Even a key that slipped past validation is overwritten by the operator's value."""
    edited = job.model_copy(
        update={
            "spec": job.spec.model_copy(
                update={"spark_conf": {"spark.kubernetes.executor.disableConfigMap": "false"}}
            )
        }
    )
    conf = jobconfigs.spark_conf(edited, OWNER)
    assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"
