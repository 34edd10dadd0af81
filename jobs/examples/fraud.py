"""The fraud-detection example (Fries Fig. 1/13): payments -> parse -> per-customer
detector (an expensive or a cheap model) -> per-merchant detector -> combiner.

The expensive model is deliberately slow - `work` rounds of a numpy recurrence per payment -
so the demo can show micro-batches growing under load and shrinking after the hot swap to
the cheap model. Both models emit the same columns, so the swap is a live function update.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.runtime.functions import emits


@emits("amount_cents long, large boolean")
def parse(df: pd.DataFrame, large_above: float = 500.0) -> pd.DataFrame:
    """Normalise the generator's payment: integer cents and a large-payment flag."""
    cents = (df["amount"] * 100).round().astype("int64")
    return df.assign(amount_cents=cents, large=df["amount"] > large_above)


def _expensive_scores(
    amounts: np.ndarray[Any, Any], mean: float, work: int
) -> np.ndarray[Any, Any]:
    # A stand-in for a heavy model: `work` rounds of a logistic recurrence per payment.
    x = np.full(len(amounts), 0.5)
    drive = np.clip(amounts / (mean + 1.0), 0.0, 10.0) / 10.0
    for _ in range(work):
        x = 3.7 * x * (1.0 - x) * 0.5 + 0.5 * drive
    return np.clip(0.3 * x + 0.7 * drive, 0.0, 1.0)


@emits("customer_score double, customer_flag boolean, customer_model string")
def customer_model(
    customer: Any,
    df: pd.DataFrame,
    state: dict[str, Any],
    *,
    model: str = "expensive",
    threshold: float = 0.8,
    work: int = 2000,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Score each payment against the customer's running mean amount."""
    count, total = int(state.get("count", 0)), float(state.get("total", 0.0))
    amounts = df["amount"].to_numpy(dtype=float)
    mean = total / count if count else float(amounts.mean()) if len(amounts) else 0.0
    if model == "expensive":
        scores = np.empty(len(amounts))
        for i, amount in enumerate(amounts):  # per payment, as a real model would be called
            scores[i] = _expensive_scores(np.array([amount]), mean, work)[0]
    else:
        scores = np.clip(amounts / (10.0 * (mean + 1.0)), 0.0, 1.0)
    state = {"count": count + len(amounts), "total": total + float(amounts.sum())}
    out = df.assign(customer_score=scores, customer_flag=scores > threshold, customer_model=model)
    return out, state


@emits("merchant_score double, merchant_flag boolean")
def merchant_model(
    merchant: Any, df: pd.DataFrame, state: dict[str, Any], window: int = 50, threshold: float = 0.3
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Flag a merchant whose recent share of customer-flagged payments is high."""
    recent = list(state.get("recent", []))
    scores = []
    for flagged in df["customer_flag"].astype(bool):
        recent = ([*recent, int(flagged)])[-window:]
        scores.append(sum(recent) / len(recent))
    score = np.asarray(scores, dtype=float)
    return df.assign(merchant_score=score, merchant_flag=score > threshold), {"recent": recent}


@emits("fraud boolean, combine_rule string")
def combine(df: pd.DataFrame, rule: str = "any") -> pd.DataFrame:
    """`any`: either detector flags the payment; `both`: both must."""
    customer, merchant = df["customer_flag"].astype(bool), df["merchant_flag"].astype(bool)
    fraud = (customer & merchant) if rule == "both" else (customer | merchant)
    return df.assign(fraud=fraud, combine_rule=rule)


def rescale_customer_state(state: dict[str, Any]) -> dict[str, Any]:
    """A state transform for a model update: forget half the history (once per customer)."""
    count = int(state.get("count", 0))
    if not count:
        return dict(state)
    keep = math.ceil(count / 2)
    return {**state, "count": keep, "total": float(state.get("total", 0.0)) * keep / count}
