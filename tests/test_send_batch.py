"""``KafkaProducer.send_batch``: many records in one call, one result for all of them."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from kclient.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    RecordTooLargeError,
    SendBatchError,
)
from kclient.producer import KafkaProducer
from kclient.protocol import ApiKey
from kclient.sender.future import RecordMetadata
from kclient.sender.partitioner import keyed_partition
from tests.test_producer import LiveMockClient


def test_every_row_arrives_and_the_result_lists_their_metadata_in_row_order(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    values = [f"v{i}".encode() for i in range(100)]
    keys = [f"k{i % 7}".encode() for i in range(100)]
    result = producer.send_batch("t", values, keys=keys, timestamps=[1000 + i for i in range(100)])
    metadata = result.result(timeout=10)
    assert len(result) == len(metadata) == 100
    assert result.done()
    for i, md in enumerate(metadata):
        assert md.partition == keyed_partition(keys[i], 4)  # as send() partitions keys
        assert md.timestamp == 1000 + i
    stored = {
        (tp[1], offset): record
        for tp, records in client.records.items()
        for offset, record in enumerate(records)
    }
    for i, md in enumerate(metadata):
        record = stored[(md.partition, md.offset)]
        assert (record.key, record.value) == (keys[i], values[i])


def test_rows_of_one_key_keep_their_order(producer: KafkaProducer, client: LiveMockClient) -> None:
    metadata = producer.send_batch("t", [bytes([i]) for i in range(50)], keys=[b"same"] * 50)
    offsets = [md.offset for md in metadata.result(10)]
    assert offsets == sorted(offsets) and len(set(offsets)) == 50
    (records,) = [r for r in client.records.values() if r]
    assert [r.value for r in records] == [bytes([i]) for i in range(50)]


def test_headers_partitions_and_none_items_are_taken_per_row(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    result = producer.send_batch(
        "t",
        [b"a", None, b"c"],
        keys=[None, b"k", None],
        headers=[[("h", b"1")], None, []],
        partitions=[2, 2, 2],
    )
    assert [md.partition for md in result.result(10)] == [2, 2, 2]
    first, second, third = client.records[("t", 2)]
    assert (first.value, first.headers) == (b"a", [("h", b"1")])
    assert (second.key, second.value) == (b"k", None)
    assert third.value == b"c"


def test_arrow_columns_are_accepted(producer: KafkaProducer, client: LiveMockClient) -> None:
    pa = pytest.importorskip("pyarrow")
    values = pa.array([b"x", b"y"], type=pa.large_binary())
    keys = pa.chunked_array([pa.array(["k1"]), pa.array(["k2"])])  # strings: UTF-8 keys
    metadata = producer.send_batch("t", values, keys=keys).result(10)
    sent = {(md.partition, md.offset) for md in metadata}
    got = {
        (tp[1], i): (r.key, r.value)
        for tp, records in client.records.items()
        for i, r in enumerate(records)
        if (tp[1], i) in sent
    }
    assert sorted(got.values()) == [(b"k1", b"x"), (b"k2", b"y")]


def test_a_row_refused_at_once_is_reported_for_that_row_and_the_others_go(
    client: LiveMockClient,
) -> None:
    with KafkaProducer(
        bootstrap_servers="h:1", linger_ms=0, kafka_client=client, max_request_size=1000
    ) as p:
        result = p.send_batch("t", [b"ok", bytes(2000), b"ok too"], partitions=[0, 0, 0])
        with pytest.raises(SendBatchError, match=r"1 of 3 records to topic 't' failed") as info:
            result.result(10)
    error = info.value
    assert list(error.errors) == [1]
    assert isinstance(error.errors[1], RecordTooLargeError)
    assert error.metadata[1] is None
    assert [md.offset for md in error.metadata if md is not None] == [0, 1]
    assert [r.value for r in client.records[("t", 0)]] == [b"ok", b"ok too"]
    assert result.exceptions(10) == error.errors
    again = pickle.loads(pickle.dumps(error))
    assert (again.topic, list(again.errors), again.metadata) == ("t", [1], error.metadata)


def test_a_record_the_broker_refuses_fails_its_row(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    def refuse(request: Any) -> dict[str, Any]:
        responses = []
        for topic in request.body_for(12)["topic_data"]:
            parts = [
                {"index": part["index"], "error_code": 87, "base_offset": -1}  # INVALID_RECORD
                for part in topic["partition_data"]
            ]
            responses.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": responses}

    client.answer = refuse  # type: ignore[method-assign]
    result = producer.send_batch("t", [b"a", b"b"], partitions=[1, 1])
    errors = result.exceptions(10)
    assert sorted(errors) == [0, 1]
    assert all("INVALID_RECORD" in repr(e) or "InvalidRecord" in repr(e) for e in errors.values())


def test_waiting_less_than_the_delivery_takes_raises_and_leaves_rows_pending(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    client.hold = True
    result = producer.send_batch("t", [b"a", b"b"], partitions=[0, 1])
    with pytest.raises(KafkaTimeoutError, match=r"2 of 2 records to topic 't' not acknowledged"):
        result.result(timeout=0.05)
    assert not result.done()
    client.hold = False
    client.release()
    assert [md.partition for md in result.result(10)] == [0, 1]


def test_futures_give_each_row_as_send_would(producer: KafkaProducer) -> None:
    result = producer.send_batch("t", [b"a", bytes(10)], partitions=[3, 3])
    futures = result.futures()
    assert all(f is not None for f in futures)
    assert [f.result(10) for f in futures if f is not None] == result.result(10)
    assert isinstance(result.result(10)[0], RecordMetadata)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"values": b"abc"}, TypeError, "'values' must be a sequence"),
        (
            {"values": [b"a"], "keys": [b"k", b"l"]},
            ValueError,
            "'keys' has 2 items but 'values' has 1",
        ),
        ({"values": [b"a"], "partitions": 5}, TypeError, "'partitions' must be a sequence"),
    ],
)
def test_bad_columns_are_refused_for_the_whole_call(
    producer: KafkaProducer, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        producer.send_batch("t", **kwargs)


def test_after_close_it_raises(client: LiveMockClient) -> None:
    p = KafkaProducer(bootstrap_servers="h:1", kafka_client=client)
    p.close()
    with pytest.raises(IllegalStateError):
        p.send_batch("t", [b"a"])


def test_one_produce_request_carries_many_rows(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    client.hold = True
    result = producer.send_batch("t", [b"v"] * 200, partitions=[0] * 200)
    assert client.request_sent.wait(10)
    client.hold = False
    client.release()
    result.result(10)
    produces = [r for r in client.sent if r.api_key == ApiKey.PRODUCE]
    assert len(produces) < 200  # batched, not a request per row


def test_a_row_of_the_wrong_type_fails_alone_and_the_rows_after_it_still_go(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    result = producer.send_batch("t", [b"a", "not bytes", b"c", b"d"], partitions=None)
    errors = result.exceptions(10)
    assert list(errors) == [1]
    assert "value must be bytes" in str(errors[1])
    assert sorted(r.value for records in client.records.values() for r in records) == [
        b"a",
        b"c",
        b"d",
    ]


def test_when_buffer_memory_stays_full_the_rows_not_queued_fail_with_the_timeout(
    client: LiveMockClient,
) -> None:
    client.hold = True
    with KafkaProducer(
        bootstrap_servers="h:1",
        kafka_client=client,
        buffer_memory=1000,
        batch_size=100,
        max_block_ms=0,
        linger_ms=0,
    ) as p:
        result = p.send_batch("t", [bytes(50)] * 40, partitions=None)
        futures = result.futures()
        queued = [row for row, f in enumerate(futures) if f is not None]
        assert queued and len(queued) < 40
        first_failed = len(queued)
        assert queued == list(range(first_failed))  # in order, then nothing more
        client.hold = False
        client.release()
        errors = result.exceptions(10)
    assert sorted(errors) == list(range(first_failed, 40))
    assert all(isinstance(e, KafkaTimeoutError) for e in errors.values())
    assert "buffer.memory" in str(errors[first_failed]) or "max.block.ms" in str(
        errors[first_failed]
    )


def test_a_topic_without_metadata_fails_every_row_once_max_block_ms_passes(
    client: LiveMockClient,
) -> None:
    with KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client, max_block_ms=50, linger_ms=0
    ) as p:
        result = p.send_batch("missing", [b"a", b"b", b"c"])
        errors = result.exceptions(10)
    assert sorted(errors) == [0, 1, 2]
    assert errors[0] is errors[2]  # one wait, one error for the rows it stopped
    assert "'missing' not present in metadata after 50 ms" in str(errors[0])


def test_timestamps_may_be_none_per_row(producer: KafkaProducer) -> None:
    metadata = producer.send_batch("t", [b"a", b"b"], timestamps=[5, None]).result(10)
    assert metadata[0].timestamp == 5
    assert metadata[1].timestamp > 1_000_000_000_000  # now, in ms


def test_rows_over_many_batches_keep_order_per_key_and_all_arrive(client: LiveMockClient) -> None:
    with KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client, batch_size=512, linger_ms=0
    ) as p:
        values = [b"%05d" % i for i in range(600)]
        keys = [b"even" if i % 2 == 0 else b"odd" for i in range(600)]
        metadata = p.send_batch("t", values, keys=keys).result(10)
    assert len({(md.partition, md.offset) for md in metadata}) == 600
    for key in (b"even", b"odd"):
        records = client.records[("t", keyed_partition(key, 4))]
        mine = [r.value for r in records if r.key == key]
        assert mine == [v for v, k in zip(values, keys, strict=True) if k == key]


def test_explicit_partitions_place_rows_and_a_partition_the_topic_lacks_fails_its_row(
    client: LiveMockClient,
) -> None:
    with KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client, linger_ms=0, max_block_ms=50
    ) as p:
        result = p.send_batch(
            "t",
            [b"a", b"b", b"c", b"d", b"e"],
            keys=[b"k", None, b"k", None, None],
            partitions=[3, 1, None, 9, 0],
        )
        errors = result.exceptions(10)
        metadata = result.futures()
    assert list(errors) == [3]
    assert "partition 9 of topic 't' with partition count 4" in str(errors[3])
    placed = {row: f.result(0).partition for row, f in enumerate(metadata) if f is not None}
    assert placed[0] == 3 and placed[1] == 1 and placed[4] == 0
    assert placed[2] == keyed_partition(b"k", 4)  # None: the key decides
    assert [r.value for r in client.records[("t", 3)]][:1] == [b"a"]


def test_keyed_and_keyless_rows_sharing_a_partition_keep_row_order() -> None:
    client = LiveMockClient(partitions=1)
    with KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client, batch_size=300, linger_ms=0
    ) as p:
        keys = [None if i % 3 else b"k%d" % i for i in range(90)]
        values = [b"%03d" % i for i in range(90)]
        p.send_batch("t", values, keys=keys).result(10)
    assert [r.value for r in client.records[("t", 0)]] == values


def test_rows_to_a_partition_the_topic_lacks_wait_for_it_once_per_call(
    client: LiveMockClient,
) -> None:
    with KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client, linger_ms=0, max_block_ms=50
    ) as p:
        result = p.send_batch("t", [b"v"] * 6, partitions=[9, 0, 9, 9, 1, 9])
        errors = result.exceptions(10)
        placed = [f.result(0).partition for f in result.futures() if f is not None]
    assert sorted(errors) == [0, 2, 3, 5] and placed == [0, 1]
    # one max.block.ms wait for partition 9, its error given to each of its rows
    assert errors[0] is errors[2] is errors[3] is errors[5]


def test_serialize_false_sends_bytes_past_the_configured_serializers(
    client: LiveMockClient,
) -> None:
    with KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client, linger_ms=0, value_serializer="json"
    ) as p:
        p.send_batch("t", [{"a": 1}], partitions=[0]).result(10)
        p.send_batch("t", [b"raw"], partitions=[0], serialize=False).result(10)
    assert [r.value for r in client.records[("t", 0)]] == [b'{"a":1}', b"raw"]
