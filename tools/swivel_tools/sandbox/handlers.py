"""HTTP in, registry call, HTTP out: the REST verbs of the resource paths.

Query parameters are read the way the real server reads them (`dryRun=All`,
`fieldValidation`, `labelSelector`, `fieldSelector`, `limit`/`continue`, the watch
parameters, delete options in the body or the query). Every refusal is an `ApiError`,
rendered as a `Status` by the server's middleware. Bearer tokens are accepted and ignored.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import yaml
from aiohttp import web

from swivel_tools.sandbox import tables, watching
from swivel_tools.sandbox.admission import WriteOptions
from swivel_tools.sandbox.errors import ApiError, bad_request, method_not_allowed
from swivel_tools.sandbox.registry import NOT_FOUND_PATH, Registry, Written
from swivel_tools.sandbox.resources import Endpoint
from swivel_tools.sandbox.routing import Route

JsonObject = dict[str, Any]
TRUE = ("true", "1")
REGISTRY = web.AppKey("registry", Registry)
BOOKMARK_INTERVAL = web.AppKey("bookmark_interval", float)


def respond(request: web.Request, body: JsonObject, status: int = 200) -> web.Response:
    """JSON, or a server-side printed Table when the client (kubectl get) asks for one."""
    if tables.wanted(request.headers.get("Accept", "")):
        body = tables.render(request.app[REGISTRY], body)
    return web.json_response(body, status=status)


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
    try:
        if content_type.endswith("yaml"):
            return yaml.safe_load(raw)
        return json.loads(raw, parse_constant=_not_json)
    except (ValueError, yaml.YAMLError) as error:
        raise bad_request(f"the request body could not be decoded: {error}") from None
    except RecursionError:
        # The real server decodes up to 10 000 levels; Python's decoder stops near 1 000.
        raise bad_request("the request body could not be decoded: nested too deeply") from None


def _not_json(literal: str) -> Any:
    """NaN and Infinity are not JSON: the real server refuses them (400), Python reads them."""
    raise ValueError(f"{literal} is not a JSON value")


def _write_options(request: web.Request) -> WriteOptions:
    dry_run = request.query.getall("dryRun", [])
    if any(value != "All" for value in dry_run):
        raise bad_request(f"unsupported dryRun value(s): {dry_run}; only 'All' is valid")
    validation = request.query.get("fieldValidation", "Warn")
    if validation not in ("Strict", "Warn", "Ignore"):
        raise bad_request(f"fieldValidation must be Strict, Warn or Ignore, not {validation!r}")
    return WriteOptions(dry_run=bool(dry_run), field_validation=validation)


def _written(request: web.Request, written: Written, status: int = 200) -> web.Response:
    response = respond(request, written.object, 201 if written.created else status)
    for warning in written.warnings:
        response.headers.add("Warning", f"299 - {json.dumps(warning)}")
    return response


def _endpoint(registry: Registry, route: Route) -> Endpoint:
    assert route.plural is not None
    endpoint = registry.endpoint(route.group, route.version, route.plural, route.namespace or "")
    if route.namespace is not None and not endpoint.type.namespaced:
        raise ApiError(404, "NotFound", NOT_FOUND_PATH)
    if route.name is not None and endpoint.type.namespaced and route.namespace is None:
        raise ApiError(404, "NotFound", NOT_FOUND_PATH)
    return endpoint


async def handle(request: web.Request, route: Route) -> web.StreamResponse:
    registry: Registry = request.app[REGISTRY]
    endpoint = _endpoint(registry, route)
    if route.name is None:
        return await _collection(request, registry, endpoint, route)
    return await _member(request, registry, endpoint, route.name, route.subresource)


async def _collection(
    request: web.Request, registry: Registry, endpoint: Endpoint, route: Route
) -> web.StreamResponse:
    query = request.query
    labels, fields = query.get("labelSelector"), query.get("fieldSelector")
    if request.method == "GET" and query.get("watch", "").lower() in TRUE:
        watch = watching.WatchRequest(
            endpoint=endpoint,
            resource_version=query.get("resourceVersion"),
            timeout_seconds=_number(query, "timeoutSeconds", watching.DEFAULT_TIMEOUT_SECONDS),
            allow_bookmarks=query.get("allowWatchBookmarks", "").lower() in TRUE,
            send_initial_events=query.get("sendInitialEvents", "").lower() in TRUE,
            labels=labels,
            fields=fields,
            as_table=tables.wanted(request.headers.get("Accept", "")),
        )
        return await watching.stream(request, registry, watch, request.app[BOOKMARK_INTERVAL])
    if request.method == "GET":
        items, version = registry.list(endpoint, labels, fields)
        limit = int(_number(query, "limit", 0))
        return respond(request, _page(endpoint, items, version, limit, query.get("continue")))
    if request.method == "POST":
        if endpoint.type.namespaced and route.namespace is None:
            raise method_not_allowed(
                "the server does not allow this method on the requested resource"
            )
        body = await _body(request)
        return _written(request, registry.create(endpoint, body, _write_options(request)))
    if request.method == "DELETE":
        options = _delete_options(request, await _body(request))
        dry_run = _write_options(request).dry_run
        return respond(
            request, registry.delete_collection(endpoint, labels, fields, options, dry_run=dry_run)
        )
    raise method_not_allowed(f"{request.method} is not supported on a collection")


async def _member(
    request: web.Request, registry: Registry, endpoint: Endpoint, name: str, subresource: str | None
) -> web.StreamResponse:
    if subresource not in (None, "status") or (subresource and not endpoint.served.has_status):
        raise ApiError(404, "NotFound", NOT_FOUND_PATH)
    if request.method == "GET":
        return respond(request, registry.get(endpoint, name))
    if request.method == "PUT":
        written = registry.replace(
            endpoint,
            name,
            await _body(request),
            subresource=subresource,
            options=_write_options(request),
        )
        return _written(request, written)
    if request.method == "PATCH":
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        written = registry.patch(
            endpoint,
            name,
            content_type,
            await _body(request),
            subresource=subresource,
            options=_write_options(request),
        )
        return _written(request, written)
    if request.method == "DELETE" and subresource is None:
        options = _delete_options(request, await _body(request))
        answer = registry.delete(endpoint, name, options, dry_run=_write_options(request).dry_run)
        return respond(request, answer)
    raise method_not_allowed(f"{request.method} is not supported here")


def _delete_options(request: web.Request, body: Any) -> JsonObject:
    options: JsonObject = dict(body) if isinstance(body, dict) else {}
    for key in ("propagationPolicy", "gracePeriodSeconds", "orphanDependents"):
        if key in request.query:
            value: Any = request.query[key]
            if key == "gracePeriodSeconds":
                value = int(_number(request.query, key, 0))
            elif key == "orphanDependents":
                value = value.lower() in TRUE
            options[key] = value
    return options


def _number(query: Any, name: str, default: float) -> float:
    raw = query.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise bad_request(f"{name} must be a number, not {raw!r}") from None


def _page(
    endpoint: Endpoint, items: list[JsonObject], version: int, limit: int, token: str | None
) -> JsonObject:
    """A list, cut into pages when `limit` is given (the continue token is opaque)."""
    list_version = version
    if token:
        try:
            state = json.loads(base64.urlsafe_b64decode(token.encode()))
            list_version, after = int(state["rv"]), tuple(state["after"])
        except (ValueError, KeyError, TypeError):
            raise bad_request("continue key is not valid") from None
        items = [i for i in items if _position(i) > after]
    metadata: JsonObject = {"resourceVersion": str(list_version)}
    if 0 < limit < len(items):
        items, rest = items[:limit], items[limit:]
        state = {"rv": list_version, "after": list(_position(items[-1]))}
        metadata["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        metadata["remainingItemCount"] = len(rest)
    return {
        "apiVersion": endpoint.api_version,
        "kind": endpoint.type.list_kind,
        "metadata": metadata,
        "items": items,
    }


def _position(obj: JsonObject) -> tuple[str, str]:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
