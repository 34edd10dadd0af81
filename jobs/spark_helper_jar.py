"""Swivel's JVM helper classes (jobs/jvm, built into `swivel-spark.jar`) on a running Spark
application: part of the Spark adapter (`SparkInternals`, Spark 4.3.x only).

    prewarm = helper_class(internals, "io.swivel.spark.StatePrewarm", api=7)

Sessions normally carry the jar in `spark.jars` (`swivel.jobs.jvm.spark_jars`). When one does
not -- created without it, or the driver JVM was started by an earlier session of this
process, whose class path is fixed at launch -- the jar is attached as `ADD JAR` does: the
executors fetch it with their next task (`SparkContext.addJar`), the driver loads it through
the session's jar class loader. py4j resolves classes through the calling thread's context
class loader, so each py4j connection's first call points its Java thread's at that loader.

A class is named to py4j by its full name (`JavaClass`), never walked to through `jvm.io.
swivel...`: py4j resolves every step of such a walk with `Class.forName`, and each package
step ("io", "io.swivel", ...) fails only after looking through every jar on the class path
(~280 in PySpark's; ~1 ms each). Those look-ups were half the driver's py4j CPU in a
migration's first batches (docs/migration.md, "The driver's class look-ups"). The checked
class is kept per SparkContext, and each py4j connection's loader is checked once.
"""

from __future__ import annotations

import weakref
from typing import Any

from swivel.jobs.jvm import jar_path
from swivel.jobs.spark_internals import SparkInternals


class HelperUnavailableError(RuntimeError):
    """The helper class is not loadable (jar not built, no JDK at install time), or it
    speaks another API version than the Python side."""


# SparkContext -> (class name, API) -> the helper class, loaded and its API checked
_CHECKED: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], Any]] = weakref.WeakKeyDictionary()
# py4j connection (one Java thread each) -> SparkContext -> the names its loader can see
_SEEN: weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Any, set[str]]] = (
    weakref.WeakKeyDictionary()
)


def helper_class(
    internals: SparkInternals,
    name: str,
    api: int,
    error: type[HelperUnavailableError] = HelperUnavailableError,
) -> Any:
    """The helper class `name` (a py4j JavaClass), attaching the built jar when needed;
    raises `error` when it cannot be loaded or its `api()` is not `api`. Once a context's
    class is checked and this thread's py4j connection sees it: no round trip. py4j
    replaces a thread's connection (a new Java thread, whose loader is not pointed yet)
    after an error; without pinned threads (`PYSPARK_PIN_THREAD=false`) a call may take
    any: then every call checks, as before this cache."""
    checked = _CHECKED.setdefault(internals.sc, {})
    seen = _seen(internals)
    if (name, api) in checked and seen is not None and name in seen:
        return checked[(name, api)]
    _ensure_loadable(internals, name, error)
    seen = _seen(internals)  # the connection the look-ups above went through
    if seen is not None:
        seen.add(name)
    if (name, api) not in checked:
        _ship_to_executors(internals)
        helper = internals.java_class(name)
        found = int(helper.api())
        if found != api:
            raise error(
                f"{name} API {found}, want {api} (rebuild: python -m swivel.jobs.jvm.build)"
            )
        checked[(name, api)] = helper
    return checked[(name, api)]


def _seen(internals: SparkInternals) -> set[str] | None:
    """The names this thread's py4j connection was checked for, in this context; None
    where py4j does not pin a connection to the thread."""
    get_connection = getattr(internals.sc._gateway._gateway_client, "get_thread_connection", None)
    connection = get_connection() if get_connection is not None else None
    if connection is None:
        return None
    return _SEEN.setdefault(connection, weakref.WeakKeyDictionary()).setdefault(internals.sc, set())


def _ship_to_executors(internals: SparkInternals) -> None:
    """Add the built jar to this context's jars, for its executors, unless the session
    carries it. A driver whose loader already sees the class (an earlier context's jar
    loader, or its own class path) did not attach it to this context."""
    jar = jar_path()
    if jar is None or jar_on_session(internals):
        return
    context = internals.sc._jsc.sc()
    if jar.name not in str(context.listJars().mkString("\n")):
        context.addJar(str(jar))


def _ensure_loadable(
    internals: SparkInternals, name: str, error: type[HelperUnavailableError]
) -> None:
    """Make `name` loadable from this thread: point its context class loader at the
    session's jar loader, attaching the built jar there when it is not yet."""
    if _loadable(internals, name):
        return
    loader = internals.spark._jsparkSession.sharedState().jarClassLoader()
    internals.java_class("java.lang.Thread").currentThread().setContextClassLoader(loader)
    if _loadable(internals, name):
        return
    jar = jar_path()
    if jar is None:
        raise error(
            f"{name} is not on the driver's class path and the jar is not built "
            "(python -m swivel.jobs.jvm.build; it needs a JDK)"
        )
    url = internals.java_class("java.io.File")(str(jar)).toURI().toURL()
    if str(url.toString()) not in {str(u.toString()) for u in loader.getURLs()}:
        loader.addURL(url)
        internals.sc._jsc.sc().addJar(str(jar))
    if not _loadable(internals, name):
        raise error(f"{name} is not loadable after attaching {jar}")


def jar_on_session(internals: SparkInternals) -> bool:
    """Whether the session was started with the built jar (in `spark.jars` or on the
    executors' class path): then using the helper attaches nothing to the application."""
    jar = jar_path()
    if jar is None:
        return False
    conf = internals.sc.getConf()
    keys = ("spark.jars", "spark.executor.extraClassPath")
    return any(jar.name in str(conf.get(key) or "") for key in keys)


def _loadable(internals: SparkInternals, name: str) -> bool:
    thread = internals.java_class("java.lang.Thread").currentThread()
    try:
        internals.java_class("java.lang.Class").forName(name, True, thread.getContextClassLoader())
    except Exception:
        return False
    return True


def java_list(values: Any) -> list[Any]:
    """The elements of a `java.util.List` a helper returned, read by index: one round trip
    for its size and one per element. Iterated in Python, py4j ends the loop on the JVM's
    NoSuchElementException, and PySpark's exception hook converts every Java exception by
    asking the JVM which of ~14 classes it is: ~75 more round trips (and class look-ups in
    the JVM) per loop. Counted on the migration bench: a prewarmed migration's polls, jobs
    and switches raised ~266 such exceptions, ~20 000 round trips (docs/migration.md)."""
    return [values.get(index) for index in range(values.size())]
