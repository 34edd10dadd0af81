"""Bearer-token authentication for every agent route except the health probes.

The token comes from `SWIVEL_AGENT_TOKEN` or from the file named by
`SWIVEL_AGENT_TOKEN_FILE` (a mounted Kubernetes Secret). Comparison is constant-time so the
answer's timing says nothing about how much of a guess was right.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

ENV_TOKEN = "SWIVEL_AGENT_TOKEN"
ENV_TOKEN_FILE = "SWIVEL_AGENT_TOKEN_FILE"
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
REALM = 'Bearer realm="swivel-agent"'

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class TokenMissingError(RuntimeError):
    """The agent refuses to start without a token: an open control port runs any code."""


def load_token(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    token = env.get(ENV_TOKEN, "").strip()
    if not token and env.get(ENV_TOKEN_FILE):
        token = Path(env[ENV_TOKEN_FILE]).read_text(encoding="utf-8").strip()
    if not token:
        raise TokenMissingError(f"set {ENV_TOKEN} or {ENV_TOKEN_FILE} (a mounted Secret)")
    return token


def token_matches(expected: str, authorization: str | None) -> bool:
    """True iff the Authorization header is `Bearer <expected>`."""
    if not authorization:
        return False
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), expected.encode())


def unauthorized(reason: str) -> web.Response:
    return web.json_response(
        {"errors": [{"field": "Authorization", "reason": reason}]},
        status=401,
        headers={"WWW-Authenticate": REALM},
    )


def bearer_auth(token: str) -> Middleware:
    """aiohttp middleware: 401 with WWW-Authenticate on a missing or wrong token."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        header = request.headers.get("Authorization")
        if header is None:
            return unauthorized("missing bearer token")
        if not token_matches(token, header):
            return unauthorized("invalid bearer token")
        return await handler(request)

    return middleware
