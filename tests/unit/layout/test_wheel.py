"""The product is what ships (issue 12): the `swivel` wheel holds the operator, agent,
runtime, planners and CLI, and no developer tool - the sandbox and the benchmark harness
live in the swivel-tools distribution (tools/, docs/packaging.md).

The wheel is built for real (`pip wheel . --no-deps`, ~10 s) from a copy of exactly what
the Dockerfile copies, so a stale `build/` in the checkout cannot hide or add a file and
the image's `pip install .` sees the same tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("pyproject.toml", "README.md", "swivel", "operator", "controllers", "jobs")
# Where the tools lived before they moved to tools/: none may come back into the product.
MOVED = {
    "swivel/cli/bench.py",
    "swivel/cli/bench_migration.py",
    "swivel/cli/sandbox.py",
    "swivel/embedded/benchmark.py",
    "swivel/embedded/overhead.py",
    "swivel/embedded/pump.py",
    "swivel/embedded/timeline.py",
    "swivel/jobs/migration/bench.py",
    "swivel/jobs/migration/overhead.py",
    "swivel/jobs/migration/process_cpu.py",
    "swivel/jobs/migration/workload.py",
}


# The benchmark harness's module names, old and new (tools/swivel_tools/bench/): a module of
# that name anywhere in the product is a benchmark that came back.
BENCH_STEMS = {
    "bench",
    "bench_migration",
    "benchmark",
    "control_overhead",
    "overhead",
    "process_cpu",
    "pump",
    "runtime_overhead",
    "timeline",
    "workload",
}


def tool_modules(names: list[str]) -> list[str]:
    """The files of `names` that are developer tools: the tools' package, any `sandbox`
    package, the modules that moved, or a module named like a benchmark module."""
    found = []
    for name in names:
        path = PurePosixPath(name)
        if (
            path.parts[0] == "swivel_tools"
            or "sandbox" in path.parts
            or name in MOVED
            or (path.suffix == ".py" and path.stem in BENCH_STEMS)
        ):
            found.append(name)
    return found


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    tree = tmp_path_factory.mktemp("source")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():  # symlinks stay links: swivel/operator -> ../operator, ...
            shutil.copytree(source, tree / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(source, tree / name)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "-q", "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("swivel-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_the_product(wheel_files: list[str]) -> None:
    for shipped in (
        "swivel/cli/main.py",
        "swivel/cli/demo.py",
        "swivel/embedded/trials.py",  # the demo's
        "swivel/operator/__init__.py",
        "swivel/controllers/__init__.py",
        "swivel/jobs/runtime/__init__.py",
        "swivel/jobs/migration/cluster.py",  # `swivel run --master local-cluster`
    ):
        assert shipped in wheel_files


def test_the_wheel_holds_no_sandbox_or_benchmark_module(wheel_files: list[str]) -> None:
    assert tool_modules(wheel_files) == []


def test_the_wheel_holds_the_examples_but_not_the_tests_probes(wheel_files: list[str]) -> None:
    """The probes delete, append to and wait for files a manifest names; an installation
    that would allow them still cannot import them from the wheel (docs/functions.md)."""
    assert "swivel/jobs/examples/labels.py" in wheel_files
    assert [name for name in wheel_files if name.startswith("swivel/jobs/testing/")] == []


def test_the_probe_finds_a_tool_module() -> None:
    assert tool_modules(
        ["swivel/sandbox/server.py", "swivel/embedded/pump.py", "swivel/x/workload.py",
         "swivel_tools/__init__.py", "swivel/cli/run.py"]
    ) == ["swivel/sandbox/server.py", "swivel/embedded/pump.py", "swivel/x/workload.py",
          "swivel_tools/__init__.py"]  # fmt: skip
