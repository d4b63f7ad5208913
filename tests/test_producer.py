"""KafkaProducer through its public API, on a scripted client (no sockets).

The producer's I/O thread really runs; ``LiveMockClient`` is a MockClient whose ``poll``
blocks until woken (like a selector) and which answers every request like a broker.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
import warnings
from collections import defaultdict
from typing import Any

import pytest

from kclient import errors
from kclient.clock import SYSTEM_CLOCK
from kclient.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    RecordTooLargeError,
    SerializationError,
)
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.producer import KafkaProducer
from kclient.protocol import ApiKey
from kclient.record import RecordBatch
from kclient.sender.future import RecordMetadata
from kclient.sender.partitioner import keyed_partition
from kclient.testing.client import MockClient, metadata_update_with


class LiveMockClient(MockClient):
    """Answers Produce and InitProducerId like a broker (unless ``hold``), blocks in poll."""

    def __init__(self, partitions: int = 4) -> None:
        super().__init__(SYSTEM_CLOCK, metadata_update_with(1, {"t": partitions}))
        self._wake = threading.Event()
        self.hold = False
        self.request_sent = threading.Event()
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.records: dict[tuple[str, int], list[Any]] = defaultdict(list)

    def wakeup(self) -> None:
        super().wakeup()
        self._wake.set()

    def send(self, request: ClientRequest, now_ms: int) -> None:
        if request.api_key == ApiKey.INIT_PRODUCER_ID:
            self.prepare_response(
                {"error_code": 0, "producer_id": 77, "producer_epoch": 0},
                api_key=ApiKey.INIT_PRODUCER_ID,
            )
        elif request.api_key == ApiKey.PRODUCE and not self.hold:
            self.prepare_response(self.answer(request), api_key=ApiKey.PRODUCE)
        super().send(request, now_ms)
        self.request_sent.set()

    def answer(self, request: ClientRequest) -> dict[str, Any]:
        responses = []
        for topic in request.body_for(12)["topic_data"]:
            parts = []
            for part in topic["partition_data"]:
                tp = (topic["name"], part["index"])
                batch = RecordBatch(part["records"])
                self.records[tp].extend(batch.records())
                parts.append(
                    {"index": part["index"], "error_code": 0, "base_offset": self.offsets[tp]}
                )
                self.offsets[tp] += batch.record_count
            responses.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": responses}

    def release(self) -> None:
        """Answer every held request."""
        for request in list(self.requests):
            self.respond_to(request, self.answer(request))
        self.wakeup()

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        responses = super().poll(timeout_ms, now_ms)
        if not responses:
            self._wake.wait(min(timeout_ms, 100) / 1000)
            self._wake.clear()
        return responses


def test_send_returns_a_future_of_record_metadata(producer: KafkaProducer) -> None:
    future = producer.send("t", value=b"v", key=b"k", headers=[("h", b"x")], timestamp_ms=1234)
    assert future.result(timeout=10) == RecordMetadata("t", keyed_partition(b"k", 4), 0, 1234, 1, 1)
    assert future.get(10) == future.result()


def test_record_metadata_gives_the_serialized_key_and_value_sizes(client: LiveMockClient) -> None:
    with KafkaProducer(
        bootstrap_servers="127.0.0.1:9092",
        kafka_client=client,
        key_serializer="str",
        value_serializer="json",
    ) as p:
        md = p.send("t", value={"a": 1}, key="kéy").result(10)
        assert (md.serialized_key_size, md.serialized_value_size) == (4, 7)  # UTF-8; '{"a":1}'
        null = p.send("t", value=None, key=None).result(10)
        assert (null.serialized_key_size, null.serialized_value_size) == (-1, -1)
        seen: list[object] = []
        p.send("t", "xyz", callback=lambda m, e: seen.append(m)).result(10)
        p.flush(10)
        assert [(m.serialized_key_size, m.serialized_value_size) for m in seen] == [
            (-1, 5)
        ]  # '"xyz"'  # type: ignore[attr-defined]


def test_records_reach_the_broker_with_keys_values_and_headers(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    producer.send("t", value=b"v1", key=b"k", headers=[("h", b"x")], partition=2).result(10)
    producer.send("t", value=None, key=None, partition=2).result(10)
    first, second = client.records[("t", 2)]
    assert (first.key, first.value, first.headers) == (b"k", b"v1", [("h", b"x")])
    assert (second.key, second.value) == (None, None)


def test_idempotence_is_on_by_default(producer: KafkaProducer, client: LiveMockClient) -> None:
    producer.send("t", b"v", partition=0).result(10)
    assert client.sent[0].api_key == ApiKey.INIT_PRODUCER_ID
    produce = next(r for r in client.sent if r.api_key == ApiKey.PRODUCE)
    batch = RecordBatch(produce.body_for(12)["topic_data"][0]["partition_data"][0]["records"])
    assert (batch.producer_id, batch.base_sequence) == (77, 0)


def test_partitioning_keyed_explicit_custom_and_ignore_keys(client: LiveMockClient) -> None:
    with KafkaProducer(bootstrap_servers="h:1", linger_ms=0, kafka_client=client) as p:
        assert (
            p.send("t", b"v", key=b"foobar").result(10).partition == (-790332482 & 0x7FFFFFFF) % 4
        )
        assert p.send("t", b"v", key=b"foobar", partition=3).result(10).partition == 3
    custom = LiveMockClient()
    with KafkaProducer(
        bootstrap_servers="h:1",
        linger_ms=0,
        kafka_client=custom,
        partitioner=lambda topic, key, n: n - 1,
    ) as p:
        assert p.send("t", b"v", key=b"x").result(10).partition == 3
        assert p.send("t", b"v").result(10).partition == 3
    ignoring = LiveMockClient()
    with KafkaProducer(
        bootstrap_servers="h:1", linger_ms=0, kafka_client=ignoring, partitioner_ignore_keys=True
    ) as p:
        partitions = {p.send("t", b"v", key=bytes([i])).result(10).partition for i in range(20)}
    assert len(partitions) == 1  # sticky: keys ignored, one batch worth of records stays put


def test_callbacks_run_with_metadata_and_their_errors_are_logged(
    producer: KafkaProducer, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[Any, Any, str]] = []

    def callback(md: Any, exc: Any) -> None:
        seen.append((md, exc, threading.current_thread().name))

    def broken(md: Any, exc: Any) -> None:
        raise RuntimeError("user bug in callback")

    with caplog.at_level(logging.ERROR):
        producer.send("t", b"v", partition=1, callback=broken).result(10)
    producer.send("t", b"v", partition=1, callback=callback)
    producer.flush(10)
    assert seen[0][0].offset == 1 and seen[0][1] is None
    assert seen[0][2].startswith("kclient-producer-network-thread")
    assert "user bug in callback" in caplog.text


def test_too_large_records_fail_at_send_naming_the_sizes(client: LiveMockClient) -> None:
    too_large = r"1082 bytes .* 'max.request.size' \(1000 bytes\)"
    with (
        KafkaProducer(bootstrap_servers="h:1", kafka_client=client, max_request_size=1000) as p,
        pytest.raises(RecordTooLargeError, match=too_large),
    ):
        p.send("t", bytes(1000))
    other = LiveMockClient()
    with (
        KafkaProducer(
            bootstrap_servers="h:1", kafka_client=other, buffer_memory=500, batch_size=100
        ) as p,
        pytest.raises(RecordTooLargeError, match=r"'buffer.memory' \(500 bytes\)"),
    ):
        p.send("t", bytes(1000))


def test_non_bytes_value_without_serializer_is_a_clear_error(producer: KafkaProducer) -> None:
    with pytest.raises(SerializationError, match="set 'value.serializer'"):
        producer.send("t", "text")


def test_configured_serializers(client: LiveMockClient) -> None:
    with KafkaProducer(
        bootstrap_servers="h:1",
        linger_ms=0,
        kafka_client=client,
        key_serializer="str",
        value_serializer="json",
    ) as p:
        p.send("t", {"a": 1}, key="k", partition=0).result(10)
    (record,) = client.records[("t", 0)]
    assert (record.key, record.value) == (b"k", b'{"a":1}')


def test_flush_waits_for_every_record_sent_before_it(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    client.hold = True
    futures = [producer.send("t", b"v", partition=i % 4) for i in range(20)]
    with pytest.raises(KafkaTimeoutError, match="flush"):
        producer.flush(timeout=0.05)
    client.hold = False
    client.release()
    producer.flush(timeout=10)
    assert all(f.done() for f in futures)


def test_close_delivers_lingering_records(client: LiveMockClient) -> None:
    producer = KafkaProducer(bootstrap_servers="h:1", linger_ms=60_000, kafka_client=client)
    future = producer.send("t", b"v", partition=0)
    producer.close()
    assert future.result(0).offset == 0
    assert client.closed
    with pytest.raises(IllegalStateError, match="after the producer is closed"):
        producer.send("t", b"v")
    producer.close()  # again: nothing happens


def test_close_with_timeout_fails_what_is_left(client: LiveMockClient) -> None:
    client.hold = True
    producer = KafkaProducer(bootstrap_servers="h:1", linger_ms=0, kafka_client=client)
    future = producer.send("t", b"v", partition=0)
    producer.close(timeout=0.05)
    with pytest.raises(IllegalStateError, match="closed before these records were delivered"):
        future.result(0)


def test_many_threads_can_send_at_once(producer: KafkaProducer, client: LiveMockClient) -> None:
    per_thread = 500
    futures: dict[int, list[Any]] = {}

    def work(n: int) -> None:
        futures[n] = [
            producer.send("t", b"%d-%d" % (n, i), partition=n % 2) for i in range(per_thread)
        ]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    producer.flush(30)
    for n, fs in futures.items():
        offsets = [f.result(0).offset for f in fs]
        assert offsets == sorted(offsets), f"thread {n}'s records were reordered"
    values = [r.value for tp in (("t", 0), ("t", 1)) for r in client.records[tp]]
    assert len(values) == len(set(values)) == 6 * per_thread


def test_asyncio_can_await_a_send(producer: KafkaProducer) -> None:
    async def main() -> RecordMetadata:
        return await asyncio.wrap_future(producer.send("t", b"v", partition=1))

    assert asyncio.run(main()).partition == 1


def test_unknown_topic_times_out_after_max_block_ms(client: LiveMockClient) -> None:
    client.prepare_metadata_update(metadata_update_with(1, {"t": 4}, topic_errors={"nope": 3}))
    missing = r"topic 'nope' not present in metadata after 50 ms"
    with (
        KafkaProducer(bootstrap_servers="h:1", kafka_client=client, max_block_ms=50) as p,
        pytest.raises(KafkaTimeoutError, match=missing),
    ):
        p.send("nope", b"v")


def test_partitions_for_and_metrics(producer: KafkaProducer) -> None:
    assert [info.partition for info in producer.partitions_for("t")] == [0, 1, 2, 3]
    producer.send("t", b"v" * 10, partition=0).result(10)
    metrics = producer.metrics()
    assert metrics["record-send-total"] == 1
    for name in (
        "record-send-rate",
        "record-error-rate",
        "record-retry-rate",
        "batch-size-avg",
        "records-per-request-avg",
        "compression-rate-avg",
        "request-latency-avg",
        "request-latency-max",
        "outgoing-byte-rate",
        "buffer-available-bytes",
        "bufferpool-wait-time",
        "requests-in-flight",
    ):
        assert name in metrics
    assert metrics["buffer-available-bytes"] == 32 * 1024 * 1024


def test_metrics_count_the_requests_in_flight(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    producer.send("t", b"v", partition=0).result(10)
    client.hold = True
    client.request_sent.clear()
    future = producer.send("t", b"v", partition=0)
    assert client.request_sent.wait(10)
    assert producer.metrics()["requests-in-flight"] == 1  # sent, not answered
    client.hold = False
    client.release()
    future.result(10)
    assert producer.metrics()["requests-in-flight"] == 0


def test_a_forked_child_gets_a_clear_error(producer: KafkaProducer) -> None:
    producer.send("t", b"v", partition=0).result(10)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: report what send() did, then leave without cleanup
        try:
            producer.send("t", b"v")
            message = b"no error"
        except IllegalStateError as exc:
            message = str(exc).encode()
        os.write(write_end, message)
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    message = os.read(read_end, 1000).decode()
    os.close(read_end)
    assert status == 0
    assert "create the producer after the fork" in message
    assert producer.send("t", b"v", partition=0).result(10).offset == 1  # the parent goes on


def test_fatal_error_makes_send_raise() -> None:
    class Refusing(LiveMockClient):
        def send(self, request: ClientRequest, now_ms: int) -> None:
            MockClient.send(self, request, now_ms)  # nothing answers by itself

    client = Refusing()
    with KafkaProducer(bootstrap_servers="h:1", linger_ms=0, kafka_client=client) as p:
        future = p.send("t", b"v", partition=0)
        code = errors.ClusterAuthorizationFailedError.code
        while not client.requests:
            client._wake.wait(0.01)
        client.respond({"error_code": code, "producer_id": -1, "producer_epoch": -1})
        client.wakeup()
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            future.result(10)
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            p.send("t", b"v")


def test_a_dropped_producer_delivers_then_stops_its_thread(client: LiveMockClient) -> None:
    producer = KafkaProducer(bootstrap_servers="h:1", linger_ms=60_000, kafka_client=client)
    future = producer.send("t", b"v", partition=0)
    name = producer._thread.name
    del producer
    gc.collect()
    (thread,) = [t for t in threading.enumerate() if t.name == name] or [None]
    if thread is not None:
        thread.join(10)
    assert future.result(0).offset == 0
    assert not any(t.name == name for t in threading.enumerate())
