"""The Dockerfile, checked statically (there is no Docker engine on the development machines;
the image is built in CI or wherever Docker runs — docs/packaging.md).

A small parser (continuation lines joined, comments dropped, stages split at FROM) and a
handful of lint rules of our own, in the spirit of hadolint: pinned bases, non-root user
matching the chart, the package installed with pip from the source tree, Java 17 for Spark,
apt hygiene, exec-form entry point, and a build context (.dockerignore) that still contains
every file the Dockerfile copies.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.prerequisites import require_executable, require_module

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
KNOWN = {
    "FROM",
    "ARG",
    "ENV",
    "RUN",
    "COPY",
    "WORKDIR",
    "USER",
    "ENTRYPOINT",
    "CMD",
    "LABEL",
    "EXPOSE",
}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse(text: str) -> list[Instruction]:
    instructions: list[Instruction] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue  # comment inside a continued instruction
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        buffer += stripped
        keyword, _, args = buffer.partition(" ")
        instructions.append(Instruction(keyword, args.strip(), start))
        buffer = ""
    assert not buffer, "Dockerfile ends inside a continued line"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


INSTRUCTIONS = parse(DOCKERFILE.read_text(encoding="utf-8"))
STAGES = stages(INSTRUCTIONS)
FINAL = STAGES[-1]
GLOBAL_ARGS = dict(
    i.args.split("=", 1)
    for i in INSTRUCTIONS[: INSTRUCTIONS.index(STAGES[0][0])]
    if i.keyword == "ARG"
)


def of(stage: list[Instruction], keyword: str) -> list[Instruction]:
    return [i for i in stage if i.keyword == keyword]


def test_instructions_are_known_and_upper_case() -> None:
    for instruction in INSTRUCTIONS:
        assert instruction.keyword in KNOWN, f"line {instruction.line}: {instruction.keyword}"


def test_base_images_are_pinned_never_latest() -> None:
    build_stages = set()
    for stage in STAGES:
        image, *alias = stage[0].args.split()
        if alias:
            build_stages.add(alias[-1])
        image = re.sub(r"\$\{(\w+)\}", lambda m: GLOBAL_ARGS[m[1]], image)
        if image in build_stages:
            continue
        name, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        assert tag and tag != "latest", f"{image}: pin a tag (or a digest)"
        assert name.startswith("python") and tag.startswith("3.11"), image  # pyproject: 3.11


def test_final_stage_runs_as_the_non_root_user_the_chart_expects() -> None:
    users = of(FINAL, "USER")
    assert users, "the final stage must set USER"
    uid, _, gid = users[-1].args.partition(":")
    assert uid.isdigit() and int(uid) != 0, "numeric non-root uid (runAsNonRoot can check it)"
    assert not gid or int(gid) != 0
    values = yaml.safe_load((ROOT / "charts/swivel/values.yaml").read_text(encoding="utf-8"))
    assert int(uid) == values["podSecurityContext"]["runAsUser"]
    assert FINAL.index(users[-1]) > max(FINAL.index(i) for i in of(FINAL, "RUN"))
    assert re.search(rf"useradd .*--uid {uid}\b", " ".join(i.args for i in of(FINAL, "RUN")))


def test_swivel_is_pip_installed_from_the_source_tree() -> None:
    runs = " ".join(i.args for stage in STAGES for i in of(stage, "RUN"))
    assert re.search(r"pip install (--no-deps )?\.(\s|$)", runs)
    copied = {
        i.args.split()[0] for stage in STAGES for i in of(stage, "COPY") if "--from" not in i.args
    }
    # The package maps operator/, controllers/ and jobs/ through symlinks: all must be copied.
    for link in (ROOT / "swivel").iterdir():
        if link.is_symlink():
            assert os.readlink(link).removeprefix("../") in copied, link.name
    assert {"pyproject.toml", "swivel"} <= copied


def test_java_17_for_spark() -> None:
    runs = " ".join(i.args for i in of(FINAL, "RUN"))
    assert "openjdk-17-jre-headless" in runs
    env = " ".join(i.args for i in of(FINAL, "ENV"))
    assert re.search(r"JAVA_HOME=\S+", env) and re.search(r"SPARK_HOME=\S+/pyspark", env)


def test_apt_is_tidy() -> None:
    for stage in STAGES:
        for run in of(stage, "RUN"):
            if "apt-get install" in run.args:
                assert "--no-install-recommends" in run.args, run.line
                assert "apt-get update" in run.args, f"line {run.line}: update in the same layer"
                assert "rm -rf /var/lib/apt/lists/*" in run.args, run.line
            assert "apt-get upgrade" not in run.args and "sudo " not in run.args, run.line
            assert not re.search(r"curl[^|]*\|\s*(ba)?sh", run.args), run.line
            assert not re.match(r"cd\s", run.args), f"line {run.line}: use WORKDIR"


def test_no_remote_add_and_absolute_workdirs() -> None:
    assert not [i for i in INSTRUCTIONS if i.keyword == "ADD"]
    for workdir in (i for i in INSTRUCTIONS if i.keyword == "WORKDIR"):
        assert workdir.args.startswith("/"), workdir.line


def test_entrypoint_is_exec_form_under_tini() -> None:
    (entrypoint,) = of(FINAL, "ENTRYPOINT")
    command = json.loads(entrypoint.args)
    assert command[:2] == ["/usr/bin/tini", "--"], "tini reaps Spark's child processes"
    assert "tini" in " ".join(i.args for i in of(FINAL, "RUN"))
    cmd = of(FINAL, "CMD")
    assert cmd and isinstance(json.loads(cmd[-1].args), list)


def test_entrypoint_script_passes_commands_to_swivel_and_starts_spark_executors() -> None:
    assert os.access(ENTRYPOINT, os.X_OK)
    bash = require_executable("bash", "the entrypoint's syntax check")
    subprocess.run([bash, "-n", str(ENTRYPOINT)], check=True)
    script = ENTRYPOINT.read_text(encoding="utf-8")
    assert 'exec swivel "$@"' in script
    assert "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in script
    for variable in (
        "SPARK_DRIVER_URL",
        "SPARK_EXECUTOR_ID",
        "SPARK_EXECUTOR_CORES",
        "SPARK_APPLICATION_ID",
        "SPARK_EXECUTOR_POD_IP",
        "SPARK_RESOURCE_PROFILE_ID",
        "SPARK_EXECUTOR_POD_NAME",
        "SPARK_EXECUTOR_MEMORY",
    ):
        assert f"${variable}" in script or f"${{{variable}}}" in script, variable


def test_the_executor_backend_ships_with_the_pinned_pyspark() -> None:
    pyspark = require_module("pyspark", "pip install -e .")
    jars = list((Path(pyspark.__file__).parent / "jars").glob("spark-kubernetes_*.jar"))
    assert jars, "pyspark lacks spark-kubernetes: executors could not start on Kubernetes"
    import zipfile

    with zipfile.ZipFile(jars[0]) as jar:
        names = set(jar.namelist())
    assert "org/apache/spark/scheduler/cluster/k8s/KubernetesExecutorBackend.class" in names


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes; a directory pattern
    covers what is below it."""
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw.removeprefix("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            ignored = not negate
    return ignored


def test_build_context_holds_what_is_copied_and_little_else() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for stage in STAGES:
        for copy in of(stage, "COPY"):
            if "--from" in copy.args:
                continue
            sources = [a for a in copy.args.split() if not a.startswith("--")][:-1]
            for source in sources:
                assert (ROOT / source).exists(), source
                assert not dockerignored(source, patterns), f"{source} is .dockerignored"
    for heavy in (".venv", ".git", "tests", "build", "swivel/__pycache__/x.pyc", "e2e"):
        assert dockerignored(heavy, patterns), heavy
