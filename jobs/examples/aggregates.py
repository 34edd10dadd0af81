"""Blocking (aggregate) example functions: they see a micro-batch's whole input at once.

The runtime compiles an `aggregate` (or any operator marked `blocking: true`) as a shuffle
by its key and one call per partition with every row of that partition for the micro-batch
(docs/runtime.md, "Blocking operators"), so a function here sees all rows of each key of
the batch in one DataFrame. The aggregate is per micro-batch; a running aggregate across
batches is a keyed operator (its state lives in the state store).

Each output row is a new record: Fries §7.1 cuts the plan at a blocking operator, so
what it emits starts a fresh transaction. `_swivel_record` names it after the group and
its first input record; the other `_swivel_*` columns (timestamp, tags) are the last input
row's of the group.
"""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.runtime.functions import emits

RECORD = "_swivel_record"


@emits("total double, payments long")
def totals(df: pd.DataFrame, by: str = "customer", value: str = "amount") -> pd.DataFrame:
    """One row per `by` value of the batch: the sum of `value` and the number of rows."""
    if df.empty:
        return df.assign(total=pd.Series(dtype="float64"), payments=pd.Series(dtype="int64"))
    groups = df.groupby(by, sort=True)
    out = groups.tail(1).copy()
    keys = out[by]
    sums = groups[value].sum()
    sizes = groups.size()
    first = groups[RECORD].first()
    out["total"] = keys.map(sums).to_numpy(dtype="float64")
    out["payments"] = keys.map(sizes).to_numpy(dtype="int64")
    out[RECORD] = ("total(" + keys.map(first).astype(str) + ")").to_numpy()
    return out.reset_index(drop=True)
