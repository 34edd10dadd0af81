"""A job's credentials: the agent's tokens per role and its TLS certificate, in one Secret.

The operator creates the Secret `<job>-agent-token` once per job and never rotates it:

- `token`: the operator's bearer token. Mounted only into the agent container (as a file);
  the operator reads it from the Secret. Submits and reads plans.
- `driver-token`, `worker-token`: derived from it (`swivel.jobs.agent.auth.role_token`),
  given to the driver's Spark container and to the executors (where user code runs). Each
  is accepted only on the routes its role uses (docs/agent.md, "Credentials").
- `ca.crt`, `tls.crt`, `tls.key`: a per-job certificate authority and the agent's server
  certificate it signed (for the driver Service's names). The CA's private key is thrown
  away once it signed: nobody can issue another certificate this job's clients would
  trust. The agent serves HTTPS with `tls.crt`/`tls.key`; the operator, the driver and
  the workers verify it against `ca.crt` (not secret: it is also given to the job's pods).

The Secret is rendered here too (`render_token_secret`), and read back by `job_credentials`
so a reconcile keeps what the first one issued. Issuing reads the clock; everything else
is pure.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from swivel.jobs.agent.auth import RoleTokens
from swivel.operator.naming import Manifest, Names, Owner, child_metadata

TOKEN_KEY = "token"
DRIVER_TOKEN_KEY = "driver-token"
WORKER_TOKEN_KEY = "worker-token"
CA_KEY = "ca.crt"
CERT_KEY = "tls.crt"
PRIVATE_KEY_KEY = "tls.key"
VALIDITY = datetime.timedelta(days=3650)  # the job's lifetime; the Secret goes with the job


@dataclass(frozen=True)
class JobCredentials(RoleTokens):
    token: str  # the operator's
    ca_pem: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None

    @property
    def tls(self) -> bool:
        return bool(self.ca_pem and self.cert_pem and self.key_pem)

    def secret_data(self) -> dict[str, str]:
        """The Secret's `data` (base64)."""
        plain = {
            TOKEN_KEY: self.token,
            DRIVER_TOKEN_KEY: self.driver_token,
            WORKER_TOKEN_KEY: self.worker_token,
        }
        if self.tls:
            assert self.ca_pem and self.cert_pem and self.key_pem
            plain |= {CA_KEY: self.ca_pem, CERT_KEY: self.cert_pem, PRIVATE_KEY_KEY: self.key_pem}
        return {key: base64.b64encode(value.encode()).decode() for key, value in plain.items()}

    @classmethod
    def of_secret(cls, secret: dict[str, object] | None) -> JobCredentials | None:
        """What an existing Secret holds; None without a token (no Secret yet)."""
        data = (secret or {}).get("data") or {}
        assert isinstance(data, dict)

        def read(key: str) -> str | None:
            encoded = data.get(key)
            return base64.b64decode(encoded).decode() if encoded else None

        token = read(TOKEN_KEY)
        if not token:
            return None
        return cls(token, read(CA_KEY), read(CERT_KEY), read(PRIVATE_KEY_KEY))

    def with_tls(self, hosts: list[str], now: datetime.datetime | None = None) -> JobCredentials:
        """These credentials, with a certificate issued if they have none (kept otherwise: a
        reconcile never replaces it)."""
        if self.tls:
            return self
        ca, cert, key = issue_certificate(hosts, now)
        return JobCredentials(self.token, ca, cert, key)


def new_credentials(
    hosts: list[str], *, tls: bool = True, token: Callable[[], str] = lambda: secrets.token_hex(32)
) -> JobCredentials:
    credentials = JobCredentials(token())
    return credentials.with_tls(hosts) if tls else credentials


def agent_hosts(service: str, namespace: str) -> list[str]:
    """The names the agent is reached by: the driver Service's, and the loopback (a
    port-forward, the sandbox's routing)."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
        "localhost",
        "127.0.0.1",
    ]


_CA_USAGE = x509.KeyUsage(
    digital_signature=False, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
    encipher_only=False, decipher_only=False,
)  # fmt: skip


def issue_certificate(
    hosts: list[str], now: datetime.datetime | None = None
) -> tuple[str, str, str]:
    """(CA certificate, server certificate, server key), PEM. The CA key is not kept."""
    now = now or datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + VALIDITY
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"swivel agent CA {hosts[0]}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem).decode(), cert.public_bytes(pem).decode(), key_pem.decode()


def as_credentials(credentials: JobCredentials | str) -> JobCredentials:
    """Credentials as given; a bare token means credentials without TLS."""
    return JobCredentials(credentials) if isinstance(credentials, str) else credentials


def render_token_secret(owner: Owner, credentials: JobCredentials | str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": child_metadata(Names(owner.name).token_secret, owner, "agent"),
        "type": "Opaque",
        "data": as_credentials(credentials).secret_data(),
    }


def job_credentials(secret: Manifest | None, owner: Owner, *, tls: bool = True) -> JobCredentials:
    """The credentials an existing Secret holds (never rotated: the running driver pod's
    agent serves with them), else new ones (with a certificate when `tls`)."""
    existing = JobCredentials.of_secret(secret)
    if existing is not None:
        return existing
    names = Names(owner.name)
    return new_credentials(agent_hosts(names.service, owner.namespace), tls=tls)


def token_of(secret: Manifest) -> str | None:
    """The token kept in an existing Secret (so a reconcile never rotates it)."""
    encoded = (secret.get("data") or {}).get(TOKEN_KEY)
    return base64.b64decode(encoded).decode() if encoded else None
