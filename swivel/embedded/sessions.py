"""The local SparkSession of embedded mode, with the JVM's chatter sent to a log file.

The JVM and the Python processes it starts (TransformWithStateInPandas prints its own
progress) inherit the driver's stdout and stderr when the session starts. `swivel run` and
`swivel demo` talk to a person in that terminal, so the session starts with both pointed at
`log_path`, and the terminal is given back to this process right after.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from swivel.api.streamjob import StreamJobSpec

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
INHERITED_AGENT_VARIABLES = ("SWIVEL_AGENT_URL", "SWIVEL_AGENT_TOKEN")


def forget_inherited_agent() -> None:
    """Drop an agent address or credential this process inherited from its parent.

    Embedded commands (`swivel run`, `demo`, `bench`) start agents of their own. Spark's
    Python workers inherit the environment the JVM started with, and they trust an agent
    address found there before the one their feed names (on Kubernetes that is the pod's
    view of the agent, `swivel.jobs.runtime.feeds.AgentFeed`). A variable left in the shell
    (or by an earlier test in the same process) would point every worker at another agent,
    or at this one with a stale credential: a 401 at each task's first read, and a failed
    query.
    """
    for name in INHERITED_AGENT_VARIABLES:
        os.environ.pop(name, None)


@contextlib.contextmanager
def _fds_redirected(log_path: Path) -> Iterator[None]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log_path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def local_session(
    job: StreamJobSpec, log_path: Path | None = None, master: str = "local[2]"
) -> Any:
    """A SparkSession for `job` on this machine (RocksDB state: TransformWithState needs it)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("swivel-embedded")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(job.dataflow.bins))
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in job.spark_conf.items():
        builder = builder.config(key, value)
    redirect = _fds_redirected(log_path) if log_path else contextlib.nullcontext()
    with redirect:
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return session
