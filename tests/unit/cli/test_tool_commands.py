"""`swivel sandbox` and `swivel bench` come from the swivel-tools distribution (tools/):
found through its `swivel.commands` entry points when it is installed, a clear exit 2 with
how to install it when it is not (docs/packaging.md, "The developer tools").

Each case runs the real `swivel` command in a subprocess; "not installed" is made by
blocking `swivel_tools` in `sys.modules` before the CLI starts, so the entry points are
still listed but their modules do not import - as after `pip install swivel` alone, where
they are not listed at all (both lead to the same placeholder).
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from swivel.cli.main import COMMAND_GROUP

RUN_CLI = (
    "import sys; sys.argv = ['swivel', *sys.argv[1:]]; from swivel.cli.main import main; main()"
)
BLOCK_TOOLS = "import sys; sys.modules['swivel_tools'] = None; "  # `import swivel_tools` fails


def swivel(*args: str, tools: bool = True) -> subprocess.CompletedProcess[str]:
    code = RUN_CLI if tools else BLOCK_TOOLS + RUN_CLI
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_tools_register_both_commands() -> None:
    names = {point.name: point.value for point in entry_points(group=COMMAND_GROUP)}
    assert names["sandbox"] == "swivel_tools.cli.sandbox:command"
    assert names["bench"] == "swivel_tools.cli.bench:command"


@pytest.mark.parametrize(
    ("command", "subcommands"),
    [("sandbox", {"up", "down", "logs"}), ("bench", {"reconfiguration", "migration", "overhead"})],
)
def test_installed_tools_answer(command: str, subcommands: set[str]) -> None:
    result = swivel(command, "--help")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line}
    assert listed >= subcommands


@pytest.mark.parametrize(
    "args",
    [
        ("sandbox", "up", "--kubeconfig", "/nonexistent/kc"),
        ("sandbox", "--help"),
        ("bench", "reconfiguration", "--output", "json"),
        ("bench",),
    ],
)
def test_without_the_tools_each_says_how_to_get_them(args: tuple[str, ...]) -> None:
    result = swivel(*args, tools=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"`swivel {args[0]}` is a developer tool in the swivel-tools distribution" in (
        result.stderr
    )
    assert "pip install -e ./tools" in result.stderr
    assert "Traceback" not in result.stderr


def test_without_the_tools_the_product_commands_still_work() -> None:
    listing = swivel("--help", tools=False)
    assert listing.returncode == 0, listing.stderr
    assert "sandbox" in listing.stdout and "bench" in listing.stdout  # listed, as placeholders
    assert swivel("crds", "--help", tools=False).returncode == 0
    assert swivel("demo", "--help", tools=False).returncode == 0


def test_every_product_module_imports_without_the_tools() -> None:
    # import-linter forbids `swivel` to import `swivel_tools` by name; this also catches an
    # import by string (importlib, `python -m`) of a module that moved to tools/.
    code = (
        BLOCK_TOOLS + "import importlib, pkgutil, swivel; "
        "names = [m.name for m in pkgutil.walk_packages(swivel.__path__, 'swivel.')]; "
        "[importlib.import_module(n) for n in names]; print(len(names))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout) > 100  # the walk saw the whole package
