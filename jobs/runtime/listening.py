"""A `StreamingQueryListener` whose progress events cross py4j as one JSON string.

PySpark's own wrapper (`JStreamingQueryListener`) builds each `QueryProgressEvent` from the
Java object field by field (`StreamingQueryProgress.fromJObject`): a py4j round trip per
field and per map entry, ~100 of them per event with RocksDB's custom state metrics, in the
driver's Python process and JVM alike, on the same cores as the query (docs/migration.md,
overhead). `ProgressListener` asks the JVM for the progress' JSON once and parses it
locally (`StreamingQueryProgress.fromJson`): the same event, two round trips.

Private PySpark API (`_jlistener`, `JStreamingQueryListener`), checked on PySpark 4.3 like
`swivel.jobs.spark_internals`.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.streaming.listener import (
    JStreamingQueryListener,
    QueryProgressEvent,
    StreamingQueryListener,
)


class _JsonProgress(JStreamingQueryListener):
    """The py4j callback object: PySpark's, except that progress arrives as JSON."""

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802 - Spark's name
        try:
            progress = json.loads(jevent.progress().json())
            event = QueryProgressEvent.fromJson({"progress": progress})
        except KeyError:  # the JSON omits a NaN or infinite rate: PySpark's own way then
            event = QueryProgressEvent.fromJObject(jevent)
        self.pylistener.onQueryProgress(event)


class ProgressListener(StreamingQueryListener):
    """Subclass it like `StreamingQueryListener`; `onQueryProgress` gets the same event."""

    @property
    def _jlistener(self) -> Any:
        from pyspark import SparkContext

        if not hasattr(self, "_jlistenerobj"):
            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonProgress(self))
        return self._jlistenerobj
