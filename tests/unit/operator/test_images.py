"""The image policy: repository matching at `/` boundaries after Docker's normalisation, digest
pinning, and the operator's environment as its source."""

from __future__ import annotations

import pytest

from swivel.operator.images import ImagePolicy, installed_policy, repository

DIGEST = "sha256:" + "0f" * 32


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("python:3.11", "docker.io/library/python"),
        ("python", "docker.io/library/python"),
        ("bitnami/spark:4", "docker.io/bitnami/spark"),
        ("ghcr.io/swivel-dev/swivel:0.1.0", "ghcr.io/swivel-dev/swivel"),
        (f"ghcr.io/swivel-dev/swivel@{DIGEST}", "ghcr.io/swivel-dev/swivel"),
        (f"ghcr.io/swivel-dev/swivel:0.1.0@{DIGEST}", "ghcr.io/swivel-dev/swivel"),
        ("registry.local:5000/team/job:1", "registry.local:5000/team/job"),
        ("registry.local:5000/team/job", "registry.local:5000/team/job"),
        ("localhost/job:dev", "localhost/job"),
    ],
)
def test_references_are_normalised_like_docker(image: str, expected: str) -> None:
    assert repository(image) == expected


def test_an_empty_policy_admits_anything_but_nonsense() -> None:
    assert ImagePolicy().refusal("anything/at:all") is None
    assert ImagePolicy().refusal("two words") == "not an image reference"
    assert ImagePolicy().refusal("") == "not an image reference"


def test_prefixes_match_at_slash_boundaries_only() -> None:
    policy = ImagePolicy.from_env({"SWIVEL_ALLOWED_IMAGES": "ghcr.io/swivel-dev/, python"})
    assert policy.allowed == ("ghcr.io/swivel-dev", "docker.io/library/python")
    assert policy.refusal("ghcr.io/swivel-dev/swivel:1") is None
    assert policy.refusal("ghcr.io/swivel-dev/team/other:1") is None
    assert policy.refusal("python:3.12") is None
    assert policy.refusal("ghcr.io/swivel-dev-evil/swivel:1") is not None
    assert policy.refusal("ghcr.io/swivel:1") is not None
    assert policy.refusal("docker.io/library/pythonista:1") is not None


def test_a_registry_host_admits_what_it_serves_and_nothing_like_it() -> None:
    policy = ImagePolicy.from_env({"SWIVEL_ALLOWED_IMAGES": "registry.example.com"})
    assert policy.refusal("registry.example.com/a/b:1") is None
    assert policy.refusal("registry.example.com.evil.io/a:1") is not None
    assert policy.refusal("evil.io/registry.example.com/a:1") is not None


def test_digest_pinning() -> None:
    policy = ImagePolicy.from_env({"SWIVEL_REQUIRE_IMAGE_DIGEST": "true"})
    assert policy.refusal(f"ghcr.io/swivel-dev/swivel@{DIGEST}") is None
    assert policy.refusal(f"ghcr.io/swivel-dev/swivel:1@{DIGEST}") is None
    for unpinned in ("ghcr.io/swivel-dev/swivel:1", "x@sha256:abc", "x@md5:" + "0" * 64):
        assert "pinned to a digest" in str(policy.refusal(unpinned))


def test_the_installed_policy_comes_from_the_environment() -> None:
    env = {"SWIVEL_ALLOWED_IMAGES": "ghcr.io/swivel-dev", "SWIVEL_REQUIRE_IMAGE_DIGEST": "1"}
    assert installed_policy(env) == ImagePolicy(("ghcr.io/swivel-dev",), True)
    assert installed_policy({}) == ImagePolicy()
