"""kclient.aio against real brokers: aiokafka's producer examples with only the import
changed, read back by confluent-kafka; the event loop keeps running while ``send`` waits
for metadata or for ``buffer.memory``; tansu, a SASL listener and a TLS listener."""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from integration.peers import Tansu
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.errors import BufferExhaustedError, KafkaTimeoutError
from kclient.protocol import ApiKey
from kclient.testing.fake_broker import FakeBroker, metadata_body
from kclient.testing.tls import write_test_certificates


def read_values(bootstrap: str, topic: str, partitions: int, n: int, **conf: Any) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "aio-check",
            "enable.auto.commit": False,
            **conf,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < n and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.2):
                assert msg.error() is None, msg.error()
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_the_aiokafka_examples_run_with_the_import_changed(kafka_broker: EmbeddedBroker) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic("example", partitions=3)

    async def send_one() -> None:  # aiokafka's first example
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("example", b"one message")
        finally:
            await producer.stop()

    async def send_in_batches() -> None:  # aiokafka's batch example
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=200)
        await producer.start()
        try:
            batch = producer.create_batch()
            i = 0
            while i < 30:
                value = f"batched {i}".encode()
                if batch.append(key=None, value=value, timestamp=None) is None:
                    partition = random.choice(tuple(await producer.partitions_for("example")))
                    await producer.send_batch(batch, "example", partition=partition)
                    batch = producer.create_batch()
                    continue
                i += 1
            partition = random.choice(tuple(await producer.partitions_for("example")))
            sent = await producer.send_batch(batch, "example", partition=partition)
            assert (await sent).partition == partition
        finally:
            await producer.stop()

    asyncio.run(send_one())
    asyncio.run(send_in_batches())
    values = read_values(bootstrap, "example", 3, 31)
    assert sorted(values) == sorted([b"one message"] + [f"batched {i}".encode() for i in range(30)])


# A send that blocked the loop would stall it for max_block_ms (2 s); a loaded 2-core
# machine delays a 5 ms heartbeat by up to a few tenths of a second (0.34 s seen)
MAX_STALL_S = 1.0


async def longest_stall_s(wait: Callable[[], Awaitable[Any]]) -> tuple[float, BaseException]:
    """Run ``wait`` (expected to fail) beside a 5 ms heartbeat; the longest gap seen."""
    gaps: list[float] = []
    stop = asyncio.Event()

    async def heartbeat() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    beat = asyncio.ensure_future(heartbeat())
    try:
        await wait()
    except Exception as exc:  # the expected failure, returned for the caller to check
        error: BaseException = exc
    else:
        raise AssertionError("the wait was expected to fail")
    finally:
        stop.set()
        await beat
    return max(gaps), error


def test_the_loop_keeps_running_while_send_waits_for_metadata() -> None:
    with EmbeddedBroker(auto_create_topics=False) as broker:

        async def main() -> tuple[float, BaseException]:
            async with AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap_servers, max_block_ms=2000
            ) as producer:
                started = time.monotonic()
                stall, error = await longest_stall_s(lambda: producer.send("missing", b"x"))
                assert 1.9 < time.monotonic() - started < 5
                return stall, error

        stall, error = asyncio.run(main())
    assert isinstance(error, KafkaTimeoutError) and "max_block_ms" in str(error)
    assert stall < MAX_STALL_S, f"the event loop stalled for {stall:.3f} s"


def test_the_loop_keeps_running_while_send_waits_for_buffer_memory() -> None:
    answers: dict[int, Any] = {int(ApiKey.PRODUCE): lambda header, body: None}  # never acked
    broker = FakeBroker(answers)
    answers[int(ApiKey.METADATA)] = lambda header, body: metadata_body([broker], {"t": 1})
    try:

        async def main() -> tuple[float, BaseException]:
            async with AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap_servers,
                max_block_ms=2000,
                buffer_memory=64 * 1024,
                max_batch_size=16 * 1024,
                request_timeout_ms=3000,
                delivery_timeout_ms=3000,  # then stop() ends what was never acknowledged
            ) as producer:

                async def fill() -> None:
                    for _ in range(10_000):
                        await producer.send("t", b"x" * 1000)

                stall, error = await longest_stall_s(fill)
                return stall, error

        stall, error = asyncio.run(main())
    finally:
        broker.close()
    assert isinstance(error, BufferExhaustedError), error
    assert stall < MAX_STALL_S, f"the event loop stalled for {stall:.3f} s"


def test_tansu_and_a_sasl_listener(tansu: Tansu) -> None:
    tansu.create_topic("aio", 1)

    async def write(bootstrap: str, topic: str, **settings: Any) -> None:
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, **settings) as producer:
            futures = [await producer.send(topic, b"v%d" % i) for i in range(500)]
            offsets = [(await f).offset for f in futures]
            assert offsets == sorted(offsets) and len(set(offsets)) == 500

    asyncio.run(write(tansu.bootstrap_servers, "aio"))
    assert len(read_values(tansu.bootstrap_servers, "aio", 1, 500)) == 500
    users = {"alice": "alice-secret"}
    with EmbeddedBroker(security_protocol="SASL_PLAINTEXT", sasl_users=users) as broker:
        asyncio.run(
            write(
                broker.bootstrap_servers,
                "sasl",
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username="alice",
                sasl_plain_password="alice-secret",
            )
        )
        values = read_values(
            broker.bootstrap_servers,
            "sasl",
            1,
            500,
            **{
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            },
        )
    assert len(values) == 500


@pytest.fixture
def tansu() -> Any:
    from integration.peers import run_tansu

    with run_tansu() as t:
        yield t


def test_tls_with_an_ssl_context_and_records_larger_than_a_socket_write(
    tmp_path: Path,
) -> None:
    certs = write_test_certificates(tmp_path, key_password="s3cret")
    values = [bytes([i]) * 300_000 for i in range(4)] + [b"small %d" % i for i in range(200)]
    with EmbeddedBroker(
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        ssl_key_password="s3cret",
    ) as broker:

        async def write() -> None:
            context = ssl.create_default_context(cafile=str(certs.ca_cert))
            async with AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap_servers,
                security_protocol="SSL",
                ssl_context=context,
                max_request_size=2_000_000,
            ) as producer:
                futures = [await producer.send("tls", v) for v in values]
                offsets = [(await f).offset for f in futures]
                assert offsets == list(range(len(values)))

        asyncio.run(write())
        got = read_values(
            broker.bootstrap_servers,
            "tls",
            1,
            len(values),
            **{"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert)},
        )
    assert got == values


def test_a_bootstrap_server_given_by_name(kafka_broker: EmbeddedBroker) -> None:
    port = kafka_broker.bootstrap_servers.rsplit(":", 1)[1]
    kafka_broker.create_topic("named", partitions=1)

    async def main() -> int:
        async with AIOKafkaProducer(bootstrap_servers=f"localhost:{port}") as producer:
            return (await producer.send_and_wait("named", b"by name")).offset

    assert asyncio.run(main()) == 0
    assert read_values(kafka_broker.bootstrap_servers, "named", 1, 1) == [b"by name"]
