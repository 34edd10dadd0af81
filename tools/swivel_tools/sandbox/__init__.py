"""A small in-memory Kubernetes API server for development and integration tests.

It is a sandbox, not a cluster: one process, no persistence, no scheduler, no nodes, no
authentication. It implements what kopf, the `kubernetes` client and kubectl rely on
(see docs/sandbox.md): discovery, CRUD, the status subresource, generation,
resourceVersion conflicts, merge/JSON patch, finalizers, watches with bookmarks and 410,
selectors, and CRD schema validation.
"""

from swivel_tools.sandbox.registry import Registry
from swivel_tools.sandbox.server import Component, RunningSandbox, SandboxThread, make_app, serve

__all__ = ["Component", "Registry", "RunningSandbox", "SandboxThread", "make_app", "serve"]
