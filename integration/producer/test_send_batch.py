"""``send_batch`` → the embedded broker and tansu, read back by confluent-kafka: every row
once, keyed rows where Java's partitioner puts them, per-key order, Arrow columns."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from integration.broker.clients import kafka_python_consume, kcat_consume
from integration.peers import Tansu, run_tansu
from integration.producer.verify import confluent_partitions, consume_all
from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker


@pytest.fixture(scope="module")
def tansu() -> Iterator[Tansu]:
    with run_tansu() as broker:
        yield broker


@pytest.fixture(scope="module")
def embedded() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        yield broker


def as_arrow(items: list[bytes | None]) -> object:
    """The items as an Arrow binary array sliced out of a larger one (it starts at an
    offset into its buffers), as send_batch reads Arrow columns in place."""
    pa = pytest.importorskip("pyarrow")
    return pa.array([b"before", *items, b"after"], pa.binary()).slice(1, len(items))


# Each column form and each codec once per broker: the codec compresses a closed batch
# whatever form its rows came in (every form x codec pair is read back by the test below)
@pytest.mark.parametrize("broker", ["embedded", "tansu"])
@pytest.mark.parametrize(("form", "codec"), [("lists", "none"), ("arrow", "lz4")])
def test_rows_arrive_once_where_confluent_kafka_would_put_their_keys(
    request: pytest.FixtureRequest, broker: str, codec: str, form: str
) -> None:
    server = request.getfixturevalue(broker)
    topic = f"bulk-{uuid.uuid4().hex[:8]}"
    server.create_topic(topic, 3)
    n = 20_000
    keys = [None if i % 5 == 0 else f"k{i % 11}".encode() for i in range(n)]
    values = [f"v{i}".encode() for i in range(n)]
    with KafkaProducer(
        bootstrap_servers=server.bootstrap_servers, compression_type=codec, batch_size=4096
    ) as producer:
        if form == "arrow":
            metadata = producer.send_batch(topic, as_arrow(values), as_arrow(keys)).result(60)
        else:
            metadata = producer.send_batch(topic, values, keys=keys).result(60)
    got = consume_all(server.bootstrap_servers, topic, 3, n)
    assert sorted(r.value for r in got) == sorted(values)  # each exactly once
    at = {(r.partition, r.offset): r for r in got}
    for i, md in enumerate(metadata):  # the metadata names where each row is
        assert at[(md.partition, md.offset)].value == values[i]
    expected = confluent_partitions(
        server.bootstrap_servers, topic, sorted({k for k in keys if k is not None})
    )
    for record in got:
        if record.key is not None:
            assert record.partition == expected[record.key]
    for key in {k for k in keys if k is not None}:  # per-key order kept
        mine = [r.value for r in got if r.key == key]
        assert mine == [v for v, k in zip(values, keys, strict=True) if k == key]


def test_arrow_columns_round_trip(embedded: EmbeddedBroker) -> None:
    pa = pytest.importorskip("pyarrow")
    topic = f"arrow-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 1)
    table = pa.table(
        {
            "key": pa.array([f"k{i}" for i in range(1000)]),
            "value": pa.array([b"x%d" % i for i in range(1000)], type=pa.large_binary()),
        }
    )
    with KafkaProducer(bootstrap_servers=embedded.bootstrap_servers) as producer:
        producer.send_batch(topic, table["value"], keys=table["key"]).result(30)
    got = consume_all(embedded.bootstrap_servers, topic, 1, 1000)
    assert [(r.key, r.value) for r in got] == [(f"k{i}".encode(), b"x%d" % i) for i in range(1000)]


# kafka-python 3.0 loads its schemas with the deprecated importlib.resources.read_text
@pytest.mark.filterwarnings("ignore:(read_text|open_text) is deprecated:DeprecationWarning")
@pytest.mark.parametrize("reader", ["kafka-python", "kcat"])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("form", ["lists", "arrow"])
def test_kafka_python_and_kcat_read_send_batch_records_exactly(
    embedded: EmbeddedBroker, reader: str, codec: str, form: str
) -> None:
    topic = f"bulk-read-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 1)
    keys = [None if i % 4 == 0 else b"k%d" % i for i in range(300)]
    values = [b"" if i == 7 else None if i == 9 else b"value-%d" % i for i in range(300)]
    with KafkaProducer(
        bootstrap_servers=embedded.bootstrap_servers, compression_type=codec, batch_size=2048
    ) as producer:
        if form == "arrow":
            producer.send_batch(topic, as_arrow(values), as_arrow(keys)).result(30)
        else:
            producer.send_batch(topic, values, keys=keys).result(30)
    expected: list[tuple[bytes | None, bytes | None]] = list(zip(keys, values, strict=True))
    if reader == "kafka-python":
        got = kafka_python_consume(embedded.bootstrap_servers, topic, 300)
    else:
        got = kcat_consume(embedded.bootstrap_servers, topic, 300, new_librdkafka=True)
        # kcat -Z prints a null value as NULL, and librdkafka hands it an empty one as null
        expected = [(k, v or b"NULL") for k, v in expected]
    assert [(k, v) for k, v, _ in got] == expected
