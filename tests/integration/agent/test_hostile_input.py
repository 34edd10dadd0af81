"""A hostile but fair caller against a real agent: every bad input is a 4xx naming its field
(`{"errors": [{"field", "reason"}]}`), never a 5xx, and nothing is committed; and a job's
credential cannot act as the operator (issue 11, docs/agent.md "Credentials")."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
import yaml

from swivel.jobs.agent.app import OPENAPI_PATH, ROUTES

from .conftest import DRIVER_TOKEN, TOKEN, WORKER_TOKEN, register

DEEP = b"[" * 100_000 + b"]" * 100_000
BODY_ROUTES = (
    "/v1/plans",
    "/v1/control/acks",
    "/v1/driver/progress",
    "/v1/driver/migration",
    "/v1/driver/loads",
    "/v1/driver/coordination",
    "/v1/driver/prewarm-check",
    "/v1/driver/actions/done",
)
HOSTILE_BODIES: tuple[tuple[str, bytes], ...] = (
    ("nested 100 000 deep", DEEP),
    ("objects nested 100 000 deep", b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
    ("NaN", b'{"batchId": NaN, "event": "started"}'),
    ("Infinity", b'[{"pid": 1, "operator": "combine", "version": Infinity}]'),
    ("a float beyond double", b'{"intervalSeconds": 1e400}'),
    ("an integer beyond 64 bits", b'{"batchId": 1000000000000000000000000000000, "event": "x"}'),
    ("5 000 digits", b'{"seq": ' + b"9" * 5000 + b"}"),
    ("not UTF-8", b'{"name": "\xff\xfe"}'),
    ("not JSON", b"{'name': 'x'}"),
    ("empty", b""),
    ("a bare string", b'"hello"'),
    ("null", b"null"),
)


def _is_clean_refusal(status: int, body: Any) -> bool:
    return (
        400 <= status < 500
        and isinstance(body, dict)
        and bool(body.get("errors"))
        and all(set(e) >= {"field", "reason"} for e in body["errors"])
    )


@pytest.mark.parametrize("route", BODY_ROUTES)
@pytest.mark.parametrize(("what", "raw"), HOSTILE_BODIES, ids=[w for w, _ in HOSTILE_BODIES])
def test_hostile_bodies_are_clean_refusals(
    agent: Any, call: Any, route: str, what: str, raw: bytes
) -> None:
    status, body, _ = call(agent.url + route, "POST", raw=raw)
    assert _is_clean_refusal(status, body), (what, status, body)
    config = call(agent.url + "/v1/config")[1]
    assert (config["configVersion"], config["activePlan"]) == (1, None)  # nothing committed


def test_an_oversized_body_is_413_before_it_is_read(agent: Any, call: Any) -> None:
    raw = b'{"name": "' + b"x" * (5 * 2**20) + b'"}'
    status, body, _ = call(agent.url + "/v1/plans", "POST", raw=raw)
    assert status == 413 and body["errors"][0]["field"] == "body"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("requestedAt", 1e300),  # accepted, published, then failed to render before
        ("requestedAt", -1),
        ("requestedAt", "yesterday"),
        ("requestedAt", True),
        ("name", "x" * 300),
        ("name", ""),
        ("idempotencyKey", "k" * 600),
        ("schedulerOverride", "chaos"),
        ("extraField", 1),
    ],
)
def test_a_bad_submission_field_is_named_and_nothing_is_published(
    agent: Any, call: Any, swap_model: Any, field: str, value: Any
) -> None:
    status, body, _ = call(agent.url + "/v1/plans", "POST", {**swap_model(), field: value})
    assert status == 400, body
    assert [e["field"] for e in body["errors"]] == [field]
    assert call(agent.url + "/v1/config")[1]["configVersion"] == 1


@pytest.mark.parametrize(
    "query",
    [
        "since=-1",
        "since=abc",
        "since=" + "9" * 30,
        "timeout=nan",
        "timeout=inf",
        "timeout=" + "9" * 400,
        "pid=-5",
        "pid=" + str(2**40),
        "pid=1&operators=ghost",
        "pid=1&operators=" + ",".join(f"op{i}" for i in range(800)),
    ],
)
def test_hostile_watch_queries_are_clean_refusals(agent: Any, call: Any, query: str) -> None:
    status, body, _ = call(f"{agent.url}/v1/control/watch?{query}&timeout=0")
    assert _is_clean_refusal(status, body), (query, status, body)


def test_a_request_line_beyond_8_kib_is_refused_by_the_http_parser(agent: Any, call: Any) -> None:
    """aiohttp's own limit, before any route: a plain-text 400, not our JSON shape."""
    query = "operators=" + ",".join(["combine"] * 2000)
    assert call(f"{agent.url}/v1/control/watch?{query}&timeout=0")[0] == 400


def test_hostile_action_queries_are_clean_refusals(agent: Any, call: Any) -> None:
    for query in ("since=x", "since=" + "1" * 25, "timeout=-inf"):
        status, body, _ = call(f"{agent.url}/v1/driver/actions?{query}")
        assert _is_clean_refusal(status, body), (query, status, body)


def _raw_request(port: int, lines: list[bytes]) -> int:
    """Send header bytes exactly as given (no client library re-encodes them)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\r\n".join([*lines, b"Connection: close", b"", b""]))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize(
    "header",
    [
        b"Authorization: Bearer \xff\xfe\xfd",
        b"Authorization: \xc3\x28 \xa0\xa1",
        b"Authorization: Bearer " + b"a" * 6000,
        b"X-Swivel: \xff",
    ],
)
def test_non_utf8_headers_are_refused_before_auth_not_a_500(agent: Any, header: bytes) -> None:
    status = _raw_request(agent.port, [b"GET /v1/config HTTP/1.1", b"Host: agent", header])
    assert 400 <= status < 500


def test_a_worker_credential_cannot_submit_fail_or_read_plans(
    agent: Any, call: Any, swap_model: Any
) -> None:
    url = agent.url
    status, plan, _ = call(url + "/v1/plans", "POST", swap_model())
    assert status == 202
    forged_failure = {"planId": plan["id"], "phase": "Failed", "message": "forged"}
    refused = {
        ("POST", "/v1/plans", json.dumps(swap_model("again"))),
        ("POST", "/v1/driver/migration", json.dumps(forged_failure)),
        ("POST", "/v1/driver/progress", '{"batchId": 1, "event": "started"}'),
        ("POST", "/v1/driver/coordination", '{"intervalSeconds": 1}'),
        ("POST", "/v1/driver/actions/done", '{"seq": 1}'),
        ("GET", "/v1/driver/actions?timeout=0", None),
        ("GET", f"/v1/plans/{plan['id']}", None),
        ("GET", "/v1/topology", None),
        ("GET", "/v1/loads", None),
        ("GET", "/metrics", None),
    }
    for method, path, raw in refused:
        data = None if raw is None else raw.encode()
        status, body, _ = call(url + path, method, raw=data, token=WORKER_TOKEN)
        assert status == 403, (method, path, status)
        assert body["errors"][0]["field"] == "Authorization"
        assert "worker credential" in body["errors"][0]["reason"]
    assert call(url + f"/v1/plans/{plan['id']}")[1]["phase"] == "Applying"  # not failed
    assert call(url + "/v1/control/watch?timeout=0", token=WORKER_TOKEN)[0] == 200


def test_each_role_only_where_it_belongs(agent: Any, call: Any, swap_model: Any) -> None:
    url = agent.url
    assert call(url + "/v1/plans", "POST", swap_model(), token=DRIVER_TOKEN)[0] == 403
    assert call(url + "/v1/control/acks", "POST", [], token=DRIVER_TOKEN)[0] == 403
    assert call(url + "/v1/topology", token=DRIVER_TOKEN)[0] == 403
    assert call(url + "/v1/config", token=DRIVER_TOKEN)[0] == 200  # a restarted driver reads it
    # The operator does not ack or report batches.
    assert call(url + "/v1/control/acks", "POST", [], token=TOKEN)[0] == 403
    progress = {"batchId": 1, "event": "started"}
    assert call(url + "/v1/driver/progress", "POST", progress, token=TOKEN)[0] == 403
    # Unknown paths are 404 to anyone authenticated, 401 to anyone else.
    assert call(url + "/v1/nothing", token=WORKER_TOKEN)[0] == 404
    assert call(url + "/v1/nothing", token="guess")[0] == 401


def test_acks_and_reports_are_checked_against_what_the_agent_knows(
    agent: Any, call: Any, swap_model: Any
) -> None:
    url = agent.url
    call(url + "/v1/driver/progress", "POST", {"batchId": 40, "event": "started"})
    status, plan, _ = call(url + "/v1/plans", "POST", swap_model())
    assert status == 202
    register(url, 7, "combine")
    good = {"pid": 7, "operator": "combine", "version": 2, "configVersion": 2}
    lies = [
        ({**good, "operator": "ghost"}, "[0].operator", 422),
        ({**good, "version": 3}, "[0].version", 422),  # not published
        ({**good, "configVersion": 9}, "[0].configVersion", 422),
        ({**good, "at": 1e12}, "[0].at", 422),
        # Not yet true (409, the client retries): a pid that never watched, a batch the
        # driver has not reported (2^62 would have held every later epoch plan back).
        ({**good, "pid": 8}, "[0].pid", 409),
        ({**good, "batchId": 2**62}, "[0].batchId", 409),
    ]
    for ack, field, expected in lies:
        status, body, _ = call(url + "/v1/control/acks", "POST", [ack])
        assert status == expected and [e["field"] for e in body["errors"]] == [field], body
    assert call(url + "/v1/plans/" + plan["id"])[1]["progress"]["workersSwitched"] == 0
    far = {"batchId": 40 + 10_000_000, "event": "started"}
    status, body, _ = call(url + "/v1/driver/progress", "POST", far)
    assert status == 422 and body["errors"][0]["field"] == "batchId"
    unknown = {"planId": "no-such-plan", "phase": "Failed", "message": "x"}
    status, body, _ = call(url + "/v1/driver/migration", "POST", unknown)
    assert status == 422 and body["errors"][0]["field"] == "planId"
    assert call(url + "/v1/driver/progress", "POST", {"batchId": 41, "event": "started"})[0] == 202
    assert call(url + "/v1/control/acks", "POST", [{**good, "batchId": 41}])[0] == 202


def test_the_openapi_document_names_the_roles_of_every_route() -> None:
    document = yaml.safe_load(OPENAPI_PATH.read_text(encoding="utf-8"))
    for method, path, _, roles in ROUTES:
        operation = document["paths"][path][method.lower()]
        if path in ("/healthz", "/readyz"):
            continue
        assert sorted(operation["x-swivel-roles"]) == sorted(r.value for r in roles), path
        assert "403" in operation["responses"], path
