"""What the tests that run things on the sandbox share: the repository root, waiting for a
condition, a `kubernetes` client for a sandbox, and installing the CRDs.

Used by `tests/integration/operator/conftest.py` (the real kopf runtime on the sandbox) and
`tests/integration/sandbox_flow/conftest.py` (the process kubelet and the laptop flow).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml
from kubernetes import client

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "swivel.dev", "v1alpha1"
T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None], timeout: float = 20.0, what: str = "", every: float = 0.1
) -> T:
    """The first truthy result of `check`, polled every `every` s; AssertionError after
    `timeout` s naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what or check}")
        time.sleep(every)


def sandbox_client(url: str, token: str | None = None) -> client.ApiClient:
    """A `kubernetes` client for the sandbox at `url` (with a bearer token if given: the
    sandbox accepts any)."""
    configuration = client.Configuration()
    configuration.host = url
    if token is not None:
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(configuration)


def install_crds(api: client.ApiClient) -> None:
    """The generated CRDs (`crds/`), as `swivel sandbox up --crds` installs them."""
    extensions = client.ApiextensionsV1Api(api)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        extensions.create_custom_resource_definition(yaml.safe_load(path.read_text("utf-8")))
