"""Who holds which credential in the rendered job (issue 11): the operator's token only in the
agent container, the driver's in the Spark container, the workers' in the executors; the
per-job certificate; the NetworkPolicy; Spark's own RPC authentication."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJob
from swivel.jobs.agent.auth import Role, role_token
from swivel.operator import jobconfigs, naming
from swivel.operator.children import render_children
from swivel.operator.credentials import (
    JobCredentials,
    agent_hosts,
    job_credentials,
    new_credentials,
    render_token_secret,
)
from swivel.operator.naming import Owner

ROOT = Path(__file__).resolve().parents[3]
OWNER = Owner(name="fraud-detection", namespace="streams", uid="0b9f6a3e-1111-2222-3333-4444")
TOKEN = "operator-token-1"
CREDENTIALS = new_credentials(agent_hosts("fraud-detection-driver", "streams"), token=lambda: TOKEN)


@pytest.fixture(scope="module")
def job() -> StreamJob:
    return load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")


@pytest.fixture(scope="module", params=[True, False], ids=["tls", "plain"])
def children(request: Any, job: StreamJob) -> dict[str, Any]:
    credentials = CREDENTIALS if request.param else TOKEN
    rendered = render_children(job, OWNER, credentials, operator_namespace="swivel")
    return {o["kind"] + "/" + o["metadata"]["name"]: o for o in rendered}


def _container(children: dict[str, Any], name: str) -> dict[str, Any]:
    pod = children["Pod/fraud-detection-driver"]
    (found,) = [c for c in pod["spec"]["containers"] if c["name"] == name]
    return found


def _secret_keys(env: list[dict[str, Any]]) -> dict[str, str]:
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in env
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def _executor(children: dict[str, Any]) -> dict[str, Any]:
    template = children["ConfigMap/fraud-detection-executor-template"]["data"]
    return yaml.safe_load(template[jobconfigs.EXECUTOR_TEMPLATE_FILE])


def test_every_child_validates(children: dict[str, Any]) -> None:
    for obj in children.values():
        kubernetes_validate.validate(obj, "1.30", strict=True)


def test_the_secret_holds_a_token_per_role(children: dict[str, Any]) -> None:
    data = {
        k: base64.b64decode(v).decode()
        for k, v in children["Secret/fraud-detection-agent-token"]["data"].items()
    }
    assert data["token"] == TOKEN
    assert data["driver-token"] == role_token(TOKEN, Role.DRIVER) != TOKEN
    assert data["worker-token"] == role_token(TOKEN, Role.WORKER) != data["driver-token"]


def test_job_code_never_gets_the_operator_token(children: dict[str, Any]) -> None:
    executor = _secret_keys(_executor(children)["spec"]["containers"][0]["env"])
    assert executor["SWIVEL_AGENT_TOKEN"] == "worker-token"
    spark = _secret_keys(_container(children, "spark")["env"])
    assert spark["SWIVEL_AGENT_TOKEN"] == "driver-token"
    assert spark["SWIVEL_AGENT_WORKER_TOKEN"] == "worker-token"
    assert "token" not in {*executor.values(), *spark.values()}
    assert not any(
        m["name"] == "agent-token" for m in _container(children, "spark")["volumeMounts"]
    )


def test_the_agent_container_mounts_the_operator_token_only(children: dict[str, Any]) -> None:
    pod = children["Pod/fraud-detection-driver"]
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "agent-token"]
    keys = {item["key"] for item in volume["secret"]["items"]}
    assert "token" in keys and not keys & {"driver-token", "worker-token", "ca.crt"}
    assert _secret_keys(_container(children, "agent")["env"]) == {}


def test_tls_when_the_credentials_carry_a_certificate(children: dict[str, Any]) -> None:
    tls = "tls.crt" in children["Secret/fraud-detection-agent-token"]["data"]
    agent, spark = _container(children, "agent"), _container(children, "spark")
    env = {e["name"]: e.get("value") for e in spark["env"]}
    assert env["SWIVEL_AGENT_URL"].startswith("https://" if tls else "http://")
    assert ("SWIVEL_AGENT_CA" in _secret_keys(spark["env"])) is tls
    assert agent["livenessProbe"]["httpGet"]["scheme"] == ("HTTPS" if tls else "HTTP")
    agent_env = {e["name"] for e in agent["env"]}
    assert ({"SWIVEL_AGENT_TLS_CERT", "SWIVEL_AGENT_TLS_KEY"} <= agent_env) is tls
    executor_env = _executor(children)["spec"]["containers"][0]["env"]
    assert ("SWIVEL_AGENT_CA" in _secret_keys(executor_env)) is tls


def test_spark_rpc_is_authenticated_and_the_ui_is_not_on_the_service(
    children: dict[str, Any], job: StreamJob
) -> None:
    config = yaml.safe_load(children["ConfigMap/fraud-detection-job"]["data"]["job.yaml"])
    assert config["spec"]["sparkConf"]["spark.authenticate"] == "true"
    assert config["spec"]["sparkConf"]["spark.ui.killEnabled"] == "false"
    spec = job.spec.model_copy(update={"spark_conf": {"spark.authenticate": "false"}})
    overridden = jobconfigs.spark_conf(job.model_copy(update={"spec": spec}), OWNER)
    assert overridden["spark.authenticate"] == "true"  # the operator's setting wins
    ports = {p["port"] for p in children["Service/fraud-detection-driver"]["spec"]["ports"]}
    assert naming.UI_PORT not in ports and naming.AGENT_PORT in ports


def test_the_network_policy_lets_in_the_job_and_the_operator_only(
    children: dict[str, Any],
) -> None:
    policy = children["NetworkPolicy/fraud-detection-ingress"]["spec"]
    job_pods = {"matchLabels": {naming.JOB_LABEL: "fraud-detection"}}
    assert policy["podSelector"] == job_pods and policy["policyTypes"] == ["Ingress"]
    own, operator = policy["ingress"]
    assert own == {"from": [{"podSelector": job_pods}]}
    (peer,) = operator["from"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "swivel"}}
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert operator["ports"] == [{"protocol": "TCP", "port": naming.AGENT_PORT}]


def test_the_certificate_is_the_job_cas_for_the_service_names() -> None:
    ca = x509.load_pem_x509_certificate(CREDENTIALS.ca_pem.encode())
    cert = x509.load_pem_x509_certificate(CREDENTIALS.cert_pem.encode())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "fraud-detection-driver.streams.svc" in names.get_values_for_type(x509.DNSName)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # Python's own verifier accepts it for the Service name, with only the job's CA.
    context = ssl.create_default_context(cadata=CREDENTIALS.ca_pem)
    assert context.get_ca_certs()[0]["subject"]
    # The CA's private key was never kept: the Secret has the server key only.
    assert "PRIVATE KEY" in CREDENTIALS.key_pem
    assert set(base64.b64decode(v) and k for k, v in CREDENTIALS.secret_data().items()) == {
        "token", "driver-token", "worker-token", "ca.crt", "tls.crt", "tls.key",
    }  # fmt: skip


def test_an_existing_secret_keeps_its_token_and_certificate() -> None:
    fresh = job_credentials(None, OWNER)
    assert fresh.tls and len(fresh.token) == 64
    rendered = render_token_secret(OWNER, fresh)
    assert job_credentials(rendered, OWNER) == fresh  # never re-issued
    assert JobCredentials.of_secret(None) is None
