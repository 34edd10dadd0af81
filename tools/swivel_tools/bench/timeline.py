"""The timeline of one switch (matplotlib PNG): where the time between the request and
*in effect* goes.

One row per operator; time 0 is the request. Per micro-batch, a bar from an operator's
first to its last record (a keyed operator is a stage of its own behind a shuffle, so a bar
that starts where the one above ends is a stage boundary); the records at a target's old
version (grey) and new version (green) as ticks inside it; a marker where each worker ran
its first record under the new version (for a Fries head: its switch); vertical lines at
the agent's *armed* moment (the last worker holds the new version) and at *in effect*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swivel.embedded.effect import Effect

BATCH_COLOURS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def plot_switch(
    effect: Effect,
    operators: Sequence[str],
    path: Path,
    *,
    title: str,
    marks: Mapping[str, float | None] | None = None,
) -> Path:
    """`operators`: top to bottom (the dataflow's order); `marks`: label -> epoch seconds
    (e.g. the agent's armed moment), drawn as vertical lines beside *in effect*."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {name: i for i, name in enumerate(operators)}
    figure, axes = plt.subplots(figsize=(11, 0.7 * len(rows) + 2.2))
    batches = sorted({b for _, b in effect.spans if b is not None})
    colour = {b: BATCH_COLOURS[i % len(BATCH_COLOURS)] for i, b in enumerate(batches)}
    for (operator, batch), span in effect.spans.items():
        if operator not in rows:
            continue
        y = rows[operator]
        start, end = effect.since(span.start), effect.since(span.end)
        fill = colour.get(batch, "grey") if batch is not None else "grey"
        axes.barh(y, max(end - start, 5.0), left=start, height=0.5, alpha=0.35,
                  color=fill, edgecolor="black", linewidth=0.5)  # fmt: skip
        axes.annotate(f"b{batch} ({span.old} old, {span.new} new)" if span.old or span.new
                      else f"b{batch}", (start, y + 0.3), fontsize=6)  # fmt: skip
    for (_, operator), first in effect.worker_first_new.items():
        if operator in rows:
            axes.plot(effect.since(first), rows[operator], marker="v", color="tab:green",
                      markersize=7)  # fmt: skip
    for operator, last in effect.last_old.items():
        if operator in rows:
            axes.plot(effect.since(last), rows[operator], marker="x", color="black", markersize=7)
    lines: dict[str, tuple[float | None, str]] = {"request": (effect.requested_at, "black")}
    for label, mark in (marks or {}).items():
        lines[label] = (mark, "tab:blue")
    lines["in effect"] = (effect.in_effect_at, "tab:red")
    for label, (moment, line_colour) in lines.items():
        x = effect.ms(moment)
        if x is not None:
            axes.axvline(x, color=line_colour, linewidth=1, linestyle="--")
            axes.annotate(f"{label} {x:.0f} ms", (x, len(rows) - 0.4), rotation=90,
                          fontsize=7, va="top", color=line_colour)  # fmt: skip
    axes.set_yticks(list(rows.values()), list(rows))
    axes.invert_yaxis()
    axes.set_xlabel("ms since the request  (v: a worker's first record at the new version, "
                    "x: a target's last record at the old one)")  # fmt: skip
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def switch_marks(plan: Mapping[str, Any]) -> dict[str, float | None]:
    """The agent's moments for one plan document (epoch seconds)."""
    from swivel.embedded.trials import epoch_seconds

    timings = plan.get("timings") or {}
    return {
        "armed (agent)": epoch_seconds(timings.get("lastSwitchAt")),
        "in effect (agent)": epoch_seconds(timings.get("inEffectAt")),
    }
