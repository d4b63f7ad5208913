"""kclient → tansu (an independent, Rust Kafka broker), read back by confluent-kafka."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from integration.peers import Tansu, run_tansu
from integration.producer.verify import CODECS, confluent_partitions, consume_all, dataset
from kclient import KafkaProducer
from kclient.sender.partitioner import keyed_partition

_topics = itertools.count()


@pytest.fixture(scope="module")
def tansu() -> Iterator[Tansu]:
    with run_tansu() as broker:
        yield broker


def _topic(tansu: Tansu, partitions: int) -> str:
    name = f"kclient-{next(_topics)}"
    tansu.create_topic(name, partitions)
    return name


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_in_order(tansu: Tansu, codec: str) -> None:
    topic = _topic(tansu, 3)
    records = dataset(300, codec)
    with KafkaProducer(
        bootstrap_servers=tansu.bootstrap_servers,
        compression_type=codec,
        linger_ms=5,
        batch_size=4096,
    ) as producer:
        futures = [producer.send(topic, value=v, key=k, headers=h) for k, v, h in records]
        producer.flush(60)
        placed = [f.result(0) for f in futures]
    consumed = consume_all(tansu.bootstrap_servers, topic, 3, len(records))
    assert len(consumed) == len(records)
    by_position = {(c.partition, c.offset): c for c in consumed}
    for (key, value, headers), md in zip(records, placed, strict=True):
        got = by_position[(md.partition, md.offset)]
        assert (got.key, got.value, got.headers) == (key, value, headers)
    for partition in range(3):  # per-partition order is send order
        sent = [
            v for (_, v, _), md in zip(records, placed, strict=True) if md.partition == partition
        ]
        assert [c.value for c in consumed if c.partition == partition] == sent
    assert len({md.partition for md in placed}) == 3


def test_keyed_records_land_where_confluent_kafka_puts_them(tansu: Tansu) -> None:
    ours = _topic(tansu, 7)
    theirs = _topic(tansu, 7)
    keys = [f"user-{i}".encode() for i in range(200)] + [b"", b"\x00", "ключ".encode()]
    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers) as producer:
        futures = {key: producer.send(ours, value=b"x", key=key) for key in keys}
        producer.flush(60)
        kclient_placed = {key: f.result(0).partition for key, f in futures.items()}
    assert kclient_placed == confluent_partitions(tansu.bootstrap_servers, theirs, keys)
    assert kclient_placed == {key: keyed_partition(key, 7) for key in keys}


@pytest.mark.parametrize("acks", [1, -1])
def test_acks_settings(tansu: Tansu, acks: int) -> None:
    # acks=0 is tested against the embedded broker: tansu answers acks=0 requests (Kafka
    # brokers never do), and a client that follows the protocol drops that connection.
    topic = _topic(tansu, 1)
    with KafkaProducer(
        bootstrap_servers=tansu.bootstrap_servers, acks=acks, linger_ms=0
    ) as producer:
        results = [producer.send(topic, value=b"%d" % i).result(30) for i in range(20)]
    assert [md.offset for md in results] == list(range(20))
    consumed = consume_all(tansu.bootstrap_servers, topic, 1, 20)
    assert [c.value for c in consumed] == [b"%d" % i for i in range(20)]


def test_large_volume_with_small_batches_and_many_requests_in_flight(tansu: Tansu) -> None:
    topic = _topic(tansu, 4)
    with KafkaProducer(
        bootstrap_servers=tansu.bootstrap_servers,
        linger_ms=1,
        batch_size=2048,
        compression_type="lz4",
    ) as producer:
        for i in range(20_000):
            producer.send(topic, value=b"%08d" % i, partition=i % 4)
        producer.flush(120)
        assert producer.metrics()["record-error-total"] == 0
    consumed = consume_all(tansu.bootstrap_servers, topic, 4, 20_000)
    for partition in range(4):
        values = [int(c.value or b"") for c in consumed if c.partition == partition]
        assert values == list(range(partition, 20_000, 4))
