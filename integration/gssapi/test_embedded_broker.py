"""SASL GSSAPI (Kerberos) end to end with a local MIT KDC: kclient (sync and asyncio) to the
embedded broker's GSSAPI listener, re-authentication (KIP-368), kcat (librdkafka through
Cyrus SASL) reading back, and the failures a user causes: each a clear error within the
timeouts, the broker serving other clients all along."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.gssapi.kcat import KCAT_PACKAGES, kcat_binary
from kclient import KafkaProducer, errors
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.errors import ConfigError, KafkaTimeoutError, SaslAuthenticationError
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.testing.broker_process import broker_process
from kclient.testing.hostile import read_frame
from kclient.testing.kdc import KerberosSetup

_topics = itertools.count()


@pytest.fixture(scope="module")
def broker(kerberos_kdc: KerberosSetup) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms=("GSSAPI", "PLAIN"),
        sasl_users={"carol": "carol-secret"},
        sasl_kerberos_keytab=str(kerberos_kdc.broker_keytab),
        connections_max_reauth_ms=1500,
    ) as embedded:
        yield embedded


def gssapi_settings(kerberos: KerberosSetup, **extra: object) -> dict[str, object]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.principal": kerberos.client_principal,
        "sasl.kerberos.keytab": str(kerberos.client_keytab),
        **extra,
    }


def topic_on(broker: EmbeddedBroker) -> str:
    name = f"gssapi-{next(_topics)}"
    broker.create_topic(name, 1)
    return name


def test_sync_producer_authenticates_and_reauthenticates(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kclient.network")
    caplog.set_level(logging.DEBUG, logger="kclient.broker.processor_sasl")
    topic = topic_on(broker)
    settings = gssapi_settings(kerberos_kdc, **{"bootstrap.servers": broker.bootstrap_servers})
    with KafkaProducer(settings) as producer:
        assert producer.send(topic, value=b"first").result(30).offset == 0
        # sessions last 1.5 s: sends across 4 s need re-authentication on the connection
        deadline = time.monotonic() + 4
        sent = 1
        while time.monotonic() < deadline:
            producer.send(topic, value=b"more").result(30)
            sent += 1
            time.sleep(0.2)
    assert [r.value for r in broker.read_records(topic, 0)][:2] == [b"first", b"more"]
    assert len(broker.read_records(topic, 0)) == sent
    messages = [r.getMessage() for r in caplog.records]
    assert any("re-authenticating to node" in m for m in messages)
    assert not [m for m in messages if "node 0 disconnected" in m]
    # the broker knows the client by its short name (Kafka's DEFAULT principal rule)
    assert any("authenticated as 'alice' with GSSAPI" in m for m in messages)
    assert any("re-authenticated as 'alice' with GSSAPI" in m for m in messages)


def test_java_style_jaas_config(broker: EmbeddedBroker, kerberos_kdc: KerberosSetup) -> None:
    topic = topic_on(broker)
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        f'keyTab="{kerberos_kdc.client_keytab}" principal="{kerberos_kdc.client_principal}";'
    )
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "GSSAPI",
        "sasl.jaas.config": jaas,
    }
    with KafkaProducer(settings) as producer:
        assert producer.send(topic, value=b"jaas").result(30).offset == 0


def test_asyncio_producer(broker: EmbeddedBroker, kerberos_kdc: KerberosSetup) -> None:
    topic = topic_on(broker)

    async def main() -> int:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="GSSAPI",
            sasl_kerberos_service_name="kafka",
            **{
                "sasl.kerberos.principal": kerberos_kdc.client_principal,
                "sasl.kerberos.keytab": str(kerberos_kdc.client_keytab),
            },
        )
        await producer.start()
        try:
            metadata = await producer.send_and_wait(topic, b"from asyncio")
        finally:
            await producer.stop()
        return metadata.offset

    assert asyncio.run(main()) == 0
    assert [r.value for r in broker.read_records(topic, 0)] == [b"from asyncio"]


def _failure(settings: dict[str, object], topic: str) -> tuple[BaseException, float]:
    started = time.monotonic()
    bounded = {"max.block.ms": 10_000, "delivery.timeout.ms": 10_000, "request.timeout.ms": 5000}
    with (
        KafkaProducer({**settings, **bounded}) as p,
        pytest.raises((SaslAuthenticationError, KafkaTimeoutError)) as info,
    ):
        p.send(topic, value=b"x").result(15)
    return info.value, time.monotonic() - started


def test_wrong_service_name_is_a_clear_error(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup
) -> None:
    topic = topic_on(broker)
    settings = gssapi_settings(
        kerberos_kdc,
        **{"bootstrap.servers": broker.bootstrap_servers, "sasl.kerberos.service.name": "kafkaa"},
    )
    error, took_s = _failure(settings, topic)
    assert "does not know the service kafkaa/127.0.0.1" in str(error)
    assert "'sasl.kerberos.service.name'" in str(error)
    assert took_s < 12
    assert_broker_serves(broker, kerberos_kdc)


def test_keytab_without_the_principal_is_a_clear_error(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup
) -> None:
    topic = topic_on(broker)
    settings = gssapi_settings(
        kerberos_kdc,
        **{
            "bootstrap.servers": broker.bootstrap_servers,
            "sasl.kerberos.principal": kerberos_kdc.kdc.principal("mallory"),
        },
    )
    error, took_s = _failure(settings, topic)
    assert "no Kerberos credentials for mallory@" in str(error)
    assert "'sasl.kerberos.keytab'" in str(error)
    assert took_s < 12
    assert_broker_serves(broker, kerberos_kdc)


def test_missing_keytab_is_a_config_error(kerberos_kdc: KerberosSetup, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'sasl\.kerberos\.keytab' .* does not exist"):
        KafkaProducer(
            gssapi_settings(
                kerberos_kdc,
                **{
                    "bootstrap.servers": "127.0.0.1:9",
                    "sasl.kerberos.keytab": str(tmp_path / "nope.keytab"),
                },
            )
        )


def test_kdc_down_is_a_clear_error_in_time(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup, tmp_path: Path
) -> None:
    # a krb5.conf whose KDC port nobody listens on, for this producer's process only
    conf = tmp_path / "krb5.conf"
    conf.write_text(
        kerberos_kdc.kdc.krb5_conf.read_text().replace(
            f"127.0.0.1:{kerberos_kdc.kdc.port}", "127.0.0.1:9"
        )
    )
    topic = topic_on(broker)
    saved = os.environ["KRB5_CONFIG"]
    os.environ["KRB5_CONFIG"] = str(conf)
    try:
        error, took_s = _failure(
            gssapi_settings(kerberos_kdc, **{"bootstrap.servers": broker.bootstrap_servers}),
            topic,
        )
    finally:
        os.environ["KRB5_CONFIG"] = saved
    assert "the Kerberos KDC cannot be reached" in str(error)
    assert took_s < 12
    assert_broker_serves(broker, kerberos_kdc)


def test_a_kdc_that_never_answers_fails_within_the_setup_timeout(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup, tmp_path: Path
) -> None:
    # a "KDC" that accepts connections and never answers (libkrb5 alone would wait ~50 s)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        conf = tmp_path / "krb5.conf"
        conf.write_text(
            kerberos_kdc.kdc.krb5_conf.read_text().replace(
                f"127.0.0.1:{kerberos_kdc.kdc.port}", f"127.0.0.1:{silent.getsockname()[1]}"
            )
        )
        saved = os.environ["KRB5_CONFIG"]
        os.environ["KRB5_CONFIG"] = str(conf)
        try:
            settings = gssapi_settings(
                kerberos_kdc,
                **{
                    "bootstrap.servers": broker.bootstrap_servers,
                    "socket.connection.setup.timeout.ms": 1500,
                },
            )
            error, took_s = _failure(settings, topic_on(broker))
        finally:
            os.environ["KRB5_CONFIG"] = saved
    assert "did not answer within 1500 ms" in str(error)
    assert "socket.connection.setup.timeout.ms" in str(error)
    assert took_s < 12
    assert_broker_serves(broker, kerberos_kdc)


@pytest.mark.parametrize(
    "tokens",
    [
        [b"\x60\x82\xff\xff not a Kerberos token"],
        [b""],
        [b"\x00" * 70_000],
    ],
)
def test_garbage_tokens_do_not_take_the_broker_down(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup, tokens: list[bytes]
) -> None:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"".join(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "bad", {"mechanism": "GSSAPI"}))
        )
        _, body = decode_response(ApiKey.SASL_HANDSHAKE, 1, read_frame(sock))
        assert body["error_code"] == 0
        for i, token in enumerate(tokens, 2):
            request = encode_request(ApiKey.SASL_AUTHENTICATE, 2, i, "bad", {"auth_bytes": token})
            sock.sendall(b"".join(request))
            _, answer = decode_response(ApiKey.SASL_AUTHENTICATE, 2, read_frame(sock))
            assert answer["error_code"] == errors.SaslAuthenticationFailedError.code
            assert "invalid credentials with SASL mechanism GSSAPI" in answer["error_message"]
    assert_broker_serves(broker, kerberos_kdc)


def assert_broker_serves(broker: EmbeddedBroker, kerberos: KerberosSetup) -> None:
    """A good GSSAPI client and a PLAIN client still get through."""
    topic = topic_on(broker)
    good = gssapi_settings(kerberos, **{"bootstrap.servers": broker.bootstrap_servers})
    plain = {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "carol",
        "sasl.password": "carol-secret",
    }
    for settings in (good, plain):
        with KafkaProducer(settings) as producer:
            producer.send(topic, value=b"still up").result(30)
    assert len(broker.read_records(topic, 0)) == 2


def test_kcat_reads_back_with_gssapi(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup, tmp_path: Path
) -> None:
    topic = topic_on(broker)
    with KafkaProducer(
        gssapi_settings(kerberos_kdc, **{"bootstrap.servers": broker.bootstrap_servers})
    ) as producer:
        for i in range(5):
            producer.send(topic, value=f"kerberos-{i}".encode())
        producer.flush(30)
    env = {**os.environ, "KRB5CCNAME": f"FILE:{tmp_path / 'kcat.ccache'}"}
    keytab = kerberos_kdc.client_keytab
    principal = kerberos_kdc.client_principal
    result = subprocess.run(
        [
            kcat_binary(),
            "-C",
            "-b",
            broker.bootstrap_servers,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanisms=GSSAPI",
            "-X",
            "sasl.kerberos.service.name=kafka",
            "-X",
            f"sasl.kerberos.keytab={keytab}",
            "-X",
            f"sasl.kerberos.principal={principal}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{result.stderr} (kcat's GSSAPI needs {KCAT_PACKAGES})"
    assert result.stdout.split() == [f"kerberos-{i}" for i in range(5)]


def test_broker_command_line_serves_gssapi(kerberos_kdc: KerberosSetup, tmp_path: Path) -> None:
    keytab = str(kerberos_kdc.broker_keytab)
    principal = kerberos_kdc.broker_principal()
    flags = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-enabled-mechanisms", "GSSAPI"]
    with broker_process(
        *flags, "--sasl-kerberos-keytab", keytab, "--sasl-kerberos-principal", principal
    ) as broker:
        assert broker.sasl_mechanisms == ("GSSAPI",)
        settings = gssapi_settings(kerberos_kdc, **{"bootstrap.servers": broker.bootstrap_servers})
        with KafkaProducer(settings) as producer:
            assert producer.send("cli-gssapi", value=b"v").result(30).offset == 0
    # a keytab without the principal stops the broker at start, naming the settings
    empty = tmp_path / "other.keytab"
    kerberos_kdc.kdc.add_principal("someone-else", empty)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kclient.broker",
            *flags,
            "--sasl-kerberos-keytab",
            str(empty),
            "--sasl-kerberos-principal",
            principal,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert (
        "'sasl.kerberos.keytab'" in result.stderr and "'sasl.kerberos.principal'" in result.stderr
    )


def test_a_stale_client_keytab_is_a_clear_error(
    broker: EmbeddedBroker, kerberos_kdc: KerberosSetup, tmp_path: Path
) -> None:
    keytab = kerberos_kdc.kdc.add_principal("rotated", tmp_path / "rotated.keytab")
    kerberos_kdc.kdc.kadmin(f"cpw -randkey {kerberos_kdc.kdc.principal('rotated')}")  # new key
    settings = gssapi_settings(
        kerberos_kdc,
        **{
            "bootstrap.servers": broker.bootstrap_servers,
            "sasl.kerberos.principal": kerberos_kdc.kdc.principal("rotated"),
            "sasl.kerberos.keytab": str(keytab),
        },
    )
    error, took_s = _failure(settings, topic_on(broker))
    assert "no Kerberos credentials for rotated@" in str(error)
    assert "'sasl.kerberos.keytab'" in str(error)
    assert took_s < 12


def test_a_broker_with_a_stale_keytab_refuses_with_the_brokers_reason(
    kerberos_kdc: KerberosSetup, tmp_path: Path
) -> None:
    kdc = kerberos_kdc.kdc
    principal = kerberos_kdc.broker_principal("localhost")
    stale = tmp_path / "stale-broker.keytab"
    kdc.kadmin(f"ktadd -k {stale} -norandkey {principal}")
    kdc.kadmin(f"cpw -randkey {principal}")  # the KDC's key moves on; the copy is stale
    kdc.kadmin(f"ktadd -k {kerberos_kdc.broker_keytab} -norandkey {principal}")  # others: new
    with EmbeddedBroker(
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms=("GSSAPI",),
        sasl_kerberos_keytab=str(stale),
    ) as broker:
        port = broker.bootstrap_servers.rsplit(":", 1)[1]
        settings = gssapi_settings(kerberos_kdc, **{"bootstrap.servers": f"localhost:{port}"})
        error, took_s = _failure(settings, "t")
    assert "invalid credentials with SASL mechanism GSSAPI" in str(error), error
    assert "'sasl.kerberos.principal'" in str(error)
    assert took_s < 12
