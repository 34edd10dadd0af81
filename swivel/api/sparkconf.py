"""Which `spec.sparkConf` keys a StreamJob author may not set, and why.

A StreamJob author is trusted with their own dataflow, not with the namespace: Spark's
Kubernetes settings would otherwise let them mount any Secret or host path into the pods,
run them under another service account, point the driver (and its token) at another API
server, replace the operator's pod templates (and with them the security context and
`automountServiceAccountToken: false`), or load code past the function allow-list (extra
jars, JVM agents, worker modules, environment such as LD_PRELOAD). Those keys are refused at
model validation with `spec.sparkConf[KEY]: reason`, everywhere a StreamJob is read
(manifests, the operator, `swivel plan`).

The operator sets some of them itself (namespace, image, service account, pod template,
the settings that keep the driver inside its Role: operator/access.py). Its rendering of
the job (the ConfigMap the driver pod's `spark` and `agent` containers read) is loaded with
`load_rendered_streamjob` (or validated with `context={TRUSTED: True}`), which accepts them;
nothing a user writes is.

docs/security.md lists the keys.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swivel.api.streamjob import StreamJob

TRUSTED = "swivel_rendered"  # validation context key: the operator's own rendering
_RENDERED: ContextVar[bool] = ContextVar("swivel_rendered", default=False)

_ROLE = r"(driver|executor)"
# (pattern, reason): the first match wins; patterns are full matches of the key.
DENIED: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (
            rf"spark\.kubernetes\.{_ROLE}\.secrets\..+",
            "mounts a Secret into the pods; the job's pods get no Secrets but the operator's",
        ),
        (
            rf"spark\.kubernetes\.{_ROLE}\.secretKeyRef\..+",
            "puts a Secret's value into the pods' environment; the job's pods read no Secrets",
        ),
        (
            rf"spark\.kubernetes\.{_ROLE}\.volumes\.(?!emptyDir\.).+",
            "mounts a host path, claim or NFS share into the pods; only emptyDir volumes"
            " are allowed",
        ),
        (
            r"spark\.kubernetes\.authenticate\..+",
            "changes the identity the driver or executors use (service account, token,"
            " certificates); the operator sets it",
        ),
        (
            r"spark\.kubernetes\.(driver\.master|namespace)",
            "points the driver (and its token) at another API server or namespace; the"
            " operator sets it",
        ),
        (
            rf"spark\.kubernetes\.({_ROLE}\.)?container\.image(\.pullSecrets)?",
            "bypasses the image policy (spec.image) or uses the namespace's pull Secrets;"
            " set spec.image",
        ),
        (
            rf"spark\.kubernetes\.{_ROLE}\.(podTemplateFile|podTemplateContainerName"
            r"|pod\.featureSteps)",
            "replaces the operator's pod template (security context, no service account"
            " token) or changes pods with custom code",
        ),
        (
            r"spark\.kubernetes\.driver\.pod\.name",
            "names another pod as the driver (executors would be owned by it); the"
            " operator sets it",
        ),
        (
            r"spark\.kubernetes\.kerberos\..+",
            "mounts Kerberos Secrets and ConfigMaps into the pods",
        ),
        (
            r"spark\.kubernetes\.(executor\.(disableConfigMap|deleteOnTermination"
            r"|decommissionLabel|decommissionLabelValue)|driver\.(service\.deleteOnTermination"
            r"|ownPersistentVolumeClaim|reusePersistentVolumeClaim)"
            r"|allocation\.pods\.allocator)",
            "would need Kubernetes rights beyond the driver's Role (docs/security.md);"
            " the operator sets it",
        ),
        (
            r"spark\.(jars|jars\..+|files|archives|submit\.pyFiles|plugins|extraListeners"
            r"|sql\.extensions|sql\.queryExecutionListeners"
            r"|sql\.streaming\.streamingQueryListeners)",
            "loads code or files past the function allow-list; bake them into the image",
        ),
        (
            rf"spark\.{_ROLE}\.(extraClassPath|extraJavaOptions|extraLibraryPath)",
            "loads code into the JVM (class path, -javaagent, native libraries) past the"
            " function allow-list",
        ),
        (
            r"spark\.(python\.(worker|daemon)\.module|pyspark\.(driver\.)?python)",
            "runs another Python program as the driver or the workers",
        ),
        (
            r"spark\.(executorEnv|kubernetes\.driverEnv)\..+",
            "sets the pods' environment (LD_PRELOAD, PYTHONPATH and the agent's settings"
            " run code or impersonate the runtime); the operator sets it",
        ),
        (
            r"spark\.authenticate(\..+)?",
            "turns off or replaces the authentication of Spark's own RPC; the operator sets it",
        ),
    )
)


def refusal(key: str) -> str | None:
    """Why a user may not set `key`, or None."""
    for pattern, reason in DENIED:
        if pattern.fullmatch(key):
            return f"not allowed: it {reason}"
    return None


def refused(conf: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, reason) for every key of `conf` a user may not set, in key order."""
    found = []
    for key in sorted(conf):
        reason = refusal(key)
        if reason is not None:
            found.append((key, reason))
    return found


def is_trusted(context: Any) -> bool:
    if _RENDERED.get():
        return True
    return isinstance(context, Mapping) and bool(context.get(TRUSTED))


@contextlib.contextmanager
def rendered() -> Iterator[None]:
    """Validate the operator's rendering inside this block (the keys it sets are accepted)."""
    token = _RENDERED.set(True)
    try:
        yield
    finally:
        _RENDERED.reset(token)


def load_rendered_streamjob(path: Path) -> StreamJob:
    """The operator's rendering of a StreamJob, read like any manifest (`load_streamjob`:
    bounds, allow-list, `field: reason`) except that the keys the operator sets pass."""
    from swivel.api.manifests import load_streamjob

    with rendered():
        return load_streamjob(path)
