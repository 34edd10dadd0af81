"""The keyed workload on `transformWithStateInPandas` and RocksDB: the operator Spark plans
for Swivel's own keyed operators (TransformWithStateInPySparkExec, column families), so
that prewarm and migration tests exercise the store Swivel's jobs have, not only the
HDFS-backed aggregation of `KeyedWorkload`.

Same inputs, feeding and reference as `KeyedWorkload`; the query counts rows per key in a
`ValueState` and emits the new count of each key it saw. The session must use the RocksDB
provider (transformWithState refuses the HDFS-backed one): `ROCKSDB_CONF`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from swivel_tools.bench.workload import KeyedWorkload

ROCKSDB_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
STATE_VARIABLE = "count"


def _processor() -> Any:
    """The StatefulProcessor class (built lazily: pyspark and pandas are imported by the
    caller's Spark session, not by importing this module)."""
    import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class CountPerKey(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.count = handle.getValueState(STATE_VARIABLE, "n long")

        def handleInputRows(  # noqa: N802 - Spark's name
            self,
            key: Any,
            rows: Iterator[Any],
            timerValues: Any,  # noqa: N803
        ) -> Iterator[Any]:
            seen = sum(len(frame) for frame in rows)
            total = (int(self.count.get()[0]) if self.count.exists() else 0) + seen
            self.count.update((total,))
            yield pd.DataFrame({"key": [int(key[0])], "n": [total]})

        def close(self) -> None:
            return None

    return CountPerKey()


@dataclass
class TransformWithStateWorkload(KeyedWorkload):
    """`KeyedWorkload` with the count kept by transformWithState (no payload column)."""

    payload_bytes: int = 0

    def frame(self) -> Any:
        return (
            self.source()
            .select("key")
            .groupBy("key")
            .transformWithStateInPandas(
                statefulProcessor=_processor(),
                outputStructType="key long, n long",
                outputMode="Update",
                timeMode="None",
            )
        )

    def _state(self) -> Any:
        """The state variable's rows, read back through the state data source."""
        return (
            self.spark.read.format("statestore")
            .option("stateVarName", STATE_VARIABLE)
            .load(self.checkpoint)
        )

    def state_counts(self) -> dict[int, int]:
        """Count per key as the state store holds it (the state variable, read back)."""
        rows = self._state().selectExpr("key.key AS key", "value.n AS n").collect()
        return {int(r["key"]): int(r["n"]) for r in rows}

    def state_rows_per_bin(self) -> dict[int, int]:
        rows = self._state().groupBy("partition_id").count().collect()
        return {int(r["partition_id"]): int(r["count"]) for r in rows}
