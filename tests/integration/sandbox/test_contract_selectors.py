"""Label selectors (equality and set-based) and field selectors on name and namespace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client


@pytest.fixture(scope="module")
def labelled(kube: Any) -> str:
    run = kube.unique("sel")
    for name, labels in (
        ("a", {"app": "fraud", "tier": "gold"}),
        ("b", {"app": "fraud", "tier": "silver"}),
        ("c", {"app": "ads"}),
        ("d", {}),
    ):
        kube.core.create_namespaced_config_map(
            kube.namespace,
            {"metadata": {"name": f"{run}-{name}", "labels": {**labels, "run": run}}},
        )
    return run


def _names(kube: Any, run: str, selector: str) -> set[str]:
    items = kube.core.list_namespaced_config_map(
        kube.namespace, label_selector=f"run={run},{selector}"
    ).items
    return {item.metadata.name.removeprefix(f"{run}-") for item in items}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=fraud", {"a", "b"}),
        ("app==fraud", {"a", "b"}),
        ("app!=fraud", {"c", "d"}),
        ("tier in (gold, bronze)", {"a"}),
        ("tier notin (gold)", {"b", "c", "d"}),
        ("tier", {"a", "b"}),
        ("!tier", {"c", "d"}),
        ("app=fraud,tier=silver", {"b"}),
    ],
)
def test_label_selectors(kube: Any, labelled: str, selector: str, expected: set[str]) -> None:
    assert _names(kube, labelled, selector) == expected


def test_field_selectors_on_name_and_namespace(kube: Any, labelled: str) -> None:
    by_name = kube.core.list_namespaced_config_map(
        kube.namespace, field_selector=f"metadata.name={labelled}-c"
    )
    assert [i.metadata.name for i in by_name.items] == [f"{labelled}-c"]
    everywhere = kube.core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={kube.namespace},metadata.name!={labelled}-c",
        label_selector=f"run={labelled}",
    )
    assert {i.metadata.name for i in everywhere.items} == {f"{labelled}-{x}" for x in "abd"}


def test_an_unsupported_field_selector_is_400(kube: Any) -> None:
    with pytest.raises(client.ApiException) as caught:
        kube.core.list_namespaced_config_map(kube.namespace, field_selector="data.color=blue")
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["reason"] == "BadRequest"


def test_pages_with_limit_and_continue(kube: Any, labelled: str) -> None:
    first = kube.core.list_namespaced_config_map(
        kube.namespace, label_selector=f"run={labelled}", limit=3
    )
    assert len(first.items) == 3 and first.metadata._continue
    rest = kube.core.list_namespaced_config_map(
        kube.namespace,
        label_selector=f"run={labelled}",
        limit=3,
        _continue=first.metadata._continue,
    )
    names = [i.metadata.name for i in first.items + rest.items]
    assert sorted(names) == [f"{labelled}-{x}" for x in "abcd"]
