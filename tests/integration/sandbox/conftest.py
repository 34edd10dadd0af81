"""Where the contract tests run: the in-memory sandbox, or a real cluster if one is configured.

Set `SWIVEL_E2E_KUBECONFIG` to a kubeconfig (kind, k3d, ...) and the very same tests run
against that cluster, in a namespace of their own that is deleted afterwards: that is how
the sandbox is kept honest. `e2e/test_sandbox_contract_on_cluster.py` loads this file and
the contract modules to run them as part of the e2e suite.

Tests get a `Kube`: typed API objects of the real `kubernetes` client, the namespace to use,
and a few helpers (examples, unique names, waiting, reading a watch stream line by line).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.watch.watch import iter_resp_lines

from swivel_tools.sandbox import SandboxThread
from tests.polling import wait_for

KUBECONFIG_ENV = "SWIVEL_E2E_KUBECONFIG"
ROOT = Path(__file__).resolve().parents[3]
GROUP, VERSION = "swivel.dev", "v1alpha1"
SANDBOX_HISTORY = 200  # small, so a test can push a resourceVersion out of the window
SANDBOX_BOOKMARK_INTERVAL = 1.0


@dataclass
class Kube:
    api: client.ApiClient
    namespace: str
    sandbox: SandboxThread | None = None
    created_crds: list[str] = field(default_factory=list)

    @property
    def is_sandbox(self) -> bool:
        return self.sandbox is not None

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> Any:
        return client.CustomObjectsApi(self.api)

    @property
    def extensions(self) -> Any:
        return client.ApiextensionsV1Api(self.api)

    @property
    def history_churn(self) -> int:
        """Writes that push old resourceVersions out of the server's watch window."""
        return SANDBOX_HISTORY + 20 if self.is_sandbox else 0

    @staticmethod
    def unique(prefix: str) -> str:
        return f"{prefix}-{secrets.token_hex(3)}"

    @staticmethod
    def example(name: str) -> dict[str, Any]:
        path = ROOT / "examples" / "fraud-detection" / name
        body: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
        return body

    def streamjob(self, name: str | None = None, **spec: Any) -> dict[str, Any]:
        body = self.example("streamjob.yaml")
        body["metadata"] = {"name": name or self.unique("job")}
        body["spec"].update(spec)
        return body

    def create_streamjob(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "streamjobs", body
        )
        return created

    def get_streamjob(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "streamjobs", name
        )
        return found

    def raw(self, method: str, path: str, **kwargs: Any) -> Any:
        """A plain HTTP call through the client's configuration (auth, TLS)."""
        url = self.api.configuration.host.rstrip("/") + path
        headers = {"Accept": "application/json", **kwargs.pop("headers", {})}
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
        return self.api.rest_client.pool_manager.request(method, url, headers=headers, **kwargs)

    def get_json(self, path: str) -> tuple[int, Any]:
        response = self.raw("GET", path)
        return response.status, json.loads(response.data or b"null")

    @staticmethod
    def read_watch(response: Any) -> list[dict[str, Any]]:
        """All events of a watch response (it must end: pass timeout_seconds)."""
        try:
            return [json.loads(line) for line in iter_resp_lines(response) if line.strip()]
        finally:
            response.close()
            response.release_conn()


def _install_crds(kube: Kube) -> None:
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        try:
            kube.extensions.create_custom_resource_definition(body)
            kube.created_crds.append(body["metadata"]["name"])
        except client.ApiException as error:
            if error.status != 409:
                raise

    def served() -> bool:
        status, listing = kube.get_json(f"/apis/{GROUP}/{VERSION}")
        names = {r["name"] for r in listing.get("resources", [])} if status == 200 else set()
        return {"streamjobs", "reconfigurations"} <= names

    wait_for(served, timeout=30)


def _open_cluster() -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=os.environ[KUBECONFIG_ENV], client_configuration=configuration
    )
    return client.ApiClient(configuration)


def _sandbox_client(sandbox: SandboxThread) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = sandbox.url
    configuration.api_key = {"BearerToken": "any-token-will-do"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(configuration)


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    sandbox = None
    if os.environ.get(KUBECONFIG_ENV):
        api = _open_cluster()
    else:
        sandbox = SandboxThread(
            history_limit=SANDBOX_HISTORY, bookmark_interval=SANDBOX_BOOKMARK_INTERVAL
        ).start()
        api = _sandbox_client(sandbox)
    target = Kube(api=api, namespace=Kube.unique("swivel-contract"), sandbox=sandbox)
    try:
        _install_crds(target)
        target.core.create_namespace({"metadata": {"name": target.namespace}})
        yield target
    finally:
        try:
            target.core.delete_namespace(target.namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise
        for name in target.created_crds if not target.is_sandbox else []:
            target.extensions.delete_custom_resource_definition(name)
        api.close()
        if sandbox is not None:
            sandbox.close()
