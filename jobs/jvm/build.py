"""Compile `src/**/*.java` against the pip-installed PySpark's jars with `javac` (JDK 17+)
and pack the classes into `swivel-spark.jar` beside this package.

    python -m swivel.jobs.jvm.build             # make setup runs this
    python -m swivel.jobs.jvm.build --src DIR   # the Dockerfile: sources of the build context
    python -m swivel.jobs.jvm.build --check     # exit 1 when the jar is missing or stale

Python's zipfile writes the jar, so only `javac` is needed, not the `jar` tool. Rebuilds
only when a source is newer than the jar (or with --force). `--optional` (make setup)
warns instead of failing when there is no `javac`: Swivel runs without the jar, only the
prewarmed migration and staggered RocksDB snapshots are then unavailable.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from swivel.jobs.jvm import JAR, SOURCES


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


NO_JAVAC = (
    "swivel: no javac on PATH: the prewarm helper jar needs a JDK 17+ "
    "(apt-get install openjdk-17-jdk-headless); Swivel runs without it "
    "(prewarmed migration and staggered snapshots unavailable)"
)


def sources(src: Path = SOURCES) -> list[Path]:
    return sorted(src.rglob("*.java"))


def stale(jar: Path = JAR, src: Path = SOURCES) -> bool:
    if not jar.is_file():
        return True
    built = jar.stat().st_mtime
    return any(s.stat().st_mtime > built for s in sources(src))


def build(jar: Path = JAR, src: Path = SOURCES, javac: str | None = None) -> Path:
    javac = javac or shutil.which("javac")
    if javac is None:
        raise SystemExit(NO_JAVAC)
    files = sources(src)
    if not files:
        raise SystemExit(f"swivel: no Java sources under {src}")
    with tempfile.TemporaryDirectory(prefix="swivel-javac-") as out:
        subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-cp",
                str(pyspark_jars() / "*"),
                "-d",
                out,
                *map(str, files),
            ],
            check=True,
        )
        partial = jar.with_suffix(".jar.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(Path(out).rglob("*.class")):
                archive.write(path, path.relative_to(out).as_posix())
        partial.replace(jar)
    return jar


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when missing or stale")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    parser.add_argument("--optional", action="store_true", help="only warn without javac")
    parser.add_argument("--src", type=Path, default=SOURCES, help="the Java sources")
    args = parser.parse_args(argv)
    if args.check:
        if stale(src=args.src):
            print(f"{JAR} is missing or older than its sources", file=sys.stderr)
            return 1
        return 0
    if not (args.force or stale(src=args.src)):
        return 0
    if args.optional and shutil.which("javac") is None:
        print(f"warning: {NO_JAVAC}", file=sys.stderr)
        return 0
    print(f"built {build(src=args.src)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
