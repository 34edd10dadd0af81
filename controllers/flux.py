"""Flux's repartitioning policies (Shah et al., ICDE 2003, §5.3 and §6.1) for Swivel's bins.

Flux rebalances a partitioned operator in *rounds*: a statistics-collection phase (each
site reports how long it sat idle and how many tuples each of its partitions processed)
and a move phase (the controller moves a few partitions and times how long that took).
Swivel's bins are Flux's mini-partitions and its executors are Flux's sites; busy time
comes from the workers' acknowledgements, records and state bytes per bin from the state
store reader.

Everything here is pure: a round's statistics go in, a `RoundDecision` comes out -- the
moves, the target assignment (bin -> executor) that the migration planner turns into
steps, and for every pair of executors the reason it did or did not move a bin -- so a
round can be printed, diffed and tested without a cluster. When a round happens is
`RoundSchedule` (`flux_phases`): the collection phase since the last move phase ended,
the timed move phase and Flux's damping, on a clock the caller owns; the operator's
policy timer and `swivel run --policy` both run it.

Import everything from here. The round's data lives in `flux_rounds`, its timing in
`flux_phases`, the memory-constrained policy in `flux_memory`, the load-balancing policy
in this module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from swivel.controllers.flux_memory import MemoryPolicy, memory_round
from swivel.controllers.flux_phases import (
    CollectionPolicy,
    RoundSchedule,
    next_collection_s,
    validate_collection_policy,
)
from swivel.controllers.flux_rounds import (
    BinLoad,
    BinMove,
    BinRejection,
    ExecutorLoad,
    FluxInputError,
    PairDecision,
    PairOutcome,
    RoundDecision,
    Site,
    decide_round,
    index_sites,
)

__all__ = [
    "BinLoad",
    "BinMove",
    "BinRejection",
    "CollectionPolicy",
    "ExecutorLoad",
    "FluxInputError",
    "LoadBalancePolicy",
    "MemoryPolicy",
    "PairDecision",
    "PairOutcome",
    "RoundDecision",
    "RoundSchedule",
    "balance_round",
    "memory_round",
    "next_collection_s",
]


@dataclass(frozen=True, slots=True)
class LoadBalancePolicy:
    """Flux §5.3's parameters (the paper's values were lost with its symbols).

    - `imbalance_threshold` 1.25: move only when the donor is more than 25 % busier than
      its receiver. Busy fractions measured over a few micro-batches wobble by ~10 % (GC,
      batch-size variance); a move costs a state reload, so it must buy more than noise.
    - `receiver_max_utilisation` 0.85: a receiver busier than this (now, or after the
      move) is left alone -- near saturation a Spark executor falls behind its trigger
      and the next round would only move the bin back.
    - `min_collection_s` 30: a floor of several micro-batches, because Flux §5.4 shows a
      tiny floor makes the policy chase noise on skewed keys (Figure 8).
    - `initial_collection_s` 60: the first phase, before any move phase was timed.
    """

    imbalance_threshold: float = 1.25
    receiver_max_utilisation: float = 0.85
    min_collection_s: float = 30.0
    initial_collection_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.imbalance_threshold >= 1:
            raise ValueError("imbalance_threshold is a ratio donor/receiver and must be >= 1")
        if not 0 < self.receiver_max_utilisation <= 1:
            raise ValueError("receiver_max_utilisation must be in (0, 1]")
        validate_collection_policy(self)


def balance_round(
    executors: Iterable[ExecutorLoad],
    bins: Iterable[BinLoad],
    current_assignment: Mapping[int, str],
    policy: LoadBalancePolicy | None = None,
) -> RoundDecision:
    """One Flux load-balancing round: sort executors by utilisation, pair the busiest with
    the idlest working inwards, and let each pair that passes the threshold test move at
    most one bin. Each executor is in at most one pair, so at most n/2 bins move.

    Flux stops at the first pair failing the threshold test; here every pair is tested so
    each gets its own reason. The outcome is the same: inner pairs have a less busy donor
    and a busier receiver, so once an outer pair fails, every inner one fails too."""
    policy = policy or LoadBalancePolicy()
    sites = index_sites(executors, bins, current_assignment)
    ranked = sorted(sites.values(), key=lambda s: (-s.utilisation, s.name))
    average = math.fsum(s.utilisation for s in ranked) / len(ranked) if ranked else 0.0
    pairs: list[PairDecision] = []
    for donor, receiver in zip(ranked[: len(ranked) // 2], reversed(ranked), strict=False):
        failed = _threshold_test(donor, receiver, average, policy)
        if failed is not None:
            pairs.append(PairDecision(donor.name, receiver.name, failed))
        else:
            pairs.append(_balance_pair(donor, receiver, policy))
    return decide_round(sites, current_assignment, pairs)


def _threshold_test(
    donor: Site, receiver: Site, average: float, policy: LoadBalancePolicy
) -> PairOutcome | None:
    if donor.utilisation <= average:
        return PairOutcome.DONOR_NOT_ABOVE_AVERAGE
    if receiver.utilisation > policy.receiver_max_utilisation:
        return PairOutcome.RECEIVER_TOO_BUSY
    ratio = donor.utilisation / receiver.utilisation if receiver.utilisation else math.inf
    if ratio <= policy.imbalance_threshold:
        return PairOutcome.BELOW_IMBALANCE_THRESHOLD
    return None


def _balance_pair(donor: Site, receiver: Site, policy: LoadBalancePolicy) -> PairDecision:
    """Move the bin that best evens the pair. Flux takes the first bin, largest first,
    that narrows the gap; that bin may overshoot to almost the same gap the other way,
    paying for a move that buys nothing and inviting a move back next round. Taking the
    bin that leaves the smallest gap gets the most balance per move (Flux's own aim);
    ties go to the bin with less state (a cheaper move), then the lower bin id."""
    gap = donor.utilisation - receiver.utilisation
    rejected: list[tuple[int, BinRejection]] = []
    best: tuple[float, int, int] | None = None
    for bin_load in donor.bins:
        share = donor.share(bin_load)
        rejection = _load_rejection(bin_load, share, gap, receiver, policy)
        if rejection is not None:
            rejected.append((bin_load.bin, rejection))
            continue
        key = (abs(gap - 2 * share), bin_load.state_bytes, bin_load.bin)
        best = key if best is None or key < best else best
    if best is None:
        return PairDecision(
            donor.name, receiver.name, PairOutcome.NO_SUITABLE_BIN, None, tuple(rejected)
        )
    return PairDecision(donor.name, receiver.name, PairOutcome.MOVED, best[2], tuple(rejected))


def _load_rejection(
    bin_load: BinLoad, share: float, gap: float, receiver: Site, policy: LoadBalancePolicy
) -> BinRejection | None:
    if not abs(gap - 2 * share) < abs(gap):
        return BinRejection.DOES_NOT_REDUCE_IMBALANCE
    if receiver.utilisation + share > policy.receiver_max_utilisation:
        return BinRejection.OVERFILLS_RECEIVER
    # Balancing load must not cause the memory problem the other policy exists to solve.
    limit = receiver.load.memory_limit_bytes
    if limit is not None and receiver.load.memory_bytes + bin_load.state_bytes > limit:
        return BinRejection.EXCEEDS_RECEIVER_MEMORY
    return None
