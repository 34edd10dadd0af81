"""The sandbox kubelet and the laptop flow (docs/sandbox.md, "Running pods").

Fixtures: `kubelet_sandbox` (the API server with the process kubelet, in a thread, with a
`kubernetes` client), helpers to wait for conditions and to read the kubelet's files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from swivel_tools.sandbox import SandboxThread
from swivel_tools.sandbox.kubelet import Kubelet
from tests.integration.sandboxing import ROOT, sandbox_client

__all__ = ["ROOT", "KubeletSandbox"]


@dataclass
class KubeletSandbox:
    sandbox: SandboxThread
    kubelet: Kubelet
    api: client.ApiClient

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    def pod(self, name: str, namespace: str = "default") -> Any | None:
        try:
            return self.core.read_namespaced_pod(name, namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def log_of(self, pod: Any, container: str) -> str:
        folder = (
            self.kubelet.root
            / "pods"
            / f"{pod.metadata.namespace}_{pod.metadata.name}_{pod.metadata.uid}"
        )
        runs = sorted((folder / "logs" / container).glob("*.log"), key=lambda p: int(p.stem))
        return runs[-1].read_text(encoding="utf-8", errors="replace") if runs else ""


@pytest.fixture
def kubelet_sandbox(tmp_path: Path) -> Iterator[KubeletSandbox]:
    kubelet = Kubelet(tmp_path / "kubelet")
    with SandboxThread(components=[kubelet]) as sandbox, sandbox_client(sandbox.url) as api:
        yield KubeletSandbox(sandbox, kubelet, api)
