"""Flux §6.1's memory-constrained policy for Swivel's bins.

When state, not CPU, is the scarce resource, Flux stops looking at idle time (a site
spilling to disk is never idle) and balances excess memory instead. Swivel's version is
stricter: a Spark executor over its memory limit is killed rather than slowed, so this
policy only relieves executors over their limit and never fills a receiver past it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from swivel.controllers.flux_phases import validate_collection_policy
from swivel.controllers.flux_rounds import (
    BinLoad,
    BinRejection,
    ExecutorLoad,
    PairDecision,
    PairOutcome,
    RoundDecision,
    Site,
    decide_round,
    index_sites,
)


@dataclass(frozen=True, slots=True)
class MemoryPolicy:
    """Flux §6.1's memory-constrained policy, as fractions of each executor's limit.

    - `shed_above_fill` 1.0: an executor holding more than this fraction sheds bins.
    - `receive_up_to_fill` 0.9: a receiver may be filled to this fraction, never more; the
      headroom absorbs state growth before the next round, and keeping it below
      `shed_above_fill` stops a receiver from becoming next round's donor.
    """

    shed_above_fill: float = 1.0
    receive_up_to_fill: float = 0.9
    min_collection_s: float = 30.0
    initial_collection_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.receive_up_to_fill <= self.shed_above_fill <= 1:
            raise ValueError("need 0 < receive_up_to_fill <= shed_above_fill <= 1")
        validate_collection_policy(self)


def memory_round(
    executors: Iterable[ExecutorLoad],
    bins: Iterable[BinLoad],
    assignment: Mapping[int, str],
    policy: MemoryPolicy | None = None,
) -> RoundDecision:
    """One round of Flux §6.1's memory-constrained policy: pair the executor furthest over
    its limit with the one with most room, the next with the next, and move one bin per
    pair. Unlike Flux, which lets a receiver exhaust its memory to even out spilling,
    Swivel never fills a receiver past `receive_up_to_fill`: a Spark executor over its
    limit is killed, not slowed. Utilisation is ignored here (as Flux drops the receiver's
    utilisation test); run this round first and balance load when it moves nothing."""
    policy = policy or MemoryPolicy()
    sites = index_sites(executors, bins, assignment)
    overflow = {s.name: _overflow_bytes(s, policy) for s in sites.values()}
    room = {s.name: _room_bytes(s, policy) for s in sites.values()}
    donors = _ranked_by(overflow, sites)
    receivers = _ranked_by(room, sites)
    pairs: list[PairDecision] = []
    for index, donor in enumerate(donors):
        if index >= len(receivers):
            pairs.append(PairDecision(donor.name, None, PairOutcome.NO_RECEIVER_WITH_ROOM))
            continue
        receiver = receivers[index]
        pairs.append(_relieve_pair(donor, receiver, overflow[donor.name], room[receiver.name]))
    return decide_round(sites, assignment, pairs)


def _ranked_by(bytes_by_site: Mapping[str, int], sites: Mapping[str, Site]) -> list[Site]:
    """Sites with a positive figure, largest first (Flux sorts by excess capacity)."""
    positive = [sites[name] for name, value in bytes_by_site.items() if value > 0]
    return sorted(positive, key=lambda s: (-bytes_by_site[s.name], s.name))


def _overflow_bytes(site: Site, policy: MemoryPolicy) -> int:
    limit = site.load.memory_limit_bytes
    return 0 if limit is None else site.load.memory_bytes - int(limit * policy.shed_above_fill)


def _room_bytes(site: Site, policy: MemoryPolicy) -> int:
    limit = site.load.memory_limit_bytes
    return 0 if limit is None else int(limit * policy.receive_up_to_fill) - site.load.memory_bytes


def _relieve_pair(donor: Site, receiver: Site, overflow: int, room: int) -> PairDecision:
    """If one bin that fits the receiver clears the donor's overflow, move the smallest
    such bin (fewest bytes for a finished job); otherwise move the largest bin that fits
    (most relief per move, so the fewest rounds). Ties: fewer records, then lower id."""
    fitting: list[BinLoad] = []
    rejected: list[tuple[int, BinRejection]] = []
    for bin_load in donor.bins:
        if bin_load.state_bytes == 0:
            rejected.append((bin_load.bin, BinRejection.FREES_NO_MEMORY))
        elif bin_load.state_bytes > room:
            rejected.append((bin_load.bin, BinRejection.EXCEEDS_RECEIVER_MEMORY))
        else:
            fitting.append(bin_load)
    if not fitting:
        return PairDecision(
            donor.name, receiver.name, PairOutcome.NO_SUITABLE_BIN, None, tuple(rejected)
        )
    sufficient = [b for b in fitting if b.state_bytes >= overflow]
    if sufficient:
        chosen = min(sufficient, key=lambda b: (b.state_bytes, b.records, b.bin))
    else:
        chosen = min(fitting, key=lambda b: (-b.state_bytes, b.records, b.bin))
    return PairDecision(donor.name, receiver.name, PairOutcome.MOVED, chosen.bin, tuple(rejected))
