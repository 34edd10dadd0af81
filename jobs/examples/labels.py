"""A stateless example that writes a label on every row: `examples/diamond` labels its two
branches with it, and a Reconfiguration that changes `label` shows which configuration
produced each row. No side effects beyond an optional sleep."""

from __future__ import annotations

import time

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.runtime.functions import emits


@emits("label string")
def labelled(df: pd.DataFrame, label: str = "v1", delay_ms: float = 0.0) -> pd.DataFrame:
    """Write `label` on every row, after sleeping `delay_ms` per Arrow batch."""
    if delay_ms:
        time.sleep(delay_ms / 1000.0)
    return df.assign(label=label)
