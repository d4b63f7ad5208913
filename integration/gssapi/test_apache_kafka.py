"""SASL GSSAPI against Apache Kafka 4.4 (one node, a SASL_PLAINTEXT listener serving
Kerberos as ``kafka/127.0.0.1`` with Java's Krb5LoginModule, ``connections.max.reauth.ms``
2 s) and the local MIT KDC: kclient sync and asyncio write, re-authenticate on their
connections, fail clearly with a wrong service name; kcat (librdkafka through Cyrus SASL)
reads back over GSSAPI too. confluent-kafka's wheels have no GSSAPI (their librdkafka is
built without Cyrus SASL), so kcat stands in for librdkafka."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.gssapi.kcat import KCAT_PACKAGES, kcat_binary
from integration.producer.verify import consume_all
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.errors import KafkaTimeoutError, SaslAuthenticationError
from kclient.testing.apache_kafka import ApacheKafka
from kclient.testing.kdc import KerberosSetup

_topics = itertools.count()


@pytest.fixture(scope="module")
def kafka(kerberos_kdc: KerberosSetup) -> Iterator[ApacheKafka]:
    with ApacheKafka(
        "4.4.0",
        listeners=("GSSAPI",),
        kerberos=kerberos_kdc,
        properties={"connections.max.reauth.ms": 2000},
    ) as cluster:
        yield cluster


def topic_on(kafka: ApacheKafka) -> str:
    name = f"gssapi-{next(_topics)}"
    kafka.create_topic(name, 1)
    return name


def read_values(kafka: ApacheKafka, topic: str, expected: int) -> list[bytes | None]:
    return [c.value for c in consume_all(kafka.bootstrap_servers, topic, 1, expected)]


def test_sync_producer_writes_and_reauthenticates(
    kafka: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kclient.network")
    topic = topic_on(kafka)
    values = []
    with KafkaProducer(kafka.client_config("GSSAPI")) as producer:
        deadline = time.monotonic() + 5  # past two session lifetimes of 2 s
        while time.monotonic() < deadline:
            value = f"kerberos-{len(values)}".encode()
            producer.send(topic, value=value).result(30)
            values.append(value)
            time.sleep(0.25)
    assert read_values(kafka, topic, len(values)) == values
    assert_reauthenticated_on_the_same_connections(caplog)


def assert_reauthenticated_on_the_same_connections(caplog: pytest.LogCaptureFixture) -> None:
    messages = [r.getMessage() for r in caplog.records]
    assert any("re-authenticating to node" in m for m in messages)
    assert not [m for m in messages if "disconnected" in m and "node 1 " in m]


def test_asyncio_producer(kafka: ApacheKafka, kerberos_kdc: KerberosSetup) -> None:
    topic = topic_on(kafka)
    config = kafka.client_config("GSSAPI")

    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=config["bootstrap.servers"],
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
            for i in range(3):
                await producer.send_and_wait(topic, f"aio-{i}".encode())
        finally:
            await producer.stop()

    asyncio.run(main())
    assert read_values(kafka, topic, 3) == [b"aio-0", b"aio-1", b"aio-2"]


def test_wrong_service_name_is_a_clear_error_and_the_broker_stays_up(kafka: ApacheKafka) -> None:
    topic = topic_on(kafka)
    bad = {
        **kafka.client_config("GSSAPI"),
        "sasl.kerberos.service.name": "kafka-typo",
        "max.block.ms": 10_000,
        "delivery.timeout.ms": 10_000,
        "request.timeout.ms": 5000,
    }
    started = time.monotonic()
    with (
        KafkaProducer(bad) as producer,
        pytest.raises((SaslAuthenticationError, KafkaTimeoutError)) as info,
    ):
        producer.send(topic, value=b"x").result(15)
    assert time.monotonic() - started < 15
    assert "does not know the service kafka-typo/127.0.0.1" in str(info.value)
    with KafkaProducer(kafka.client_config("GSSAPI")) as producer:
        assert producer.send(topic, value=b"after").result(30).offset == 0


def test_kcat_reads_back_over_gssapi(
    kafka: ApacheKafka, kerberos_kdc: KerberosSetup, tmp_path: Path
) -> None:
    topic = topic_on(kafka)
    config = kafka.client_config("GSSAPI")
    with KafkaProducer(config) as producer:
        for i in range(4):
            producer.send(topic, value=f"java-{i}".encode())
        producer.flush(30)
    options = [
        f"{name}={value}"
        for name, value in config.items()
        if name not in {"bootstrap.servers", "sasl.mechanism"}
    ] + ["sasl.mechanisms=GSSAPI"]
    command = [
        kcat_binary(),
        "-C",
        "-b",
        config["bootstrap.servers"],
        "-t",
        topic,
        "-o",
        "beginning",
    ]
    for option in options:
        command += ["-X", option]
    result = subprocess.run(
        [*command, "-e", "-q"],
        env={**os.environ, "KRB5CCNAME": f"FILE:{tmp_path / 'kcat.ccache'}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{result.stderr} (kcat's GSSAPI needs {KCAT_PACKAGES})"
    assert result.stdout.split() == [f"java-{i}" for i in range(4)]
