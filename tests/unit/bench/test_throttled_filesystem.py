"""The throttled file system of `swivel bench migration` (jobs/jvm/src/.../
ThrottledFileSystem.java), run by its own `main` in a plain JVM (no Spark): a file read
through `throttled://` costs the per-open latency plus its bytes at the stream bandwidth,
as `expected_read_s` says, and all of its bytes arrive."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from swivel.jobs import jvm
from swivel.jobs.jvm import build
from swivel_tools.bench.migration_figures import THROTTLED_CLASS, expected_read_s
from tests.prerequisites import require


def test_a_read_through_the_throttle_takes_latency_plus_bytes_over_bandwidth(
    tmp_path: Path,
) -> None:
    java = shutil.which("java")
    require(None if java else "`java` (a JDK 17)", "the throttled file system")
    require(None if not build.stale() else "the built helper jar (make setup)", "its classes")
    data = tmp_path / "state.bin"
    data.write_bytes(b"\x01" * (8 * 2**20))
    classpath = f"{jvm.JAR}:{build.pyspark_jars()}/*"
    done = subprocess.run(
        [str(java), "-cp", classpath, THROTTLED_CLASS, str(data), "40", "50"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    nbytes, elapsed_ms, slept_ms, opens = (int(v) for v in done.stdout.split())
    assert nbytes == 8 * 2**20
    assert opens == 1
    floor_ms = expected_read_s(nbytes, 1, 40.0, 50.0) * 1e3  # 50 + 200 ms
    assert elapsed_ms >= floor_ms * 0.95
    assert slept_ms >= 50  # the open latency at least; the rest paces the reads
    assert elapsed_ms < floor_ms + 3_000  # throttled, not stuck
