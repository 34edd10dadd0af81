"""A keyed operator on Spark's state store: a `StatefulProcessor` for
`transformWithStateInPandas` that hands each key group to `operators.run_keyed_group`.

The key's state is one ValueState row (the user's dict as JSON, and the function version it
is at), read once per key group and written back once, in the bin (state partition) the key
hashes to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StringType, StructField, StructType

from swivel.jobs.runtime.operators import (
    OperatorRunner,
    decode_state,
    encode_state,
    run_keyed_group,
)

STATE_SCHEMA = StructType([StructField("state", StringType()), StructField("version", LongType())])


class KeyedOperator(StatefulProcessor):
    def __init__(self, runner: OperatorRunner) -> None:
        self.runner = runner

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("swivel", STATE_SCHEMA)

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        state = decode_state(self.state.get() if self.state.exists() else None)
        yield from run_keyed_group(self.runner, key[0], rows, state)
        self.state.update(encode_state(state))

    def close(self) -> None:
        return None
