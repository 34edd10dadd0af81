"""Flux's rounds in time (Shah et al., ICDE 2003, §5.3): collection phase, move phase, damping.

Every Flux policy proceeds in rounds. A round collects statistics for a duration Δ, then
decides; when it moves partitions, the controller times the move phase. Flux's damping
sets the next Δ to the length of the move phase just finished -- so even poor moves take
at most half of the time -- halves Δ after a round that moved nothing, and never lets it
fall below a minimum Δmin (§5.4, Figure 8: a small Δmin makes the policy chase noise on a
skewed workload). The threshold test that decides whether a round moves at all is the
policy's (`flux.balance_round`, `flux_memory.memory_round`).

`RoundSchedule` is where a policy stands in its rounds, as data, in seconds on one clock
that the caller owns: the operator's wall clock (epoch seconds, kept in the StreamJob's
status so a restarted operator honours the damped deadline) or `swivel run --policy`'s
monotonic clock. Both run the same transitions:

    schedule = RoundSchedule.start(policy, now)   # first collection: initial Δ
    schedule.due(now)                              # the damped deadline has passed
    schedule.without_moves(now, policy)            # nothing moved: Δ/2 (>= Δmin) from now
    schedule.move_started(now)                     # moves requested: time the move phase
    schedule.move_ended(now, policy)               # Δ = its length (>= Δmin), collect anew

Where Swivel differs from Flux: statistics cover everything since the last move phase
ended (`collecting_since`), also across rounds that moved nothing. Flux's controller tells
every site when a round begins and each collection starts afresh; Swivel's driver measures
continuously and is told nothing when a round starts, so the window restarts only when
the placement changes -- the next round still comes Δ/2 later, on more samples of the
same placement.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol


class CollectionPolicy(Protocol):
    @property
    def min_collection_s(self) -> float: ...

    @property
    def initial_collection_s(self) -> float: ...


def validate_collection_policy(policy: CollectionPolicy) -> None:
    if not policy.min_collection_s > 0:
        raise ValueError("min_collection_s must be positive")
    if not policy.initial_collection_s >= policy.min_collection_s:
        raise ValueError("initial_collection_s must be at least min_collection_s")


def next_collection_s(
    last_move_phase_s: float,
    moved: bool,
    previous_collection_s: float,
    policy: CollectionPolicy,
) -> float:
    """Flux's damping: collect for as long as the last move phase took, so at most half
    of the time goes to moving state even when moves are poor; after a round that moved
    nothing, halve the previous phase to look again sooner; never below the minimum."""
    proposed = last_move_phase_s if moved else previous_collection_s / 2
    return max(policy.min_collection_s, proposed)


@dataclass(frozen=True, slots=True)
class RoundSchedule:
    """One policy's place in its rounds, on the caller's clock (seconds).

    - `collection_s`: Δ, the length of the collection phase under way.
    - `collecting_since`: when the last move phase ended (or the policy started): the
      statistics a round decides on must have been gathered since then.
    - `round_at`: the damped deadline of the next round; None while a move phase runs.
    - `moving_since`: when the move phase under way began (its moves were requested).
    - `last_move_phase_s`: the length of the last move phase, as timed.
    """

    collection_s: float
    collecting_since: float
    round_at: float | None
    moving_since: float | None = None
    last_move_phase_s: float | None = None

    @classmethod
    def start(cls, policy: CollectionPolicy, now: float) -> RoundSchedule:
        collection = max(policy.min_collection_s, policy.initial_collection_s)
        return cls(collection, now, now + collection)

    @property
    def moving(self) -> bool:
        return self.moving_since is not None

    def due(self, now: float) -> bool:
        """The collection phase is over: a round may decide now."""
        return self.round_at is not None and now >= self.round_at

    def remaining_s(self, now: float) -> float | None:
        """Seconds until the next round (0 when due); None while a move phase runs."""
        return None if self.round_at is None else max(0.0, self.round_at - now)

    def covers(self, measured_from: float) -> bool:
        """Statistics gathered from `measured_from` on describe this collection phase only
        (none of them predates the end of the last move phase)."""
        return measured_from >= self.collecting_since

    def without_moves(self, now: float, policy: CollectionPolicy) -> RoundSchedule:
        """A round that moved nothing: the next one after Δ/2 (never below Δmin)."""
        collection = next_collection_s(0.0, False, self.collection_s, policy)
        return replace(self, collection_s=collection, round_at=now + collection)

    def move_started(self, now: float) -> RoundSchedule:
        """The round's moves were requested: the move phase is timed from `now`."""
        return replace(self, moving_since=now, round_at=None)

    def move_ended(self, now: float, policy: CollectionPolicy) -> RoundSchedule:
        """The move phase is over: a new collection phase as long as it took (>= Δmin)."""
        started = self.collecting_since if self.moving_since is None else self.moving_since
        took = max(0.0, now - started)
        collection = next_collection_s(took, True, self.collection_s, policy)
        return RoundSchedule(collection, now, now + collection, None, took)

    def after_round(
        self, moved: bool, started: float, ended: float, policy: CollectionPolicy
    ) -> RoundSchedule:
        """A whole round where the caller waits for its moves (`swivel run --policy`): the
        move phase ran from `started` to `ended`, or nothing moved at `started`."""
        if not moved:
            return self.without_moves(started, policy)
        return self.move_started(started).move_ended(ended, policy)
