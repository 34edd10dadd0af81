"""The `swivel` command line: one click group, each command in a module of its own."""

from __future__ import annotations

import click

from swivel import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="swivel")
def cli() -> None:
    """Run and reconfigure PySpark Structured Streaming jobs while they run."""


def _register() -> None:
    # Imported here so that `swivel --help` stays fast and each command owns its imports.
    from swivel.cli import (
        agent,
        apply,
        bench,
        check_schedule,
        crds,
        demo,
        driver,
        operator,
        plan,
        run,
        sandbox,
        status,
    )

    for module in (
        agent,
        apply,
        bench,
        demo,
        check_schedule,
        crds,
        driver,
        operator,
        plan,
        run,
        sandbox,
        status,
    ):
        cli.add_command(module.command)


def main() -> None:
    _register()
    cli()
