"""Watch streams: replay from a resourceVersion, bookmarks, timeoutSeconds, 410, selectors."""

from __future__ import annotations

import time
from typing import Any

GROUP, VERSION = "swivel.dev", "v1alpha1"


def _watch_jobs(kube: Any, **params: Any) -> list[dict[str, Any]]:
    response = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", watch=True, _preload_content=False, **params
    )
    assert response.status == 200
    events: list[dict[str, Any]] = kube.read_watch(response)
    return events


def _of(events: list[dict[str, Any]], name: str) -> list[tuple[str, str]]:
    return [
        (e["type"], e["object"]["metadata"]["resourceVersion"])
        for e in events
        if e["type"] != "BOOKMARK" and e["object"]["metadata"]["name"] == name
    ]


def test_watch_from_a_resource_version_replays_what_happened_since(kube: Any) -> None:
    job = kube.create_streamjob(kube.streamjob())
    name, start = job["metadata"]["name"], job["metadata"]["resourceVersion"]
    patched = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "streamjobs", name, {"spec": {"executor": {"instances": 3}}}
    )
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, kube.namespace, "streamjobs", name)

    events = _watch_jobs(kube, resource_version=start, timeout_seconds=1)
    mine = _of(events, name)
    assert [kind for kind, _ in mine] == ["MODIFIED", "DELETED"]
    assert mine[0][1] == patched["metadata"]["resourceVersion"]
    assert int(mine[1][1]) > int(mine[0][1])
    modified = next(
        e for e in events if e["type"] == "MODIFIED" and e["object"]["metadata"]["name"] == name
    )
    assert (
        modified["object"]["kind"] == "StreamJob"
        and modified["object"]["spec"]["executor"]["instances"] == 3
    )


def test_watch_without_a_version_starts_with_the_current_objects(kube: Any) -> None:
    name = kube.create_streamjob(kube.streamjob())["metadata"]["name"]
    events = _watch_jobs(kube, timeout_seconds=1)
    assert ("ADDED", kube.get_streamjob(name)["metadata"]["resourceVersion"]) in _of(events, name)


def test_bookmarks_carry_only_a_resource_version_and_the_stream_ends_on_time(kube: Any) -> None:
    """kube-apiserver sends a bookmark about 2 s before the timeout ends a watch (and the
    sandbox does the same), so a 3 s watch with bookmarks allowed must see one."""
    listed = kube.custom.list_namespaced_custom_object(GROUP, VERSION, kube.namespace, "streamjobs")
    started = time.monotonic()
    events = _watch_jobs(
        kube,
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=3,
        allow_watch_bookmarks=True,
    )
    elapsed = time.monotonic() - started
    assert 2 <= elapsed < 10
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, events
    for event in bookmarks:
        obj = event["object"]
        assert obj["kind"] == "StreamJob" and obj["apiVersion"] == f"{GROUP}/{VERSION}"
        assert int(obj["metadata"]["resourceVersion"]) >= int(listed["metadata"]["resourceVersion"])
        assert "spec" not in obj


def test_a_version_older_than_the_watch_window_is_410_gone(kube: Any) -> None:
    name = kube.unique("churn")
    kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": name}})
    for step in range(kube.history_churn):
        kube.core.patch_namespaced_config_map(name, kube.namespace, {"data": {"step": str(step)}})
    response = kube.core.list_namespaced_config_map(
        kube.namespace, watch=True, resource_version="1", timeout_seconds=5, _preload_content=False
    )
    assert response.status == 200  # the refusal travels inside the stream
    events = kube.read_watch(response)
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410
    assert status["reason"] in ("Expired", "Gone")


def test_watch_with_a_label_selector_sees_objects_enter_and_leave_it(kube: Any) -> None:
    name = kube.unique("cm")
    created = kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": name}})
    for color in ("blue", "red", "blue"):
        kube.core.patch_namespaced_config_map(
            name, kube.namespace, {"metadata": {"labels": {"color": color}}}
        )
    response = kube.core.list_namespaced_config_map(
        kube.namespace,
        watch=True,
        label_selector="color=blue",
        resource_version=created.metadata.resource_version,
        timeout_seconds=1,
        _preload_content=False,
    )
    kinds = [e["type"] for e in kube.read_watch(response) if e["type"] != "BOOKMARK"]
    assert kinds == ["ADDED", "DELETED", "ADDED"]


def test_watch_by_name_as_kubectl_wait_does(kube: Any) -> None:
    names = [kube.create_streamjob(kube.streamjob())["metadata"]["name"] for _ in range(2)]
    events = _watch_jobs(kube, field_selector=f"metadata.name={names[0]}", timeout_seconds=1)
    seen = {e["object"]["metadata"]["name"] for e in events if e["type"] != "BOOKMARK"}
    assert seen == {names[0]}
