"""The real kopf runtime, in-process, against the in-memory sandbox API server.

One sandbox per session (CRDs installed once); every test gets its own namespace and its
own operator (a thread with its own loop) watching that namespace, with a
`TestingAgentLink` instead of real agents. `Harness.restart()` stops the operator and
starts a fresh one with the same agent (an operator restart mid-flight).
"""

from __future__ import annotations

import asyncio
import gc
import secrets
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kopf
import pytest
import yaml
from kubernetes import client

from swivel.operator.clusters import KubernetesCluster
from swivel.operator.contexts import Intervals, OperatorContext
from swivel.operator.main import run
from swivel_tools.sandbox import SandboxThread
from tests.fakes_agent import TestingAgentLink
from tests.integration.sandboxing import GROUP, ROOT, VERSION, install_crds, sandbox_client
from tests.polling import wait_for

__all__ = ["GROUP", "ROOT", "VERSION", "Harness"]


class OperatorThread:
    def __init__(self, ctx: OperatorContext, namespace: str, server: str) -> None:
        self.stop_flag, self.ready_flag = threading.Event(), threading.Event()
        self.failure: BaseException | None = None
        connection = kopf.ConnectionInfo(server=server, token="sandbox")

        def main() -> None:
            try:
                asyncio.run(
                    run(
                        ctx,
                        namespaces=[namespace],
                        clusterwide=False,
                        connection=connection,
                        stop_flag=self.stop_flag,
                        ready_flag=self.ready_flag,
                    )
                )
            except BaseException as error:  # surfaced by stop()
                self.failure = error
            finally:
                # kopf can leave an API session to the garbage collector when its watch
                # streams are cancelled at shutdown; collect it here, where it is expected,
                # rather than as an unraisable ResourceWarning in a later test.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ResourceWarning)
                    gc.collect()

        self.thread = threading.Thread(target=main, name=f"operator-{namespace}", daemon=True)
        self.thread.start()
        if not self.ready_flag.wait(10):
            raise AssertionError(f"the operator did not start: {self.failure!r}")

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the operator did not stop"
        if self.failure is not None:
            raise self.failure


@dataclass
class Harness:
    api: client.ApiClient
    namespace: str
    server: str
    link: TestingAgentLink
    operator: OperatorThread | None = None
    operators: list[OperatorThread] = field(default_factory=list)

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> Any:
        return client.CustomObjectsApi(self.api)

    def start(self, health: float = 0.2) -> None:
        ctx = OperatorContext(
            cluster=KubernetesCluster(self.api),
            agents=self.link,
            intervals=Intervals(health=health, reconfiguration=0.2, policies=0.2),
        )
        self.operator = OperatorThread(ctx, self.namespace, self.server)

    def stop(self) -> None:
        if self.operator is not None:
            self.operator.stop()
            self.operator = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @staticmethod
    def example(name: str) -> dict[str, Any]:
        body: dict[str, Any] = yaml.safe_load(
            (ROOT / "examples" / "fraud-detection" / name).read_text(encoding="utf-8")
        )
        return body

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, body
        )
        return created

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name
            )
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def patch(self, plural: str, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name, body
        )

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)

    def phase(self, plural: str, name: str) -> str | None:
        obj = self.get(plural, name)
        return ((obj or {}).get("status") or {}).get("phase")

    def wait_phase(
        self, plural: str, name: str, phase: str, timeout: float = 10.0
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            obj = self.get(plural, name)
            return obj if ((obj or {}).get("status") or {}).get("phase") == phase else None

        return wait_for(
            reached, timeout, f"{plural}/{name} phase {phase} (now {self.phase(plural, name)})"
        )

    def condition(self, plural: str, name: str, type_: str) -> dict[str, Any] | None:
        obj = self.get(plural, name) or {}
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition["type"] == type_:
                found: dict[str, Any] = condition
                return found
        return None

    def await_reason(
        self, plural: str, name: str, type_: str, reason: str, timeout: float = 10
    ) -> dict[str, Any]:
        """The condition `type_` of `name` once its reason is `reason`."""
        found: dict[str, Any] = wait_for(
            lambda: (c := self.condition(plural, name, type_)) and c["reason"] == reason and c,
            timeout,
            f"{plural}/{name} {type_} {reason}",
        )
        return found

    def job(self, name: str = "fraud-detection") -> dict[str, Any]:
        body = self.example("streamjob.yaml")
        body["metadata"] = {"name": name}
        self.link.job_specs[name] = body["spec"]  # the fake agent plans as the agent would
        return self.create("streamjobs", body)

    def run_driver(self, job: str = "fraud-detection") -> None:
        """Play kubelet: the driver pod is Running."""
        pod = f"{job}-driver"
        wait_for(lambda: self._pod(pod), 10, f"pod {pod}")
        self.core.patch_namespaced_pod_status(pod, self.namespace, {"status": {"phase": "Running"}})

    def _pod(self, name: str) -> Any:
        try:
            return self.core.read_namespaced_pod(name, self.namespace)
        except client.ApiException:
            return None


@pytest.fixture(scope="session")
def sandbox() -> Iterator[tuple[SandboxThread, client.ApiClient]]:
    running = SandboxThread(bookmark_interval=1.0).start()
    api = sandbox_client(running.url, token="sandbox")
    install_crds(api)
    try:
        yield running, api
    finally:
        api.close()
        running.close()


@pytest.fixture
def harness(sandbox: tuple[SandboxThread, client.ApiClient]) -> Iterator[Harness]:
    running, api = sandbox
    namespace = f"op-{secrets.token_hex(3)}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    target = Harness(api=api, namespace=namespace, server=running.url, link=TestingAgentLink())
    target.start()
    try:
        yield target
    finally:
        target.stop()
