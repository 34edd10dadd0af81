"""The image policy travels from chart values to the operator's environment, and the operator
reads that environment into the policy it enforces (operator/images.py): the rendered
Deployment's env is fed to `ImagePolicy.from_env` as the operator would see it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from swivel.operator.images import ImagePolicy
from tests.prerequisites import require_module

Objects = list[dict[str, Any]]
Render = Callable[..., Objects]
DIGEST = "sha256:" + "ab" * 32


def _env(objects: Objects) -> dict[str, str]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _policy(render: Render, values: dict[str, Any] | None = None) -> ImagePolicy:
    return ImagePolicy.from_env(_env(render(values)))


def test_the_default_admits_the_charts_own_repository_only(render: Render) -> None:
    env = _env(render())
    assert env["SWIVEL_ALLOWED_IMAGES"] == "ghcr.io/swivel-dev/swivel"
    assert env["SWIVEL_REQUIRE_IMAGE_DIGEST"] == "false"
    policy = _policy(render)
    assert policy.refusal("ghcr.io/swivel-dev/swivel:0.1.0") is None
    assert policy.refusal(f"ghcr.io/swivel-dev/swivel@{DIGEST}") is None
    assert "not from an allowed repository" in str(policy.refusal("docker.io/evil/miner:1"))
    assert policy.refusal("ghcr.io/swivel-dev/swivel-evil:0.1.0") is not None


def test_the_default_follows_image_repository(render: Render) -> None:
    policy = _policy(render, {"image": {"repository": "registry.example.com/team/swivel"}})
    assert policy.refusal("registry.example.com/team/swivel:1") is None
    assert policy.refusal("ghcr.io/swivel-dev/swivel:0.1.0") is not None


def test_listed_prefixes_and_a_digest_requirement(render: Render) -> None:
    values = {
        "imagePolicy": {
            "allowedImages": ["registry.example.com", "ghcr.io/swivel-dev"],
            "requireDigest": True,
        }
    }
    env = _env(render(values))
    assert env["SWIVEL_ALLOWED_IMAGES"] == "registry.example.com,ghcr.io/swivel-dev"
    assert env["SWIVEL_REQUIRE_IMAGE_DIGEST"] == "true"
    policy = ImagePolicy.from_env(env)
    assert policy.refusal(f"registry.example.com/any/thing@{DIGEST}") is None
    assert policy.refusal(f"ghcr.io/swivel-dev/swivel@{DIGEST}") is None
    assert "pinned to a digest" in str(policy.refusal("ghcr.io/swivel-dev/swivel:0.1.0"))
    assert policy.refusal(f"registry.example.com.evil.io/x@{DIGEST}") is not None


@pytest.mark.parametrize(
    "values",
    [
        {"imagePolicy": {"allowedImages": ["a,b"]}},  # the env is comma-separated
        {"imagePolicy": {"allowedImages": [""]}},
        {"imagePolicy": {"requireDigest": "yes"}},
        {"imagePolicy": {"allowAll": True}},
    ],
)
def test_the_schema_rejects_bad_policies(render: Render, values: dict[str, Any]) -> None:
    helm = require_module("helm_python", "pip install helm-python-sdk")
    with pytest.raises(helm.HelmValuesError, match="imagePolicy"):
        render(values)
