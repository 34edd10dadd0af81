"""Service names on a laptop: the sandbox's stand-in for cluster DNS and kube-proxy.

In a cluster `fraud-detection-driver.default.svc:8470` reaches the agent port of the pod
the Service selects. In the sandbox every pod runs on 127.0.0.1 and each declared container
port gets a free local port (the kubelet records it in the pod annotation
`sandbox.swivel.dev/host-ports`), so a Service name and port stand for `127.0.0.1` and that
pod's host port. The kubelet keeps the current table in a JSON file (`NetworkMap`); two
things read it:

- the kubelet itself, which rewrites Service addresses in a container's arguments,
  environment and ConfigMap files when it starts the container (`Translation` in
  `containers.py`), and
- Python processes started through `python -m swivel_tools.sandbox.network --map FILE -- ARGS`
  (the operator `swivel sandbox up` starts): `install(path)` wraps `socket.getaddrinfo`, so
  every client in the process (aiohttp, urllib, requests) resolves Service names to
  127.0.0.1 and maps the port. Names the table does not know resolve as usual.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCALHOST = "127.0.0.1"
PORTS_ANNOTATION = "sandbox.swivel.dev/host-ports"
SERVICE_SUFFIXES = (".svc.cluster.local", ".svc")

JsonObject = dict[str, Any]


def service_key(host: str) -> str | None:
    """`name.namespace` for a Service DNS name (`name.ns.svc[.cluster.local]`), else None."""
    host = host.lower().rstrip(".")
    for suffix in SERVICE_SUFFIXES:
        if host.endswith(suffix):
            stem = host.removesuffix(suffix)
            return stem if stem.count(".") == 1 else None
    return None


def host_ports(pod: JsonObject) -> dict[int, int]:
    """The pod's container port → local port table the kubelet recorded (empty if none)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        table = json.loads(annotations.get(PORTS_ANNOTATION) or "{}")
        return {int(k): int(v) for k, v in table.items()}
    except (TypeError, ValueError):
        return {}


def _container_port(pod: JsonObject, target: int | str) -> int | None:
    if isinstance(target, int):
        return target
    if target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    return None


def _selects(selector: Mapping[str, str], pod: JsonObject) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@dataclass
class NetworkMap:
    """`name.namespace` of each Service → {service port: local port of a selected pod}."""

    services: dict[str, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def compute(cls, services: Iterable[JsonObject], pods: Iterable[JsonObject]) -> NetworkMap:
        """From the stored Services and pods (only pods the kubelet gave ports, not deleting)."""
        running = [
            pod
            for pod in pods
            if host_ports(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")
        ]
        running.sort(
            key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"])
        )
        table: dict[str, dict[int, int]] = {}
        for service in services:
            metadata, spec = service["metadata"], service.get("spec") or {}
            namespace = metadata.get("namespace", "default")
            selected = [
                pod
                for pod in running
                if pod["metadata"].get("namespace") == namespace
                and _selects(spec.get("selector") or {}, pod)
            ]
            ports: dict[int, int] = {}
            for port in spec.get("ports") or []:
                target = port.get("targetPort", port.get("port"))
                for pod in selected:
                    container_port = _container_port(pod, target)
                    local = host_ports(pod).get(container_port or -1)
                    if local is not None:
                        ports[int(port["port"])] = local
                        break
            if ports:
                table[f"{metadata['name']}.{namespace}"] = ports
        return cls(table)

    def resolve(self, host: str, port: int | None) -> tuple[str, int | None] | None:
        key = service_key(host)
        if key is None or key not in self.services:
            return None
        return LOCALHOST, self.services[key].get(port, port) if port is not None else None

    def save(self, path: Path) -> None:
        document = {
            "services": {k: {str(p): h for p, h in v.items()} for k, v in self.services.items()}
        }
        staging = path.with_name(f".{path.name}.tmp")
        staging.write_text(json.dumps(document, indent=2, sort_keys=True), encoding="utf-8")
        staging.replace(path)

    @classmethod
    def load(cls, path: Path) -> NetworkMap:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            services = document.get("services") or {}
            return cls({k: {int(p): int(h) for p, h in v.items()} for k, v in services.items()})
        except (OSError, ValueError, AttributeError):
            return cls()


class _CachedMap:
    """The map file, re-read when it changes (a stat per lookup of a Service name)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._map = NetworkMap()

    def get(self) -> NetworkMap:
        try:
            stat = self.path.stat()
        except OSError:
            return NetworkMap()
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._map, self._stamp = NetworkMap.load(self.path), stamp
        return self._map


def install(path: Path) -> None:
    """Resolve Service names through the map file in this process (wraps getaddrinfo)."""
    original = socket.getaddrinfo
    cached = _CachedMap(path)

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if isinstance(name, str) and service_key(name) is not None:
            number: int | None = None
            with contextlib.suppress(TypeError, ValueError):
                number = int(port)
            found = cached.get().resolve(name, number)
            if found is not None:
                host, port = found[0], found[1] if found[1] is not None else port
        return original(host, port, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo


def main(argv: list[str] | None = None) -> None:
    """`python -m swivel_tools.sandbox.network --map FILE -- SWIVEL-ARGS...`: run a `swivel`
    command with Service names resolved through the sandbox's map."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] != "--map" or args[2] != "--":
        raise SystemExit(
            "usage: python -m swivel_tools.sandbox.network --map FILE -- SWIVEL-ARGS..."
        )
    install(Path(args[1]))
    os.environ["SWIVEL_SANDBOX_NETWORK"] = args[1]
    from swivel.cli.main import main as swivel

    sys.argv = ["swivel", *args[3:]]
    swivel()


if __name__ == "__main__":
    main()
