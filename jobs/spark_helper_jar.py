"""Swivel's JVM helper classes (jobs/jvm, built into `swivel-spark.jar`) on a running Spark
application: part of the Spark adapter (`SparkInternals`, Spark 4.3.x only).

    prewarm = helper_class(internals, "io.swivel.spark.StatePrewarm", api=7)

Sessions normally carry the jar in `spark.jars` (`swivel.jobs.jvm.spark_jars`). When one does
not -- created without it, or the driver JVM was started by an earlier session of this
process, whose class path is fixed at launch -- the jar is attached as `ADD JAR` does: the
executors fetch it with their next task (`SparkContext.addJar`), the driver loads it through
the session's jar class loader. py4j resolves classes through the calling thread's context
class loader, so every call first points this thread's at that loader.
"""

from __future__ import annotations

from typing import Any

from swivel.jobs.jvm import jar_path
from swivel.jobs.spark_internals import SparkInternals


class HelperUnavailableError(RuntimeError):
    """The helper class is not loadable (jar not built, no JDK at install time), or it
    speaks another API version than the Python side."""


def helper_class(
    internals: SparkInternals,
    name: str,
    api: int,
    error: type[HelperUnavailableError] = HelperUnavailableError,
) -> Any:
    """The helper class `name` (a py4j JavaClass), attaching the built jar when needed;
    raises `error` when it cannot be loaded or its `api()` is not `api`."""
    jvm = internals._jvm
    loader = internals.spark._jsparkSession.sharedState().jarClassLoader()
    if not _loadable(jvm, name):
        jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
    if not _loadable(jvm, name):
        jar = jar_path()
        if jar is None:
            raise error(
                f"{name} is not on the driver's class path and the jar is not built "
                "(python -m swivel.jobs.jvm.build; it needs a JDK)"
            )
        url = jvm.java.io.File(str(jar)).toURI().toURL()
        if str(url.toString()) not in {str(u.toString()) for u in loader.getURLs()}:
            loader.addURL(url)
            internals.sc._jsc.sc().addJar(str(jar))
        if not _loadable(jvm, name):
            raise error(f"{name} is not loadable after attaching {jar}")
    helper = jvm
    for part in name.split("."):
        helper = getattr(helper, part)
    found = int(helper.api())
    if found != api:
        raise error(f"{name} API {found}, want {api} (rebuild: python -m swivel.jobs.jvm.build)")
    return helper


def jar_on_session(internals: SparkInternals) -> bool:
    """Whether the session was started with the built jar (in `spark.jars` or on the
    executors' class path): then using the helper attaches nothing to the application."""
    jar = jar_path()
    if jar is None:
        return False
    conf = internals.sc.getConf()
    keys = ("spark.jars", "spark.executor.extraClassPath")
    return any(jar.name in str(conf.get(key) or "") for key in keys)


def _loadable(jvm: Any, name: str) -> bool:
    try:
        jvm.java.lang.Class.forName(
            name, True, jvm.java.lang.Thread.currentThread().getContextClassLoader()
        )
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
