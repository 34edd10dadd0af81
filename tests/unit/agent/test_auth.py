"""Bearer tokens: where they come from and how they are compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from swivel.jobs.agent.auth import TokenMissingError, load_token, token_matches


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
