"""kubectl against the sandbox: the workflow of the issue, as far as the API server goes.

Skipped where no kubectl binary is installed. An "operator" thread stands in for the real
one by setting the Ready condition, so that `kubectl wait` has something to wait for.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swivel_tools.sandbox import SandboxThread, kubeconfig
from swivel_tools.sandbox.registry import Registry
from tests.prerequisites import require_executable

ROOT = Path(__file__).resolve().parents[3]
KUBECTL = shutil.which("kubectl")


@pytest.fixture(scope="module", autouse=True)
def _kubectl_installed() -> None:
    """Skipped without kubectl on a laptop, failed in CI (tests/prerequisites.py)."""
    require_executable("kubectl", "kubectl against the sandbox")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SandboxThread, Path]]:
    with SandboxThread() as running:
        config = kubeconfig.write(tmp_path_factory.mktemp("kube") / "config", running.url)
        yield running, config


def kubectl(config: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    if ok:
        assert result.returncode == 0, f"kubectl {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result


def _mark_ready(registry: Registry, name: str) -> None:
    endpoint = registry.endpoint("swivel.dev", "v1alpha1", "streamjobs", "default")
    condition = {"type": "Ready", "status": "True", "reason": "Running", "message": "",
                 "lastTransitionTime": "2024-05-01T10:00:00Z"}  # fmt: skip
    registry.patch(
        endpoint,
        name,
        "application/merge-patch+json",
        {"status": {"phase": "Running", "conditions": [condition]}},
        subresource="status",
    )


def test_apply_get_wait_patch_delete(sandbox: tuple[SandboxThread, Path]) -> None:
    running, config = sandbox
    assert "swivel-sandbox" in kubectl(config, "version").stdout
    kubectl(config, "apply", "-f", "crds/")
    kubectl(
        config, "wait", "--for=condition=Established", "crd/streamjobs.swivel.dev", "--timeout=10s"
    )

    applied = kubectl(config, "apply", "-f", "examples/fraud-detection/streamjob.yaml")
    assert "streamjob.swivel.dev/fraud-detection created" in applied.stdout
    table = kubectl(config, "get", "streamjobs,reconfigurations").stdout
    header = table.splitlines()[0].split()
    assert header[:4] == ["NAME", "READY", "PHASE", "CONFIG"] and "BINS" in header
    assert "fraud-detection" in table and " 16 " in table

    threading.Timer(0.5, lambda: running.call(lambda r: _mark_ready(r, "fraud-detection"))).start()
    started = time.monotonic()
    kubectl(config, "wait", "--for=condition=Ready", "streamjob", "--all", "--timeout=20s")
    assert time.monotonic() - started < 15
    assert "Running" in kubectl(config, "get", "sj", "fraud-detection").stdout

    refused = kubectl(
        config,
        "patch",
        "sj",
        "fraud-detection",
        "--type=merge",
        "-p",
        '{"spec":{"dataflow":{"bins":48}}}',
        ok=False,
    )
    assert refused.returncode != 0 and "spec.dataflow.bins" in refused.stderr

    kubectl(config, "apply", "-f", "examples/fraud-detection/reconfiguration.yaml")
    assert "swap-model" in kubectl(config, "get", "swivel").stdout  # the CRDs' category
    assert "dataflow" in kubectl(config, "explain", "streamjob.spec").stdout

    kubectl(config, "delete", "-f", "examples/fraud-detection/reconfiguration.yaml")
    kubectl(config, "delete", "sj", "fraud-detection", "--wait=true", "--timeout=10s")
    assert "No resources found" in kubectl(config, "get", "sj").stderr


def test_builtin_kinds_through_kubectl(sandbox: tuple[SandboxThread, Path]) -> None:
    _, config = sandbox
    kubectl(config, "create", "namespace", "kubectl-test")
    kubectl(config, "-n", "kubectl-test", "create", "configmap", "settings", "--from-literal=a=1")
    kubectl(config, "-n", "kubectl-test", "label", "configmap", "settings", "app=swivel")
    listed = kubectl(
        config, "-n", "kubectl-test", "get", "cm", "-l", "app=swivel", "-o", "name"
    ).stdout
    assert listed.strip() == "configmap/settings"
    kubectl(config, "delete", "namespace", "kubectl-test", "--timeout=10s")
    assert "kubectl-test" not in kubectl(config, "get", "namespaces").stdout
