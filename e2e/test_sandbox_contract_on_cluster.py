"""The sandbox's contract tests, run against the configured cluster to keep the sandbox honest.

The tests live in tests/integration/sandbox/ and run against the in-memory sandbox by
default; their `kube` fixture switches to the cluster when `SWIVEL_E2E_KUBECONFIG` is set,
which is always the case here (e2e/conftest.py skips this folder otherwise). This module
only loads them: the conftest that provides `kube`, then every `test_contract_*.py`, whose
tests and module fixtures are re-exported under names prefixed by their module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SANDBOX_TESTS = Path(__file__).resolve().parents[1] / "tests" / "integration" / "sandbox"


def _load(path: Path) -> ModuleType:
    name = f"swivel_sandbox_contract_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _is_fixture(value: object) -> bool:
    return hasattr(value, "_fixture_function_marker")


kube = _load(SANDBOX_TESTS / "conftest.py").kube

for _path in sorted(SANDBOX_TESTS.glob("test_contract_*.py")):
    _module = _load(_path)
    _topic = _path.stem.removeprefix("test_contract_")
    for _name, _value in vars(_module).items():
        if _name.startswith("test_") and callable(_value):
            globals()[f"test_{_topic}__{_name.removeprefix('test_')}"] = _value
        elif _is_fixture(_value) and _name != "kube":
            globals()[_name] = _value
