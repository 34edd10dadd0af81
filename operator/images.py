"""The image policy: which images a StreamJob's pods may run (`spec.image`).

The driver, the agent sidecar and the executors all run `spec.image`, and the driver holds
a service account that creates pods: an author who may pick any image may run any code
next to that token. The installation decides (chart values `imagePolicy`, passed to the
operator as SWIVEL_ALLOWED_IMAGES and SWIVEL_REQUIRE_IMAGE_DIGEST):

- `allowed`: repositories or repository prefixes. An entry matches a repository equal to
  it or below it at a `/` boundary (`ghcr.io/swivel-dev` admits `ghcr.io/swivel-dev/swivel`
  but not `ghcr.io/swivel-dev-evil/x`; a registry host admits everything it serves).
  References are normalised as Docker does (`python:3` is
  `docker.io/library/python:3`). Empty: any image (the operator's default outside the
  chart, e.g. the sandbox; the chart's default admits its own repository only).
- `require_digest`: the reference must pin a digest (`@sha256:` and 64 hex digits), so a
  tag moved in the registry cannot change what runs.

A refused image is a condition, a status message and a Warning Event on the StreamJob;
nothing is rendered for it (streamjobs.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

ALLOWED_ENV = "SWIVEL_ALLOWED_IMAGES"
DIGEST_ENV = "SWIVEL_REQUIRE_IMAGE_DIGEST"
DOCKER_HUB = "docker.io"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_TRUE = frozenset({"1", "true", "yes", "on"})


def repository(image: str) -> str:
    """The normalised repository of an image reference (no tag, no digest)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:  # a tag (a colon before the last slash is a registry port)
        name = name[:colon]
    first, _, rest = name.partition("/")
    if not rest:
        return f"{DOCKER_HUB}/library/{first}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"{DOCKER_HUB}/{name}"
    return name


def _entry(prefix: str) -> str:
    prefix = prefix.strip().rstrip("/")
    if "/" not in prefix and ("." in prefix or ":" in prefix or prefix == "localhost"):
        return prefix  # a registry host
    return repository(prefix)


@dataclass(frozen=True)
class ImagePolicy:
    allowed: tuple[str, ...] = ()
    require_digest: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ImagePolicy:
        entries = [e for e in environ.get(ALLOWED_ENV, "").replace("\n", ",").split(",")]
        allowed = tuple(_entry(e) for e in entries if e.strip())
        digest = environ.get(DIGEST_ENV, "").strip().lower() in _TRUE
        return cls(allowed, digest)

    def refusal(self, image: str) -> str | None:
        """Why `image` may not run, or None."""
        if any(c.isspace() for c in image) or not image:
            return "not an image reference"
        if self.require_digest:
            digest = image.split("@", 1)[1] if "@" in image else ""
            if not _DIGEST.fullmatch(digest):
                return (
                    f"{image!r} is not pinned to a digest; this installation requires"
                    " IMAGE@sha256:<64 hex digits> (chart value imagePolicy.requireDigest)"
                )
        if self.allowed:
            found = repository(image)
            if not any(found == a or found.startswith(a + "/") for a in self.allowed):
                return (
                    f"{image!r} is not from an allowed repository ({', '.join(self.allowed)};"
                    " chart value imagePolicy.allowedImages)"
                )
        return None


_cache: dict[tuple[str, str], ImagePolicy] = {}


def installed_policy(environ: Mapping[str, str] | None = None) -> ImagePolicy:
    """The policy the operator was started with (its environment; the chart sets it)."""
    env = os.environ if environ is None else environ
    key = (env.get(ALLOWED_ENV, ""), env.get(DIGEST_ENV, ""))
    if key not in _cache:
        _cache[key] = ImagePolicy.from_env(env)
    return _cache[key]


__all__ = ["ImagePolicy", "installed_policy", "repository"]
