"""`swivel sandbox up|down --kubeconfig PATH`: a local Kubernetes API for kubectl and kopf.

`up` starts the in-memory sandbox API server (`python -m swivel.sandbox`) as a detached
background process, waits until `/version` answers, installs the Swivel CRDs (generated
from the models, as the Helm chart would) and writes a kubeconfig pointing at it, with a
state file (`PATH.sandbox.json`) and a log (`PATH.sandbox.log`) beside it. `down` stops
that process and removes the state and the kubeconfig. It is a developer sandbox, not a
cluster: see docs/sandbox.md for what it does and does not do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import click

from swivel.sandbox import kubeconfig

STARTUP_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 10.0
_KUBECONFIG = click.Path(dir_okay=False, path_type=Path)


def _state_path(config: Path) -> Path:
    return config.with_name(config.name + ".sandbox.json")


def _log_path(config: Path) -> Path:
    return config.with_name(config.name + ".sandbox.log")


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
    return b"swivel.sandbox" in command_line


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


def _start(port: int, ready_file: Path, log: Path) -> None:
    """Launch the server detached (it forks away; the launcher exits at once)."""
    ready_file.unlink(missing_ok=True)
    arguments = ["--port", str(port), "--ready-file", str(ready_file), "--detach"]
    with log.open("ab") as output:
        launcher = subprocess.run(
            [sys.executable, "-m", "swivel.sandbox", *arguments],
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
def up(config: Path, port: int, crds: bool) -> None:
    """Start the sandbox API server in the background and write a kubeconfig for it."""
    config = config.absolute()
    state = _read_state(config)
    if state and _is_sandbox_process(int(state["pid"])) and _answers(state["url"]):
        click.echo(f"The sandbox is already running at {state['url']} (pid {state['pid']}).")
        return
    config.parent.mkdir(parents=True, exist_ok=True)
    log = _log_path(config)
    ready_file = config.with_name(config.name + ".sandbox.ready")
    _start(port, ready_file, log)
    ready = _wait_ready(ready_file, log)
    installed = _install_swivel_crds(ready["url"]) if crds else []
    kubeconfig.write(config, ready["url"])
    state = {**ready, "kubeconfig": str(config), "log": str(log)}
    _state_path(config).write_text(json.dumps(state, indent=2), encoding="utf-8")
    click.echo(f"Swivel sandbox API server (a developer sandbox, not a cluster) at {ready['url']}")
    click.echo(f"  pid {ready['pid']}, log {log}")
    if installed:
        click.echo(f"  CRDs installed: {', '.join(installed)}")
    click.echo("Use it with:")
    click.echo(f"  export KUBECONFIG={config}")
    click.echo(f"  kubectl --kubeconfig {config} apply -f examples/fraud-detection/streamjob.yaml")
    click.echo(f"  kubectl --kubeconfig {config} get streamjobs,reconfigurations")
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
