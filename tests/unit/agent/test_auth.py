"""Bearer tokens: where they come from and how they are compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from swivel.jobs.agent.auth import (
    Role,
    TokenMissingError,
    load_token,
    role_of,
    role_token,
    role_tokens,
    token_matches,
)


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("Bearer s3cret", True),
        ("bearer s3cret", True),
        ("Bearer  s3cret ", True),
        ("Bearer s3cre", False),
        ("Bearer s3cret2", False),
        ("Basic s3cret", False),
        ("s3cret", False),
        ("", False),
        (None, False),
    ],
)
def test_token_matches(header: str | None, ok: bool) -> None:
    assert token_matches("s3cret", header) is ok


def test_token_from_env_or_mounted_secret(tmp_path: Path) -> None:
    assert load_token({"SWIVEL_AGENT_TOKEN": "abc"}) == "abc"
    secret = tmp_path / "token"
    secret.write_text("from-secret\n")
    assert load_token({"SWIVEL_AGENT_TOKEN_FILE": str(secret)}) == "from-secret"
    assert (
        load_token({"SWIVEL_AGENT_TOKEN": "env", "SWIVEL_AGENT_TOKEN_FILE": str(secret)}) == "env"
    )


def test_no_token_refuses_to_start() -> None:
    with pytest.raises(TokenMissingError):
        load_token({})


def test_each_role_has_its_own_token_derived_one_way() -> None:
    tokens = role_tokens("operator-secret")
    assert tokens[Role.OPERATOR] == "operator-secret"
    assert len({*tokens.values()}) == 3
    assert role_token("another", Role.WORKER) != tokens[Role.WORKER]
    assert role_of(tokens, f"Bearer {tokens[Role.WORKER]}") is Role.WORKER
    assert role_of(tokens, f"Bearer {tokens[Role.DRIVER]}") is Role.DRIVER
    assert role_of(tokens, "Bearer operator-secret") is Role.OPERATOR
    assert role_of(tokens, "Bearer nope") is None


@pytest.mark.parametrize(
    "header",
    [
        "Bearer \udcff\udcfe",  # aiohttp's surrogate escapes of bytes that are not UTF-8
        "Bearer tökén",
        "Bearer " + "a" * 5000,
        "\udcff s3cret",
    ],
)
def test_headers_that_are_no_token_never_raise(header: str) -> None:
    assert token_matches("s3cret", header) is False
    assert role_of(role_tokens("s3cret"), header) is None
