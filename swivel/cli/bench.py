"""`swivel bench ...`: the benchmarks, one subcommand each. Subcommands live in their own
modules and are added here (`bench_migration`: `migration`, `overhead`)."""

from __future__ import annotations

import click

from swivel.cli import bench_migration


@click.group("bench")
def command() -> None:
    """Run a benchmark and print its figures (`--output json` for the contract shape)."""


for _subcommand in bench_migration.COMMANDS:
    command.add_command(_subcommand)
