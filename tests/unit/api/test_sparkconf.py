"""A StreamJob author cannot escalate through `spec.sparkConf`: keys that mount Secrets or host
paths, switch the service account, replace the pod template, redirect the driver's token or
load code are refused with `spec.sparkConf[KEY]: reason`; ordinary tuning keys pass; the
operator's own rendering (the trusted context) may carry the keys it sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from swivel.api.manifests import SpecError, parse_manifest
from swivel.api.sparkconf import TRUSTED, load_rendered_streamjob, refused
from swivel.api.streamjob import StreamJob
from swivel.cli.plan import command as plan

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "fraud-detection"

DENIED = {
    "spark.kubernetes.driver.secrets.db-password": "/etc/db",
    "spark.kubernetes.executor.secrets.aws": "/etc/aws",
    "spark.kubernetes.driver.secretKeyRef.PASSWORD": "db:password",
    "spark.kubernetes.executor.secretKeyRef.TOKEN": "other-job-agent-token:token",
    "spark.kubernetes.executor.volumes.hostPath.root.mount.path": "/host",
    "spark.kubernetes.executor.volumes.hostPath.root.options.path": "/",
    "spark.kubernetes.driver.volumes.persistentVolumeClaim.data.options.claimName": "theirs",
    "spark.kubernetes.executor.volumes.nfs.share.options.server": "nfs.example",
    "spark.kubernetes.authenticate.driver.serviceAccountName": "cluster-admin-sa",
    "spark.kubernetes.authenticate.executor.serviceAccountName": "builder",
    "spark.kubernetes.authenticate.oauthToken": "abc",
    "spark.kubernetes.authenticate.driver.mounted.oauthTokenFile": "/t",
    "spark.kubernetes.driver.master": "https://attacker.example",
    "spark.kubernetes.namespace": "kube-system",
    "spark.kubernetes.container.image": "evil/image:latest",
    "spark.kubernetes.executor.container.image": "evil/image:latest",
    "spark.kubernetes.container.image.pullSecrets": "registry-creds",
    "spark.kubernetes.executor.podTemplateFile": "/tmp/privileged.yaml",
    "spark.kubernetes.driver.podTemplateFile": "/tmp/privileged.yaml",
    "spark.kubernetes.executor.podTemplateContainerName": "other",
    "spark.kubernetes.executor.pod.featureSteps": "com.example.Privileged",
    "spark.kubernetes.driver.pod.name": "someone-elses-pod",
    "spark.kubernetes.kerberos.tokenSecret.name": "krb",
    "spark.kubernetes.executor.deleteOnTermination": "false",
    "spark.kubernetes.allocation.pods.allocator": "statefulset",
    "spark.kubernetes.executor.disableConfigMap": "false",
    "spark.jars": "https://attacker.example/x.jar",
    "spark.jars.packages": "com.example:evil:1.0",
    "spark.driver.extraJavaOptions": "-javaagent:/tmp/a.jar",
    "spark.executor.extraClassPath": "/tmp/evil",
    "spark.plugins": "com.example.Plugin",
    "spark.extraListeners": "com.example.Listener",
    "spark.python.worker.module": "evil",
    "spark.pyspark.python": "/tmp/evil-python",
    "spark.executorEnv.LD_PRELOAD": "/tmp/evil.so",
    "spark.executorEnv.SWIVEL_AGENT_TOKEN": "forged",
    "spark.authenticate": "false",
    "spark.submit.pyFiles": "https://attacker.example/x.py",
}

ALLOWED = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50",
    "spark.executor.memoryOverhead": "512m",
    "spark.kubernetes.executor.podNamePrefix": "fraud",
    "spark.kubernetes.container.image.pullPolicy": "Always",
    "spark.kubernetes.executor.volumes.emptyDir.scratch.mount.path": "/scratch",
    "spark.kubernetes.executor.volumes.emptyDir.scratch.options.medium": "Memory",
    "spark.kubernetes.executor.request.cores": "500m",
    "spark.kubernetes.executor.limit.cores": "1",
    "spark.kubernetes.node.selector.pool": "streaming",
    "spark.kubernetes.executor.annotation.team": "fraud",
    "spark.master": "k8s://https://kubernetes.default.svc",  # the operator overrides it
}


def _job(conf: dict[str, str]) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLE / "streamjob.yaml").read_text())
    document["spec"]["sparkConf"] = conf
    return document


@pytest.mark.parametrize("key", sorted(DENIED))
def test_a_denied_key_is_refused_naming_it(key: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_manifest(_job({key: DENIED[key]}), StreamJob)
    [problem] = caught.value.problems
    assert problem.field == f"spec.sparkConf[{key}]"
    assert problem.reason.startswith("not allowed: it ")
    assert "Traceback" not in str(caught.value)


def test_the_denylist_and_the_table_agree() -> None:
    assert [key for key, _ in refused(DENIED)] == sorted(DENIED)
    assert refused(ALLOWED) == []


def test_ordinary_tuning_keys_pass() -> None:
    job = parse_manifest(_job(ALLOWED), StreamJob)
    assert job.spec.spark_conf == ALLOWED


def test_several_denied_keys_are_all_named() -> None:
    conf = {"spark.jars": "x", "spark.kubernetes.namespace": "y", "spark.sql.x": "1"}
    with pytest.raises(SpecError) as caught:
        parse_manifest(_job(conf), StreamJob)
    [problem] = caught.value.problems
    assert problem.field == "spec.sparkConf[spark.jars]"
    assert problem.reason.endswith("(also refused: spark.kubernetes.namespace)")


def test_keys_are_matched_whole_not_as_prefixes() -> None:
    """`spark.jarsSomething` or `spark.authenticateX` are not the denied keys (Spark ignores
    them); `spark.authenticate.secret` is."""
    assert refused({"spark.authenticated.note": "1", "spark.jarsx": "1"}) == []
    assert [k for k, _ in refused({"spark.authenticate.secret": "s"})] == [
        "spark.authenticate.secret"
    ]


def test_the_operators_rendering_may_carry_the_keys_it_sets(tmp_path: Path) -> None:
    conf = {"spark.kubernetes.namespace": "streams", "spark.kubernetes.container.image": "i:1"}
    job = StreamJob.model_validate(_job(conf), context={TRUSTED: True})
    assert job.spec.spark_conf == conf
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(_job(conf)), encoding="utf-8")
    assert load_rendered_streamjob(path).spec.spark_conf == conf
    with pytest.raises(SpecError, match=r"spec\.sparkConf\[spark\.kubernetes\.container"):
        parse_manifest(_job(conf), StreamJob)  # the trust ends with the rendered file


def test_swivel_plan_refuses_with_exit_2_and_field_reason(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_job({"spark.executorEnv.LD_PRELOAD": "/x.so"})))
    result = CliRunner().invoke(plan, [str(EXAMPLE / "reconfiguration.yaml"), "--job", str(job)])
    assert result.exit_code == 2, result.output
    assert "spec.sparkConf[spark.executorEnv.LD_PRELOAD]: not allowed" in result.output
    assert "Traceback" not in result.output
