"""A Java list a helper returns is read by index (`java_list`), not iterated: py4j ends an
iteration on the JVM's NoSuchElementException, and PySpark's exception hook then asks the
JVM which of its exception classes that is, dozens of round trips per loop (docs/migration.md,
"Where the driver's py4j threads went"). Counted on the real gateway (local Spark)."""

from __future__ import annotations

import threading
from typing import Any

from swivel.jobs.spark_helper_jar import java_list
from swivel_tools.bench.py4j_calls import Py4jCalls


def test_a_java_list_is_read_in_one_round_trip_per_element(spark: Any) -> None:
    values = spark._jvm.java.util.ArrayList()
    for value in ("a", "b"):
        values.add(value)
    with Py4jCalls() as read:
        assert [str(v) for v in java_list(values)] == ["a", "b"]
    with Py4jCalls() as iterated:
        assert [str(v) for v in values] == ["a", "b"]
    # this thread's: py4j's finalizer may release an earlier test's proxies meanwhile
    me = threading.current_thread().name
    assert read.report()["per_thread"][me]["calls"] == 3  # size, get(0), get(1)
    # what the iteration cost instead: its ending exception, converted
    assert iterated.report()["per_thread"][me]["calls"] > 20, iterated.report()
    assert java_list(spark._jvm.java.util.ArrayList()) == []
