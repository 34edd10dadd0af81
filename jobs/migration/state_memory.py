"""State memory per bin, from what Spark's state stores report about themselves.

The one load figure that still needs this reader: the workers report rows and busy time per
bin through the control plane, seconds old (Chi §5, `swivel.jobs.control.counting`), but a
bin's state -- how many rows its store holds and how many bytes -- lives in the executors'
JVMs only, where no Python worker can see it. So the driver reads it here, a few seconds of
CPU per reading, throttled (`driver.STATE_ROWS_EVERY_S`), and only for the memory policy's
state bytes and the moved-state figures.

What Spark 4.3 exposes (checked on PySpark 4.3.0, docs/migration.md "State memory"):

- per *operator*, in every query progress (`stateOperators[]`): `memoryUsedBytes` (the
  store provider's own memory figure, summed over the partitions the batch touched),
  `numRowsTotal`, and custom metrics (HDFS: `stateOnCurrentVersionSizeBytes`; RocksDB:
  `rocksdbPinnedBlocksMemoryUsage`, `rocksdbSstFileSize`, ...), all per-operator totals;
- per *partition*, only `SnapshotLastUploaded.partition_<p>_<store>` (a version number,
  not memory). Each task's value of the state SQL metric ("memory used by state") is in
  the JVM's task-end events, but the status REST API drops SQL accumulators from its task
  data, a Python listener sees only progress events, and the executors'
  `StateStoreProvider`s are not reachable from the driver (a JVM `SparkListener` could
  read them: not done).

So a bin's bytes are *attributed*, not measured: for every stateful operator, the bin's
rows in that operator's store (the `statestore` reader, the store's own rows) times that
operator's bytes per row (`memoryUsedBytes / numRowsTotal` of its own progress entry),
summed over the operators. An operator with few large rows and one with many small rows
each get their own ratio; rows of one operator are never priced at another's average.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ATTRIBUTION = "rows per bin x memoryUsedBytes/numRowsTotal of the bin's operator"


@dataclass(frozen=True)
class OperatorRows:
    """One stateful operator's rows per bin, as its store holds them."""

    operator_id: int
    name: str  # Spark's short name, as in progress `stateOperators[].operatorName`
    rows: dict[int, int] = field(default_factory=dict)  # bin -> rows


def read_state_rows(spark: Any, checkpoint: str) -> tuple[OperatorRows, ...]:
    """Rows per bin of every stateful operator of the checkpoint (Spark jobs beside the
    query: the `statestore` reader opens every bin's store).

    TransformWithState operators need one read per state variable (`stateVarName`), which
    the `state-metadata` reader lists in `operatorProperties`; their rows are summed."""
    reader = spark.read
    operators: list[OperatorRows] = []

    def count(frame: Any, into: dict[int, int]) -> None:
        for row in frame.groupBy("partition_id").count().collect():
            into[int(row[0])] = into.get(int(row[0]), 0) + int(row[1])

    metadata = reader.format("state-metadata").load(checkpoint).collect()
    for operator in metadata:
        properties = json.loads(operator["operatorProperties"] or "{}")
        variables = [v.get("stateName") for v in properties.get("stateVariables") or []]
        base = reader.format("statestore").option("operatorId", int(operator["operatorId"]))
        found = OperatorRows(int(operator["operatorId"]), str(operator["operatorName"] or ""))
        if not variables:
            count(base.option("storeName", operator["stateStoreName"]).load(checkpoint), found.rows)
        for name in variables:
            count(base.option("stateVarName", name).load(checkpoint), found.rows)
        operators.append(found)
    if not metadata:  # a checkpoint written before operator metadata existed: one store
        found = OperatorRows(0, "")
        count(reader.format("statestore").load(checkpoint), found.rows)
        operators.append(found)
    return tuple(operators)


def bytes_per_row(
    progress: Sequence[Mapping[str, Any]], operators: Sequence[OperatorRows]
) -> dict[int, float]:
    """Operator id -> its store's bytes per row, from the latest progress' entries.

    Entries are matched by operator name. Operators sharing a name (their order in the
    progress is the plan's, not necessarily the ids') share the pooled ratio of those
    entries; an operator whose name has no entry (no metadata) gets the pooled ratio of
    all entries."""
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for entry in progress:
        by_name.setdefault(str(entry.get("operatorName") or ""), []).append(entry)
    everything = _pooled(progress)
    return {
        op.operator_id: _pooled(by_name[op.name]) if op.name in by_name else everything
        for op in operators
    }


def _pooled(entries: Iterable[Mapping[str, Any]]) -> float:
    listed = list(entries)
    rows = sum(int(e.get("numRowsTotal", 0) or 0) for e in listed)
    used = sum(int(e.get("memoryUsedBytes", 0) or 0) for e in listed)
    ratio = used / rows if rows else 0.0
    return ratio if math.isfinite(ratio) else 0.0


def bin_state(
    progress: Sequence[Mapping[str, Any]], operators: Sequence[OperatorRows]
) -> dict[int, tuple[int, int]]:
    """Bin -> (rows, attributed bytes) over every operator (`ATTRIBUTION`)."""
    ratios = bytes_per_row(progress, operators)
    out: dict[int, tuple[int, int]] = {}
    for op in operators:
        for bin_id, rows in op.rows.items():
            before_rows, before_bytes = out.get(bin_id, (0, 0))
            attributed = round(rows * ratios[op.operator_id])
            out[bin_id] = (before_rows + rows, before_bytes + attributed)
    return out
