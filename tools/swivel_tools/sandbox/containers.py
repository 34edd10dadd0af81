"""What a container sees, made of local things: volumes, paths, ports, Service names, env.

A pod's containers expect an image's filesystem, a pod IP and cluster DNS. The sandbox
kubelet runs them as local processes, so before starting one it

- **projects volumes** into the pod's folder: `configMap` and `secret` volumes become
  files (per container, `items` and `subPath` honoured), `emptyDir` a folder shared by
  the pod's containers, `persistentVolumeClaim` the claim's own folder (per claim, outside
  the pod's folder: it survives the pod being replaced);
- builds a **`Translation`**: each `mountPath` → its local folder (longest first, so a
  mount inside another one wins), each declared `containerPort` → a free local port, each
  Service (`name.ns.svc[.cluster.local]`, with or without a port) → 127.0.0.1 and the
  local port of the pod it selects (see `network.py`), and `0.0.0.0` → 127.0.0.1 (nothing
  in the sandbox listens beyond the loopback);
- applies it to the container's **arguments**, **env values** and the text of its
  **ConfigMap files** (never to Secret data);
- **adapts Swivel job manifests** found in ConfigMap files (`kind: StreamJob`): Spark runs
  in local mode inside the "driver" container (`spark.master=local[2]`, driver host and
  bind address 127.0.0.1, `spark.kubernetes.*` dropped, Spark UI off);
- resolves **env `valueFrom`** (`secretKeyRef`, `configMapKeyRef`, `fieldRef` for the
  pod's name, namespace, uid, IP, node, service account, labels and annotations) and
  `envFrom`.

Entry points are not changed for the sandbox: they read their usual arguments and files,
which simply point at local paths and ports.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from swivel_tools.sandbox.network import LOCALHOST, NetworkMap

JsonObject = dict[str, Any]
Lookup = Callable[[str, str], JsonObject | None]  # (kind "configmaps"|"secrets", name) → object

LOCAL_MASTER = "local[2]"
# The driver runs on LOCAL_MASTER here: one executor, so no MigrationDriver carries out bin
# moves or coordination changes; an agent told it may accept them would leave them Applying.
NOT_IN_LOCAL_MODE = frozenset({"SWIVEL_AGENT_MIGRATIONS"})
NODE_NAME = "swivel-sandbox"
# Only the image's own entry point runs: this environment's `swivel` command.
ENTRY_POINT = "swivel"


class ContainerConfigError(Exception):
    """The container cannot be configured yet (a missing ConfigMap, Secret or key)."""


@dataclass
class Translation:
    """Container paths, ports and Service names → local ones, for one container."""

    mounts: list[tuple[str, Path]] = field(default_factory=list)
    ports: dict[int, int] = field(default_factory=dict)
    network: NetworkMap = field(default_factory=NetworkMap)

    def __post_init__(self) -> None:
        self.mounts.sort(key=lambda mount: len(mount[0]), reverse=True)

    def path(self, container_path: str) -> str:
        for mount_path, local in self.mounts:
            root = mount_path.rstrip("/")
            if container_path == root or container_path.startswith(root + "/"):
                return str(local) + container_path[len(root) :]
        return container_path

    def text(self, value: str) -> str:
        """Pod-local and Service addresses, then mount paths, rewritten wherever they occur."""
        value = _LOOPBACK_WITH_PORT.sub(self._loopback_with_port, value)
        value = _SERVICE_WITH_PORT.sub(self._service_with_port, value)
        value = _SERVICE.sub(self._service, value)
        for mount_path, local in self.mounts:
            root = re.escape(mount_path.rstrip("/"))
            value = re.sub(rf"(?<![\w.\-/]){root}(?=/|$|[^\w.\-])", str(local), value)
        return value

    def argument(self, value: str) -> str:
        if value == "0.0.0.0":
            return LOCALHOST
        if value.isdigit() and int(value) in self.ports:
            return str(self.ports[int(value)])
        flag, equals, rest = value.partition("=")
        if equals and flag.startswith("-") and rest.isdigit() and int(rest) in self.ports:
            return f"{flag}={self.ports[int(rest)]}"
        if equals and flag.startswith("-") and rest == "0.0.0.0":
            return f"{flag}={LOCALHOST}"
        return self.text(value)

    def _service_with_port(self, match: re.Match[str]) -> str:
        found = self.network.resolve(match["host"], int(match["port"]))
        return f"{found[0]}:{found[1]}" if found else match[0]

    def _loopback_with_port(self, match: re.Match[str]) -> str:
        port = int(match["port"])
        return f"{LOCALHOST}:{self.ports[port]}" if port in self.ports else match[0]

    def _service(self, match: re.Match[str]) -> str:
        return LOCALHOST if self.network.resolve(match[0], None) else match[0]


_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SERVICE_HOST = rf"{_NAME}\.{_NAME}\.svc(\.cluster\.local)?"
_SERVICE_WITH_PORT = re.compile(rf"(?<![\w.\-])(?P<host>{_SERVICE_HOST}):(?P<port>\d+)")
_LOOPBACK_WITH_PORT = re.compile(
    r"(?<![\w.\-])(localhost|127\.0\.0\.1|0\.0\.0\.0):(?P<port>\d+)(?!\d)"
)
_SERVICE = re.compile(rf"(?<![\w.\-]){_SERVICE_HOST}(?![\w\-])")


# Volumes.


def _decoded(obj: JsonObject, secret: bool) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if secret:
        for key, value in (obj.get("data") or {}).items():
            files[key] = base64.b64decode(value)
        for key, value in (obj.get("stringData") or {}).items():
            files[key] = str(value).encode()
    else:
        for key, value in (obj.get("data") or {}).items():
            files[key] = str(value).encode()
        for key, value in (obj.get("binaryData") or {}).items():
            files[key] = base64.b64decode(value)
    return files


def claim_folder(claims_dir: Path, namespace: str, claim: JsonObject) -> Path:
    """A claim's storage: one folder per claim object (its uid), outside every pod's folder,
    so it outlives the pods that mount it and a new claim by the same name starts empty."""
    metadata = claim["metadata"]
    return claims_dir / f"{namespace}_{metadata['name']}_{metadata['uid']}"


def _claim(volume: JsonObject, lookup: Lookup) -> JsonObject:
    """The bound PersistentVolumeClaim a volume names (ContainerConfigError until it is)."""
    name = volume["persistentVolumeClaim"].get("claimName", "")
    claim = lookup("persistentvolumeclaims", name)
    if claim is None:
        raise ContainerConfigError(f'persistentvolumeclaim "{name}" not found')
    if claim["metadata"].get("deletionTimestamp"):
        raise ContainerConfigError(f'persistentvolumeclaim "{name}" is being deleted')
    if (claim.get("status") or {}).get("phase") != "Bound":
        raise ContainerConfigError(f'persistentvolumeclaim "{name}" is not bound yet')
    return claim


def _projection(volume: JsonObject, lookup: Lookup) -> tuple[dict[str, bytes], bool] | None:
    """The files of a configMap/secret volume (None for an emptyDir) and whether secret."""
    if "emptyDir" in volume:
        return None
    if "configMap" in volume:
        source, kind, name_key, secret = volume["configMap"], "configmaps", "name", False
    elif "secret" in volume:
        source, kind, name_key, secret = volume["secret"], "secrets", "secretName", True
    else:
        raise ContainerConfigError(
            f"volume {volume.get('name')!r}: only configMap, secret, emptyDir and"
            " persistentVolumeClaim volumes run in the sandbox"
        )
    name = source.get(name_key, "")
    found = lookup(kind, name)
    if found is None:
        if source.get("optional"):
            return {}, secret
        singular = "configmap" if kind == "configmaps" else "secret"
        raise ContainerConfigError(f'{singular} "{name}" not found')
    files = _decoded(found, secret)
    items = source.get("items")
    if items:
        picked = {}
        for item in items:
            if item["key"] not in files:
                raise ContainerConfigError(f"key {item['key']!r} not found in {kind} {name!r}")
            picked[item["path"]] = files[item["key"]]
        files = picked
    return files, secret


SANDBOX_TOKEN = b"sandbox"  # the sandbox accepts any bearer token
ROOT_CA = "kube-root-ca.crt"


def _projected(
    volume: JsonObject, pod: JsonObject, lookup: Lookup
) -> tuple[dict[str, bytes], bool]:
    """The files of a `projected` volume, e.g. the service account token the operator mounts
    into the driver's spark container only: `serviceAccountToken` (a placeholder token),
    `configMap` / `secret` sources and `downwardAPI` fields. The sandbox publishes no root
    CA (it serves plain HTTP), so a missing `kube-root-ca.crt` projects no file. Kept
    private (0600, untranslated), as the kubelet writes projected tokens."""
    files: dict[str, bytes] = {}
    for source in volume["projected"].get("sources") or []:
        if "serviceAccountToken" in source:
            files[source["serviceAccountToken"].get("path", "token")] = SANDBOX_TOKEN
        elif "downwardAPI" in source:
            for item in source["downwardAPI"].get("items") or []:
                path = (item.get("fieldRef") or {}).get("fieldPath", "")
                files[item["path"]] = _field(pod, path).encode()
        elif "configMap" in source or "secret" in source:
            kind = "configMap" if "configMap" in source else "secret"
            name = source[kind].get("name")
            if kind == "configMap" and name == ROOT_CA and lookup("configmaps", ROOT_CA) is None:
                continue
            inner = {"name": volume.get("name"), kind: source[kind]}
            if kind == "secret":
                inner[kind] = {**source[kind], "secretName": source[kind].get("name", "")}
            projection = _projection(inner, lookup)
            files.update(projection[0] if projection else {})
        else:
            raise ContainerConfigError(
                f"volume {volume.get('name')!r}: projected sources other than"
                " serviceAccountToken, configMap, secret and downwardAPI do not run here"
            )
    return files, True


@dataclass(frozen=True)
class Mount:
    """One volumeMount made local: `local` is what `mount_path` stands for."""

    mount_path: str
    local: Path
    volume_folder: Path
    files: dict[str, bytes] | None  # None: an emptyDir or a claim (shared, never rewritten)
    secret: bool


def project_volumes(
    pod: JsonObject,
    container: JsonObject,
    pod_dir: Path,
    lookup: Lookup,
    claims_dir: Path | None = None,
) -> list[Mount]:
    """Local folders for the container's mounts (files are written by `write_volumes`).

    emptyDir folders are shared by the pod (`pod_dir/volumes/NAME`); configMap and secret
    projections are the container's own (`pod_dir/containers/C/volumes/NAME`) because their
    text is translated with the container's mounts; a persistentVolumeClaim is the claim's
    own folder under `claims_dir` (default `pod_dir/../../claims`), which outlives the pod.
    """
    volumes = {v["name"]: v for v in (pod.get("spec") or {}).get("volumes") or []}
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    claims = claims_dir if claims_dir is not None else pod_dir.parent.parent / "claims"
    mounts = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"])
        if volume is None:
            raise ContainerConfigError(f"volume {mount['name']!r} is not declared by the pod")
        if "persistentVolumeClaim" in volume:
            folder = claim_folder(claims, namespace, _claim(volume, lookup))
            local = folder / mount["subPath"] if mount.get("subPath") else folder
            mounts.append(Mount(str(mount["mountPath"]), local, folder, None, False))
            continue
        projection = (
            _projected(volume, pod, lookup)
            if "projected" in volume
            else _projection(volume, lookup)
        )
        if projection is None:
            folder, files, secret = pod_dir / "volumes" / volume["name"], None, False
        else:
            folder = pod_dir / "containers" / container["name"] / "volumes" / volume["name"]
            files, secret = projection
        local = folder / mount["subPath"] if mount.get("subPath") else folder
        mounts.append(Mount(str(mount["mountPath"]), local, folder, files, secret))
    return mounts


def write_volumes(mounts: list[Mount], translation: Translation) -> None:
    """Create emptyDirs and claim folders (kept across restarts) and (re)write projections."""
    for mount in mounts:
        if mount.files is None:
            mount.volume_folder.mkdir(parents=True, exist_ok=True)
            continue
        if mount.volume_folder.exists():
            shutil.rmtree(mount.volume_folder)
        mount.volume_folder.mkdir(parents=True)
        for relative, content in mount.files.items():
            target = mount.volume_folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content if mount.secret else translate_file(content, translation))
            os.chmod(target, 0o600 if mount.secret else 0o644)


def translate_file(content: bytes, translation: Translation) -> bytes:
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return content
    adapted = adapt_job_manifest(text)
    return translation.text(adapted if adapted is not None else text).encode()


def adapt_job_manifest(text: str) -> str | None:
    """A Swivel StreamJob manifest with Spark in local mode; None if `text` is not one."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not (
        isinstance(document, dict)
        and document.get("kind") == "StreamJob"
        and str(document.get("apiVersion", "")).startswith("swivel.dev/")
        and isinstance(document.get("spec"), dict)
    ):
        return None
    conf = {
        key: value
        for key, value in (document["spec"].get("sparkConf") or {}).items()
        if not key.startswith("spark.kubernetes.")
        and key not in {"spark.driver.port", "spark.driver.blockManager.port"}
    }
    conf.update(
        {
            "spark.master": LOCAL_MASTER,
            "spark.submit.deployMode": "client",
            "spark.driver.host": LOCALHOST,
            "spark.driver.bindAddress": LOCALHOST,
            "spark.ui.enabled": "false",
        }
    )
    document["spec"]["sparkConf"] = conf
    return yaml.safe_dump(document, sort_keys=False)


# Environment.


def _field(pod: JsonObject, path: str) -> str:
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    simple = {
        "metadata.name": metadata.get("name", ""),
        "metadata.namespace": metadata.get("namespace", ""),
        "metadata.uid": metadata.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", NODE_NAME),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": LOCALHOST,
        "status.podIPs": LOCALHOST,
        "status.hostIP": LOCALHOST,
        "status.hostIPs": LOCALHOST,
    }
    if path in simple:
        return str(simple[path])
    found = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if found:
        return str((metadata.get(found[1]) or {}).get(found[2], ""))
    raise ContainerConfigError(f"fieldRef {path!r} is not supported")


def _key_ref(ref: JsonObject, kind: str, lookup: Lookup) -> str | None:
    found = lookup(kind, ref.get("name", ""))
    files = _decoded(found, kind == "secrets") if found is not None else {}
    if ref.get("key") in files:
        return files[ref["key"]].decode("utf-8", errors="replace")
    if ref.get("optional"):
        return None
    what = "secret" if kind == "secrets" else "configmap"
    if found is None:
        raise ContainerConfigError(f'{what} "{ref.get("name")}" not found')
    raise ContainerConfigError(f"couldn't find key {ref.get('key')} in {what} {ref.get('name')}")


def environment(
    pod: JsonObject, container: JsonObject, lookup: Lookup, translation: Translation
) -> dict[str, str]:
    """The container's own variables (not the inherited ones), resolved and translated."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for key, kind in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            if key not in source:
                continue
            ref = source[key]
            found = lookup(kind, ref.get("name", ""))
            if found is None:
                if ref.get("optional"):
                    continue
                raise ContainerConfigError(f'{kind[:-1]} "{ref.get("name")}" not found')
            for name, raw in _decoded(found, kind == "secrets").items():
                text = raw.decode("utf-8", errors="replace")
                env[prefix + name] = text if kind == "secrets" else translation.text(text)
    for variable in container.get("env") or []:
        name = variable["name"]
        if "valueFrom" not in variable:
            env[name] = translation.text(_expand(str(variable.get("value", "")), env))
            continue
        source = variable["valueFrom"]
        value: str | None
        if "secretKeyRef" in source:
            value = _key_ref(source["secretKeyRef"], "secrets", lookup)
        elif "configMapKeyRef" in source:
            referenced = _key_ref(source["configMapKeyRef"], "configmaps", lookup)
            value = translation.text(referenced) if referenced is not None else None
        elif "fieldRef" in source:
            value = _field(pod, source["fieldRef"]["fieldPath"])
        else:
            raise ContainerConfigError(f"env {name}: only secretKeyRef, configMapKeyRef, fieldRef")
        if value is not None:
            env[name] = value
    for name in NOT_IN_LOCAL_MODE:
        env.pop(name, None)
    return env


def _expand(value: str, env: Mapping[str, str]) -> str:
    """`$(VAR)` references to earlier variables, as Kubernetes does (`$$` escapes)."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
        lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]),
        value,
    )


def command_line(
    container: JsonObject, translation: Translation, env: Mapping[str, str]
) -> list[str]:
    """The process to start: the image's `swivel` entry point from this environment."""
    command = [str(c) for c in container.get("command") or [ENTRY_POINT]]
    arguments = [str(a) for a in container.get("args") or []]
    words = [_expand(word, env) for word in [*command[1:], *arguments]]
    if os.path.basename(command[0]) != ENTRY_POINT:
        raise UnsupportedCommandError(
            f"the sandbox runs only the image's `swivel` entry point, not {command[0]!r}"
        )
    return [*entry_point(), *(translation.argument(word) for word in words)]


class UnsupportedCommandError(Exception):
    """A container whose command the sandbox cannot run (anything but `swivel`)."""


def entry_point() -> list[str]:
    """This environment's `swivel` command (the console script beside the interpreter)."""
    script = shutil.which(ENTRY_POINT, path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "swivel"]


def inherited_environment() -> dict[str, str]:
    """What a container process inherits from the sandbox: the user's environment (PATH,
    JAVA_HOME, ...) without Swivel's own variables and kubeconfig."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SWIVEL_") and k not in {"KUBECONFIG", "PYSPARK_SUBMIT_ARGS"}
    }
