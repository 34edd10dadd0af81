"""The words a dataflow is written in that the planners reason with too: how an edge routes
tuples, and how many (tuple, receiving operator) pairs an operator may yield per input.

They belong to the API (a user writes them in a StreamJob) and sit below everything else,
so the models and the planners share one definition without the models importing a planner.
Standard library only.
"""

from __future__ import annotations

import enum

__all__ = ["Cardinality", "Partitioning"]


class Partitioning(enum.StrEnum):
    """How the tuples on an edge are routed between the workers of its two operators."""

    FORWARD = "forward"  # worker i sends only to worker i (equal parallelism)
    HASH = "hash"  # every upstream worker may send to every downstream worker, by key
    BROADCAST = "broadcast"  # every upstream worker sends every tuple to every downstream worker


class Cardinality(enum.StrEnum):
    """Fries Def. 5.1/5.2: how many (tuple, receiving operator) pairs one input may yield."""

    ONE_TO_ONE = "one-to-one"
    ONE_TO_MANY = "one-to-many"
