"""`swivel sandbox up/down`: a detached server, a kubeconfig that works, and a clean stop."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner
from kubernetes import client, config

from swivel_tools.cli.sandbox import command


def _alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"swivel_tools.sandbox" in cmdline


def test_up_serves_the_swivel_crds_and_down_stops_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kube" / "config"
    runner = CliRunner()
    started = runner.invoke(command, ["up", "--kubeconfig", str(kubeconfig)])
    assert started.exit_code == 0, started.output
    state = json.loads((tmp_path / "kube" / "config.sandbox.json").read_text(encoding="utf-8"))
    try:
        assert "not a cluster" in started.output and state["url"] in started.output
        assert _alive(state["pid"]) and state["pid"] != os.getpid()
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            crds = client.ApiextensionsV1Api(api).list_custom_resource_definition()
            assert {c.metadata.name for c in crds.items} == {
                "streamjobs.swivel.dev",
                "reconfigurations.swivel.dev",
            }
            assert client.CoreV1Api(api).read_namespace("default").status.phase == "Active"

        again = runner.invoke(command, ["up", "--kubeconfig", str(kubeconfig)])
        assert again.exit_code == 0 and "already running" in again.output
    finally:
        stopped = runner.invoke(command, ["down", "--kubeconfig", str(kubeconfig)])
    assert stopped.exit_code == 0, stopped.output
    assert not _alive(state["pid"])
    assert not kubeconfig.exists()
    assert not (tmp_path / "kube" / "config.sandbox.json").exists()


def test_down_without_a_sandbox_is_harmless(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n", encoding="utf-8")
    result = CliRunner().invoke(command, ["down", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 0 and "nothing to stop" in result.output
    assert kubeconfig.exists()  # never removes a kubeconfig it did not write


def test_a_port_in_use_is_reported(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            command, ["up", "--kubeconfig", str(tmp_path / "config"), "--port", str(port)]
        )
    assert result.exit_code != 0 and "cannot listen" in result.output
