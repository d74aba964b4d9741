"""Certificates and keys for the local control plane, made with the ``cryptography`` package.

One self-signed CA signs the kube-apiserver serving certificate (for 127.0.0.1 and ``localhost``) and
the admin client certificate (group ``system:masters``, so it bypasses RBAC as cluster-admin does); a
separate RSA key pair signs and verifies service-account tokens. Everything is written with mode 0600
under the state directory and lives as long as it does.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True, slots=True)
class PkiFiles:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path  # private: signs service-account tokens (kube-apiserver, kube-controller-manager)
    sa_pub: Path  # public: verifies them (kube-apiserver)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, org: str = "") -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate | None,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    server: bool = False,
    client: bool = False,
    ips: tuple[str, ...] = (),
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject if ca_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
    )
    if ca_cert is None:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        ).add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        builder = builder.add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                        *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips),
                    ]
                ),
                critical=False,
            )
    return builder.sign(ca_key, hashes.SHA256())


def make_pki(directory: Path, *, ips: tuple[str, ...] = ()) -> PkiFiles:
    """Create a fresh CA, serving and admin certificates and the service-account key pair in ``directory``;
    the serving certificate is also valid for ``ips`` (the real node's gateway, where pods reach the API)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _issue(_name("gpuplace-testenv-ca"), ca_key, None, ca_key)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _issue(_name("kube-apiserver"), serving_key, ca_cert, ca_key, server=True, ips=ips)
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin = _issue(_name("gpuplace-admin", "system:masters"), admin_key, ca_cert, ca_key, client=True)
    # kube-apiserver accepts RSA or ECDSA for service-account tokens; RSA is what every tool expects.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    return PkiFiles(
        ca_cert=_write(directory / "ca.crt", ca_cert.public_bytes(pem)),
        ca_key=_write(directory / "ca.key", _key_pem(ca_key)),
        serving_cert=_write(directory / "apiserver.crt", serving.public_bytes(pem)),
        serving_key=_write(directory / "apiserver.key", _key_pem(serving_key)),
        admin_cert=_write(directory / "admin.crt", admin.public_bytes(pem)),
        admin_key=_write(directory / "admin.key", _key_pem(admin_key)),
        sa_key=_write(directory / "sa.key", _key_pem(sa_key)),
        sa_pub=_write(
            directory / "sa.pub",
            sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
        ),
    )
