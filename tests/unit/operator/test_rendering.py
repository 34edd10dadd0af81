"""The rendered children: table tests of what each carries, and every object validated
against the real Kubernetes schemas (`kubernetes-validate`, strict: unknown fields fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from swivel.api.base import Disruption
from swivel.api.changes import diff_specs
from swivel.api.manifests import load_streamjob
from swivel.api.sparkconf import load_rendered_streamjob
from swivel.api.streamjob import StreamJob
from swivel.operator import jobconfigs, naming, pods, restarts
from swivel.operator.children import render_children
from swivel.operator.credentials import token_of
from swivel.operator.naming import Names, Owner

ROOT = Path(__file__).resolve().parents[3]
KUBERNETES_VERSION = "1.30"
OWNER = Owner(
    name="fraud-detection", namespace="streams", uid="0b9f6a3e-1111-2222-3333-444455556666"
)
TOKEN = "s3cr3t-token"


@pytest.fixture(scope="module")
def job() -> StreamJob:
    return load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")


@pytest.fixture(scope="module")
def children(job: StreamJob) -> dict[str, dict[str, Any]]:
    return {
        obj["kind"] + "/" + obj["metadata"]["name"]: obj
        for obj in render_children(job, OWNER, TOKEN)
    }


def test_every_child_validates_against_the_kubernetes_schema(
    children: dict[str, dict[str, Any]],
) -> None:
    for obj in children.values():
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_embedded_manifests_validate_too(children: dict[str, dict[str, Any]]) -> None:
    template = children["ConfigMap/fraud-detection-executor-template"]["data"]
    pod = yaml.safe_load(template[jobconfigs.EXECUTOR_TEMPLATE_FILE])
    pod["metadata"]["name"] = "executor"  # Spark names executors; the schema needs one
    kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)


def test_the_validator_rejects_a_broken_object(children: dict[str, dict[str, Any]]) -> None:
    broken = yaml.safe_load(yaml.safe_dump(children["Pod/fraud-detection-driver"]))
    broken["spec"]["containers"][0]["imagePullPolicy"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    ("kind", "name", "component"),
    [
        ("Pod", "fraud-detection-driver", "driver"),
        ("Service", "fraud-detection-driver", "driver"),
        ("ConfigMap", "fraud-detection-job", "config"),
        ("ConfigMap", "fraud-detection-executor-template", "executor"),
        ("Secret", "fraud-detection-agent-token", "agent"),
        ("ServiceAccount", "fraud-detection-driver", "driver"),
        ("Role", "fraud-detection-driver", "driver"),
        ("RoleBinding", "fraud-detection-driver", "driver"),
    ],
)
def test_each_child_is_labelled_owned_and_namespaced(
    children: dict[str, dict[str, Any]], kind: str, name: str, component: str
) -> None:
    metadata = children[f"{kind}/{name}"]["metadata"]
    assert metadata["namespace"] == "streams"
    assert metadata["labels"][naming.JOB_LABEL] == "fraud-detection"
    assert metadata["labels"]["app.kubernetes.io/component"] == component
    (reference,) = metadata["ownerReferences"]
    assert reference == {
        "apiVersion": "swivel.dev/v1alpha1",
        "kind": "StreamJob",
        "name": "fraud-detection",
        "uid": OWNER.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_the_pod_runs_the_driver_and_the_agent_sidecar(children: dict[str, dict[str, Any]]) -> None:
    pod = children["Pod/fraud-detection-driver"]
    spark, agent = pod["spec"]["containers"]
    assert spark["command"] == [
        "swivel", "driver", "--job-config", "/etc/swivel/job.yaml", "--boundary-timeout", "45"
    ]  # fmt: skip
    # SIGTERM: the driver waits up to 45 s for a batch boundary, inside the grace period.
    assert pod["spec"]["terminationGracePeriodSeconds"] > pods.BOUNDARY_TIMEOUT_S
    assert agent["command"][:3] == ["swivel", "agent", "--job"]
    assert agent["command"][agent["command"].index("--port") + 1] == "8470"
    assert agent["command"][agent["command"].index("--state-dir") + 1] == "/var/lib/swivel/agent"
    assert agent["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["spec"]["serviceAccountName"] == "fraud-detection-driver"
    env = {e["name"]: e for e in spark["env"]}
    assert env["SWIVEL_AGENT_URL"]["value"] == "http://fraud-detection-driver.streams.svc:8470"
    assert (
        env["SWIVEL_AGENT_TOKEN"]["valueFrom"]["secretKeyRef"]["name"]
        == "fraud-detection-agent-token"
    )


@pytest.mark.parametrize(
    ("driver", "executor", "driver_resources", "executor_resources"),
    [
        ({}, {}, ("1", "1Gi"), ("1", "1Gi")),
        (
            {"cores": 2, "memory": "3Gi"},
            {"cores": 4, "memory": "1536Mi"},
            ("2", "3Gi"),
            ("4", "1536Mi"),
        ),
    ],
)
def test_resources_come_from_the_spec(
    job: StreamJob,
    driver: dict[str, Any],
    executor: dict[str, Any],
    driver_resources: tuple[str, str],
    executor_resources: tuple[str, str],
) -> None:
    manifest = job.to_manifest()
    manifest["spec"]["driver"] = driver
    manifest["spec"]["executor"] = executor
    edited = StreamJob.model_validate(manifest)
    pod = pods.render_driver_pod(edited, OWNER)
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    assert (requests["cpu"], requests["memory"]) == driver_resources
    template = yaml.safe_load(
        pods.render_executor_template(edited, OWNER)["data"][jobconfigs.EXECUTOR_TEMPLATE_FILE]
    )
    requests = template["spec"]["containers"][0]["resources"]["requests"]
    assert (requests["cpu"], requests["memory"]) == executor_resources
    conf = jobconfigs.spark_conf(edited, OWNER)
    assert (
        conf["spark.executor.memory"]
        == f"{jobconfigs.quantity_bytes(executor_resources[1]) // 2**20}m"
    )


def test_the_job_config_carries_the_spec_and_the_kubernetes_spark_settings(
    children: dict[str, dict[str, Any]], job: StreamJob, tmp_path: Path
) -> None:
    text = children["ConfigMap/fraud-detection-job"]["data"]["job.yaml"]
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    parsed = load_rendered_streamjob(tmp_path / "job.yaml")  # what `swivel driver` reads
    assert parsed.spec.dataflow == job.spec.dataflow
    assert parsed.spec.spark_conf["spark.kubernetes.driver.pod.name"] == "fraud-detection-driver"
    assert parsed.spec.spark_conf["spark.executor.instances"] == "2"
    assert parsed.spec.checkpoint.location == "/var/lib/swivel/checkpoints/fraud-detection"


DEFAULT_LOCATION = "/var/lib/swivel/checkpoints/fraud-detection"


@pytest.mark.parametrize(
    ("sink", "checkpoint", "claim", "location"),
    [
        # The default: a 1Gi ReadWriteOnce claim of the default class at the checkpoint root.
        ("noop", {}, {"storage": "1Gi"}, DEFAULT_LOCATION),
        (
            "files",
            {"volumeSize": "20Gi", "storageClassName": "fast-ssd"},
            {"storage": "20Gi", "storageClassName": "fast-ssd"},
            DEFAULT_LOCATION,
        ),
        # An explicit location is the user's storage: no claim, no extra volume.
        ("noop", {"location": "s3a://bucket/ckpt"}, None, "s3a://bucket/ckpt"),
        # A memory sink cannot resume (Spark refuses): its checkpoint stays on the pod.
        ("memory", {}, None, DEFAULT_LOCATION),
    ],
)
def test_the_checkpoint_lives_on_a_claim_the_job_owns(
    job: StreamJob,
    sink: str,
    checkpoint: dict[str, Any],
    claim: dict[str, str] | None,
    location: str,
) -> None:
    manifest = job.to_manifest()
    manifest["spec"]["checkpoint"] = checkpoint
    manifest["spec"]["sink"] = {"kind": sink, "options": {"path": "/data/out"}}
    edited = StreamJob.model_validate(manifest)
    children = render_children(edited, OWNER, TOKEN)
    kinds = [obj["kind"] for obj in children]
    rendered = {obj["kind"] + "/" + obj["metadata"]["name"]: obj for obj in children}
    pod = rendered["Pod/fraud-detection-driver"]
    spark = pod["spec"]["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in spark["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    job_config = yaml.safe_load(rendered["ConfigMap/fraud-detection-job"]["data"]["job.yaml"])
    assert job_config["spec"]["checkpoint"]["location"] == location
    if claim is None:
        assert "PersistentVolumeClaim" not in kinds
        assert "checkpoints" not in mounts and "checkpoints" not in volumes
        return
    pvc = rendered["PersistentVolumeClaim/fraud-detection-checkpoints"]
    kubernetes_validate.validate(pvc, KUBERNETES_VERSION, strict=True)
    kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
    assert pvc["metadata"]["labels"]["app.kubernetes.io/component"] == "checkpoints"
    assert pvc["metadata"]["ownerReferences"] == [OWNER.reference()]
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pvc["spec"]["resources"]["requests"] == {"storage": claim["storage"]}
    assert pvc["spec"].get("storageClassName") == claim.get("storageClassName")
    assert kinds.index("PersistentVolumeClaim") < kinds.index("Pod")  # the pod mounts it
    assert mounts["checkpoints"] == restarts.CHECKPOINT_ROOT
    assert location.startswith(restarts.CHECKPOINT_ROOT + "/")
    assert volumes["checkpoints"] == {
        "name": "checkpoints",
        "persistentVolumeClaim": {"claimName": "fraud-detection-checkpoints"},
    }
    agent = pod["spec"]["containers"][1]
    assert "checkpoints" not in {m["name"] for m in agent["volumeMounts"]}


def test_the_token_is_the_one_given(children: dict[str, dict[str, Any]]) -> None:
    assert token_of(children["Secret/fraud-detection-agent-token"]) == TOKEN
    assert token_of({"data": {}}) is None


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("executor", "instances"), 5),
        (("dataflow", "operators", 2, "params"), {"model": "cheap"}),
        (("dataflow", "operators", 2, "function"), "swivel.jobs.examples.fraud:merchant_model"),
        (("policies",), {"rebalance": {"enabled": True}}),
        (("image",), "example.org/swivel:2"),
        (("source", "rowsPerSecond"), 7),
        (("executor", "memory"), "2Gi"),
        (("dataflow", "bins"), 32),
        (("checkpoint", "location"), "s3a://bucket/ckpt"),
        # The claim is created once: its size and class restart nothing.
        (("checkpoint", "volumeSize"), "5Gi"),
        (("checkpoint", "storageClassName"), "fast-ssd"),
    ],
)
def test_the_restart_hash_changes_exactly_for_restart_class_edits(
    job: StreamJob, path: tuple[str | int, ...], value: Any
) -> None:
    manifest = job.to_manifest()
    target = manifest["spec"]
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    edited = StreamJob.model_validate(manifest)
    needs_restart = diff_specs(job.spec, edited.spec).disruption is Disruption.RESTART
    changed = restarts.restart_hash(job.spec) != restarts.restart_hash(edited.spec)
    assert changed == needs_restart


@pytest.mark.parametrize(
    ("running_sink", "new_sink", "refused"),
    [
        ("files", "files", False),
        ("noop", "kafka", False),
        (None, "console", False),  # a pod from before the sink annotation: the new spec decides
        # A memory sink on either side: the restarted query could only start over.
        ("memory", "memory", True),
        ("memory", "files", True),
        ("files", "memory", True),
        (None, "memory", True),
    ],
)
def test_a_restart_that_cannot_resume_from_the_checkpoint_is_refused(
    job: StreamJob, running_sink: str | None, new_sink: str, refused: bool
) -> None:
    manifest = job.to_manifest()
    manifest["spec"]["sink"] = {"kind": new_sink}
    edited = StreamJob.model_validate(manifest)
    pod = next(c for c in render_children(edited, OWNER, TOKEN) if c["kind"] == "Pod")
    assert pod["metadata"]["annotations"][restarts.SINK_ANNOTATION] == new_sink
    refusal = restarts.restart_refusal(running_sink, edited)
    assert (refusal is not None) == refused
    if refusal is not None:
        assert "memory sink" in refusal and "start over" in refusal
    # A claim exactly where a restart can resume from it.
    assert restarts.uses_checkpoint_claim(edited) == (new_sink != "memory")


def test_long_names_are_refused_before_rendering() -> None:
    assert naming.name_problems("a" * 56) == []
    assert naming.name_problems("a" * 57) != []
    assert Names("x").agent_url("ns") == "http://x-driver.ns.svc:8470"
