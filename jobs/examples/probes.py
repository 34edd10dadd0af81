"""Small functions the runtime's tests and the benchmark use to observe a running query:
they make batches slow on purpose, count state transitions, and fail once on demand.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.runtime.functions import emits


@emits("label string")
def labelled(df: pd.DataFrame, label: str = "v1", delay_ms: float = 0.0) -> pd.DataFrame:
    """Write `label` on every row, after sleeping `delay_ms` per Arrow batch."""
    if delay_ms:
        time.sleep(delay_ms / 1000.0)
    return df.assign(label=label)


@emits("seen long, transforms long")
def counting(
    key: Any,
    df: pd.DataFrame,
    state: dict[str, Any],
    fail_marker: str | None = None,
    delay_ms: float = 0.0,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Count rows per key; report how often a state transform has been applied to the key.

    With `fail_marker`, the first call that finds the file there deletes it and raises: the
    task fails, the query stops, and a restart replays the batch.
    """
    if delay_ms:
        time.sleep(delay_ms / 1000.0)
    if fail_marker and os.path.exists(fail_marker):
        os.remove(fail_marker)
        raise RuntimeError("probe: failing once on purpose")
    seen = int(state.get("seen", 0)) + len(df)
    transforms = int(state.get("transforms", 0))
    out = df.assign(seen=seen, transforms=transforms)
    return out, {"seen": seen, "transforms": transforms}


def mark_transformed(state: dict[str, Any]) -> dict[str, Any]:
    """A state transform whose every application is visible in the state."""
    return {**state, "transforms": int(state.get("transforms", 0)) + 1}
