"""`swivel crds [--check]`: write (or verify) the CRD YAML generated from the models."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from swivel.api.crds import stale_files, write_files


@click.command("crds")
@click.option("--check", is_flag=True, help="Exit 1 if committed CRDs differ from the models.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Repository root holding crds/ and charts/swivel/crds/.",
)
def command(check: bool, root: Path) -> None:
    """Generate crds/*.yaml and the chart's copy from the pydantic models."""
    if check:
        stale = stale_files(root)
        for path in stale:
            click.echo(f"stale: {path} (run `swivel crds` to regenerate)", err=True)
        if stale:
            sys.exit(1)
        click.echo("CRDs match the models.")
        return
    written = write_files(root)
    for path in written:
        click.echo(f"wrote {path}")
    if not written:
        click.echo("CRDs already up to date.")
