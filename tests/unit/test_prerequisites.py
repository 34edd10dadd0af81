"""A missing prerequisite skips a test on a laptop and fails it in CI (tests/prerequisites.py)."""

from __future__ import annotations

import pytest

from tests.prerequisites import CI_ENV, require, require_executable, require_module

MISSING = "no-such-tool-swivel-test"


def test_locally_a_missing_prerequisite_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CI_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"`{MISSING}` on PATH"):
        require_executable(MISSING, "the test")
    with pytest.raises(pytest.skip.Exception, match="no_such_module_swivel"):
        require_module("no_such_module_swivel", "pip install nothing")


@pytest.mark.parametrize("value", ["1", "true"])
def test_in_ci_it_fails_naming_what_is_missing(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(CI_ENV, value)
    with pytest.raises(pytest.fail.Exception, match=f"the laptop flow needs `{MISSING}` on PATH"):
        require_executable(MISSING, "the laptop flow")
    with pytest.raises(pytest.fail.Exception, match=r"no_such_module_swivel \(pip install nothing"):
        require_module("no_such_module_swivel", "pip install nothing")
    with pytest.raises(pytest.fail.Exception, match="needs Java; CI must provide it"):
        require("Java", "the flow")


def test_what_is_there_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CI_ENV, "1")
    require(None, "anything")
    assert require_executable("sh", "the test").endswith("/sh")
    assert require_module("json", "stdlib").dumps(1) == "1"
