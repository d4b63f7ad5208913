"""Client quotas on a running embedded broker: a client over its quota is told how long to
wait (throttle_time_ms) and its connection is muted that long (KIP-219), an old request
version's answer is held back instead; a flooding client is slowed while an honest one
keeps its rate."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kclient.broker import EmbeddedBroker
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.record import RecordBatchBuilder
from kclient.testing.hostile import read_frame

TOPIC = "quota-topic"


def records(n: int, size: int = 1000) -> bytes:
    builder = RecordBatchBuilder("none", batch_size=1 << 30)
    for i in range(n):
        builder.append(1_700_000_000_000 + i, None, b"x" * size, ())
    return builder.build()


class RawClient:
    """One connection speaking the protocol by hand (to see what the broker answers)."""

    def __init__(self, broker: EmbeddedBroker, client_id: str) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=10)
        self.client_id = client_id
        self.correlation = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self.correlation += 1
        frame = encode_request(api_key, version, self.correlation, self.client_id, body)
        self.sock.sendall(b"".join(frame))

    def receive(self, api_key: int, version: int) -> dict[str, Any]:
        corr, body = decode_response(api_key, version, read_frame(self.sock))
        assert corr == self.correlation
        return body

    def produce(self, version: int, batch: bytes) -> tuple[float, dict[str, Any]]:
        """Seconds until the answer, and the answer."""
        start = time.monotonic()
        self.send_produce(version, batch)
        body = self.receive(ApiKey.PRODUCE, version)
        assert body["responses"][0]["partition_responses"][0]["error_code"] == 0
        return time.monotonic() - start, body

    def send_produce(self, version: int, batch: bytes) -> None:
        self.send(
            ApiKey.PRODUCE,
            version,
            {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )

    def metadata(self) -> float:
        start = time.monotonic()
        self.send(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        self.receive(ApiKey.METADATA, 12)
        return time.monotonic() - start

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    # 2 KB/s per client id, measured over 2 windows of 1 s (so that throttle times are
    # short: 3 KB at once is 0.55 s)
    with EmbeddedBroker(quota_producer_byte_rate=2000, quota_window_num=2) as b:
        b.create_topic(TOPIC)
        yield b


def test_a_client_over_its_quota_is_answered_at_once_then_muted(broker: EmbeddedBroker) -> None:
    client = RawClient(broker, "flood")
    try:
        elapsed_s, body = client.produce(9, records(3))  # 3 KB in a 1 s window: 1.5 times the quota
        throttle_ms = body["throttle_time_ms"]
        assert throttle_ms > 300
        assert elapsed_s < throttle_ms / 1000 / 2  # the answer came at once (KIP-219)
        # a client ignoring throttle_time_ms: its next request waits out the throttle time
        waited_s = client.metadata()
        assert waited_s >= throttle_ms / 1000 - 0.05
        assert waited_s < throttle_ms / 1000 + 1
    finally:
        client.close()
    # the broker counted it, per client id
    (m,) = [m for m in broker.quota_metrics() if m.client_id == "flood"]
    assert m.quota_type == "Produce" and m.quota == 2000
    assert m.throttle_count == 1 and m.throttle_time_ms_total == throttle_ms


def test_an_old_produce_version_gets_its_answer_after_the_throttle_time(
    broker: EmbeddedBroker,
) -> None:
    client = RawClient(broker, "old-client")
    try:
        elapsed_s, body = client.produce(5, records(3))  # Produce v5: before KIP-219
        throttle_ms = body["throttle_time_ms"]
        assert throttle_ms > 300
        assert elapsed_s >= throttle_ms / 1000 - 0.05
        assert client.metadata() < 1.0  # and then the connection is read again
    finally:
        client.close()


def test_other_clients_are_not_held_up_by_a_throttled_one(broker: EmbeddedBroker) -> None:
    flood = RawClient(broker, "flood")
    honest = RawClient(broker, "honest")
    try:
        start = time.monotonic()
        flood.send_produce(5, records(3))  # its answer is held back for seconds
        latencies = [honest.produce(9, records(1, size=100))[0] for _ in range(5)]
        assert max(latencies) < 0.5
        body = flood.receive(ApiKey.PRODUCE, 5)
        assert time.monotonic() - start >= body["throttle_time_ms"] / 1000 - 0.05 > 0.3
    finally:
        flood.close()
        honest.close()


# ---- independent peers ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:(read_text|open_text) is deprecated:DeprecationWarning")
def test_kafka_python_alters_and_describes_client_quotas() -> None:
    """kafka-python's own AlterClientQuotas/DescribeClientQuotas messages (it has no admin
    method for them) against ours; what it sets governs the broker."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

    with EmbeddedBroker() as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            entry = AlterClientQuotasRequest.EntryData
            request = AlterClientQuotasRequest(
                entries=[
                    entry(
                        entity=[entry.EntityData(entity_type="client-id", entity_name="app")],
                        ops=[entry.OpData(key="producer_byte_rate", value=1024.0, remove=False)],
                    ),
                    entry(
                        entity=[entry.EntityData(entity_type="user", entity_name=None)],
                        ops=[entry.OpData(key="request_percentage", value=0.0, remove=False)],
                    ),
                ],
                validate_only=False,
            )
            altered = admin._manager.run(admin._manager.send, request)
            assert [e.error_code for e in altered.entries] == [0, 42]
            assert "request_percentage must be greater than 0" in altered.entries[1].error_message
            broker.set_client_quotas(user="alice", consumer_byte_rate=4096)
            described = admin._manager.run(
                admin._manager.send, DescribeClientQuotasRequest(components=[], strict=False)
            )
        finally:
            admin.close()
        assert described.error_code == 0
        seen = {
            tuple((e.entity_type, e.entity_name) for e in d.entity): {
                v.key: v.value for v in d.values
            }
            for d in described.entries
        }
        assert seen == {
            (("client-id", "app"),): {"producer_byte_rate": 1024.0},
            (("user", "alice"),): {"consumer_byte_rate": 4096.0},
        }
        assert broker.client_quotas_of()[(("client-id", "app"),)] == {"producer_byte_rate": 1024}


def test_librdkafka_reports_the_throttle_and_delivers_everything() -> None:
    """confluent-kafka's throttle callback (librdkafka reads throttle_time_ms from our
    answers), with every record delivered once."""
    import confluent_kafka

    with EmbeddedBroker() as broker:
        broker.create_topic(TOPIC)
        broker.set_client_quotas(client_id="rdkafka-flood", producer_byte_rate=50_000)
        throttles: list[tuple[str, int]] = []
        delivered: list[int] = []
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "client.id": "rdkafka-flood",
                "linger.ms": 5,
                "throttle_cb": lambda event: throttles.append(
                    (event.broker_name, int(event.throttle_time * 1000))
                ),
            }
        )

        def on_delivery(err: Any, msg: Any) -> None:
            assert err is None, err
            delivered.append(msg.offset())

        for _ in range(600):  # 600 KB, over ten times the quota at once
            producer.produce(TOPIC, b"x" * 1000, on_delivery=on_delivery)
            producer.poll(0)
        deadline = time.monotonic() + 30
        while (len(delivered) < 600 or not throttles) and time.monotonic() < deadline:
            producer.poll(0.1)
        assert producer.flush(10) == 0
        assert sorted(delivered) == list(range(600))
        assert throttles, "librdkafka saw no throttle_time_ms"
        assert all(ms > 0 for _, ms in throttles)
        (m,) = [m for m in broker.quota_metrics() if m.client_id == "rdkafka-flood"]
        assert m.throttle_count >= len(throttles)


def test_a_flooding_client_is_held_to_its_quota_while_honest_producers_go_on() -> None:
    """Two connections of one client id send 50 KB Produce requests as fast as answers come
    back, ignoring throttle_time_ms; the broker holds them to about their quota while a
    kclient and a confluent-kafka producer (other client ids) keep working."""
    import threading

    import confluent_kafka

    from kclient import KafkaProducer

    quota = 100_000
    with EmbeddedBroker(quota_window_num=2) as broker:
        broker.create_topic(TOPIC)
        broker.set_client_quotas(client_id="flood", producer_byte_rate=quota)
        stop = threading.Event()
        sent_bytes = [0, 0]

        def flood(i: int) -> None:
            client = RawClient(broker, "flood")
            try:
                batch = records(50, 1000)
                while not stop.is_set():
                    client.produce(9, batch)
                    sent_bytes[i] += len(batch)
            finally:
                client.close()

        threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in (0, 1)]
        for t in threads:
            t.start()
        start = time.monotonic()
        latencies = []
        with KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0) as producer:
            while time.monotonic() - start < 3:
                t0 = time.monotonic()
                producer.send(TOPIC, b"v" * 100).result(10)
                latencies.append(time.monotonic() - t0)
        rdkafka = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        for _ in range(200):
            rdkafka.produce(TOPIC, b"w" * 100)
        assert rdkafka.flush(10) == 0
        elapsed_s = time.monotonic() - start
        stop.set()
        for t in threads:
            t.join(10)
    # the flood got about its quota (plus one window's burst and a request per connection)
    assert sum(sent_bytes) <= quota * (elapsed_s + 2) + 2 * 60_000
    # the honest producer's sends were answered (loose bound: a shared, noisy machine)
    assert len(latencies) > 50
    assert max(latencies) < 1.0


@pytest.mark.filterwarnings("ignore:(read_text|open_text) is deprecated:DeprecationWarning")
def test_topic_creation_over_the_controller_mutation_quota() -> None:
    """KIP-599 as two admin clients see it: kafka-python (CreateTopics v7, strict) gets
    THROTTLING_QUOTA_EXCEEDED for the topic over the quota, which is not created;
    librdkafka (CreateTopics v4, permissive) gets every topic and is throttled."""
    import confluent_kafka.admin
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import ThrottlingQuotaExceededError

    with EmbeddedBroker(quota_controller_mutation_rate=2) as broker:  # a burst of 20
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="kp")
        try:
            with pytest.raises(ThrottlingQuotaExceededError, match="controller_mutation_rate"):
                admin.create_topics([NewTopic(f"kp{i}", 15, 1) for i in range(3)])
        finally:
            admin.close()
        assert {t for t in broker.topics() if t.startswith("kp")} == {"kp0", "kp1"}
        rdkafka = confluent_kafka.admin.AdminClient(
            {"bootstrap.servers": broker.bootstrap_servers, "client.id": "rd"}
        )
        futures = rdkafka.create_topics(
            [confluent_kafka.admin.NewTopic(f"rd{i}", 15, 1) for i in range(3)]
        )
        for future in futures.values():
            future.result(10)
        assert {t for t in broker.topics() if t.startswith("rd")} == {"rd0", "rd1", "rd2"}
        throttled = {
            m.client_id: m.throttle_count
            for m in broker.quota_metrics()
            if m.quota_type == "ControllerMutation"
        }
        assert throttled["kp"] >= 1 and throttled["rd"] >= 1


def test_a_user_quota_follows_the_sasl_user_across_client_ids() -> None:
    """The user of a quota is the SASL user: two producers of alice with different client
    ids share her quota; bob (no quota) is never throttled."""
    import confluent_kafka

    users = {"alice": "alice-secret", "bob": "bob-secret"}
    with EmbeddedBroker(security_protocol="SASL_PLAINTEXT", sasl_users=users) as broker:
        broker.create_topic(TOPIC)
        broker.set_client_quotas(user="alice", producer_byte_rate=20_000)

        def produce_as(user: str, client_id: str) -> None:
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": broker.bootstrap_servers,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.username": user,
                    "sasl.password": users[user],
                    "client.id": client_id,
                    "linger.ms": 5,
                }
            )
            for _ in range(150):  # 150 KB, under ten windows of 20 KB/s alone
                producer.produce(TOPIC, b"x" * 1000)
                producer.poll(0)
            assert producer.flush(30) == 0

        produce_as("alice", "one")
        produce_as("alice", "two")  # together over her 200 KB burst
        produce_as("bob", "three")
    throttled = {
        (m.user, m.client_id): m.throttle_count
        for m in broker.quota_metrics()
        if m.quota_type == "Produce"
    }
    assert throttled.get(("alice", ""), 0) > 0  # measured together, as one
    assert all(user == "alice" for user, _ in throttled)
