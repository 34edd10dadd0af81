"""A migration's hand-overs read off Chi's meta-topology G', in the order Spark can use.

The meta-topology G' (`metatopology.py`) has a state edge v -> w for the bins that
executor v hands to executor w. Chi's Theorem 1 (§4.2.1) orders a hand-over by instances:
an instance completes only after every instance it takes state from, so in a chain
A -> B -> C, B passes state on only once it has taken A's. That order exists because in
Chi the state travels from the old instance to the new one. **In Spark it does not:** a
plan moves each bin at most once, and the taker reads it from the durable checkpoint, not
from the giver, so no hand-over waits for another and Theorem 1's order protects nothing.
Applied anyway (until 2026-11-26, as waves of G'), it cost balance: for a swap A <-> B
acyclic invariance splits B, so every bin of B went to A before A handed any to B, and
halfway through a 16 + 16 swap one executor held 47 of 64 bins (docs/migration.md,
"Measured (2026-11-26)").

So the steps take the moving state edges of G' together: *several givers in parallel within a
step*, as many bins per step as the strategy allows (all-at-once: every bin in one step;
fluid: one; batched: `batch_size`, Megaphone's non-interfering groups). The order is
*least-loaded taker first*: each next hand-over goes to the taker holding the fewest bins
at that point (ties: from the giver holding the most), so the emptiest executors absorb
state first, a giver's load falls as it gives, and a swap alternates its two directions.

What Spark does with that order: nothing is copied between executors and a bin switches
only at a micro-batch boundary, for every stateful operator at once (there is no
per-operator barrier), so a step is one boundary and its hand-overs are re-pointed in the
listed order within it; all-at-once keeps its one step (one global barrier) and only lists
the order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HandOver:
    """`giver` hands `bins` (in this order) to `taker` in one step."""

    giver: str
    taker: str
    bins: tuple[int, ...]

    def to_dict(self) -> dict[str, object]:
        return {"from": self.giver, "to": self.taker, "bins": list(self.bins)}


Loads = Counter[str]  # bins per executor, as the hand-overs so far leave them


def hand_overs_in_order(
    edges: Sequence[tuple[str, str, Sequence[int]]], loads: Loads
) -> list[HandOver]:
    """`edges` (giver, taker, bins) as hand-overs, least-loaded taker first; `loads` is
    updated as each one is handed over."""
    remaining = {(giver, taker): tuple(sorted(bins)) for giver, taker, bins in edges if bins}
    ordered: list[HandOver] = []
    while remaining:
        giver, taker = min(remaining, key=_preference(loads))
        bins = remaining.pop((giver, taker))
        ordered.append(HandOver(giver, taker, bins))
        loads[giver] -= len(bins)
        loads[taker] += len(bins)
    return ordered


def one_at_a_time(edges: Sequence[tuple[str, str, Sequence[int]]], loads: Loads) -> list[HandOver]:
    """Single-bin hand-overs, least-loaded taker first at every bin (fluid's order)."""
    remaining = {(giver, taker): sorted(bins) for giver, taker, bins in edges if bins}
    ordered: list[HandOver] = []
    while remaining:
        pair = min(remaining, key=_preference(loads))
        bins = remaining[pair]
        ordered.append(HandOver(pair[0], pair[1], (bins.pop(0),)))
        loads[pair[0]] -= 1
        loads[pair[1]] += 1
        if not bins:
            del remaining[pair]
    return ordered


def order_groups(
    groups: Sequence[Sequence[tuple[int, str, str]]], loads: Loads
) -> list[list[HandOver]]:
    """Steps (groups of (bin, giver, taker) chosen by the strategy) in hand-over order:
    next the group whose most loaded taker holds the fewest bins (ties: the larger group,
    then the lowest bin), and inside it least-loaded taker first."""
    pending = [list(group) for group in groups if group]
    steps: list[list[HandOver]] = []
    while pending:
        best = min(
            range(len(pending)),
            key=lambda i: (
                max(loads[t] for _, _, t in pending[i]),
                -len(pending[i]),
                min(pending[i]),
            ),
        )
        group = pending.pop(best)
        steps.append(hand_overs_in_order(_edges_of(group), loads))
    return steps


def initial_loads(current: Mapping[int, str]) -> Loads:
    return Counter(current.values())


def _edges_of(moves: Sequence[tuple[int, str, str]]) -> list[tuple[str, str, list[int]]]:
    pairs: dict[tuple[str, str], list[int]] = {}
    for bin_id, giver, taker in moves:
        pairs.setdefault((giver, taker), []).append(bin_id)
    return [(giver, taker, bins) for (giver, taker), bins in pairs.items()]


def _preference(loads: Loads) -> Callable[[tuple[str, str]], tuple[int, int, str, str]]:
    def key(pair: tuple[str, str]) -> tuple[int, int, str, str]:
        giver, taker = pair
        return (loads[taker], -loads[giver], giver, taker)

    return key
