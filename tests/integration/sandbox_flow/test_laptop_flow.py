"""The laptop flow of issue 5, end to end: `swivel sandbox up` (API server, process kubelet,
the real operator), a StreamJob that runs real local Spark in its driver pod with the agent
beside it, a live Reconfiguration, and `swivel sandbox down` — once with the `kubernetes`
Python client and once with kubectl. Without Java, kubectl or one of the pieces the flow
runs, the tests are skipped on a laptop and fail in CI (`SWIVEL_CI`, tests/prerequisites.py).

The job is the fraud-detection example made small (2 bins, 10 rows/s, a lighter expensive
model) so each flow takes about a minute or less on a busy 2-core machine; the example as published (16 bins, 200 rows/s)
works the same way, only slower (docs/sandbox.md has the measured times).
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from kubernetes import client, config

from swivel_tools.cli.sandbox import command as sandbox
from tests.polling import wait_for
from tests.prerequisites import require, require_executable

from .conftest import ROOT

GROUP, VERSION = "swivel.dev", "v1alpha1"
EXAMPLES = ROOT / "examples" / "fraud-detection"
READY_TIMEOUT = 150.0
SUCCEEDED_TIMEOUT = 120.0


def _missing_pieces() -> str | None:
    """The first thing the flow needs that is missing (None when nothing is)."""
    for module in (
        "swivel.operator.main",  # the operator
        "swivel.cli.driver",  # the driver container's entry point
        "swivel.embedded.sessions",  # the local SparkSession it uses
        "swivel.jobs.runtime.driver",  # the job runtime
        "swivel.jobs.agent.app",  # the agent
    ):
        try:
            importlib.import_module(module)
        except ImportError as error:
            return f"the module {module} ({error})"
    from swivel.cli.main import _register, cli

    _register()
    if "driver" not in cli.commands:
        return "`swivel driver` registered in the CLI"
    if shutil.which("java") is None:
        return "Java on PATH (local Spark needs it)"
    return None


MISSING = _missing_pieces()


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    """Before `laptop` starts anything: skip locally, fail in CI, when a piece is missing."""
    require(MISSING, "the laptop flow")


@pytest.fixture
def kubectl_on_path() -> str:
    return require_executable("kubectl", "the laptop flow with kubectl")


def small_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / "streamjob.yaml").read_text())
    job["spec"]["dataflow"]["bins"] = 2
    job["spec"]["source"]["rowsPerSecond"] = 10
    for operator in job["spec"]["dataflow"]["operators"]:
        operator["parallelism"] = min(operator.get("parallelism", 1), 2)
        if operator["name"] == "customer-detector":
            operator["params"]["work"] = 100  # a lighter "expensive" model
    return job


def reconfiguration() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / "reconfiguration.yaml").read_text())
    return body


@pytest.fixture
def laptop(tmp_path: Path) -> Iterator[Path]:
    """`swivel sandbox up` with everything; `down` afterwards (and no process left)."""
    kubeconfig = tmp_path / "kc"
    runner = CliRunner()
    started = runner.invoke(sandbox, ["up", "--kubeconfig", str(kubeconfig)])
    assert started.exit_code == 0, started.output
    assert "operator" in started.output and "kubelet" in started.output
    try:
        yield kubeconfig
    finally:
        for log in (tmp_path / "kc.operator.log", tmp_path / "kc.sandbox.log"):
            if log.exists():
                print(f"--- {log.name} (tail) ---\n{log.read_text(errors='replace')[-3000:]}")
        stopped = runner.invoke(sandbox, ["down", "--kubeconfig", str(kubeconfig)])
        assert stopped.exit_code == 0, stopped.output


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def _container_pids(pod: Any) -> list[int]:
    return [
        int(status.container_id.removeprefix("sandbox://"))
        for status in pod.status.container_statuses or []
        if status.container_id
    ]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def test_the_laptop_flow_with_the_kubernetes_client(laptop: Path) -> None:
    began = time.monotonic()
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(laptop), client_configuration=configuration)
    with client.ApiClient(configuration) as api:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "streamjobs", small_job())

        def job() -> dict[str, Any]:
            found: dict[str, Any] = custom.get_namespaced_custom_object(
                GROUP, VERSION, "default", "streamjobs", "fraud-detection"
            )
            return found

        wait_for(lambda: _condition(job(), "Ready") == "True", READY_TIMEOUT, "StreamJob Ready")
        ready_at = time.monotonic() - began
        driver = core.read_namespaced_pod("fraud-detection-driver", "default")
        assert driver.spec.node_name == "swivel-sandbox"
        assert {c.name for c in driver.status.container_statuses} == {"spark", "agent"}
        assert all(c.ready for c in driver.status.container_statuses)

        custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", "reconfigurations", reconfiguration()
        )

        def reconfigured() -> dict[str, Any]:
            found: dict[str, Any] = custom.get_namespaced_custom_object(
                GROUP, VERSION, "default", "reconfigurations", "swap-model"
            )
            return found

        wait_for(
            lambda: _condition(reconfigured(), "Succeeded") == "True",
            SUCCEEDED_TIMEOUT,
            "Reconfiguration Succeeded",
        )
        done = reconfigured()["status"]
        assert done["phase"] == "Completed" and done["kind"] == "live-control"
        assert done["progress"]["workersSwitched"] == done["progress"]["workersTotal"] > 0
        print(
            f"laptop flow (kubernetes client): Ready after {ready_at:.1f}s, reconfigured after"
            f" {time.monotonic() - began:.1f}s (agent delay {done.get('delayMs')} ms)"
        )

        # Live: the same driver pod, its containers never restarted.
        after = core.read_namespaced_pod("fraud-detection-driver", "default")
        assert after.metadata.uid == driver.metadata.uid
        assert [c.restart_count for c in after.status.container_statuses] == [0, 0]
        wait_for(
            lambda: (
                ((job().get("status") or {}).get("lastReconfiguration") or {}).get("name")
                == "swap-model"
            ),
            30,
            "the StreamJob's status to show the reconfiguration",
        )
        pids = _container_pids(after)
        assert pids and all(_alive(pid) for pid in pids)
    stopped = CliRunner().invoke(sandbox, ["down", "--kubeconfig", str(laptop)])
    assert stopped.exit_code == 0, stopped.output
    assert not any(_alive(pid) for pid in pids), "down leaves no container process behind"


def test_the_laptop_flow_with_kubectl(kubectl_on_path: str, laptop: Path, tmp_path: Path) -> None:
    began = time.monotonic()
    job_file = tmp_path / "streamjob.yaml"
    job_file.write_text(yaml.safe_dump(small_job(), sort_keys=False))

    def kubectl(*args: str, timeout: float = 30.0) -> str:
        done = subprocess.run(
            [kubectl_on_path, "--kubeconfig", str(laptop), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}{done.stdout}"
        return done.stdout

    kubectl("apply", "-f", str(job_file))
    kubectl("wait", "--for=condition=Ready", "streamjob", "--all",
            f"--timeout={READY_TIMEOUT:.0f}s", timeout=READY_TIMEOUT + 10)  # fmt: skip
    uid = kubectl("get", "pod", "fraud-detection-driver", "-o", "jsonpath={.metadata.uid}")
    kubectl("apply", "-f", str(EXAMPLES / "reconfiguration.yaml"))
    kubectl("wait", "--for=condition=Succeeded", "reconfiguration", "--all",
            f"--timeout={SUCCEEDED_TIMEOUT:.0f}s", timeout=SUCCEEDED_TIMEOUT + 10)  # fmt: skip
    listing = kubectl("get", "streamjobs,reconfigurations")
    print(f"laptop flow (kubectl): {time.monotonic() - began:.1f}s\n{listing}")
    assert "fraud-detection" in listing and "swap-model" in listing and "Completed" in listing
    assert kubectl("get", "pod", "fraud-detection-driver", "-o", "jsonpath={.metadata.uid}") == uid

    logs = CliRunner().invoke(
        sandbox, ["logs", "--kubeconfig", str(laptop), "fraud-detection-driver", "-c", "agent"]
    )
    assert logs.exit_code == 0 and "swivel agent for fraud-detection" in logs.output
    spark = CliRunner().invoke(
        sandbox, ["logs", "--kubeconfig", str(laptop), "fraud-detection-driver"]
    )
    assert spark.exit_code == 0 and "swivel driver: fraud-detection runs" in spark.output
    assert (
        json.loads(kubectl("get", "pod", "fraud-detection-driver", "-o", "json"))["status"]["podIP"]
        == "127.0.0.1"
    )


def _batches(checkpoint: Path, since: float = 0.0) -> list[int]:
    """Batch ids Spark planned in `checkpoint` (its offsets log), written at or after `since`."""
    folder = checkpoint / "offsets"
    if not folder.is_dir():
        return []
    return sorted(
        int(p.name) for p in folder.iterdir() if p.name.isdigit() and p.stat().st_mtime >= since
    )


def _driver_checkpoint(kubeconfig: Path) -> Path | None:
    """The (local) checkpoint the running driver's query uses, from its log line."""
    logs = CliRunner().invoke(
        sandbox, ["logs", "--kubeconfig", str(kubeconfig), "fraud-detection-driver"]
    )
    for line in logs.output.splitlines():
        if "swivel driver: fraud-detection runs" in line and "checkpoint " in line:
            return Path(line.rsplit("checkpoint ", 1)[1].rstrip(")"))
    return None


def test_a_restart_class_edit_resumes_from_the_checkpoint(laptop: Path) -> None:
    """Issue 5: a restart-class edit replaces the driver pod gracefully and keeps the
    checkpoint (the job's PersistentVolumeClaim): the new query continues the old one."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(laptop), client_configuration=configuration)
    with client.ApiClient(configuration) as api:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        body = small_job()
        body["spec"]["sink"] = {"kind": "noop"}  # Spark's memory sink cannot resume at all
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "streamjobs", body)

        def job() -> dict[str, Any]:
            found: dict[str, Any] = custom.get_namespaced_custom_object(
                GROUP, VERSION, "default", "streamjobs", "fraud-detection"
            )
            return found

        wait_for(lambda: _condition(job(), "Ready") == "True", READY_TIMEOUT, "StreamJob Ready")
        claim = core.read_namespaced_persistent_volume_claim(
            "fraud-detection-checkpoints", "default"
        )
        assert claim.status.phase == "Bound"
        assert claim.metadata.owner_references[0].uid == job()["metadata"]["uid"]
        old = core.read_namespaced_pod("fraud-detection-driver", "default")
        checkpoint = wait_for(lambda: _driver_checkpoint(laptop), 30, "the driver's checkpoint")
        wait_for(lambda: len(_batches(checkpoint)) >= 2, 60, "two batches in the checkpoint")
        metadata = (checkpoint / "metadata").read_text()  # the query's id

        custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", "streamjobs", "fraud-detection",
            {"spec": {"source": {"rowsPerSecond": 12}}},
        )  # fmt: skip

        def replaced() -> Any:
            try:
                pod = core.read_namespaced_pod("fraud-detection-driver", "default")
            except client.ApiException:
                return None
            return pod if pod.metadata.uid != old.metadata.uid else None

        new = wait_for(replaced, 90, "a new driver pod")
        # The old pod is gone (stopped at a batch boundary) before the new one is created:
        # what the checkpoint holds now is where the old query stopped.
        replaced_at = time.time()
        stopped_by = max(_batches(checkpoint), default=0)
        wait_for(
            lambda: _condition(job(), "Ready") == "True" and job()["status"]["phase"] == "Running",
            READY_TIMEOUT,
            "Ready again after the restart",
        )
        assert job()["status"]["observedGeneration"] == 2
        assert (
            new.metadata.annotations["swivel.dev/restart-hash"]
            != (old.metadata.annotations["swivel.dev/restart-hash"])
        )
        resumed = wait_for(lambda: _driver_checkpoint(laptop), 30, "the new driver's checkpoint")
        assert resumed == checkpoint  # the same claim, mounted by the new pod
        assert (resumed / "metadata").read_text() == metadata  # the same query, resumed
        after = wait_for(
            lambda: _batches(resumed, since=replaced_at) or None, 60, "batches after the restart"
        )
        # The new query's first batch continues the old one's (a fresh one would start at 0).
        assert after[0] >= stopped_by > 0, (after, stopped_by)
        new_pod = core.read_namespaced_pod("fraud-detection-driver", "default")
        assert [c.restart_count for c in new_pod.status.container_statuses] == [0, 0]
