"""`swivel sandbox up|down|logs --kubeconfig PATH`: a local Kubernetes API, kubelet and operator.

`up` starts the in-memory sandbox API server (`python -m swivel_tools.sandbox`) as a detached
background process with its process kubelet (pods run as local processes, their files in
`PATH.sandbox.d/`) and, unless `--no-operator`, the real `swivel operator` beside it; it
waits until `/version` answers, installs the Swivel CRDs (generated from the models, as the
Helm chart would) and writes a kubeconfig pointing at it, with a state file
(`PATH.sandbox.json`) and logs (`PATH.sandbox.log`, `PATH.operator.log`) beside it. `down`
stops all of it and removes the state and the kubeconfig. `logs POD` shows a container's
output. It is a developer sandbox, not a cluster: see docs/sandbox.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import click

from swivel_tools.sandbox import kubeconfig

STARTUP_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 20.0  # the operator (5 s) and the pods (3 s) stop first
_KUBECONFIG = click.Path(dir_okay=False, path_type=Path)


def _state_path(config: Path) -> Path:
    return config.with_name(config.name + ".sandbox.json")


def _log_path(config: Path) -> Path:
    return config.with_name(config.name + ".sandbox.log")


def _operator_log_path(config: Path) -> Path:
    return config.with_name(config.name + ".operator.log")


def _kubelet_root(config: Path) -> Path:
    return config.with_name(config.name + ".sandbox.d")


def _read_state(config: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(_state_path(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _is_sandbox_process(pid: int) -> bool:
    """Is `pid` alive and still our server (not a recycled pid)?"""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc (macOS): trust the state file
    return b"swivel_tools.sandbox" in command_line


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/version", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _post(url: str, path: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _install_swivel_crds(url: str) -> list[str]:
    from swivel.api.crds import KINDS, crd

    installed = []
    for kind in KINDS:
        body = crd(kind)
        status = _post(url, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
        if status not in (201, 409):
            raise click.ClickException(f"installing CRD {body['metadata']['name']}: HTTP {status}")
        installed.append(body["metadata"]["name"])
    return installed


def _start(port: int, ready_file: Path, log: Path, extra: list[str]) -> None:
    """Launch the server detached (it forks away; the launcher exits at once)."""
    ready_file.unlink(missing_ok=True)
    arguments = ["--port", str(port), "--ready-file", str(ready_file), "--detach", *extra]
    with log.open("ab") as output:
        launcher = subprocess.run(
            [sys.executable, "-m", "swivel_tools.sandbox", *arguments],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=STARTUP_TIMEOUT_SECONDS,
        )
    if launcher.returncode != 0:
        raise click.ClickException(f"the sandbox did not start:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-2000:]


def _wait_ready(ready_file: Path, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            ready = json.loads(ready_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            ready = None
        if ready and "error" in ready:
            ready_file.unlink(missing_ok=True)
            raise click.ClickException(f"the sandbox could not start: {ready['error']}")
        if ready and _answers(ready["url"]):
            ready_file.unlink(missing_ok=True)
            return dict(ready)
        time.sleep(0.05)
    raise click.ClickException(
        f"the sandbox did not answer within {STARTUP_TIMEOUT_SECONDS:.0f}s; see {log}:\n{_tail(log)}"
    )


@click.group("sandbox")
def command() -> None:
    """A local in-memory Kubernetes API (a developer sandbox, not a cluster)."""


@command.command("up")
@click.option(
    "--kubeconfig", "config", type=_KUBECONFIG, required=True, help="Kubeconfig to write."
)
@click.option("--port", type=int, default=0, show_default=True, help="0 picks a free port.")
@click.option("--crds/--no-crds", default=True, show_default=True, help="Install the Swivel CRDs.")
@click.option(
    "--operator/--no-operator",
    default=True,
    show_default=True,
    help="Run the Swivel operator beside the API server (--no-operator: the server and kubelet).",
)
def up(config: Path, port: int, crds: bool, operator: bool) -> None:
    """Start the sandbox (API server, kubelet, operator) in the background; write a kubeconfig."""
    config = config.absolute()
    state = _read_state(config)
    if state and _is_sandbox_process(int(state["pid"])) and _answers(state["url"]):
        click.echo(f"The sandbox is already running at {state['url']} (pid {state['pid']}).")
        return
    config.parent.mkdir(parents=True, exist_ok=True)
    log = _log_path(config)
    ready_file = config.with_name(config.name + ".sandbox.ready")
    root = _kubelet_root(config)
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)  # what a previous sandbox left (logs)
    extra = ["--kubelet-root", str(root)]
    if crds:
        extra.append("--crds")
    if operator:
        extra += ["--operator", "--operator-log", str(_operator_log_path(config))]
    _start(port, ready_file, log, extra)
    ready = _wait_ready(ready_file, log)
    installed = _install_swivel_crds(ready["url"]) if crds else []
    kubeconfig.write(config, ready["url"])
    state = {**ready, "kubeconfig": str(config), "log": str(log)}
    _state_path(config).write_text(json.dumps(state, indent=2), encoding="utf-8")
    click.echo(f"Swivel sandbox API server (a developer sandbox, not a cluster) at {ready['url']}")
    click.echo(f"  pid {ready['pid']}, log {log}")
    click.echo(f"  kubelet: pods run as local processes (files in {root})")
    if operator:
        click.echo(
            f"  operator: swivel operator --all-namespaces, log {_operator_log_path(config)}"
        )
    if installed:
        click.echo(f"  CRDs installed: {', '.join(installed)}")
    click.echo("Use it with:")
    click.echo(f"  export KUBECONFIG={config}")
    click.echo(f"  kubectl --kubeconfig {config} apply -f examples/fraud-detection/streamjob.yaml")
    click.echo(f"  kubectl --kubeconfig {config} get streamjobs,reconfigurations")
    click.echo(f"  swivel sandbox logs --kubeconfig {config} fraud-detection-driver -c spark")
    click.echo(f"Stop it with: swivel sandbox down --kubeconfig {config}")


@command.command("down")
@click.option("--kubeconfig", "config", type=_KUBECONFIG, required=True, help="As given to `up`.")
def down(config: Path) -> None:
    """Stop the sandbox started with this kubeconfig and remove its state."""
    config = config.absolute()
    state = _read_state(config)
    if state is None:
        click.echo(f"No sandbox state next to {config}; nothing to stop.")
        return
    pid = int(state["pid"])
    if _is_sandbox_process(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while _is_sandbox_process(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _is_sandbox_process(pid):
            os.kill(pid, signal.SIGKILL)
        click.echo(f"Stopped the sandbox (pid {pid}).")
    else:
        click.echo(f"The sandbox (pid {pid}) was not running; cleaning up.")
    _state_path(config).unlink(missing_ok=True)
    if kubeconfig.is_ours(config):
        config.unlink(missing_ok=True)
    click.echo(f"Removed its state; the log stays at {state.get('log', _log_path(config))}.")


def _pod_folder(root: Path, namespace: str, pod: str) -> Path | None:
    found = sorted((root / "pods").glob(f"{namespace}_{pod}_*"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _log_files(folder: Path) -> list[Path]:
    runs = [p for p in folder.glob("*.log") if p.stem.isdigit()]
    return sorted(runs, key=lambda p: int(p.stem))


@command.command("logs")
@click.option("--kubeconfig", "config", type=_KUBECONFIG, required=True, help="As given to `up`.")
@click.option("--namespace", "-n", default="default", show_default=True)
@click.option("--container", "-c", default=None, help="Default: the pod's first container.")
@click.option("--previous", "-p", is_flag=True, help="The previous run of the container.")
@click.option("--operator", "operator_log", is_flag=True, help="The operator's log instead.")
@click.argument("pod", required=False)
def logs(  # noqa: PLR0917 - click passes options positionally
    config: Path,
    namespace: str,
    container: str | None,
    previous: bool,
    operator_log: bool,
    pod: str | None,
) -> None:
    """Print what a sandbox pod's container wrote (stdout and stderr), like `kubectl logs`."""
    config = config.absolute()
    state = _read_state(config) or {}
    if operator_log:
        path = Path(state.get("operatorLog") or _operator_log_path(config))
        if not path.exists():
            raise click.ClickException(f"no operator log at {path}")
        click.echo(path.read_text(encoding="utf-8", errors="replace"), nl=False)
        return
    if pod is None:
        raise click.UsageError("give a POD name (or --operator)")
    root = Path(state.get("kubeletRoot") or _kubelet_root(config))
    folder = _pod_folder(root, namespace, pod)
    if folder is None:
        raise click.ClickException(
            f'pod "{pod}" in namespace "{namespace}" has not run in the sandbox at {root}'
        )
    try:
        names = json.loads((folder / "containers.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        names = []
    if container is None:
        if not names:
            raise click.ClickException(f"pod {pod!r} has no containers")
        container = names[0]
        if len(names) > 1:
            click.echo(f'Defaulted container "{container}" out of: {", ".join(names)}', err=True)
    elif container not in names:
        raise click.ClickException(
            f"container {container} is not valid for pod {pod} (choose one of: {', '.join(names)})"
        )
    runs = _log_files(folder / "logs" / container)
    wanted = runs[-2:-1] if previous else runs[-1:]
    if not wanted:
        what = "previous terminated container" if previous else "container"
        raise click.ClickException(f'{what} "{container}" in pod "{pod}" has no logs yet')
    click.echo(wanted[0].read_text(encoding="utf-8", errors="replace"), nl=False)
