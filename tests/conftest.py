"""Shared fixtures. `spark`: ONE local SparkSession for the whole test session, created on
first use (tests that do not ask for it never start a JVM) and used by every Spark test.

`getOrCreate` hands back any session that is still active, whatever master and settings were
asked for: a session another fixture left running (the cluster tests' standalone session)
would silently run the local tests on another master (there, a failed task is retried 4
times). The fixture refuses such a session instead of adopting it.

At import it sets the tests' function allow-list (`TEST_FUNCTION_PREFIXES`, below).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

MASTER = "local[2]"  # local mode: a failed task fails its job (no retry)

# The tests' function allow-list: the default (`swivel.jobs.examples`) plus the probes in
# `swivel.jobs.testing`, which many tests name and which no installation allows by default
# (they delete, append to and wait for files a manifest names: jobs/testing/__init__.py).
# Set here, at import, before any test starts a process: drivers, agents and Spark's Python
# workers inherit this process's environment, and a standalone cluster's executors inherit
# that of the process that started it. A test of the default itself deletes the variable
# (`monkeypatch.delenv`). A list set outside the run (a developer's shell, for the CLI) is
# kept, with the probes' package added: without it the probe tests would fail with
# refusals that look like product bugs.
TEST_FUNCTION_PREFIXES = "swivel.jobs.examples,swivel.jobs.testing"


def _tests_allow_list(outside: str) -> str:
    """The tests' list, given the one set outside the run ("" when none)."""
    if not outside:
        return TEST_FUNCTION_PREFIXES
    if "swivel.jobs.testing" in [p.strip() for p in outside.split(",")]:
        return outside
    return f"{outside},swivel.jobs.testing"


os.environ["SWIVEL_FUNCTION_PREFIXES"] = _tests_allow_list(
    os.environ.get("SWIVEL_FUNCTION_PREFIXES", "").strip()
)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Python workers must run this interpreter (the venv with swivel installed), not the
    # `python3` first on PATH.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkContext._active_spark_context
    if active is not None and active.master != MASTER:
        pytest.fail(
            f"a SparkContext on {active.master} ({active.appName}) is still running: the "
            f"fixture that started it did not stop it; the local tests need {MASTER}"
        )
    session = (
        SparkSession.builder.master(MASTER)
        .appName("swivel-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.pyspark.python", sys.executable)
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .config("spark.python.worker.reuse", "true")
        # Set, not inherited: a JVM an earlier session started keeps that session's settings
        # as defaults (the cluster tests' spark.local.dir is a folder they delete).
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(autouse=True)
def _agent_environment_restored() -> Iterator[None]:
    """Give every test the agent variables the session started with.

    In-process feeds and clients write `SWIVEL_AGENT_URL`/`SWIVEL_AGENT_TOKEN` into this
    process's environment (a Python worker's view of its agent). Left there, they would be
    inherited by every later subprocess and JVM, whose workers trust them first: a later
    test's job would talk to a stopped agent, or to its own with a stale credential.
    """
    names = ("SWIVEL_AGENT_URL", "SWIVEL_AGENT_TOKEN", "SWIVEL_AGENT_DRIVER_TOKEN")
    before = {name: os.environ.get(name) for name in names}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# -- two workers (pytest-xdist: `make test` runs `pytest -n 2 --dist loadgroup`) ------------
#
# The tests that run Spark are in two work units, each run by one worker in file order: the
# standalone-cluster tests (each file starts its cluster once) and the local-Spark tests (the
# session fixture `spark` starts once per worker). The two units run side by side, one per
# worker, and everything else (unit, agent, operator, chart and sandbox tests: no Spark) is
# handed out one test at a time. History: two units from 2026-11-27 01:00 (pytest ~19-21 min
# against ~26-28 with one); one unit again from 07:00, after two of five clean-clone runs
# failed by timing under the contention (the Spark UI's REST answered after 10 s:
# `wait_for_executors` now takes a failed poll for "not yet" until its deadline;
# test_keyed_tag_order published its update before a head had kept rows: it now waits for
# one); two units again from 10:30, those causes fixed. The units are made by the scheduler
# below, from the node id: xdist 3.8's own `xdist_group` marks do nothing under pytest 9.2
# (the worker renames `item._nodeid`, which pytest 9 no longer reads for `nodeid`). Every
# test that starts Spark lives in these folders or files (the fixture `spark` is used nowhere
# else).
SPARK_UNITS = {
    # Two local-Spark files whose Spark runs in a subprocess of their own (no `spark`
    # fixture, no standalone cluster) run after the cluster tests, in their unit: since
    # 2026-11-27 16:30 the cluster unit took 10:20 alone, the local one ~24-27 min in CI.
    # (File entries first: the first matching prefix decides.)
    "tests/integration/embedded/test_bench_smoke.py": "spark-cluster",
    "tests/integration/embedded/test_run_apply_status.py": "spark-cluster",
    "tests/integration/cluster/": "spark-cluster",
    "tests/integration/runtime/": "spark-local",
    "tests/integration/embedded/": "spark-local",
    "tests/integration/sandbox_flow/": "spark-local",
    "tests/unit/cli/test_bad_input.py": "spark-local",  # one test runs `swivel run` in-process
}


def spark_scope(nodeid: str) -> str:
    """The work unit of a test: its Spark unit, or one per test otherwise."""
    for folder, unit in SPARK_UNITS.items():
        if nodeid.startswith(folder):
            return unit
    return nodeid


# optional: without xdist, or with `-p no:xdist`, pytest does not know this hook
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` (what `make test` asks for) with the Spark units; any other
    `--dist` keeps xdist's own scheduler (None: the next implementation decides)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SparkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return spark_scope(nodeid)

    return SparkUnits(config, log)
