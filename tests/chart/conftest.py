"""Chart tests: Helm's own Go SDK (through `helm-python-sdk`, no helm binary) renders and lints
charts/swivel; the rendered objects are then checked as data.

Fixtures: `chart` (the loaded chart), `render(values)` (the parsed objects of one offline
render, like `helm template swivel charts/swivel -n swivel-system`) and `ci_values(name)` (a
values file of charts/swivel/ci, the chart-testing convention).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.prerequisites import require_module

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "swivel"
RELEASE, NAMESPACE = "swivel", "swivel-system"

Objects = list[dict[str, Any]]
Render = Callable[..., Objects]


@pytest.fixture(scope="session")
def chart() -> Iterator[Any]:
    helm = require_module("helm_python", "pip install helm-python-sdk")
    with helm.Chart.load(CHART) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def render(chart: Any) -> Render:
    def _render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> Objects:
        manifests: dict[str, str] = chart.render(
            values, name=RELEASE, namespace=namespace, is_install=True
        )
        objects: Objects = []
        for path, text in sorted(manifests.items()):
            if path.endswith("NOTES.txt"):
                continue
            objects += [doc for doc in yaml.safe_load_all(text) if doc]
        return objects

    return _render


@pytest.fixture(scope="session")
def ci_values() -> Callable[[str], dict[str, Any]]:
    def _load(name: str) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load((CHART / "ci" / name).read_text(encoding="utf-8"))
        return loaded

    return _load
