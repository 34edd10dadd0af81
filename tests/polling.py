"""The one way tests wait for something to happen: poll a predicate until it returns
something truthy.

`wait_for(predicate, timeout, what)` returns the first truthy value of `predicate()`; after
`timeout` seconds it fails with an AssertionError that says what was awaited (`what`, or the
predicate's source when `what` is not given) and the last value seen (or the last exception, when `ignoring` names exceptions that mean "not yet",
such as a connection refused while a server starts). An exception the predicate raises that
is not in `ignoring` propagates at once: a predicate can fail fast (a process that exited).
No async test polls today; an async twin belongs here when one does.

Shipped code and the benchmarks do not import this (tests only).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["PollTimeoutError", "wait_for"]

T = TypeVar("T")
_NOTHING = object()


class PollTimeoutError(AssertionError):
    """What `wait_for` raises when the predicate stays falsy: an AssertionError, so pytest
    reports it as a failed assertion."""


def _describe(predicate: Callable[..., object]) -> str:
    """The predicate's source line when it is a lambda, else its qualified name."""
    name = getattr(predicate, "__qualname__", repr(predicate))
    if name.endswith("<lambda>"):
        try:
            return " ".join(inspect.getsource(predicate).split())
        except (OSError, TypeError):
            pass
    return str(name)


def _message(what: str, timeout: float, last: object) -> str:
    if last is _NOTHING:
        seen = "the predicate never returned"
    elif isinstance(last, BaseException):
        seen = f"last raised {type(last).__name__}: {last}"
    else:
        seen = f"last value {last!r}"
    text = f"not within {timeout:g}s: {what} ({seen})"
    return text if len(text) <= 2000 else text[:2000] + "...)"


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    what: str = "",
    *,
    every: float = 0.05,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """The first truthy value of `predicate()`, polled every `every` s (it is always called
    at least once, and once more at the deadline); `PollTimeoutError` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    while True:
        try:
            value = predicate()
        except ignoring as error:
            last = error
        else:
            if value:
                return value
            last = value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PollTimeoutError(_message(what or _describe(predicate), timeout, last)) from (
                last if isinstance(last, BaseException) else None
            )
        time.sleep(min(every, remaining))
