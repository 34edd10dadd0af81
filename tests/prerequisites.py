"""What a test needs from the machine (Java, kubectl, a Python package of `.[dev]`): skipped
without it on a laptop, failed without it in CI.

CI (`.ci/run`, which runs `make test`) sets `SWIVEL_CI=1`: there, a missing prerequisite is
a broken environment, and a test that skipped would hide it, so `require*` fail the test
with a message naming what is missing. Without `SWIVEL_CI` they skip, as `pytest.skip` and
`pytest.importorskip` did. At module level (collection), a failure is a collection error
that names the module.

Deliberate skips are not prerequisites and do not use this: the e2e suite without a cluster
(`SWIVEL_E2E_KUBECONFIG`), platform-only tests, the cluster tests after a local session.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType

import pytest

__all__ = ["CI_ENV", "in_ci", "require", "require_executable", "require_module"]

CI_ENV = "SWIVEL_CI"


def in_ci() -> bool:
    """Whether `SWIVEL_CI` is set (to anything but empty, 0 or false)."""
    return os.environ.get(CI_ENV, "").strip().lower() not in ("", "0", "false", "no")


def require(missing: str | None, needed_by: str) -> None:
    """Nothing when `missing` is None; else skip (locally) or fail (in CI) saying that
    `needed_by` needs `missing`."""
    if missing is None:
        return
    message = f"{needed_by} needs {missing}"
    if in_ci():
        pytest.fail(f"{message}; CI must provide it ({CI_ENV} is set)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require_executable(name: str, needed_by: str) -> str:
    """The path of `name` on PATH (skip locally, fail in CI, without it)."""
    path = shutil.which(name)
    require(None if path else f"`{name}` on PATH", needed_by)
    assert path is not None
    return path


def require_module(name: str, install: str) -> ModuleType:
    """The module `name` (skip locally, fail in CI, when it cannot be imported); `install`
    says how to get it (e.g. "pip install lupa")."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        require(f"the Python module {name} ({install}; {error})", "this test")
        raise  # not reached: require skipped or failed
