"""The process kubelet without Spark: a pod with the agent, its volumes, env, ports, probes,
Service resolution, restarts, logs and graceful deletion."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from swivel_tools.sandbox import containers
from swivel_tools.sandbox.network import PORTS_ANNOTATION, NetworkMap
from tests.polling import wait_for

from .conftest import ROOT, KubeletSandbox

TOKEN = "s3cret-token"
MANAGED = {"app.kubernetes.io/managed-by": "swivel-operator", "app": "agent-only"}


def _job_yaml() -> str:
    job = yaml.safe_load((ROOT / "examples" / "fraud-detection" / "streamjob.yaml").read_text())
    job["spec"]["sparkConf"] = {"spark.master": "k8s://https://kubernetes.default.svc"}
    job["spec"]["checkpoint"] = {"location": "/var/lib/swivel/checkpoints/fraud-detection"}
    return yaml.safe_dump(job)


def _agent_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": MANAGED},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "agent",
                    "image": "swivel:dev",
                    "command": [
                        "swivel",
                        "agent",
                        "--job",
                        "/etc/swivel/job.yaml",
                        "--host",
                        "0.0.0.0",
                        "--port",
                        "8470",
                        "--state-dir",
                        "/var/lib/swivel/agent",
                    ],
                    "env": [
                        {
                            "name": "SWIVEL_AGENT_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "token", "key": "token"}},
                        },
                        {
                            "name": "MY_POD",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        },
                        {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "AGENT_URL", "value": "http://agent.default.svc:8470"},
                    ],
                    "ports": [{"name": "agent", "containerPort": 8470}],
                    "readinessProbe": {
                        "httpGet": {"port": "agent", "path": "/healthz"},
                        "periodSeconds": 1,
                    },
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/swivel", "readOnly": True},
                        {"name": "state", "mountPath": "/var/lib/swivel"},
                    ],
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": "job"}},
                {"name": "state", "emptyDir": {}},
            ],
            **spec,
        },
    }


def _create_config(kube: KubeletSandbox) -> None:
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "job"}, "data": {"job.yaml": _job_yaml()}}
    )
    kube.core.create_namespaced_secret(
        "default",
        {
            "metadata": {"name": "token"},
            "data": {"token": base64.b64encode(TOKEN.encode()).decode()},
        },
    )
    kube.core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"app": "agent-only"},
                "ports": [{"port": 8470, "targetPort": "agent"}],
            },
        },
    )


def _ready(kube: KubeletSandbox, name: str) -> Any:
    pod = kube.pod(name)
    if pod is None or pod.status.phase != "Running":
        return None
    conditions = {c.type: c.status for c in pod.status.conditions or []}
    return pod if conditions.get("Ready") == "True" else None


def test_a_pod_runs_with_its_volumes_env_ports_and_service(kubelet_sandbox: KubeletSandbox) -> None:
    kube = kubelet_sandbox
    _create_config(kube)
    kube.core.create_namespaced_pod("default", _agent_pod("agent-0"))

    pod = wait_for(lambda: _ready(kube, "agent-0"), 30, "the agent pod Ready")
    assert pod.spec.node_name == "swivel-sandbox"
    assert pod.status.pod_ip == "127.0.0.1"
    [status] = pod.status.container_statuses
    assert status.ready and status.started and status.restart_count == 0
    assert status.state.running is not None

    ports = json.loads(pod.metadata.annotations[PORTS_ANNOTATION])
    local = int(ports["8470"])
    assert local != 8470
    # The agent listens on its local port, with the token from the Secret.
    request = urllib.request.Request(f"http://127.0.0.1:{local}/v1/config")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200

    # The Service name resolves to that port (the table the operator's resolver reads).
    network = NetworkMap.load(kube.kubelet.network_file)
    assert network.resolve("agent.default.svc", 8470) == ("127.0.0.1", local)
    assert network.resolve("agent.default.svc.cluster.local", 8470) == ("127.0.0.1", local)

    # Files: the job manifest with local paths and Spark in local mode; the state emptyDir.
    folder = kube.kubelet.root / "pods" / f"default_agent-0_{pod.metadata.uid}"
    job = yaml.safe_load((folder / "containers/agent/volumes/config/job.yaml").read_text())
    assert job["spec"]["sparkConf"]["spark.master"] == "local[2]"
    assert job["spec"]["checkpoint"]["location"] == str(
        folder / "volumes/state/checkpoints/fraud-detection"
    )
    assert (folder / "volumes" / "state").is_dir()  # the emptyDir, shared by the containers
    assert "swivel agent for fraud-detection" in kube.log_of(pod, "agent")


def test_env_is_resolved_and_translated(tmp_path: Path) -> None:
    pod = _agent_pod("agent-0")
    pod["metadata"].update(namespace="default", uid="u-1")
    objects = {
        ("secrets", "token"): {"data": {"token": base64.b64encode(TOKEN.encode()).decode()}},
        ("configmaps", "job"): {"data": {"job.yaml": _job_yaml()}},
    }
    container = pod["spec"]["containers"][0]
    # The sandbox's driver runs on local[2]: the agent must not promise bin migrations.
    container["env"].append({"name": "SWIVEL_AGENT_MIGRATIONS", "value": "1"})
    mounts = containers.project_volumes(pod, container, tmp_path, lambda k, n: objects.get((k, n)))
    translation = containers.Translation(
        mounts=[(m.mount_path, m.local) for m in mounts],
        ports={8470: 40001},
        network=NetworkMap({"agent.default": {8470: 40001}}),
    )
    env = containers.environment(pod, container, lambda k, n: objects.get((k, n)), translation)
    assert env == {
        "SWIVEL_AGENT_TOKEN": TOKEN,
        "MY_POD": "agent-0",
        "MY_IP": "127.0.0.1",
        "AGENT_URL": "http://127.0.0.1:40001",
    }
    argv = containers.command_line(container, translation, env)
    assert argv[1:] == ["agent", "--job", f"{tmp_path}/containers/agent/volumes/config/job.yaml",
                        "--host", "127.0.0.1", "--port", "40001",
                        "--state-dir", f"{tmp_path}/volumes/state/agent"]  # fmt: skip
    assert translation.text("spark.driver.host=agent.default.svc") == "spark.driver.host=127.0.0.1"
    assert translation.text("agent-driver.default.svc:9") == "agent-driver.default.svc:9"  # unknown


def test_a_completed_pod_succeeds_and_keeps_its_log(kubelet_sandbox: KubeletSandbox) -> None:
    kube = kubelet_sandbox
    _create_config(kube)
    pod = _agent_pod("version", restartPolicy="Never")
    container = pod["spec"]["containers"][0]
    container["command"] = ["swivel", "--version"]
    container.pop("readinessProbe")
    kube.core.create_namespaced_pod("default", pod)
    done = wait_for(
        lambda: (p := kube.pod("version")) and p.status.phase in {"Succeeded", "Failed"} and p,
        30,
        "the pod to finish",
    )
    assert done.status.phase == "Succeeded"
    [status] = done.status.container_statuses
    assert status.state.terminated.exit_code == 0
    assert status.state.terminated.reason == "Completed"
    assert "swivel" in kube.log_of(done, "agent")


def test_missing_config_waits_then_starts(kubelet_sandbox: KubeletSandbox) -> None:
    kube = kubelet_sandbox
    kube.core.create_namespaced_pod("default", _agent_pod("early"))

    def waiting() -> str | None:
        pod = kube.pod("early")
        statuses = (pod.status.container_statuses or []) if pod else []
        reason = (
            statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else None
        )
        return reason if reason == "CreateContainerConfigError" else None

    wait_for(waiting, 10, "CreateContainerConfigError")
    assert kube.pod("early").status.phase == "Pending"
    _create_config(kube)
    wait_for(lambda: _ready(kube, "early"), 30, "the pod Ready once its config exists")


def test_deletion_stops_the_processes_and_confirms(kubelet_sandbox: KubeletSandbox) -> None:
    kube = kubelet_sandbox
    _create_config(kube)
    kube.core.create_namespaced_pod("default", _agent_pod("doomed"))
    pod = wait_for(lambda: _ready(kube, "doomed"), 30, "Ready")
    pid = int(pod.status.container_statuses[0].container_id.removeprefix("sandbox://"))
    kube.core.delete_namespaced_pod("doomed", "default")
    wait_for(lambda: kube.pod("doomed") is None, 15, "the pod gone")
    assert not _alive(pid)
    assert NetworkMap.load(kube.kubelet.network_file).resolve("agent.default.svc", 8470) is None


def _claimed_pod(name: str) -> dict[str, Any]:
    """The agent pod with its state on a PersistentVolumeClaim instead of an emptyDir."""
    pod = _agent_pod(name)
    pod["spec"]["volumes"][1] = {"name": "state", "persistentVolumeClaim": {"claimName": "state"}}
    return pod


def _cmdline(pod: Any) -> str:
    pid = int(pod.status.container_statuses[0].container_id.removeprefix("sandbox://"))
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_a_claim_is_bound_and_its_folder_outlives_the_pods(kubelet_sandbox: KubeletSandbox) -> None:
    kube = kubelet_sandbox
    _create_config(kube)
    kube.core.create_namespaced_pod("default", _claimed_pod("first"))
    waiting = wait_for(
        lambda: (
            (p := kube.pod("first"))
            and p.status.container_statuses
            and p.status.container_statuses[0].state.waiting
            and p.status.container_statuses[0].state.waiting.message
        ),
        10,
        "the pod waiting for its claim",
    )
    assert waiting == 'persistentvolumeclaim "state" not found'
    claim = kube.core.create_namespaced_persistent_volume_claim(
        "default",
        {
            "metadata": {"name": "state"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    bound = wait_for(
        lambda: (
            (c := kube.core.read_namespaced_persistent_volume_claim("state", "default"))
            and c.status.phase == "Bound"
            and c
        ),
        10,
        "the claim Bound",
    )
    assert bound.status.capacity == {"storage": "1Gi"}
    folder = containers.claim_folder(
        kube.kubelet.claims_dir,
        "default",
        {"metadata": {"name": "state", "uid": claim.metadata.uid}},
    )
    first = wait_for(lambda: _ready(kube, "first"), 30, "Ready once the claim is bound")
    assert f"--state-dir {folder}/agent" in _cmdline(first)
    (folder / "agent").mkdir(parents=True, exist_ok=True)
    (folder / "agent" / "kept.txt").write_text("from the first pod")
    kube.core.delete_namespaced_pod("first", "default")
    wait_for(lambda: kube.pod("first") is None, 15, "the first pod gone")
    assert (folder / "agent" / "kept.txt").read_text() == "from the first pod"

    kube.core.create_namespaced_pod("default", _claimed_pod("second"))
    second = wait_for(lambda: _ready(kube, "second"), 30, "the second pod Ready")
    assert f"--state-dir {folder}/agent" in _cmdline(second)  # the same storage
    kube.core.delete_namespaced_pod("second", "default")
    wait_for(lambda: kube.pod("second") is None, 15, "the second pod gone")
    kube.core.delete_namespaced_persistent_volume_claim("state", "default")
    wait_for(lambda: not folder.exists(), 10, "the claim's folder removed with it")


def test_a_failing_container_restarts_with_backoff(kubelet_sandbox: KubeletSandbox) -> None:
    kube = kubelet_sandbox
    _create_config(kube)
    pod = _agent_pod("crasher", restartPolicy="Always")
    container = pod["spec"]["containers"][0]
    container["command"] = ["swivel", "agent", "--job", "/etc/swivel/missing.yaml"]
    container.pop("readinessProbe")
    kube.core.create_namespaced_pod("default", pod)
    restarted = wait_for(
        lambda: (
            (p := kube.pod("crasher"))
            and p.status.container_statuses
            and p.status.container_statuses[0].restart_count >= 2
            and p
        ),
        30,
        "two restarts",
    )
    status = restarted.status.container_statuses[0]
    assert status.last_state.terminated.exit_code != 0
    assert restarted.status.phase == "Running"


def test_pods_not_for_the_sandbox_stay_pending(kubelet_sandbox: KubeletSandbox) -> None:
    kube = kubelet_sandbox
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "nginx"},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        },
    )
    bound = _agent_pod("other-command")
    bound["spec"]["nodeName"] = "swivel-sandbox"
    bound["spec"]["containers"][0]["command"] = ["nginx", "-g", "daemon off;"]
    kube.core.create_namespaced_pod("default", bound)

    def refused() -> str | None:
        pod = kube.pod("other-command")
        statuses = (pod.status.container_statuses or []) if pod else []
        waiting = statuses[0].state.waiting if statuses else None
        return waiting.message if waiting and waiting.reason == "RunContainerError" else None

    _create_config(kube)
    assert "only the image's `swivel` entry point" in wait_for(refused, 10, "RunContainerError")
    nginx = kube.pod("nginx")
    assert nginx.spec.node_name is None and nginx.status.phase == "Pending"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def test_up_without_the_operator_runs_pods_and_down_stops_them(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from kubernetes import client, config

    from swivel_tools.cli.sandbox import command as sandbox

    kubeconfig = tmp_path / "kc"
    runner = CliRunner()
    started = runner.invoke(sandbox, ["up", "--kubeconfig", str(kubeconfig), "--no-operator"])
    assert started.exit_code == 0, started.output
    assert "operator:" not in started.output
    try:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            kube = KubeletSandbox(None, None, api)  # type: ignore[arg-type]
            _create_config(kube)
            kube.core.create_namespaced_pod("default", _agent_pod("agent-cli"))
            pod = wait_for(lambda: _ready(kube, "agent-cli"), 30, "the agent pod Ready")
        pid = int(pod.status.container_statuses[0].container_id.removeprefix("sandbox://"))
        logs = runner.invoke(sandbox, ["logs", "--kubeconfig", str(kubeconfig), "agent-cli"])
        assert logs.exit_code == 0 and "swivel agent for fraud-detection" in logs.output
        missing = runner.invoke(sandbox, ["logs", "--kubeconfig", str(kubeconfig), "nope"])
        assert missing.exit_code != 0 and "has not run in the sandbox" in missing.output
        wrong = runner.invoke(
            sandbox, ["logs", "--kubeconfig", str(kubeconfig), "agent-cli", "-c", "spark"]
        )
        assert wrong.exit_code != 0 and "choose one of: agent" in wrong.output
    finally:
        stopped = runner.invoke(sandbox, ["down", "--kubeconfig", str(kubeconfig)])
    assert stopped.exit_code == 0, stopped.output
    assert not _alive(pid)
