"""TLS settings: ``security.protocol=SSL`` and the ``ssl.*`` settings (PEM files only).

Contexts are built from certificate files written for each test; no sockets.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from kclient.config import ProducerConfig
from kclient.errors import ConfigError
from kclient.network.channel import describe_os_error
from kclient.network.config import NetworkClientConfig
from kclient.testing.tls import TestCertificates, write_test_certificates

BOOT = {"bootstrap.servers": "127.0.0.1:9093"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("tls"), key_password="pw")


def ssl_config(**settings: object) -> ProducerConfig:
    return ProducerConfig({**BOOT, "security.protocol": "SSL", **settings})


def test_ssl_builds_a_verifying_context_from_the_truststore(certs: TestCertificates) -> None:
    config = ssl_config(**{"ssl.truststore.location": certs.ca_cert})
    context = config.ssl_context
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname  # ssl.endpoint.identification.algorithm=https
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "kclient test CA"),),)
    ]
    assert config.security_protocol == "SSL"


def test_snake_case_and_lower_case_protocol_are_accepted(certs: TestCertificates) -> None:
    config = ProducerConfig(BOOT, security_protocol="ssl", ssl_truststore_location=certs.ca_cert)
    assert config.security_protocol == "SSL"
    assert config.ssl_context is not None


def test_empty_endpoint_identification_turns_the_name_check_off(certs: TestCertificates) -> None:
    config = ssl_config(
        **{"ssl.truststore.location": certs.ca_cert, "ssl.endpoint.identification.algorithm": ""}
    )
    assert config.ssl_context is not None
    assert not config.ssl_context.check_hostname
    assert config.ssl_context.verify_mode == ssl.CERT_REQUIRED  # the chain is still checked
    with pytest.raises(ConfigError, match="'ssl.endpoint.identification.algorithm' must be"):
        ssl_config(**{"ssl.endpoint.identification.algorithm": "ldap"})


def test_without_a_truststore_the_system_cas_are_trusted(
    certs: TestCertificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenSSL's default verify paths honour these variables: make "the system's CAs" be
    # exactly the test CA, and see that the context trusts it
    monkeypatch.setenv("SSL_CERT_FILE", certs.ca_cert)
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    config = ssl_config()
    assert config.ssl_context is not None
    assert config.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in config.ssl_context.get_ca_certs()] == [
        ((("commonName", "kclient test CA"),),)
    ]


def test_missing_unreadable_or_garbage_files_name_the_setting(
    certs: TestCertificates, tmp_path: Path
) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(ConfigError, match=r"'ssl.truststore.location' is '.*nope.pem': no such"):
        ssl_config(**{"ssl.truststore.location": missing})
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="'ssl.truststore.location' .* no usable PEM"):
        ssl_config(**{"ssl.truststore.location": str(garbage)})
    with pytest.raises(ConfigError, match="'ssl.keystore.location' is '.*nope.pem': no such"):
        ssl_config(**{"ssl.keystore.location": missing})
    with pytest.raises(ConfigError, match="'ssl.keystore.location' .*JKS and PKCS12"):
        ssl_config(**{"ssl.keystore.location": certs.ca_cert})  # a certificate, no key


def test_an_encrypted_key_needs_the_right_password(certs: TestCertificates) -> None:
    base = {
        "ssl.truststore.location": certs.ca_cert,
        "ssl.keystore.location": certs.client_keystore,
    }
    with pytest.raises(ConfigError, match="'ssl.key.password' does not open it"):
        ssl_config(**base)
    with pytest.raises(ConfigError, match="'ssl.key.password' does not open it"):
        ssl_config(**base, **{"ssl.key.password": "wrong"})
    assert ssl_config(**base, **{"ssl.key.password": "pw"}).ssl_context is not None


def test_pem_text_settings_work_like_the_files(certs: TestCertificates) -> None:
    key = Path(certs.client_key).read_text()
    chain = Path(certs.client_cert).read_text()
    config = ssl_config(
        **{
            "ssl.truststore.certificates": Path(certs.ca_cert).read_text(),
            "ssl.keystore.certificate.chain": chain,
            "ssl.keystore.key": key,
            "ssl.key.password": "pw",
        }
    )
    assert config.ssl_context is not None
    assert len(config.ssl_context.get_ca_certs()) == 1
    with pytest.raises(ConfigError, match="go together: set both"):
        ssl_config(**{"ssl.keystore.certificate.chain": chain})
    with pytest.raises(ConfigError, match="'ssl.truststore.certificates' holds no usable PEM"):
        ssl_config(**{"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----\nxx\n"})


def test_jks_and_pkcs12_stores_are_refused_with_how_to_convert() -> None:
    with pytest.raises(ConfigError, match="'ssl.truststore.type' must be PEM .*keytool"):
        ssl_config(**{"ssl.truststore.type": "JKS"})
    with pytest.raises(ConfigError, match="'ssl.keystore.type' must be PEM"):
        ssl_config(**{"ssl.keystore.type": "PKCS12"})
    assert ssl_config(**{"ssl.keystore.type": "pem"}).ssl_keystore_type == "PEM"


def test_ssl_settings_without_ssl_protocol_are_an_error_not_ignored(
    certs: TestCertificates,
) -> None:
    with pytest.raises(ConfigError, match="'security.protocol' is PLAINTEXT: set 'security.pro"):
        ProducerConfig({**BOOT, "ssl.truststore.location": certs.ca_cert})
    with pytest.raises(ConfigError, match="must be one of PLAINTEXT, SSL, SASL_PLAINTEXT"):
        ProducerConfig({**BOOT, "security.protocol": "TLS"})


def test_a_ready_context_is_used_as_is_and_excludes_the_file_settings(
    certs: TestCertificates,
) -> None:
    context = ssl.create_default_context()
    assert ssl_config(**{"ssl.context": context}).ssl_context is context
    with pytest.raises(ConfigError, match="'ssl.context' is given: it replaces"):
        ssl_config(**{"ssl.context": context, "ssl.truststore.location": certs.ca_cert})
    with pytest.raises(ConfigError, match="must be an ssl.SSLContext"):
        ssl_config(**{"ssl.context": "tls"})


def test_secrets_never_show_in_the_config_repr(certs: TestCertificates) -> None:
    config = ssl_config(
        **{"ssl.keystore.location": certs.client_keystore, "ssl.key.password": "pw"}
    )
    assert "pw'" not in repr(config)
    assert "ssl.key.password=[hidden]" in repr(config)


def test_the_network_client_gets_the_context(certs: TestCertificates) -> None:
    config = ssl_config(**{"ssl.truststore.location": certs.ca_cert})
    network = NetworkClientConfig.from_config(config)
    assert network.security_protocol == "SSL"
    assert network.ssl_context is config.ssl_context
    with pytest.raises(ConfigError, match="'security.protocol' must be one of PLAINTEXT, SSL"):
        NetworkClientConfig(security_protocol="TLS")
    with pytest.raises(ConfigError, match="SASL_SSL needs 'sasl.mechanism'"):
        NetworkClientConfig(security_protocol="SASL_SSL")


def _ssl_error(cls: type[ssl.SSLError], reason: str, **attrs: str) -> ssl.SSLError:
    exc = cls(1, f"[SSL: {reason}] {reason.lower()}")
    exc.reason = reason  # type: ignore[misc]
    for name, value in attrs.items():
        setattr(exc, name, value)
    return exc


def test_tls_failures_are_described_with_the_setting_to_check() -> None:
    untrusted = _ssl_error(
        ssl.SSLCertVerificationError,
        "CERTIFICATE_VERIFY_FAILED",
        verify_message="unable to get local issuer certificate",
    )
    assert "'ssl.truststore.location'" in describe_os_error(untrusted)
    assert "unable to get local issuer certificate" in describe_os_error(untrusted)
    mismatch = _ssl_error(
        ssl.SSLCertVerificationError,
        "CERTIFICATE_VERIFY_FAILED",
        verify_message="Hostname mismatch, certificate is not valid for 'b1'.",
    )
    assert "'ssl.endpoint.identification.algorithm'" in describe_os_error(mismatch)
    plaintext = _ssl_error(ssl.SSLError, "WRONG_VERSION_NUMBER")
    assert "'security.protocol'" in describe_os_error(plaintext)
    no_cert = _ssl_error(ssl.SSLError, "TLSV13_ALERT_CERTIFICATE_REQUIRED")
    assert "requires a client certificate" in describe_os_error(no_cert)
    assert "'ssl.keystore.location'" in describe_os_error(no_cert)
    refused = _ssl_error(ssl.SSLError, "SSLV3_ALERT_BAD_CERTIFICATE")
    assert "refused our client certificate" in describe_os_error(refused)


def test_librdkafka_names_work_as_confluent_kafka_users_write_them(
    certs: TestCertificates,
) -> None:
    config = ProducerConfig(
        {
            **BOOT,
            "security.protocol": "SSL",
            "ssl.ca.location": certs.ca_cert,
            "ssl.certificate.location": certs.client_cert,
            "ssl.key.location": certs.client_key,
            "ssl.key.password": "pw",
        }
    )
    assert config.ssl_truststore_location == certs.ca_cert
    assert config.ssl_context is not None
    assert len(config.ssl_context.get_ca_certs()) == 1
    with pytest.raises(ConfigError, match="'ssl.key.password' does not open it"):
        ssl_config(
            **{"ssl.certificate.location": certs.client_cert, "ssl.key.location": certs.client_key}
        )
    with pytest.raises(ConfigError, match="'ssl.certificate.location' and 'ssl.key.location' go"):
        ssl_config(**{"ssl.certificate.location": certs.client_cert})
    with pytest.raises(ConfigError, match="not both"):
        ssl_config(
            **{
                "ssl.certificate.location": certs.client_cert,
                "ssl.key.location": certs.client_key,
                "ssl.keystore.location": certs.client_keystore,
            }
        )
    with pytest.raises(ConfigError, match="'ssl.truststore.location' is given twice"):
        ssl_config(**{"ssl.ca.location": certs.ca_cert, "ssl.truststore.location": certs.ca_cert})
    sasl = ProducerConfig(
        {
            **BOOT,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "u",
            "sasl.password": "p",
        }
    )
    assert sasl.sasl is not None and sasl.sasl.mechanism == "SCRAM-SHA-256"


def test_kafka_python_keyword_names_work_as_its_users_write_them(certs: TestCertificates) -> None:
    config = ProducerConfig(
        bootstrap_servers="h:1",
        security_protocol="SASL_SSL",
        ssl_cafile=certs.ca_cert,
        ssl_certfile=certs.client_cert,
        ssl_keyfile=certs.client_key,
        ssl_password="pw",
        sasl_mechanism="PLAIN",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    assert config.ssl_truststore_location == certs.ca_cert
    assert config.ssl_context is not None and len(config.ssl_context.get_ca_certs()) == 1
    assert (config.sasl_username, config.sasl_password) == ("u", "p")
