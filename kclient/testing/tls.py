"""Throw-away TLS certificates for tests: a CA, a server certificate and a client one.

``write_test_certificates(directory)`` writes PEM files and returns their paths. The
server certificate names ``localhost`` and ``127.0.0.1`` (change with ``hostnames`` and
``ips``); the client certificate is for mutual TLS. Keys are unencrypted unless
``key_password`` is given (then both private keys are encrypted with it). Certificates
are valid from one hour ago for ``days`` days.

Needs the ``cryptography`` package (in kclient's ``test`` extra). For tests only: never
use these files to protect anything.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TestCertificates", "write_test_certificates"]


@dataclass(frozen=True)
class TestCertificates:
    """Paths of the PEM files ``write_test_certificates`` wrote."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    ca_cert: str
    """The CA certificate: what clients trust (``ssl.truststore.location``)."""
    server_cert: str
    server_key: str
    server_keystore: str
    """Server key and certificate chain in one file (``ssl.keystore.location``, type PEM)."""
    client_cert: str
    client_key: str
    client_keystore: str
    """Client key and certificate in one file, for mutual TLS."""
    other_ca_cert: str
    """A second CA that signed nothing here: trusting only it must fail verification."""


def write_test_certificates(
    directory: str | Path,
    *,
    hostnames: tuple[str, ...] = ("localhost",),
    ips: tuple[str, ...] = ("127.0.0.1",),
    key_password: str | None = None,
    days: int = 2,
) -> TestCertificates:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "kclient.testing.tls needs the 'cryptography' package: "
            "pip install 'kclient-kafka[test]'"
        ) from exc

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = now - datetime.timedelta(hours=1)
    not_after = now + datetime.timedelta(days=days)

    def name(common_name: str) -> Any:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def new_key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    def certificate(
        subject: str, key: Any, issuer: str, issuer_key: Any, extensions: list[tuple[Any, bool]]
    ) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(issuer_key, hashes.SHA256())

    def ca(common_name: str) -> tuple[Any, Any]:
        key = new_key()
        cert = certificate(
            common_name,
            key,
            common_name,
            key,
            [
                (x509.BasicConstraints(ca=True, path_length=None), True),
                (
                    x509.KeyUsage(
                        digital_signature=True,
                        content_commitment=False,
                        key_encipherment=False,
                        data_encipherment=False,
                        key_agreement=False,
                        key_cert_sign=True,
                        crl_sign=True,
                        encipher_only=False,
                        decipher_only=False,
                    ),
                    True,
                ),
            ],
        )
        return key, cert

    def leaf(common_name: str, ca_key: Any, ca_cert: Any, usage: Any, san: Any) -> tuple[Any, Any]:
        key = new_key()
        extensions: list[tuple[Any, bool]] = [
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.ExtendedKeyUsage([usage]), False),
        ]
        if san is not None:
            extensions.append((san, False))
        issuer = ca_cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        return key, certificate(common_name, key, issuer, ca_key, extensions)

    def cert_pem(cert: Any) -> bytes:
        data: bytes = cert.public_bytes(serialization.Encoding.PEM)
        return data

    def key_pem(key: Any) -> bytes:
        encryption: Any = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password is not None
            else serialization.NoEncryption()
        )
        data: bytes = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        return data

    ca_key, ca_cert = ca("kclient test CA")
    _, other_ca_cert = ca("kclient other test CA")
    san = x509.SubjectAlternativeName(
        [x509.DNSName(h) for h in hostnames]
        + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    )
    server_key, server_cert = leaf(
        hostnames[0] if hostnames else "server",
        ca_key,
        ca_cert,
        ExtendedKeyUsageOID.SERVER_AUTH,
        san,
    )
    client_key, client_cert = leaf(
        "kclient test client", ca_key, ca_cert, ExtendedKeyUsageOID.CLIENT_AUTH, None
    )

    def write(file_name: str, data: bytes) -> str:
        path = out / file_name
        path.write_bytes(data)
        return str(path)

    return TestCertificates(
        ca_cert=write("ca.pem", cert_pem(ca_cert)),
        server_cert=write("server.pem", cert_pem(server_cert)),
        server_key=write("server.key", key_pem(server_key)),
        server_keystore=write(
            "server-keystore.pem", key_pem(server_key) + cert_pem(server_cert) + cert_pem(ca_cert)
        ),
        client_cert=write("client.pem", cert_pem(client_cert)),
        client_key=write("client.key", key_pem(client_key)),
        client_keystore=write("client-keystore.pem", key_pem(client_key) + cert_pem(client_cert)),
        other_ca_cert=write("other-ca.pem", cert_pem(other_ca_cert)),
    )
