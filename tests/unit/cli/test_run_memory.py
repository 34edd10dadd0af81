"""`swivel run --master`: spec.executor.memory becomes the executors' JVM size. Every
suffix the model's quantity pattern admits is converted or refused with `field: reason`
(milli bytes, fractions of a byte), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from swivel.api.errors import SpecError
from swivel.api.manifests import parse_manifest
from swivel.api.streamjob import StreamJob
from swivel.cli.run import _jvm_memory
from swivel.cli.run import command as run

ROOT = Path(__file__).resolve().parents[3]
FIELD = "spec.executor.memory"


@pytest.mark.parametrize(
    ("quantity", "jvm"),
    [
        ("1Gi", "1024m"),
        ("1.5Gi", "1536m"),
        ("512Mi", "512m"),
        ("2097152Ki", "2048m"),
        ("1Ti", "1048576m"),
        ("1G", "953m"),  # 10**9 bytes, whole mebibytes down
        ("2000M", "1907m"),
        ("3000000k", "2861m"),
        ("1T", "953674m"),
        ("1073741824", "1024m"),  # bytes
        ("0.5k", "1m"),  # under a mebibyte: Spark refuses it with its own minimum
    ],
)
def test_every_suffix_of_the_pattern_converts(quantity: str, jvm: str) -> None:
    assert _jvm_memory(quantity, FIELD) == jvm


@pytest.mark.parametrize(
    ("quantity", "reason"),
    [
        ("512m", "'512m' is not a Kubernetes quantity (e.g. 2Gi)"),  # the model says more
        ("1.5", "'1.5' is not a whole number of bytes"),
        ("0.0001k", "'0.0001k' is not a whole number of bytes"),
        ("2GB", "'2GB' is not a Kubernetes quantity (e.g. 2Gi)"),
    ],
)
def test_what_is_no_number_of_bytes_is_refused_naming_the_field(quantity: str, reason: str) -> None:
    with pytest.raises(SpecError) as caught:
        _jvm_memory(quantity, FIELD)
    assert str(caught.value) == f"{FIELD}: {reason}"


def test_swivel_run_refuses_milli_bytes_before_starting_anything(tmp_path: Path) -> None:
    manifest = yaml.safe_load(
        (ROOT / "examples" / "fraud-detection" / "streamjob.yaml").read_text()
    )
    manifest["spec"].setdefault("executor", {})["memory"] = "512m"
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(manifest))
    result = CliRunner().invoke(run, [str(job), "--master", "local-cluster"])
    assert result.exit_code == 2, result.output
    assert f"{FIELD}: '512m' is 0.512 bytes" in result.stderr
    assert "Traceback" not in result.output and "starting" not in result.stdout


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("spec.executor.memory", ("executor", "memory")),
        ("spec.driver.memory", ("driver", "memory")),
        ("spec.checkpoint.volumeSize", ("checkpoint", "volumeSize")),
    ],
)
def test_the_model_refuses_a_milli_size_saying_what_it_means(
    field: str, path: tuple[str, str]
) -> None:
    manifest = yaml.safe_load(
        (ROOT / "examples" / "fraud-detection" / "streamjob.yaml").read_text()
    )
    manifest["spec"].setdefault(path[0], {})[path[1]] = "2.5m"
    with pytest.raises(SpecError) as caught:
        parse_manifest(manifest, StreamJob)
    assert str(caught.value) == (
        f"{field}: '2.5m' is 0.0025 bytes ('m' is milli); for mebibytes write '2.5Mi'"
    )
