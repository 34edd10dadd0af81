"""Every object the chart renders validates against the real Kubernetes OpenAPI schemas
(`kubernetes-validate`, strict: unknown fields are errors), for the oldest Kubernetes the
chart supports and the newest the package knows; the chart's CRDs are the generated ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.prerequisites import require_module

kubernetes_validate = require_module("kubernetes_validate", "pip install kubernetes-validate")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "swivel"
Objects = list[dict[str, Any]]
Render = Callable[..., Objects]

OLDEST = "1.27"  # Chart.yaml kubeVersion
VERSIONS = [OLDEST, kubernetes_validate.latest_version()]
# Not part of Kubernetes: the prometheus-operator CRD, checked field by field in test_render.
THIRD_PARTY_KINDS = {"ServiceMonitor"}
VALUES = {
    "defaults": {},
    "cluster-wide": "cluster-wide-values.yaml",
    "namespaces": "namespaces-values.yaml",
}


def test_oldest_supported_version_is_the_charts() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["kubeVersion"] == f">={OLDEST}.0-0"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("mode", VALUES)
def test_rendered_objects_are_valid_kubernetes(
    render: Render, ci_values: Callable[[str], dict[str, Any]], mode: str, version: str
) -> None:
    source = VALUES[mode]
    objects = render(ci_values(source) if isinstance(source, str) else source)
    checked = 0
    for obj in objects:
        if obj["kind"] in THIRD_PARTY_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {error.message}")
        checked += 1
    assert checked >= 5


def test_an_invalid_object_would_be_caught() -> None:
    """The validator is not a rubber stamp: a typo'd Deployment field fails strict validation."""
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"a": "b"}},
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i", "livenessprobe": {}}]},
            },
        },
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[-1], strict=True)


def test_chart_crds_are_the_generated_crds(chart: Any) -> None:
    """Helm installs exactly the files `swivel crds` generates (see tests/unit/api/test_crds)."""
    from swivel.api.crds import KINDS, rendered_files

    generated = rendered_files(ROOT)
    shipped = {Path(c["filename"]).name: c["data"] for c in chart.crds}
    assert sorted(shipped) == sorted(kind.file_name for kind in KINDS)
    for kind in KINDS:
        assert shipped[kind.file_name] == generated[ROOT / "crds" / kind.file_name], kind.name
        assert (CHART / "crds" / kind.file_name).read_text(encoding="utf-8") == (
            generated[ROOT / "crds" / kind.file_name]
        )


@pytest.mark.parametrize("version", VERSIONS)
def test_chart_crds_are_valid_kubernetes(chart: Any, version: str) -> None:
    for entry in chart.crds:
        crd = yaml.safe_load(entry["data"])
        kubernetes_validate.validate(crd, version, strict=True)
        assert crd["spec"]["group"] == "swivel.dev"
