"""The sandbox's process kubelet: runs pods' containers as local processes.

A component of the sandbox server (`serve(components=[Kubelet(root)])`), on its loop:

- **Scheduling**: the sandbox has one node, `swivel-sandbox`. Pods without a node that
  carry the label the Swivel operator puts on everything it renders
  (`app.kubernetes.io/managed-by=swivel-operator`) are bound to it; a pod created with
  `spec.nodeName: swivel-sandbox` runs as well. Every other pod stays Pending, as on a
  cluster without a scheduler. Binding gives each declared container port a free local
  port, recorded in the annotation `sandbox.swivel.dev/host-ports` (`network.py`).
- **Starting**: volumes projected into `ROOT/pods/NS_NAME_UID/`, env resolved, paths, ports
  and Service names translated (`containers.py`); the command must be the image's
  `swivel` entry point and runs as this environment's `swivel` console script, in its own
  process group, with stdout and stderr in `logs/CONTAINER/RESTART.log`.
- **Status** through the status subresource: phase Pending → Running → Succeeded/Failed,
  `containerStatuses` (state, lastState, ready, started, restartCount), conditions
  PodScheduled, Initialized, ContainersReady, Ready, podIP/hostIP 127.0.0.1. Readiness and
  liveness probes (`httpGet`, `tcpSocket`) run against the local ports; a container
  without a readiness probe is ready while it runs.
- **Restarts** per `restartPolicy` (Always, OnFailure, Never) with a back-off of 1 s
  doubling up to 20 s (a real kubelet: 10 s up to 5 min), shown as `CrashLoopBackOff`.
- **Deletion**: a bound pod is deleted gracefully (the server marks it): SIGTERM to each
  container's main process, SIGKILL to its process group after the grace period, then the
  kubelet confirms with `gracePeriodSeconds=0` and removes the pod's folder.
- **Services**: the table of Service name → local port is kept in `ROOT/network.json`.
- **Claims**: a PersistentVolumeClaim is bound at once (status `Bound`, its requested
  storage as capacity; no PersistentVolume objects) and its storage is the folder
  `ROOT/claims/NS_NAME_UID/`, which outlives the pods mounting it (a replaced driver pod
  finds its checkpoint) and is removed with the claim.

On shutdown every container gets SIGTERM and, after `shutdown_grace` seconds, SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import aiohttp

from swivel_tools.sandbox import containers
from swivel_tools.sandbox.containers import (
    NODE_NAME,
    ContainerConfigError,
    Translation,
    UnsupportedCommandError,
)
from swivel_tools.sandbox.errors import ApiError
from swivel_tools.sandbox.network import LOCALHOST, PORTS_ANNOTATION, NetworkMap, host_ports
from swivel_tools.sandbox.patching import MERGE_PATCH
from swivel_tools.sandbox.registry import Registry
from swivel_tools.sandbox.resources import Endpoint, ResourceKey
from swivel_tools.sandbox.store import StoredEvent

logger = logging.getLogger(__name__)

JsonObject = dict[str, Any]
PODS: ResourceKey = ("", "pods")
SERVICES: ResourceKey = ("", "services")
CLAIMS: ResourceKey = ("", "persistentvolumeclaims")
CONFIGS: tuple[ResourceKey, ...] = (("", "configmaps"), ("", "secrets"))
BIND_LABELS = {"app.kubernetes.io/managed-by": "swivel-operator"}
NETWORK_FILE = "network.json"
CONFIG_RETRY_SECONDS = 1.0
BACKOFF_SECONDS = (1.0, 20.0)
BACKOFF_RESET_SECONDS = 60.0
SHUTDOWN_GRACE_SECONDS = 3.0


def pod_folder_name(pod: JsonObject) -> str:
    metadata = pod["metadata"]
    return f"{metadata.get('namespace', 'default')}_{metadata['name']}_{metadata['uid']}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOCALHOST, 0))
        return int(probe.getsockname()[1])


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the container's main process gets SIGKILL if the sandbox dies abruptly."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class ContainerRun:
    spec: JsonObject
    restart_count: int = 0
    process: asyncio.subprocess.Process | None = None
    state: JsonObject = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: JsonObject = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    ever_started: bool = False
    done: bool = False  # terminated for good (no restart coming)
    exit_code: int | None = None
    started_at: float = 0.0  # monotonic, for the back-off reset

    @property
    def name(self) -> str:
        return str(self.spec["name"])


class PodRun:
    """One bound pod: its containers' supervisors, probes and status."""

    def __init__(self, kubelet: Kubelet, pod: JsonObject) -> None:
        self.kubelet = kubelet
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.namespace: str = pod["metadata"].get("namespace", "default")
        self.name: str = pod["metadata"]["name"]
        self.folder = kubelet.root / "pods" / pod_folder_name(pod)
        spec = pod.get("spec") or {}
        self.restart_policy: str = spec.get("restartPolicy", "Always")
        self.containers = [ContainerRun(c) for c in spec.get("containers") or []]
        self.stopping = asyncio.Event()
        self.changed = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.start_time = kubelet.registry.timestamp()
        self.transitions: dict[str, tuple[str, str]] = {}
        self.terminating: asyncio.Task[None] | None = None

    # Lifecycle.

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        names = [c.name for c in self.containers]
        (self.folder / "containers.json").write_text(json.dumps(names), encoding="utf-8")
        self.tasks = [asyncio.create_task(self._supervise(c)) for c in self.containers]
        self.tasks.append(asyncio.create_task(self._write_status()))
        self.changed.set()

    async def stop(self, grace: float) -> None:
        """SIGTERM to each main process, SIGKILL to the groups after `grace` seconds."""
        self.stopping.set()
        running = [c.process for c in self.containers if c.process and c.process.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        if running:
            await asyncio.wait(
                [asyncio.create_task(p.wait()) for p in running], timeout=max(grace, 0.0)
            )
        for container in self.containers:
            if container.process is not None:
                kill_group(container.process.pid)
                with contextlib.suppress(ProcessLookupError):
                    await container.process.wait()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # One container: prepare, start, wait, restart.

    def _lookup(self, kind: str, name: str) -> JsonObject | None:
        registry = self.kubelet.registry
        try:
            return registry.get(registry.endpoint("", "v1", kind, self.namespace), name)
        except ApiError:
            return None

    def _prepare(self, container: ContainerRun) -> tuple[list[str], dict[str, str], Path]:
        spec = container.spec
        mounts = containers.project_volumes(
            self.pod, spec, self.folder, self._lookup, self.kubelet.claims_dir
        )
        translation = Translation(
            mounts=[(m.mount_path, m.local) for m in mounts],
            ports=host_ports(self.pod),
            network=self.kubelet.network,
        )
        env = containers.environment(self.pod, spec, self._lookup, translation)
        argv = containers.command_line(spec, translation, env)
        containers.write_volumes(mounts, translation)
        workdir = self.folder / "containers" / container.name / "workdir"
        if spec.get("workingDir"):
            workdir = Path(translation.path(str(spec["workingDir"])))
            if str(workdir) == str(spec["workingDir"]):  # not under a mount: keep it local
                workdir = self.folder / "containers" / container.name / "workdir"
        workdir.mkdir(parents=True, exist_ok=True)
        return argv, {**containers.inherited_environment(), **env}, workdir

    def _log_file(self, container: ContainerRun) -> Path:
        folder = self.folder / "logs" / container.name
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{container.restart_count}.log"

    async def _supervise(self, container: ContainerRun) -> None:
        backoff = BACKOFF_SECONDS[0]
        while not self.stopping.is_set():
            try:
                argv, env, workdir = self._prepare(container)
            except ContainerConfigError as error:
                self._set_waiting(container, "CreateContainerConfigError", str(error))
                await self._pause(CONFIG_RETRY_SECONDS)
                continue
            except UnsupportedCommandError as error:
                self._set_waiting(container, "RunContainerError", str(error))
                await self.stopping.wait()
                return
            code = await self._run_once(container, argv, env, workdir)
            if self.stopping.is_set() or not self._restarts(code):
                container.done = True
                self.changed.set()
                return
            ran = time.monotonic() - container.started_at
            backoff = BACKOFF_SECONDS[0] if ran > BACKOFF_RESET_SECONDS else backoff
            container.restart_count += 1
            self._set_waiting(
                container,
                "CrashLoopBackOff",
                f"back-off {backoff:g}s restarting failed container={container.name}"
                f" pod={self.name}",
            )
            await self._pause(backoff)
            backoff = min(backoff * 2, BACKOFF_SECONDS[1])

    async def _run_once(
        self, container: ContainerRun, argv: list[str], env: dict[str, str], workdir: Path
    ) -> int:
        log_path = self._log_file(container)
        log: IO[bytes]
        with log_path.open("ab") as log:
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    env=env,
                    cwd=workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_parent if sys.platform == "linux" else None,
                )
            except OSError as error:
                log.write(f"sandbox kubelet: cannot start {argv[0]}: {error}\n".encode())
                self._set_terminated(container, 128, "StartError", str(error))
                return 128
        container.process = process
        container.started_at = time.monotonic()
        container.state = {"running": {"startedAt": self.kubelet.registry.timestamp()}}
        container.started = container.ever_started = True
        container.ready = "readinessProbe" not in container.spec
        self.changed.set()
        probes = [
            asyncio.create_task(self._probe(container, process, kind))
            for kind in ("readinessProbe", "livenessProbe")
            if kind in container.spec
        ]
        try:
            code = await process.wait()
        finally:
            for probe in probes:
                probe.cancel()
        kill_group(process.pid)  # what the main process left behind (JVM, workers)
        reason = "Completed" if code == 0 else "Error"
        if code < 0:
            code, reason = 128 - code, "Error"  # killed by a signal, as a shell reports it
        self._set_terminated(container, code, reason, "")
        return code

    def _restarts(self, code: int) -> bool:
        return self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    def _set_waiting(self, container: ContainerRun, reason: str, message: str) -> None:
        container.state = {"waiting": {"reason": reason, "message": message}}
        container.ready = container.started = False
        self.changed.set()

    def _set_terminated(
        self, container: ContainerRun, code: int, reason: str, message: str
    ) -> None:
        terminated: JsonObject = {
            "exitCode": code,
            "reason": reason,
            "finishedAt": self.kubelet.registry.timestamp(),
            "containerID": f"sandbox://{container.process.pid if container.process else 0}",
        }
        if message:
            terminated["message"] = message
        started = (container.state.get("running") or {}).get("startedAt")
        if started:
            terminated["startedAt"] = started
        container.state = {"terminated": terminated}
        container.last_state = {"terminated": terminated}
        container.exit_code = code
        container.ready = container.started = False
        self.changed.set()

    # Probes.

    async def _probe(
        self, container: ContainerRun, process: asyncio.subprocess.Process, kind: str
    ) -> None:
        probe = container.spec[kind]
        period = float(probe.get("periodSeconds", 10))
        failures, threshold = 0, int(probe.get("failureThreshold", 3))
        await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
        while process.returncode is None:
            ok = await self._check(probe)
            failures = 0 if ok else failures + 1
            if kind == "readinessProbe" and ok != container.ready and (ok or failures >= threshold):
                container.ready = ok
                self.changed.set()
            if kind == "livenessProbe" and failures >= threshold:
                logger.info("%s/%s: liveness probe failed; restarting", self.name, container.name)
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                return
            # Until ready, look again soon: a developer sandbox should not wait a period.
            await asyncio.sleep(min(period, 1.0) if not container.ready else period)

    def _port(self, value: int | str) -> int | None:
        if isinstance(value, str) and not value.isdigit():
            for spec in (self.pod.get("spec") or {}).get("containers") or []:
                for port in spec.get("ports") or []:
                    if port.get("name") == value:
                        value = int(port["containerPort"])
                        break
        if isinstance(value, str) and not value.isdigit():
            return None
        number = int(value)
        return host_ports(self.pod).get(number, number)

    async def _check(self, probe: JsonObject) -> bool:
        timeout = float(probe.get("timeoutSeconds", 1))
        if "httpGet" in probe:
            action = probe["httpGet"]
            port = self._port(action.get("port", 80))
            scheme = str(action.get("scheme", "HTTP")).lower()  # HTTPS: unverified, as kubelets
            url = f"{scheme}://{LOCALHOST}:{port}{action.get('path', '/')}"
            try:
                client_timeout = aiohttp.ClientTimeout(total=timeout)
                async with (
                    aiohttp.ClientSession(timeout=client_timeout) as session,
                    session.get(url, ssl=False) as response,
                ):
                    return 200 <= response.status < 400
            except (aiohttp.ClientError, TimeoutError, OSError):
                return False
        if "tcpSocket" in probe:
            port = self._port(probe["tcpSocket"].get("port", 0))
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(LOCALHOST, port), timeout
                )
            except (OSError, TimeoutError):
                return False
            writer.close()
            return True
        return True  # exec and grpc probes are not run in the sandbox: taken as passing

    # Status.

    def phase(self) -> str:
        if all(c.done for c in self.containers) and self.containers:
            codes = [c.exit_code for c in self.containers]
            return "Succeeded" if all(code == 0 for code in codes) else "Failed"
        if any(c.ever_started for c in self.containers):
            return "Running"
        return "Pending"

    def _condition(self, kind: str, value: bool) -> JsonObject:
        status = "True" if value else "False"
        previous = self.transitions.get(kind)
        if previous is None or previous[0] != status:
            self.transitions[kind] = (status, self.kubelet.registry.timestamp())
        return {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": self.transitions[kind][1],
        }

    def status(self) -> JsonObject:
        ready = bool(self.containers) and all(c.ready for c in self.containers)
        statuses = []
        for container in self.containers:
            entry: JsonObject = {
                "name": container.name,
                "image": container.spec.get("image", ""),
                "imageID": "",
                "ready": container.ready,
                "started": container.started,
                "restartCount": container.restart_count,
                "state": container.state,
                "lastState": container.last_state,
            }
            if container.process is not None:
                entry["containerID"] = f"sandbox://{container.process.pid}"
            statuses.append(entry)
        return {
            "phase": self.phase(),
            "hostIP": LOCALHOST,
            "hostIPs": [{"ip": LOCALHOST}],
            "podIP": LOCALHOST,
            "podIPs": [{"ip": LOCALHOST}],
            "startTime": self.start_time,
            "qosClass": "Burstable",
            "conditions": [
                self._condition("PodScheduled", True),
                self._condition("Initialized", True),
                self._condition("ContainersReady", ready),
                self._condition("Ready", ready),
            ],
            "containerStatuses": statuses,
        }

    async def _write_status(self) -> None:
        while True:
            await self.changed.wait()
            self.changed.clear()
            if self.stopping.is_set():
                return
            self.kubelet.write_status(self, self.status())
            await asyncio.sleep(0.05)  # coalesce bursts of changes into one write


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class Kubelet:
    """The sandbox component that runs pods (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        node_name: str = NODE_NAME,
        bind_labels: dict[str, str] | None = None,
        shutdown_grace: float = SHUTDOWN_GRACE_SECONDS,
    ) -> None:
        self.root = Path(root)
        self.node_name = node_name
        self.bind_labels = BIND_LABELS if bind_labels is None else bind_labels
        self.shutdown_grace = shutdown_grace
        self.runs: dict[str, PodRun] = {}
        self.network = NetworkMap()
        self._registry: Registry | None = None
        self._given_ports: set[int] = set()

    @property
    def registry(self) -> Registry:
        assert self._registry is not None, "the kubelet is not running"
        return self._registry

    @property
    def network_file(self) -> Path:
        return self.root / NETWORK_FILE

    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    def _endpoint(self, key: ResourceKey, namespace: str = "") -> Endpoint:
        found = self.registry.catalogue.get(key)
        assert found is not None
        return Endpoint.of(found, namespace)

    async def run(self, registry: Registry) -> None:
        self._registry = registry
        (self.root / "pods").mkdir(parents=True, exist_ok=True)
        subscription = registry.store.subscribe()  # every kind: pods, services, configs
        try:
            claims, _ = registry.list(self._endpoint(CLAIMS))
            for claim in claims:
                self._on_claim("ADDED", claim)
            pods, _ = registry.list(self._endpoint(PODS))
            for pod in pods:
                self._on_pod("ADDED", pod)
            self._publish_network()
            async for event in subscription:
                self._on_event(event)
        finally:
            subscription.close()
            await self.shutdown()

    async def shutdown(self) -> None:
        runs, self.runs = list(self.runs.values()), {}
        await asyncio.gather(
            *(run.stop(self.shutdown_grace) for run in runs), return_exceptions=True
        )

    # Events.

    def _on_event(self, event: StoredEvent) -> None:
        try:
            if event.key == PODS:
                self._on_pod(event.type, event.object)
                self._publish_network()
            elif event.key == SERVICES:
                self._publish_network()
            elif event.key == CLAIMS:
                self._on_claim(event.type, event.object)
        except Exception:  # one bad object must not stop the kubelet
            logger.exception("sandbox kubelet: handling %s %s", event.type, event.key)

    def _on_pod(self, kind: str, pod: JsonObject) -> None:
        metadata, spec = pod["metadata"], pod.get("spec") or {}
        uid = metadata["uid"]
        run = self.runs.get(uid)
        if kind == "DELETED":
            if run is not None:
                self._terminate(run, 0.0)
            return
        if not spec.get("nodeName"):
            if self._wants(pod):
                self._bind(pod)
            return
        if spec["nodeName"] != self.node_name:
            return
        if metadata.get("deletionTimestamp"):
            grace = float(metadata.get("deletionGracePeriodSeconds") or 0)
            if run is not None:
                self._terminate(run, grace)
            elif grace:
                self._confirm_deletion(pod)
            return
        if run is not None:
            run.pod = pod
            return
        if (pod.get("status") or {}).get("phase") in {"Succeeded", "Failed"}:
            return  # finished before (a restarted sandbox does not rerun it)
        run = PodRun(self, pod)
        self.runs[uid] = run
        run.start()

    # Claims.

    def _on_claim(self, kind: str, claim: JsonObject) -> None:
        metadata = claim["metadata"]
        namespace = metadata.get("namespace", "default")
        if kind == "DELETED":
            folder = containers.claim_folder(self.claims_dir, namespace, claim)
            shutil.rmtree(folder, ignore_errors=True)
            return
        if metadata.get("deletionTimestamp") or (claim.get("status") or {}).get("phase") == "Bound":
            return
        spec = claim.get("spec") or {}
        status = {
            "phase": "Bound",
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "capacity": {
                "storage": ((spec.get("resources") or {}).get("requests") or {}).get(
                    "storage", "1Gi"
                )
            },
        }
        endpoint = self._endpoint(CLAIMS, namespace)
        try:
            self.registry.patch(
                endpoint, metadata["name"], MERGE_PATCH, {"status": status}, subresource="status"
            )
        except ApiError as error:
            if error.code != 404:
                logger.warning("sandbox kubelet: binding claim %s: %s", metadata["name"], error)

    def _wants(self, pod: JsonObject) -> bool:
        metadata = pod["metadata"]
        if metadata.get("deletionTimestamp"):
            return False
        labels = metadata.get("labels") or {}
        return bool(self.bind_labels) and all(
            labels.get(k) == v for k, v in self.bind_labels.items()
        )

    def _bind(self, pod: JsonObject) -> None:
        ports: dict[str, int] = {}
        for container in (pod.get("spec") or {}).get("containers") or []:
            for port in container.get("ports") or []:
                number = int(port["containerPort"])
                ports.setdefault(str(number), self._new_port())
        patch = {
            "metadata": {"annotations": {PORTS_ANNOTATION: json.dumps(ports, sort_keys=True)}},
            "spec": {"nodeName": self.node_name},
        }
        endpoint = self._endpoint(PODS, pod["metadata"].get("namespace", "default"))
        try:
            self.registry.patch(endpoint, pod["metadata"]["name"], MERGE_PATCH, patch)
        except ApiError as error:
            logger.warning("sandbox kubelet: binding %s: %s", pod["metadata"]["name"], error)

    def _new_port(self) -> int:
        for _ in range(100):
            port = free_port()
            if port not in self._given_ports:
                self._given_ports.add(port)
                return port
        raise RuntimeError("no free local port")

    def _terminate(self, run: PodRun, grace: float) -> None:
        if run.terminating is None:
            run.terminating = asyncio.create_task(self._finish(run, grace))

    async def _finish(self, run: PodRun, grace: float) -> None:
        await run.stop(grace)
        self.runs.pop(run.uid, None)
        for port in host_ports(run.pod).values():
            self._given_ports.discard(port)
        self._confirm_deletion(run.pod)
        shutil.rmtree(run.folder, ignore_errors=True)
        self._publish_network()

    def _confirm_deletion(self, pod: JsonObject) -> None:
        endpoint = self._endpoint(PODS, pod["metadata"].get("namespace", "default"))
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}}
        with contextlib.suppress(ApiError):  # already gone, or another pod by that name
            self.registry.delete(endpoint, pod["metadata"]["name"], options)

    def write_status(self, run: PodRun, status: JsonObject) -> None:
        endpoint = self._endpoint(PODS, run.namespace)
        try:
            current = self.registry.get(endpoint, run.name)
            if current["metadata"]["uid"] != run.uid or current["metadata"].get(
                "deletionTimestamp"
            ):
                return
            self.registry.patch(
                endpoint, run.name, MERGE_PATCH, {"status": status}, subresource="status"
            )
        except ApiError as error:
            if error.code != 404:
                logger.warning("sandbox kubelet: status of %s: %s", run.name, error)

    def _publish_network(self) -> None:
        services, _ = self.registry.list(self._endpoint(SERVICES))
        pods, _ = self.registry.list(self._endpoint(PODS))
        ours = [p for p in pods if (p.get("spec") or {}).get("nodeName") == self.node_name]
        network = NetworkMap.compute(services, ours)
        if network != self.network or not self.network_file.exists():
            self.network = network
            self.root.mkdir(parents=True, exist_ok=True)
            network.save(self.network_file)
