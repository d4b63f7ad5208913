"""``client.dns.lookup`` (KIP-235) and ``bootstrap.resolve.timeout.ms`` (KIP-909) on Apache
Kafka 4.4, over 127.0.0.1 only.

The node's listeners advertise ``localhost`` and its TLS certificate names only
``localhost`` (no IP address). ``bootstrap.servers=127.0.0.1:<ssl port>`` then fails the
host name check with ``use_all_dns_ips`` (TLS checks 127.0.0.1, which the certificate does
not name) and works with ``resolve_canonical_bootstrap_servers_only``: 127.0.0.1's reverse
name here is ``localhost`` (``/etc/hosts``), which the certificate names. Names that do not
resolve come from a resolver given to the client (a ``*.invalid`` lookup would ask the
machine's DNS server, which is not on 127.0.0.1); every other name is looked up as usual
(``localhost``, from ``/etc/hosts``)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from integration.apache_kafka.readback import unique
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.config import ProducerConfig
from kclient.errors import BootstrapResolutionError, ConfigError, KafkaTimeoutError
from kclient.network import NetworkClient, NetworkClientConfig
from kclient.network.connection_states import Address, resolve_all
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka

CANONICAL = "resolve_canonical_bootstrap_servers_only"


@pytest.fixture(scope="module")
def kafka() -> Iterator[ApacheKafka]:
    """One Kafka 4.4 node advertising ``localhost``, its certificate naming only that."""
    if socket.getnameinfo(("127.0.0.1", 0), socket.NI_NAMEREQD)[0] != "localhost":
        pytest.fail("this machine's reverse name of 127.0.0.1 must be localhost (/etc/hosts)")
    with ApacheKafka(
        VERSIONS[0],
        listeners=("PLAINTEXT", "SSL"),
        advertised_host="localhost",
        certificate_ips=(),
    ) as kafka:
        yield kafka


def _tls_settings(kafka: ApacheKafka, **more: object) -> dict[str, object]:
    port = kafka.broker_address(1, "SSL").rsplit(":", 1)[1]
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.truststore.location": kafka.certificates.ca_cert,
        **more,
    }


# ---- client.dns.lookup (KIP-235) --------------------------------------------------------


def test_an_ip_bootstrap_fails_the_host_name_check_with_use_all_dns_ips(
    kafka: ApacheKafka,
) -> None:
    topic = unique("dns-all-ips")
    kafka.create_topic(topic, 1)
    settings = _tls_settings(kafka, **{"max.block.ms": 3_000})
    with KafkaProducer(settings) as producer, pytest.raises(KafkaTimeoutError) as info:
        producer.send(topic, b"v")
    text = str(info.value)
    assert "127.0.0.1" in text and "mismatch" in text.lower(), text


def test_canonical_names_pass_the_host_name_check(kafka: ApacheKafka) -> None:
    topic = unique("dns-canonical")
    kafka.create_topic(topic, 1)
    settings = _tls_settings(kafka, **{"client.dns.lookup": CANONICAL})
    with KafkaProducer(settings) as producer:
        bootstrap = producer._metadata.bootstrap_addresses
        assert [host for host, _ in bootstrap] == ["localhost"]
        assert producer.send(topic, b"by its canonical name").result(timeout=30).offset == 0


def test_canonical_names_on_the_loop(kafka: ApacheKafka) -> None:
    topic = unique("dns-canonical-aio")
    kafka.create_topic(topic, 1)

    async def main() -> int:
        async with AIOKafkaProducer(
            **_tls_settings(kafka, client_dns_lookup=CANONICAL)
        ) as producer:
            metadata = await producer.send_and_wait(topic, b"by its canonical name")
        return metadata.offset

    assert asyncio.run(asyncio.wait_for(main(), 60)) == 0


# ---- bootstrap.resolve.timeout.ms (KIP-909) ---------------------------------------------


class _Dns:
    """``*.invalid`` never resolves; ``late.test`` is 127.0.0.1 once ``resolvable``."""

    def __init__(self) -> None:
        self.resolvable = False

    def __call__(self, host: str, port: int) -> list[Address]:
        if host.endswith(".invalid") or (host == "late.test" and not self.resolvable):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve_all("127.0.0.1" if host == "late.test" else host, port)


def _producer(settings: dict[str, object], dns: _Dns) -> KafkaProducer:
    cfg = ProducerConfig(settings)
    client = NetworkClient.create(
        cfg.bootstrap_servers, NetworkClientConfig.from_config(cfg), resolver=dns
    )
    return KafkaProducer(settings, kafka_client=client)


def test_no_name_resolving_fails_after_the_timeout_with_a_typed_error(
    kafka: ApacheKafka,
) -> None:
    port = kafka.broker_address(1).rsplit(":", 1)[1]
    settings = {
        "bootstrap.servers": f"kafka.invalid:{port}",
        "bootstrap.resolve.timeout.ms": 2_000,
    }
    producer = _producer(settings, _Dns())
    try:
        start = time.monotonic()
        with pytest.raises(BootstrapResolutionError, match="'bootstrap.resolve.timeout.ms'"):
            producer.send("t", b"v")
        assert 1.9 <= time.monotonic() - start < 5  # the setting, not max.block.ms (60 s)
        with pytest.raises(BootstrapResolutionError):  # final, as Java's
            producer.send("t", b"v")
    finally:
        producer.close()
    with pytest.raises(ConfigError, match="'bootstrap.resolve.timeout.ms'"):
        _producer({**settings, "bootstrap.resolve.timeout.ms": 0}, _Dns())  # at creation


def test_a_name_that_resolves_within_the_timeout_reaches_kafka(kafka: ApacheKafka) -> None:
    topic = unique("dns-late")
    kafka.create_topic(topic, 1)
    port = kafka.broker_address(1).rsplit(":", 1)[1]
    dns = _Dns()
    settings = {
        "bootstrap.servers": f"nohost.invalid:{port},late.test:{port}",
        "bootstrap.resolve.timeout.ms": 20_000,
    }
    later = threading.Timer(1.0, lambda: setattr(dns, "resolvable", True))
    with _producer(settings, dns) as producer:
        start = time.monotonic()
        later.start()
        try:
            future = producer.send(topic, b"after the name resolved")  # waits for metadata
            assert time.monotonic() - start >= 0.9
            assert future.result(timeout=30).offset == 0
        finally:
            later.cancel()
        assert producer._metadata.bootstrap_addresses == (("late.test", int(port)),)
