"""The layering rules the design card sets, checked on the source itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN_IN_CONTROLLERS = {"kopf", "kubernetes", "aiohttp", "pyspark"}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_controllers_import_no_kubernetes_spark_or_network_library() -> None:
    files = sorted((ROOT / "controllers").rglob("*.py"))
    assert files, "controllers/ must hold the planners"
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_roots(path) & FORBIDDEN_IN_CONTROLLERS)
        for path in files
    }
    assert {f: libs for f, libs in offenders.items() if libs} == {}


def test_the_probe_itself_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import aiohttp\nfrom pyspark.sql import SparkSession\n", encoding="utf-8")
    assert _imported_roots(probe) & FORBIDDEN_IN_CONTROLLERS == {"aiohttp", "pyspark"}


def test_import_operator_is_still_the_standard_library_from_the_repository_root() -> None:
    # `python -c` puts the current directory first on sys.path: the worst case for shadowing.
    code = "import operator, swivel.operator as own; print(operator.__file__); print(own.__name__)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    stdlib_path, own_name = result.stdout.split()
    assert Path(stdlib_path).parent != ROOT / "operator"
    assert stdlib_path.endswith("operator.py") and "site-packages" not in stdlib_path
    assert own_name == "swivel.operator"


def test_design_card_folders_are_mapped_into_the_swivel_namespace() -> None:
    for folder in ("operator", "controllers", "jobs"):
        link = ROOT / "swivel" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve()


def test_one_client_per_side_no_urllib_request_in_the_product() -> None:
    """The CLI's side speaks to the agent with `AgentClient`, the job side with its stdlib
    `Connection` (docs/architecture.md, "Clients"): a third HTTP client is a regression."""
    folders = ("swivel", "jobs", "operator", "controllers")
    offenders = sorted(
        str(path.relative_to(ROOT))
        for folder in folders
        for path in (ROOT / folder).rglob("*.py")
        if "urllib.request" in _imported_modules(path)
    )
    assert offenders == []


def test_the_urllib_probe_itself_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import urllib.parse\nimport urllib.request as fetch\n", encoding="utf-8")
    assert "urllib.request" in _imported_modules(probe)


def test_the_protocol_is_a_package_of_its_own() -> None:
    protocol = ROOT / "swivel" / "protocol"
    assert protocol.is_dir() and not protocol.is_symlink()
    assert "pydantic" in set().union(*(_imported_roots(p) for p in protocol.glob("*.py")))


def _imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules
