"""HTTP details of the sandbox itself: unknown paths, bad bodies, warnings, any token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from swivel_tools.sandbox import SandboxThread


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with SandboxThread() as running:
        yield running.url


def _call(
    url: str, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, Any, Any]:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"null"), response.headers
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), error.headers


@pytest.mark.parametrize(
    "path", ["/openapi/v2", "/apis/nope.example.com/v1", "/api/v2", "/metrics"]
)
def test_unknown_paths_are_404_statuses(url: str, path: str) -> None:
    code, body, _ = _call(url, "GET", path)
    assert code == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"


def test_a_body_that_is_not_json_is_400(url: str) -> None:
    code, body, _ = _call(url, "POST", "/api/v1/namespaces/default/configmaps", b"{nope",
                          **{"Content-Type": "application/json"})  # fmt: skip
    assert code == 400 and body["reason"] == "BadRequest"


def test_unknown_fields_of_custom_resources_come_back_as_warnings(url: str) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.http.test"},
        "spec": {"group": "http.test", "scope": "Namespaced",
                 "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {
                         "size": {"type": "integer"}}}}}}}]},
    }  # fmt: skip
    assert _call(url, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd,
                 **{"Content-Type": "application/json"})[0] == 201  # fmt: skip
    thing = {"apiVersion": "http.test/v1", "kind": "Thing", "metadata": {"name": "t"},
             "spec": {"size": 1, "colour": "red"}}  # fmt: skip
    code, body, headers = _call(url, "POST", "/apis/http.test/v1/namespaces/default/things", thing,
                                **{"Content-Type": "application/json", "Authorization": "Bearer whatever"})  # fmt: skip
    assert code == 201 and body["spec"] == {"size": 1}
    assert headers.get_all("Warning") == ['299 - "unknown field \\"spec.colour\\""']
    code, body, _ = _call(url, "GET", "/apis/http.test/v1/things")  # all namespaces
    assert code == 200 and [i["metadata"]["name"] for i in body["items"]] == ["t"]
    code, body, _ = _call(url, "GET", "/apis/http.test/v1/things/t")  # namespaced: needs one
    assert code == 404


def test_a_namespaced_kind_cannot_be_created_without_a_namespace(url: str) -> None:
    code, _, _ = _call(url, "POST", "/api/v1/configmaps", {"metadata": {"name": "x"}},
                       **{"Content-Type": "application/json"})  # fmt: skip
    assert code == 405


def test_health_probes(url: str) -> None:
    for probe in ("/healthz", "/readyz", "/livez"):
        with urllib.request.urlopen(url + probe, timeout=5) as response:
            assert response.status == 200


def test_bad_numbers_in_the_query_are_400(url: str) -> None:
    for query in ("watch=true&timeoutSeconds=soon", "limit=many"):
        code, body, _ = _call(url, "GET", f"/api/v1/configmaps?{query}")
        assert code == 400 and body["reason"] == "BadRequest"


def test_requests_are_counted_by_client_verb_and_resource(url: str) -> None:
    def counts() -> dict[str, int]:
        code, body, _ = _call(url, "GET", "/sandbox/requests")
        assert code == 200
        found: dict[str, int] = body
        return found

    before = counts()
    agent = {"User-Agent": "probe/1.0 (tests)"}
    _call(url, "GET", "/api/v1/namespaces/default/configmaps", **agent)
    _call(url, "GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=0", **agent)
    _call(url, "GET", "/api/v1/namespaces/default/configmaps/missing", **agent)
    _call(url, "PATCH", "/api/v1/namespaces/default/pods/missing/status", {}, **agent)
    after = counts()
    grown = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert grown == {
        "probe list configmaps": 1,
        "probe watch configmaps": 1,
        "probe get configmaps": 1,
        "probe patch pods/status": 1,
    }
