"""Swivel's small JVM helper for Spark (Java source in `src/`), compiled from source with
the JDK on the machine into `swivel-spark.jar` beside this file: by `make setup`, by the
Dockerfile's build stage, or by hand with `python -m swivel.jobs.jvm.build`.

The prewarmed migration uses it (`jobs/spark_prewarm.py`, docs/migration.md
"Prewarmed moves: what Spark allows"), so do staggered RocksDB snapshots
(`jobs/spark_snapshot_phases.py`, "Staggered snapshots"), and `swivel bench migration` its `throttled://`
checkpoint storage (`ThrottledFileSystem`, a benchmark's emulation of a remote store's
reads, not used by the product). Everything else runs without it: `spark_jars()` names the
jar when it was built, and sessions add it to `spark.jars`.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
JAR = HERE / "swivel-spark.jar"
SOURCES = HERE / "src"


def jar_path() -> Path | None:
    """The built jar, or None when it was not built (no JDK at install time)."""
    return JAR if JAR.is_file() else None


def spark_jars(existing: str | None = None) -> str | None:
    """`spark.jars` with the helper jar added (comma-separated, no duplicate); `existing`
    unchanged when the jar is not built."""
    jar = jar_path()
    if jar is None:
        return existing
    listed = [j for j in (existing or "").split(",") if j]
    if str(jar) not in listed:
        listed.append(str(jar))
    return ",".join(listed)
