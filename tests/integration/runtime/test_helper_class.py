"""The driver names JVM classes to py4j by their full name: no `jvm.org.apache...` walk,
whose every package step is a `Class.forName` that fails only after looking through all of
the class path's jars (docs/migration.md, "The driver's class look-ups"). Counted on the
real gateway (local Spark)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from swivel.jobs.jvm import jar_path
from swivel.jobs.spark_helper_jar import HelperUnavailableError, helper_class
from swivel.jobs.spark_internals import SparkInternals
from swivel.jobs.spark_prewarm import HELPER_API, HELPER_CLASS
from swivel_tools.bench.py4j_calls import Py4jCalls, thread_key

pytestmark = pytest.mark.skipif(
    jar_path() is None, reason="the helper jar is not built (python -m swivel.jobs.jvm.build)"
)


def _commands(recorded: Py4jCalls, thread: str) -> dict[str, int]:
    """Command -> how many times `thread` sent it."""
    busiest = recorded.report(top=1000)["busiest"]
    return {e["command"]: e["calls"] for e in busiest if e["thread"] == thread}


def test_the_helper_class_is_checked_once_per_thread_and_never_walked_to(spark: Any) -> None:
    internals = SparkInternals(spark)
    first = helper_class(internals, HELPER_CLASS, HELPER_API)
    with Py4jCalls() as again:
        assert helper_class(internals, HELPER_CLASS, HELPER_API) is first
    me = thread_key(threading.current_thread().name)
    assert me not in again.report()["per_thread"], again.report()  # no round trip at all

    found: list[Any] = []
    first_done, second_go, second_done = threading.Event(), threading.Event(), threading.Event()

    def other_thread() -> None:  # its own py4j thread: its class loader is checked once
        helper = helper_class(internals, HELPER_CLASS, HELPER_API)
        found.append(int(helper.api()))
        first_done.set()
        second_go.wait(60)
        found.append(helper_class(internals, HELPER_CLASS, HELPER_API) is helper)
        second_done.set()

    worker = threading.Thread(target=other_thread, name="helper-check")
    with Py4jCalls() as fresh:
        worker.start()
        assert first_done.wait(60)
    with Py4jCalls() as second:  # one recording at a time
        second_go.set()
        assert second_done.wait(60)
    worker.join(60)
    assert found == [HELPER_API, True]
    assert "helper-check" not in second.report()["per_thread"], second.report()
    commands = _commands(fresh, "helper-check")
    # the API was checked once per context (by the first call above): here only the
    # test's own `api()` call
    assert commands.get("call api") == 1, commands
    # a step of a walk is `reflect <name>`: "io", "io.swivel", ..., "java", "java.lang".
    # (PySpark's own walks may show: its exception hook converts the Java exception of
    # this thread's first, failed, look-up, before its class loader is pointed.)
    walked = {c.removeprefix("reflect ") for c in commands if c.startswith("reflect ")}
    ours = (HELPER_CLASS, "java.lang.Class", "java.lang.Thread", "java.io.File")
    steps = {name.rsplit(".", n)[0] for name in ours for n in range(1, name.count(".") + 1)}
    assert not walked & (steps | set(ours)), commands


def test_a_helper_of_another_api_is_refused_with_both_versions(spark: Any) -> None:
    internals = SparkInternals(spark)
    with pytest.raises(HelperUnavailableError, match=f"API {HELPER_API}, want 0"):
        helper_class(internals, "io.swivel.spark.StatePrewarm", 0)


def test_the_adapters_placement_calls_walk_to_no_class(spark: Any) -> None:
    """Re-pointing a bin (the boundary's work) and resolving the state root: class steps
    by full name only."""
    internals = SparkInternals(spark)
    with Py4jCalls() as recorded:
        provider = internals._provider_id(_Query(), "file:/tmp/swivel-state", 0, 3, "default")
    assert str(provider.storeId().partitionId()) == "3"
    commands = _commands(recorded, thread_key(threading.current_thread().name))
    assert commands, recorded.report()
    assert not [c for c in commands if c.startswith("reflect ")], commands


class _Query:
    """What `_provider_id` reads of a query: its run id."""

    runId = "6f1c1d9e-52a4-4a51-9a5c-0c2f9d7e8b10"  # noqa: N815 (a StreamingQuery's name)
