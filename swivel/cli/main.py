"""The `swivel` command line: one click group, each command in a module of its own.

`swivel sandbox` and `swivel bench` are developer tools that do not ship in this package
(docs/packaging.md, "The developer tools"): the `swivel-tools` distribution registers them
as `swivel.commands` entry points. Without it, each is a placeholder that says how to get it
and exits 2, so a wheel or image without the tools still answers them clearly.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import NoReturn

import click

from swivel import __version__

COMMAND_GROUP = "swivel.commands"  # the entry-point group the tools register their commands in
TOOL_COMMANDS = {
    "sandbox": "A local in-memory Kubernetes API (a developer tool, in swivel-tools).",
    "bench": "Benchmarks that run real jobs on this machine (a developer tool, in swivel-tools).",
}
INSTALL_HINT = (
    "`swivel {name}` is a developer tool in the swivel-tools distribution, which is not "
    "installed. From a checkout of the repository: pip install -e ./tools "
    "(or `make setup`, which installs both)."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="swivel")
def cli() -> None:
    """Run and reconfigure PySpark Structured Streaming jobs while they run."""


def _missing_tool(name: str, summary: str) -> click.Command:
    """A stand-in for a tool command: takes any arguments, prints how to install the tools
    and exits 2 (a usage error, like any command this installation cannot run)."""

    @click.command(
        name,
        help=summary,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    @click.pass_context
    def placeholder(context: click.Context) -> NoReturn:
        click.echo(f"Error: {INSTALL_HINT.format(name=name)}", err=True)
        context.exit(2)

    return placeholder


def _tool_commands() -> dict[str, click.Command]:
    """The commands the installed tools register; one whose module does not import (the
    distribution half removed, or blocked) counts as not installed."""
    found: dict[str, click.Command] = {}
    for point in entry_points(group=COMMAND_GROUP):
        try:
            loaded = point.load()
        except ImportError:
            continue
        if isinstance(loaded, click.Command):
            found[point.name] = loaded
    return found


def _register() -> None:
    # Imported here so that `swivel --help` stays fast and each command owns its imports.
    from swivel.cli import (
        agent,
        apply,
        check_schedule,
        crds,
        demo,
        driver,
        openapi,
        operator,
        plan,
        run,
        status,
    )

    for module in (
        agent,
        apply,
        demo,
        check_schedule,
        crds,
        driver,
        openapi,
        operator,
        plan,
        run,
        status,
    ):
        cli.add_command(module.command)
    tools = _tool_commands()
    for name, summary in TOOL_COMMANDS.items():
        command = tools.pop(name) if name in tools else _missing_tool(name, summary)
        cli.add_command(command, name)
    for name, extra in tools.items():  # a tool command the product does not know by name
        if name not in cli.commands:
            cli.add_command(extra, name)


def main() -> None:
    _register()
    cli()
