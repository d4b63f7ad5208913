"""Producer interceptors (``interceptors=[...]``, Java's ``ProducerInterceptor``) through
``KafkaProducer``'s public API on the scripted client of ``test_producer`` (no sockets),
and ``ProducerInterceptors`` alone with a ``MockClock`` (the error log's rate limit)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from kclient import KafkaProducer, ProducerInterceptor, ProducerRecord, errors
from kclient.errors import ConfigError
from kclient.producer.interceptors import LOG_INTERVAL_MS, ProducerInterceptors
from kclient.sender.future import RecordMetadata
from kclient.testing.clock import MockClock
from tests.test_producer import LiveMockClient


class Recording(ProducerInterceptor):
    """Adds a header to each record and records what it is told."""

    def __init__(self, header: str = "traced") -> None:
        self.header = header
        self.sent: list[ProducerRecord] = []
        self.acks: list[tuple[RecordMetadata | None, BaseException | None]] = []
        self.ack_threads: set[str] = set()
        self.closed = 0

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent.append(record)
        headers = [*(record.headers or ()), (self.header, b"1")]
        return record._replace(headers=headers)

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        self.acks.append((metadata, exception))
        self.ack_threads.add(threading.current_thread().name)

    def close(self) -> None:
        self.closed += 1


class Raising(ProducerInterceptor):
    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("on_send broke")

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        raise RuntimeError("on_acknowledgement broke")

    def close(self) -> None:
        raise RuntimeError("close broke")


def _producer(client: LiveMockClient, *interceptors: Any, **settings: Any) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers="127.0.0.1:9092",
        linger_ms=0,
        kafka_client=client,
        interceptors=list(interceptors),
        **settings,
    )


def test_on_send_changes_the_record_and_every_record_is_acknowledged_once(
    client: LiveMockClient,
) -> None:
    first, second = Recording("a"), Recording("b")
    calls: list[object] = []
    with _producer(client, first, second) as producer:
        futures = [
            producer.send("t", b"v0", key=b"k", partition=1),
            producer.send("t", b"v1", partition=1, callback=lambda m, e: calls.append(m)),
        ]
        result = producer.send_batch("t", [b"b0", b"b1", b"b2"], partitions=[1, 1, 1])
        for future in futures:
            future.result(10)
        result.result(10)
        producer.flush(10)
    records = client.records[("t", 1)]
    assert [r.headers for r in records] == [[("a", b"1"), ("b", b"1")]] * 5
    assert [r.value for r in records] == [b"v0", b"v1", b"b0", b"b1", b"b2"]
    assert second.sent[0].headers == [("a", b"1")]  # the second got the first's record
    assert len(first.acks) == len(second.acks) == 5
    assert all(m is not None and e is None for m, e in first.acks)
    assert first.ack_threads == {producer._thread.name}  # the I/O thread, as Java's
    assert calls == [first.acks[1][0]]  # the user's callback still runs, after
    assert first.closed == second.closed == 1


def test_without_interceptors_send_keeps_its_fast_path(client: LiveMockClient) -> None:
    with KafkaProducer(bootstrap_servers="h:1", kafka_client=client) as plain:
        fast = "send" in plain.__dict__  # the C SendCall when the accelerator is built
        assert plain._interceptors is None
    with _producer(client, Recording()) as intercepted:
        assert "send" not in intercepted.__dict__
        assert intercepted._checked_send
    if not fast:
        pytest.skip("the accelerator is not built: no fast send to keep")


def test_a_raising_interceptor_is_logged_once_and_loses_no_record(
    client: LiveMockClient, caplog: pytest.LogCaptureFixture
) -> None:
    recording = Recording()
    with (
        caplog.at_level(logging.WARNING, "kclient.producer.interceptors"),
        _producer(client, Raising(), recording) as producer,
    ):
        for i in range(5):
            producer.send("t", b"v%d" % i, partition=0).result(10)
    assert [r.value for r in client.records[("t", 0)]] == [b"v%d" % i for i in range(5)]
    assert [r.headers for r in client.records[("t", 0)]] == [[("traced", b"1")]] * 5
    assert len(recording.acks) == 5 and recording.closed == 1  # the next ones still run
    broke = [r.getMessage() for r in caplog.records]
    assert len(broke) == 3, broke  # one per method, not one per record
    assert all("Raising" in m for m in broke)


def test_failed_records_and_refused_sends_are_acknowledged_with_their_error(
    client: LiveMockClient,
) -> None:
    recording = Recording()
    with _producer(
        client, recording, max_request_size=1000, delivery_timeout_ms=200, request_timeout_ms=100
    ) as producer:
        with pytest.raises(errors.RecordTooLargeError):
            producer.send("t", b"x" * 2000, partition=0)
        client.hold = True  # no answer: the record times out
        future = producer.send("t", b"late", partition=0)
        with pytest.raises(errors.KafkaTimeoutError):
            future.result(10)
    assert [type(e) for _, e in recording.acks] == [
        errors.RecordTooLargeError,
        type(future.exception()),
    ]
    # as Java's: the topic, the partition the record named (else -1), offset -1
    assert [m for m, _ in recording.acks] == [RecordMetadata("t", 0, -1, -1)] * 2


def test_an_aborted_transactions_records_are_acknowledged() -> None:
    from tests.sender.txn_helpers import TXN_ID
    from tests.test_producer_transactions import LiveTxnBroker

    broker = LiveTxnBroker()
    recording = Recording()
    config = {"bootstrap.servers": "h:1", "transactional.id": TXN_ID, "linger.ms": 60_000}
    with KafkaProducer(config, kafka_client=broker, interceptors=[recording]) as producer:
        producer.init_transactions(timeout=10)
        producer.begin_transaction()
        future = producer.send("t", b"never", partition=0)  # lingers: never sent
        producer.abort_transaction(timeout=10)
        assert isinstance(future.exception(10), errors.TransactionAbortedError)
    assert [type(e) for _, e in recording.acks] == [errors.TransactionAbortedError]


def test_interceptors_must_have_the_three_methods() -> None:
    class OnlySend:
        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            return record

    with pytest.raises(ConfigError, match=r"'interceptors'.*OnlySend.*on_acknowledgement, close"):
        KafkaProducer(bootstrap_servers="h:1", interceptors=[OnlySend()])
    with pytest.raises(ConfigError, match="'interceptors' must be a list"):
        KafkaProducer(bootstrap_servers="h:1", interceptors=Recording())


def test_later_errors_are_counted_and_logged_at_most_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = MockClock()
    chain = ProducerInterceptors([Raising()], clock.monotonic_ms)
    record = ProducerRecord("t", b"v")
    with caplog.at_level(logging.WARNING, "kclient.producer.interceptors"):
        for _ in range(10):
            assert chain.on_send(record) is record  # the record it got goes on
        clock.advance(LOG_INTERVAL_MS)
        chain.on_send(record)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "10 times more" in messages[1]


def test_on_send_returning_something_else_is_an_error_of_the_interceptor() -> None:
    class Wrong(ProducerInterceptor):
        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            return ("t", b"v")  # type: ignore[return-value]

    chain = ProducerInterceptors([Wrong()], MockClock().monotonic_ms)
    record = ProducerRecord("t", b"v")
    assert chain.on_send(record) is record


def test_kclient_aio_passes_interceptors_through_and_acknowledges_each_record_once() -> None:
    import asyncio

    from kclient.aio import AIOKafkaProducer

    client = LiveMockClient(partitions=1)
    recording = Recording()

    async def main() -> None:
        async with AIOKafkaProducer(
            bootstrap_servers="127.0.0.1:1", kafka_client=client, interceptors=[recording]
        ) as producer:
            await producer.send_and_wait("t", b"a")
            await (await producer.send("t", b"b"))

    asyncio.run(asyncio.wait_for(main(), 30))
    assert [r.headers for r in client.records[("t", 0)]] == [[("traced", b"1")]] * 2
    assert len(recording.acks) == 2 and recording.closed == 1


def test_kclient_aio_runs_on_send_once_while_it_waits_for_metadata() -> None:
    import asyncio

    from kclient.aio import AIOKafkaProducer

    recording = Recording()

    async def main() -> None:
        async with AIOKafkaProducer(
            bootstrap_servers="127.0.0.1:1",
            kafka_client=LiveMockClient(partitions=1),
            interceptors=[recording],
            max_block_ms=200,
        ) as producer:
            with pytest.raises(errors.KafkaTimeoutError):
                await producer.send("no-such-topic", b"a")  # tried again and again

    asyncio.run(asyncio.wait_for(main(), 30))
    assert len(recording.sent) == 1
    assert [type(e) for _, e in recording.acks] == [errors.KafkaTimeoutError]


def test_a_failed_record_without_a_partition_is_acknowledged_with_partition_minus_one() -> None:
    """Java's rule for a failed record's metadata; the user's callback keeps kclient's
    arguments (metadata None with an exception)."""
    from kclient.producer.interceptors import ProducerInterceptors

    recording = Recording()
    interceptors = ProducerInterceptors([recording], lambda: 0)
    seen: list[tuple[RecordMetadata | None, BaseException | None]] = []
    callback = interceptors.wrap(lambda m, e: seen.append((m, e)), "orders", None)
    error = errors.KafkaTimeoutError("expired")
    callback(None, error)
    delivered = RecordMetadata("orders", 3, 7, 1000)
    callback(delivered, None)
    assert recording.acks == [(RecordMetadata("orders", -1, -1, -1), error), (delivered, None)]
    assert seen == [(None, error), (delivered, None)]
