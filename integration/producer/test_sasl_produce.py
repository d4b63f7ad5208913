"""kclient with SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; over plaintext and TLS) to the
embedded broker's SASL listeners, read back by confluent-kafka authenticating on its own."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator

import pytest

from integration.producer.verify import consume_all, dataset
from kclient import KafkaProducer
from kclient.broker import EmbeddedCluster
from kclient.errors import KafkaTimeoutError, SaslAuthenticationError
from kclient.testing.tls import TestCertificates, write_test_certificates

USERS = {"alice": "alice-secret", "bob": "b=o,b pässword"}
_topics = itertools.count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3, security_protocol="SASL_PLAINTEXT", sasl_users=USERS) as embedded:
        yield embedded


def _topic(cluster: EmbeddedCluster, partitions: int) -> str:
    name = f"sasl-{next(_topics)}"
    cluster.create_topic(name, partitions)
    return name


def sasl(mechanism: str, user: str = "alice", protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    return {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_each_mechanism_authenticates_to_every_broker_and_records_read_back(
    cluster: EmbeddedCluster, mechanism: str
) -> None:
    topic = _topic(cluster, 6)
    records = dataset(600, mechanism)
    settings = sasl(mechanism, user="bob")  # a name and password that need escaping
    with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, **settings}) as producer:
        futures = [producer.send(topic, value=v, key=k, headers=h) for k, v, h in records]
        producer.flush(60)
        placed = [f.result(0) for f in futures]
    assert len({md.partition for md in placed}) == 6  # all three brokers
    consumed = consume_all(cluster.bootstrap_servers, topic, 6, len(records), settings=settings)
    by_position = {(c.partition, c.offset): c for c in consumed}
    assert len(consumed) == len(records)
    for (key, value, headers), md in zip(records, placed, strict=True):
        got = by_position[(md.partition, md.offset)]
        assert (got.key, got.value, got.headers) == (key, value, headers)


def test_java_style_jaas_config_works(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster, 1)
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";'
    )
    with KafkaProducer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": jaas,
        }
    ) as producer:
        assert producer.send(topic, value=b"jaas").result(30).offset == 0


def test_a_wrong_password_fails_send_at_once_with_the_brokers_reason(
    cluster: EmbeddedCluster,
) -> None:
    settings = {**sasl("SCRAM-SHA-512"), "sasl.password": "not-it"}
    started = time.monotonic()
    with (
        KafkaProducer(
            {"bootstrap.servers": cluster.bootstrap_servers, "max.block.ms": 20_000, **settings}
        ) as producer,
        pytest.raises(SaslAuthenticationError) as failed,
    ):
        producer.send(_topic(cluster, 1), value=b"x")
    assert time.monotonic() - started < 10  # not max.block.ms: authentication is final
    text = str(failed.value)
    assert "authentication as 'alice' with SCRAM-SHA-512 failed" in text
    assert "check 'sasl.username' and 'sasl.password'" in text


def test_plaintext_to_a_sasl_listener_is_refused_and_sasl_to_a_plain_one_says_so(
    cluster: EmbeddedCluster,
) -> None:
    topic = _topic(cluster, 1)
    # The broker closes a connection that skips SASL: its first request is never answered.
    with (
        KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=1_500) as producer,
        pytest.raises(KafkaTimeoutError, match=r"a SASL listener\? check 'security.protocol'"),
    ):
        producer.send(topic, value=b"x")
    with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, **sasl("PLAIN")}) as ok:
        assert ok.send(topic, value=b"still served").result(30).offset == 0
    with (
        EmbeddedCluster(1) as plain,
        KafkaProducer(
            {"bootstrap.servers": plain.bootstrap_servers, "max.block.ms": 5_000, **sasl("PLAIN")}
        ) as producer,
        pytest.raises(SaslAuthenticationError) as refused,
    ):
        producer.send("anything", value=b"x")
    assert "is it a SASL listener" in str(refused.value) or "does not enable" in str(refused.value)


def test_sasl_ssl_with_scram(tmp_path_factory: pytest.TempPathFactory) -> None:
    certs: TestCertificates = write_test_certificates(tmp_path_factory.mktemp("sasl-tls"))
    with EmbeddedCluster(
        3,
        security_protocol="SASL_SSL",
        ssl_keystore_location=certs.server_keystore,
        sasl_users=USERS,
    ) as cluster:
        topic = _topic(cluster, 3)
        settings = {
            **sasl("SCRAM-SHA-512", protocol="SASL_SSL"),
            "ssl.truststore.location": certs.ca_cert,
        }
        with KafkaProducer(
            {"bootstrap.servers": cluster.bootstrap_servers, **settings}
        ) as producer:
            futures = [producer.send(topic, value=str(i).encode()) for i in range(300)]
            producer.flush(60)
            for future in futures:
                future.result(0)
        consumed = consume_all(
            cluster.bootstrap_servers,
            topic,
            3,
            300,
            settings={
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "alice",
                "sasl.password": USERS["alice"],
                "ssl.ca.location": certs.ca_cert,
            },
        )
        assert sorted(int(c.value or b"") for c in consumed) == list(range(300))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sessions_are_renewed_on_the_same_connections_while_producing(
    mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Brokers with connections.max.reauth.ms (KIP-368) close a connection whose session
    expired at its next request; kclient re-authenticates in time on the same connection,
    so a steady producer sees no disconnect and loses nothing."""
    caplog.set_level(logging.INFO, logger="kclient.network.client")
    with EmbeddedCluster(
        2, security_protocol="SASL_PLAINTEXT", sasl_users=USERS, connections_max_reauth_ms=1_000
    ) as reauth_cluster:
        topic = _topic(reauth_cluster, 4)
        assert {reauth_cluster.leader(topic, p) for p in range(4)} == {0, 1}
        with KafkaProducer(
            {"bootstrap.servers": reauth_cluster.bootstrap_servers, "linger.ms": 0}
            | sasl(mechanism)
        ) as producer:
            futures = []
            # until every broker renewed the sessions twice (about two lifetimes), then
            # for half a lifetime more
            deadline = time.monotonic() + 15.0
            renewed_at = None
            while time.monotonic() < deadline:
                n = len(futures)
                futures.append(producer.send(topic, value=b"%d" % n, partition=n % 4))
                time.sleep(0.005)
                if renewed_at is None and n % 20 == 0:
                    metrics = reauth_cluster.metrics()
                    if all(s.successful_reauthentications >= 2 for s in metrics):
                        renewed_at = time.monotonic()
                if renewed_at is not None and time.monotonic() > renewed_at + 0.5:
                    break
            producer.flush(30)
            assert [f.exception(0) for f in futures] == [None] * len(futures)
        snapshots = reauth_cluster.metrics()
        consumed = consume_all(
            reauth_cluster.bootstrap_servers, topic, 4, len(futures), settings=sasl(mechanism)
        )
    assert sorted(int(c.value or b"") for c in consumed) == list(range(len(futures)))
    assert all(s.successful_reauthentications >= 2 for s in snapshots), [
        (s.successful_reauthentications, s.connections) for s in snapshots
    ]
    assert [s.expired_connections_killed for s in snapshots] == [0, 0]
    disconnects = [r.getMessage() for r in caplog.records if "disconnected" in r.getMessage()]
    assert disconnects == []
