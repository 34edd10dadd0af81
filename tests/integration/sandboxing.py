"""What the tests that run things on the sandbox share: the repository root, a `kubernetes`
client for a sandbox, and installing the CRDs (waiting for a condition: `tests.polling`).

Used by `tests/integration/operator/conftest.py` (the real kopf runtime on the sandbox) and
`tests/integration/sandbox_flow/conftest.py` (the process kubelet and the laptop flow).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "swivel.dev", "v1alpha1"


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
