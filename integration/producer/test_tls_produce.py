"""kclient over TLS to the embedded cluster's SSL listeners, read back by confluent-kafka
(librdkafka, OpenSSL) over TLS; mutual TLS; the errors of the usual mistakes."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest

from integration.producer.verify import consume_all, dataset
from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker, EmbeddedCluster
from kclient.errors import KafkaError, KafkaTimeoutError
from kclient.testing.tls import TestCertificates, write_test_certificates

_topics = itertools.count()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("tls"), key_password="s3cret")


def ssl_cluster(certs: TestCertificates, **settings: object) -> EmbeddedCluster:
    return EmbeddedCluster(
        3,
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        ssl_key_password="s3cret",
        **settings,
    )


@pytest.fixture(scope="module")
def cluster(certs: TestCertificates) -> Iterator[EmbeddedCluster]:
    with ssl_cluster(certs) as embedded:
        yield embedded


def _topic(cluster: EmbeddedCluster, partitions: int) -> str:
    name = f"tls-{next(_topics)}"
    cluster.create_topic(name, partitions)
    return name


def consumer_settings(certs: TestCertificates) -> dict[str, object]:
    return {"security.protocol": "SSL", "ssl.ca.location": certs.ca_cert}


def test_records_cross_tls_to_three_brokers_and_read_back_intact(
    cluster: EmbeddedCluster, certs: TestCertificates
) -> None:
    topic = _topic(cluster, 6)
    records = dataset(1500, "tls")
    records += [(b"big", bytes([i]) * 300_000, [("n", str(i).encode())]) for i in range(3)]
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        security_protocol="SSL",
        ssl_truststore_location=certs.ca_cert,
        compression_type="lz4",
        batch_size=8192,
    ) as producer:
        futures = [producer.send(topic, value=v, key=k, headers=h) for k, v, h in records]
        producer.flush(60)
        placed = [f.result(0) for f in futures]
    consumed = consume_all(
        cluster.bootstrap_servers, topic, 6, len(records), settings=consumer_settings(certs)
    )
    assert len(consumed) == len(records)
    by_position = {(c.partition, c.offset): c for c in consumed}
    for (key, value, headers), md in zip(records, placed, strict=True):
        got = by_position[(md.partition, md.offset)]
        assert (got.key, got.value, got.headers) == (key, value, headers)
    assert len({md.partition for md in placed}) == 6  # all three brokers took records


def test_a_broker_restart_means_a_new_handshake_and_nothing_lost_or_duplicated(
    cluster: EmbeddedCluster, certs: TestCertificates
) -> None:
    topic = _topic(cluster, 3)
    total = 6_000
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        security_protocol="SSL",
        ssl_truststore_location=certs.ca_cert,
        linger_ms=2,
        batch_size=2048,
        request_timeout_ms=5_000,
        retry_backoff_ms=20,
        reconnect_backoff_ms=20,
    ) as producer:

        def restart() -> None:
            time.sleep(0.2)
            cluster.stop_broker(1)
            time.sleep(0.3)
            cluster.start_broker(1)

        chaos = threading.Thread(target=restart)
        chaos.start()
        futures = []
        for i in range(total):
            futures.append(producer.send(topic, value=str(i).encode()))
            if i % 500 == 0:
                time.sleep(0.05)
        chaos.join(30)
        producer.flush(60)
        for future in futures:
            future.result(0)
    consumed = consume_all(
        cluster.bootstrap_servers, topic, 3, total, settings=consumer_settings(certs)
    )
    assert sorted(int(c.value or b"") for c in consumed) == list(range(total))


def test_mutual_tls_with_the_client_certificate_works_and_without_it_fails_clearly(
    certs: TestCertificates,
) -> None:
    with ssl_cluster(
        certs, ssl_truststore_location=certs.ca_cert, ssl_client_auth="required"
    ) as cluster:
        topic = _topic(cluster, 1)
        with KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            security_protocol="SSL",
            ssl_truststore_location=certs.ca_cert,
            ssl_keystore_location=certs.client_keystore,
            ssl_key_password="s3cret",
        ) as producer:
            assert producer.send(topic, value=b"with a certificate").result(30).offset == 0
        with (
            KafkaProducer(
                bootstrap_servers=cluster.bootstrap_servers,
                security_protocol="SSL",
                ssl_truststore_location=certs.ca_cert,
                max_block_ms=1_500,
            ) as producer,
            pytest.raises(KafkaTimeoutError) as failed,
        ):
            producer.send(topic, value=b"without one")
        message = str(failed.value)
        assert "127.0.0.1" in message
        assert "certificate" in message
        assert "'ssl.keystore.location'" in message


def test_librdkafka_style_settings_do_mutual_tls_too(certs: TestCertificates) -> None:
    with ssl_cluster(
        certs, ssl_truststore_location=certs.ca_cert, ssl_client_auth="required"
    ) as cluster:
        topic = _topic(cluster, 1)
        settings = {
            "security.protocol": "SSL",
            "ssl.ca.location": certs.ca_cert,
            "ssl.certificate.location": certs.client_cert,
            "ssl.key.location": certs.client_key,
            "ssl.key.password": "s3cret",
        }
        with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, **settings}) as p:
            assert p.send(topic, value=b"as confluent-kafka users write it").result(30).offset == 0
        consumed = consume_all(cluster.bootstrap_servers, topic, 1, 1, settings=settings)
        assert [c.value for c in consumed] == [b"as confluent-kafka users write it"]


def test_an_untrusted_broker_is_refused_with_the_reason_and_the_setting(
    cluster: EmbeddedCluster, certs: TestCertificates
) -> None:
    topic = _topic(cluster, 1)
    with (
        KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            security_protocol="SSL",
            ssl_truststore_location=certs.other_ca_cert,
            max_block_ms=1_500,
        ) as producer,
        pytest.raises(KafkaError) as failed,
    ):
        producer.send(topic, value=b"x")
    message = str(failed.value)
    assert "certificate verify failed" in message
    assert "'ssl.truststore.location'" in message


def test_plaintext_to_a_tls_listener_points_at_security_protocol(
    cluster: EmbeddedCluster,
) -> None:
    with (
        KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=1_500) as producer,
        pytest.raises(KafkaError) as failed,
    ):
        producer.send(_topic(cluster, 1), value=b"x")
    assert "set 'security.protocol' to SSL" in str(failed.value)


def test_tls_to_a_plaintext_listener_points_at_security_protocol(certs: TestCertificates) -> None:
    """A plaintext broker resets the connection on the ClientHello: the reason names the
    listener and the setting (a reset used to be reported without them)."""
    with (
        EmbeddedBroker() as plaintext,
        KafkaProducer(
            bootstrap_servers=plaintext.bootstrap_servers,
            security_protocol="SSL",
            ssl_truststore_location=certs.ca_cert,
            max_block_ms=2_000,
        ) as producer,
        pytest.raises(KafkaError) as failed,
    ):
        producer.send("t", value=b"x")
    assert "is it a PLAINTEXT listener (check 'security.protocol')" in str(failed.value)
