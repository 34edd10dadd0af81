"""The one poll-until helper of the tests (tests/polling.py)."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.polling import PollTimeoutError, wait_for


def test_it_returns_the_first_truthy_value() -> None:
    values = iter([None, 0, [], {"phase": "Ready"}])
    assert wait_for(lambda: next(values), 1.0, "ready", every=0.001) == {"phase": "Ready"}


def test_a_timeout_says_what_was_awaited_and_the_last_value_seen() -> None:
    counter = itertools.count()
    started = time.monotonic()
    with pytest.raises(
        PollTimeoutError, match=r"not within 0.2s: the answer \(last value 0\)"
    ) as error:
        wait_for(lambda: next(counter) * 0, 0.2, "the answer", every=0.01)
    assert 0.2 <= time.monotonic() - started < 1.0
    assert isinstance(error.value, AssertionError)


def test_without_what_the_message_names_the_predicate_source() -> None:
    with pytest.raises(PollTimeoutError, match=r"lambda: \{\}\.get\(.nothing.\)"):
        wait_for(lambda: {}.get("nothing"), 0.05)


def test_ignored_exceptions_mean_not_yet_and_others_propagate() -> None:
    attempts = iter([ConnectionRefusedError("refused"), ConnectionRefusedError("refused"), 7])

    def connect() -> int:
        value = next(attempts)
        if isinstance(value, BaseException):
            raise value
        return value

    assert wait_for(connect, 1.0, "a connection", every=0.001, ignoring=(OSError,)) == 7
    with pytest.raises(PollTimeoutError, match="last raised ConnectionRefusedError: refused"):
        wait_for(connect_refused, 0.05, "a connection", ignoring=(OSError,))
    with pytest.raises(ZeroDivisionError):
        wait_for(lambda: 1 / 0, 1.0, "division", ignoring=(OSError,))


def connect_refused() -> None:
    raise ConnectionRefusedError("refused")
