"""A local standalone Spark cluster for the migration tests: master + workers from the pip
package's `spark-class`, one driver session with 2 executors, torn down after the module.

Module scope, not package scope: this folder has no `__init__.py`, and pytest (8+) then
finds no Package for a "package" fixture and keeps it until the end of the whole session.
The cluster and its driver session outlived this folder, and the shared `spark` fixture
(tests/conftest.py) got this session back from `getOrCreate`: the runtime tests ran on the
standalone cluster, where a failed task is retried (spark.task.maxFailures = 4).

The driver is started while one worker (2 cores) is up, so its two 1-core executors land
there and the executor target is pinned at 2; the second worker joins as spare capacity
for the scale-out test. Only one SparkContext can live in a process: when another test
folder already started a local session, these tests are skipped (run them on their own:
`pytest tests/integration/cluster -m cluster`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from swivel.jobs.migration.cluster import LocalCluster

BINS = 8


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        pytest.skip("a local SparkContext is already running in this process")
    local = LocalCluster(workers=2)
    local.start(initial_workers=1)
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def cluster_spark(cluster: LocalCluster) -> Iterator[Any]:
    try:
        session = cluster.session(
            executors=2,
            bins=BINS,
            app_name="swivel-cluster-tests",
            conf={"spark.sql.streaming.numRecentProgressUpdates": "1000"},
        )
    except BaseException:
        # The session may exist (e.g. its executors did not register in time): stop it, or
        # the next folder's getOrCreate would be handed a session on a stopped cluster.
        from pyspark import SparkContext

        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        raise
    logging.getLogger("py4j").setLevel(logging.WARNING)
    cluster.add_worker(wait=False)  # spare capacity for scale-out, registers in ~10 s
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()
