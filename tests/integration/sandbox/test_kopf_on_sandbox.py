"""The real kopf runtime against the sandbox: create, update and delete of a StreamJob.

A tiny operator defined here (kopf.on.create/update/delete, a finalizer, status patches)
runs in its own thread with `kopf.run`, talks HTTP to a sandbox on an ephemeral port, and
the test drives it with the `kubernetes` client, as a user would with kubectl. This is the
path the real operator will take in the integration tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import kopf
import pytest
import yaml
from kubernetes import client

from swivel_tools.sandbox import SandboxThread
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[3]
GROUP, VERSION, PLURAL = "swivel.dev", "v1alpha1", "streamjobs"
FINALIZER = "sandbox-test.swivel.dev/finalizer"
NAMESPACE = "default"
T = TypeVar("T")


class Operator:
    """A minimal operator for StreamJobs, recording what its handlers saw."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.calls: list[tuple[str, str, Any]] = []
        self.registry = kopf.OperatorRegistry()
        self.stop = threading.Event()
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kopf", daemon=True)
        self._define_handlers()

    def _define_handlers(self) -> None:
        on = {"registry": self.registry}
        resource = (GROUP, VERSION, PLURAL)

        @kopf.on.login(**on)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(
                server=self.server, insecure=True, scheme="Bearer", token="t"
            )

        @kopf.on.startup(**on)
        def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
            settings.persistence.finalizer = FINALIZER
            settings.watching.server_timeout = 5  # exercise reconnections with resourceVersion
            settings.networking.request_timeout = 10

        @kopf.on.create(*resource, **on)
        def created(name: str, spec: Any, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
            self.calls.append(("create", name, spec["executor"]["instances"]))
            kopf.info(body, reason="Starting", message="The driver is being started.")
            patch.status["phase"] = "Starting"

        @kopf.on.update(*resource, field="spec", **on)
        def updated(name: str, diff: Any, patch: kopf.Patch, **_: Any) -> None:
            self.calls.append(("update", name, [tuple(d[1]) for d in diff]))
            patch.status["phase"] = "Running"

        @kopf.on.delete(*resource, **on)
        def deleted(name: str, **_: Any) -> None:
            self.calls.append(("delete", name, None))

    def _run(self) -> None:
        kopf.run(
            registry=self.registry,
            standalone=True,
            namespaces=[NAMESPACE],
            stop_flag=self.stop,
            ready_flag=self.ready,
        )

    def start(self) -> None:
        self._thread.start()
        assert self.ready.wait(15), "kopf did not become ready"

    def close(self) -> None:
        self.stop.set()
        self._thread.join(15)
        assert not self._thread.is_alive(), "kopf did not stop"

    def handled(self, kind: str, name: str) -> tuple[str, str, Any] | None:
        return next((c for c in self.calls if c[:2] == (kind, name)), None)


@pytest.fixture
def sandbox() -> Iterator[tuple[SandboxThread, Any]]:
    with SandboxThread() as running:
        configuration = client.Configuration()
        configuration.host = running.url
        api = client.ApiClient(configuration)
        crd = yaml.safe_load(
            (ROOT / "crds" / "swivel.dev_streamjobs.yaml").read_text(encoding="utf-8")
        )
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        yield running, api
        api.close()


@pytest.mark.timeout(30)
def test_kopf_creates_updates_and_finalizes_a_streamjob(sandbox: tuple[SandboxThread, Any]) -> None:
    running, api = sandbox
    jobs = client.CustomObjectsApi(api)
    operator = Operator(running.url)
    operator.start()
    try:
        body = yaml.safe_load(
            (ROOT / "examples" / "fraud-detection" / "streamjob.yaml").read_text(encoding="utf-8")
        )
        name = body["metadata"]["name"]
        jobs.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, body)

        def get() -> dict[str, Any]:
            found: dict[str, Any] = jobs.get_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, PLURAL, name
            )
            return found

        assert (
            wait_for(lambda: operator.handled("create", name), 10.0, "the create handler")[2] == 2
        )
        started = wait_for(
            lambda: get() if get().get("status", {}).get("phase") == "Starting" else None,
            10.0,
            "status.phase=Starting",
        )
        assert FINALIZER in started["metadata"]["finalizers"]
        assert started["metadata"]["generation"] == 1

        jobs.patch_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, name, {"spec": {"executor": {"instances": 3}}}
        )
        update = wait_for(lambda: operator.handled("update", name), 10.0, "the update handler")
        assert ("executor", "instances") in update[2]  # relative to field="spec"
        running_job = wait_for(
            lambda: get() if get().get("status", {}).get("phase") == "Running" else None,
            10.0,
            "status.phase=Running",
        )
        assert running_job["metadata"]["generation"] == 2

        jobs.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
        wait_for(lambda: operator.handled("delete", name), 10.0, "the delete handler")

        def gone() -> bool:
            try:
                get()
            except client.ApiException as error:
                return bool(error.status == 404)
            return False

        wait_for(gone, 10.0, "the finalizer to let the object go")

        def posted() -> list[Any]:
            found = client.CoreV1Api(api).list_namespaced_event(
                NAMESPACE, field_selector=f"involvedObject.name={name},reason=Starting"
            )
            return list(found.items)

        event = wait_for(posted, 10.0, "the event kopf posts")[0]
        assert event.involved_object.kind == "StreamJob" and event.type == "Normal"
    finally:
        operator.close()
    assert [c[0] for c in operator.calls] == ["create", "update", "delete"]
