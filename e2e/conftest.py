"""Skip the whole e2e suite unless a real cluster is configured."""

from __future__ import annotations

import os

import pytest

KUBECONFIG_ENV = "SWIVEL_E2E_KUBECONFIG"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(KUBECONFIG_ENV):
        return
    skip = pytest.mark.skip(reason=f"no cluster: set {KUBECONFIG_ENV} to run the e2e suite")
    for item in items:
        item.add_marker(skip)
