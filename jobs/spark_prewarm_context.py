"""What a prewarm helper call of one query starts from (jobs/spark_prewarm.py): the query's
session state and a Hadoop conf of it, its state root and run id, and each store's schemas;
and the session settings under which no bin may be prewarmed.

Resolved per call, because a session's settings can change between calls (the tests'
failure switches are such settings); a store's schemas do not change while its checkpoint
lives, so they are read once per (state root, operator, store).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from swivel.jobs.spark_internals import SparkInternals

# How transformWithState(InPandas) opens its store (TransformWithStateInPySparkExec, 4.3):
# one binary key and value column; each state variable is a column family of the store.
TWS_KEY_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [{"name": "key", "type": "binary", "nullable": True, "metadata": {}}],
    }
)
TWS_VALUE_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [{"name": "value", "type": "binary", "nullable": True, "metadata": {}}],
    }
)

# Settings under which a prewarmed copy cannot be handed over safely (docs/migration.md).
REFUSING_SETTINGS: dict[str, tuple[Callable[[str], bool], str]] = {
    "spark.sql.streaming.stateStore.checkpointFormatVersion": (
        lambda v: v not in ("", "1"),
        "checkpoint format v2 writes each version's unique id after foreachBatch returns, "
        "so the version to switch at is not known at the boundary",
    ),
    "spark.sql.streaming.stateStore.unloadOnCommit": (
        lambda v: v.lower() == "true",
        "unloadOnCommit unloads every store after its commit, prewarmed copies included",
    ),
    "spark.sql.streaming.stateStore.encodingFormat": (
        lambda v: v.lower() == "avro",
        "Avro state encoding needs the operator's schema broadcast, which a prewarm does not have",
    ),
}


def settings_refusal(internals: SparkInternals, query: Any) -> str | None:
    """Why no bin of `query` may be prewarmed under its session's settings, or None."""
    for key, (refuses, reason) in REFUSING_SETTINGS.items():
        value = internals.query_setting(query, key)
        if refuses(value):
            return f"{key}={value}: {reason}"
    return None


@dataclass(frozen=True)
class JobContext:
    """What a helper job of one query is started with, resolved once per call."""

    helper: Any  # the StatePrewarm JVM class
    state: Any  # the query's SessionState: its SQL conf carries the state-store settings
    hadoop_conf: Any
    root: str  # the query's state checkpoint root
    run_id: str


def job_context(internals: SparkInternals, helper: Any, query: Any) -> JobContext:
    """What every helper call of `query` is started with (its session's state, a fresh
    Hadoop conf, the state root and run id)."""
    state = internals.query_session(query).sessionState()
    return JobContext(
        helper=helper,
        state=state,
        hadoop_conf=state.newHadoopConf(),
        root=internals.state_root(query),
        run_id=str(query.runId),
    )


class StoreSchemas:
    """Each store's key and value schema (JSON) and whether it has column families, read
    once per (state root, operator, store)."""

    def __init__(self, internals: SparkInternals) -> None:
        self.internals = internals
        self._read: dict[tuple[str, int, str], tuple[str, str, bool]] = {}

    def of(self, job: JobContext, operator: int, store: str) -> tuple[str, str, bool]:
        """A transformWithState operator keeps its schemas in `<op>/_stateSchema` (v3) and
        opens its store with constant binary ones; the others have
        `<op>/<p>/_metadata/schema`."""
        key = (job.root, operator, store)
        if key not in self._read:
            if self._has_column_families(job.hadoop_conf, job.root, operator):
                self._read[key] = (TWS_KEY_SCHEMA, TWS_VALUE_SCHEMA, True)
            else:
                found = job.helper.readSchema(job.hadoop_conf, job.root, operator, store)
                self._read[key] = (str(found[0]), str(found[1]), False)
        return self._read[key]

    def _has_column_families(self, hadoop_conf: Any, root: str, operator: int) -> bool:
        path = self.internals.java_class("org.apache.hadoop.fs.Path")(
            f"{root}/{operator}/_stateSchema"
        )
        return bool(path.getFileSystem(hadoop_conf).exists(path))
