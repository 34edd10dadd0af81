"""The prewarm helper's build (jobs/jvm): the jar is named in `spark.jars` only when built,
and its Java source compiles against the pinned PySpark's jars (a Spark upgrade that
changes the private APIs it uses fails here, in seconds, not on a cluster)."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from swivel.jobs import jvm
from swivel.jobs.jvm import build
from tests.prerequisites import require


def test_spark_jars_adds_the_jar_once_and_only_when_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jar = tmp_path / "swivel-spark.jar"
    monkeypatch.setattr(jvm, "JAR", jar)
    assert jvm.jar_path() is None
    assert jvm.spark_jars("a.jar") == "a.jar"
    assert jvm.spark_jars() is None
    jar.write_bytes(b"PK")
    assert jvm.spark_jars() == str(jar)
    assert jvm.spark_jars("a.jar") == f"a.jar,{jar}"
    assert jvm.spark_jars(f"a.jar,{jar}") == f"a.jar,{jar}"


def test_stale_when_missing_or_older_than_a_source(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "p").mkdir(parents=True)
    source = src / "p" / "A.java"
    source.write_text("class A {}\n")
    jar = tmp_path / "out.jar"
    assert build.stale(jar, src)
    jar.write_bytes(b"PK")
    os.utime(source, (1_000, 1_000))
    assert not build.stale(jar, src)
    os.utime(source, None)
    assert build.stale(jar, src)


def test_the_helper_compiles_against_the_pinned_pyspark(tmp_path: Path) -> None:
    require(None if shutil.which("javac") else "`javac` (a JDK 17)", "the JVM helper build")
    jar = build.build(tmp_path / "swivel-spark.jar")
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    for piece in ("StatePrewarm", "PrewarmRunner", "PrewarmLoads", "HelperRpc", "HelperEndpoint"):
        assert f"io/swivel/spark/{piece}.class" in names, sorted(names)
    assert "META-INF/MANIFEST.MF" in names
