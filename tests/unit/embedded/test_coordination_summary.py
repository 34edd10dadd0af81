"""`swivel bench coordination`'s summary: medians per mode and the ratio tuned / g = 1,
overall and per ABBA round (pure; the run itself is the lead's, on an idle machine)."""

from __future__ import annotations

from typing import Any

from swivel_tools.bench.coordination import _summary


def phase(round_index: int, mode: str, coordination_ms: float, group: int = 1) -> dict[str, Any]:
    return {
        "round": round_index,
        "mode": mode,
        "coordination_ms_per_batch": coordination_ms,
        "batch_ms": 400.0,
        "points_per_batch": 1.0 if mode == "g1" else 1 / group,
        "group_at_end": group,
    }


def test_the_ratio_is_tuned_over_g1_overall_and_per_round() -> None:
    phases = [
        phase(0, "g1", 8.0),
        phase(0, "tuned", 4.0, group=8),
        phase(1, "tuned", 5.0, group=8),
        phase(1, "g1", 10.0),
    ]
    summary = _summary(phases, rounds=2)
    assert summary["g1"]["coordination_ms_per_batch"] == 9.0
    assert summary["tuned"]["coordination_ms_per_batch"] == 4.5
    assert summary["ratio"] == 0.5
    assert summary["pair_ratios"] == [0.5, 0.5]
    assert summary["tuned"]["groups_at_end"] == [8, 8]


def test_no_ratio_when_g1_spent_nothing() -> None:
    summary = _summary([phase(0, "g1", 0.0), phase(0, "tuned", 0.0)], rounds=1)
    assert summary["ratio"] is None
    assert summary["pair_ratios"] == [None]
