"""`swivel agent --job JOB.yaml`: the sidecar agent beside a running job's driver.

It is the operator's and the CLI's only handle on the running job, and the hub of the
control channel to the job's Python workers (docs/agent.md, docs/control-protocol.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from swivel.api.errors import SpecError
from swivel.api.sparkconf import load_rendered_streamjob
from swivel.cli.errors import fail

_FILE = click.Path(exists=False, dir_okay=False, path_type=Path)


@click.command("agent")
@click.option("--job", "job_path", type=_FILE, required=True, help="The StreamJob manifest.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8471, show_default=True)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=lambda: os.environ.get("SWIVEL_AGENT_STATE_DIR", ".swivel/agent"),
    show_default="$SWIVEL_AGENT_STATE_DIR or .swivel/agent",
    help="Durable state: accepted plans survive an agent restart.",
)
@click.option(
    "--schedule-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=lambda: os.environ.get("SWIVEL_SCHEDULE_DIR"),
    help="Record update events for `swivel check-schedule` here.",
)
def command(
    job_path: Path, host: str, port: int, state_dir: Path, schedule_dir: Path | None
) -> None:
    """Serve the control hub for the job in JOB.yaml (token: $SWIVEL_AGENT_TOKEN[_FILE])."""
    from aiohttp import web

    from swivel.jobs.agent.app import create_app
    from swivel.jobs.agent.auth import TokenMissingError, load_token, tls_context
    from swivel.jobs.agent.hub import Hub
    from swivel.jobs.agent.store import StateStore

    try:
        job = load_rendered_streamjob(job_path)
    except SpecError as error:
        fail(error)
    try:
        token = load_token()
    except (TokenMissingError, OSError) as error:
        raise click.ClickException(str(error)) from None
    try:
        hub = Hub(job.spec, job.name, store=StateStore(state_dir), schedule_dir=schedule_dir)
        tls = tls_context(os.environ)  # the certificate the operator issued, when mounted
    except OSError as error:  # an unreadable state file or certificate: say which
        where = f"{error.filename}: " if error.filename else ""
        raise click.ClickException(f"{where}{error.strerror or error}") from None
    scheme = "https" if tls else "http"
    click.echo(f"swivel agent for {job.name} on {scheme}://{host}:{port} (state in {state_dir})")
    web.run_app(
        create_app(hub, token),
        host=host,
        port=port,
        ssl_context=tls,
        print=None,
        access_log=None,
        shutdown_timeout=1.0,
    )
