"""`swivel openapi [--check]`: write (or verify) the agent's OpenAPI document, generated from
the protocol models and the agent's routes (`swivel.jobs.agent.openapi`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from swivel.jobs.agent.openapi import RELATIVE_PATH, is_stale, write


@click.command("openapi")
@click.option("--check", is_flag=True, help="Exit 1 if the committed document differs.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help=f"Repository root holding {RELATIVE_PATH}.",
)
def command(check: bool, root: Path) -> None:
    """Generate jobs/agent/openapi.yaml from the protocol models and the agent's routes."""
    path = root / RELATIVE_PATH
    if check:
        if is_stale(root):
            click.echo(f"stale: {path} (run `swivel openapi` to regenerate)", err=True)
            sys.exit(1)
        click.echo("The agent's OpenAPI document matches the models.")
        return
    click.echo(f"wrote {path}" if write(root) else "The OpenAPI document is already up to date.")
