"""Bearer tokens per role, and which role may call which route (issue 11, docs/agent.md).

Three callers share an agent and trust differs between them:

- the **operator** (and the CLI in embedded mode) submits and reads plans;
- the **driver** reports batches, migrations, loads and coordination, and takes boundary
  actions;
- the **workers** (every Python worker, where user functions run) long-poll snapshots and
  post acks.

Each role has its own token, and a route answers 403 to a role that does not use it, so a
user function that reads its environment can neither submit nor fail a plan. The agent is
given one secret, the operator's (`SWIVEL_AGENT_TOKEN` or the file named by
`SWIVEL_AGENT_TOKEN_FILE`, a mounted Secret key); the driver's and the workers' are derived
from it with HMAC-SHA256 (`role_token`), which the operator computes too when it renders the
job's Secret. Knowing a derived token says nothing about the operator's. Comparison is
constant-time so an answer's timing says nothing about how much of a guess was right.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from swivel.protocol.answers import Errors, Problem

ENV_TOKEN = "SWIVEL_AGENT_TOKEN"
ENV_TOKEN_FILE = "SWIVEL_AGENT_TOKEN_FILE"
ENV_TLS_CERT = "SWIVEL_AGENT_TLS_CERT"  # PEM files the operator issued (operator/credentials.py)
ENV_TLS_KEY = "SWIVEL_AGENT_TLS_KEY"
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
REALM = 'Bearer realm="swivel-agent"'
MAX_AUTHORIZATION = 1024  # a bearer token is 64 hex digits; anything longer is not one

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Role(enum.StrEnum):
    OPERATOR = "operator"
    DRIVER = "driver"
    WORKER = "worker"


class TokenMissingError(RuntimeError):
    """The agent refuses to start without a token: an open control port runs any code."""


def load_token(environ: Mapping[str, str] | None = None) -> str:
    """The operator's token, as the agent container is given it."""
    env = os.environ if environ is None else environ
    token = env.get(ENV_TOKEN, "").strip()
    if not token and env.get(ENV_TOKEN_FILE):
        token = Path(env[ENV_TOKEN_FILE]).read_text(encoding="utf-8").strip()
    if not token:
        raise TokenMissingError(f"set {ENV_TOKEN} or {ENV_TOKEN_FILE} (a mounted Secret)")
    return token


def tls_context(environ: Mapping[str, str]) -> ssl.SSLContext | None:
    """The agent's server TLS context from the mounted certificate and key; None (plain
    HTTP: embedded mode on 127.0.0.1) when none is configured."""
    cert, key = environ.get(ENV_TLS_CERT), environ.get(ENV_TLS_KEY)
    if not cert or not key:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except OSError as error:  # ssl.SSLError too; neither names the file
        reason = f"the agent's certificate {cert} or key {key}: {error.strerror or error}"
        raise OSError(error.errno, reason) from None
    return context


def role_token(operator_token: str, role: Role | str) -> str:
    """The token of `role` for an agent whose operator token is `operator_token`."""
    if Role(role) is Role.OPERATOR:
        return operator_token
    message = f"swivel-agent/{Role(role).value}".encode()
    return hmac.new(operator_token.encode(), message, hashlib.sha256).hexdigest()


def role_tokens(operator_token: str) -> dict[Role, str]:
    return {role: role_token(operator_token, role) for role in Role}


class RoleTokens:
    """The driver's and the workers' tokens, derived from the operator's `token`
    (`role_token`): the one spelling for whoever holds the operator's token and hands the
    others on (`swivel.operator.credentials.JobCredentials`, and
    `swivel.embedded.agents.LocalAgent` for a local job)."""

    token: str

    @property
    def driver_token(self) -> str:
        return role_token(self.token, Role.DRIVER)

    @property
    def worker_token(self) -> str:
        return role_token(self.token, Role.WORKER)


def _presented(authorization: str | None) -> bytes | None:
    """The bearer token of an Authorization header as bytes, None when there is none.

    aiohttp decodes header bytes that are not UTF-8 with surrogate escapes; such a header
    (or an absurdly long one) is no token of ours, and must never reach `.encode()` as text.
    """
    if not authorization or len(authorization) > MAX_AUTHORIZATION:
        return None
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer" or not presented.strip().isascii():
        return None
    return presented.strip().encode("ascii")


def token_matches(expected: str, authorization: str | None) -> bool:
    """True iff the Authorization header is `Bearer <expected>`."""
    presented = _presented(authorization)
    return presented is not None and hmac.compare_digest(presented, expected.encode())


def role_of(tokens: Mapping[Role, str], authorization: str | None) -> Role | None:
    """The role whose token the header carries (every role compared: constant time)."""
    presented = _presented(authorization)
    if presented is None:
        return None
    found = None
    for role, token in tokens.items():
        if hmac.compare_digest(presented, token.encode()):
            found = role
    return found


def unauthorized(reason: str) -> web.Response:
    return web.json_response(_refusal(reason), status=401, headers={"WWW-Authenticate": REALM})


def forbidden(role: Role, request: web.Request) -> web.Response:
    reason = f"the {role.value} credential may not {request.method} {request.path}"
    return web.json_response(_refusal(reason), status=403)


def _refusal(reason: str) -> dict[str, Any]:
    return Errors(errors=[Problem(field="Authorization", reason=reason)]).to_wire()


def bearer_auth(
    operator_token: str, allowed: Callable[[web.Request], frozenset[Role] | None]
) -> Middleware:
    """aiohttp middleware: 401 with WWW-Authenticate on a missing or unknown token, 403 when
    the token's role may not call the route (`allowed`: the roles of the matched route; None
    for a path the router does not know, which then answers its own 404/405)."""
    tokens = role_tokens(operator_token)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        header = request.headers.get("Authorization")
        if header is None:
            return unauthorized("missing bearer token")
        role = role_of(tokens, header)
        if role is None:
            return unauthorized("invalid bearer token")
        roles = allowed(request)
        if roles is not None and role not in roles:
            return forbidden(role, request)
        return await handler(request)

    return middleware
