import asyncio
import concurrent.futures
import gc
import logging
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from kclient.errors import (
    IllegalStateError,
    InvalidRecordError,
    KafkaTimeoutError,
    NotEnoughReplicasError,
)
from kclient.network.cluster import TopicPartition
from kclient.record import CompressionType, RecordBatch, RecordBatchBuilder
from kclient.sender.batch import FinalState, ProducerBatch, rewrite_producer_state
from kclient.sender.future import RecordMetadata

TP = TopicPartition("orders", 3)


def _batch(batch_size: int = 16384) -> ProducerBatch:
    return ProducerBatch(TP, RecordBatchBuilder(CompressionType.NONE, batch_size), 0, batch_size, 1)


def _append(batch: ProducerBatch, n: int, callback: object = None, ts: int = 1000) -> list:
    futures = []
    for i in range(n):
        future = batch.try_append(ts + i, None, b"v%d" % i, (), callback)  # type: ignore[arg-type]
        assert future is not None
        futures.append(future)
    return futures


def test_records_share_the_batch_result_and_get_their_own_offsets() -> None:
    batch = _batch()
    futures = _append(batch, 3)
    assert not any(f.done() for f in futures)
    batch.complete(base_offset=100, log_append_time_ms=-1)
    assert [f.result() for f in futures] == [
        RecordMetadata("orders", 3, 100, 1000, -1, 2),
        RecordMetadata("orders", 3, 101, 1001, -1, 2),
        RecordMetadata("orders", 3, 102, 1002, -1, 2),
    ]
    assert futures[1].get(timeout=0) == futures[1].result()
    assert batch.final_state is FinalState.SUCCEEDED


def test_log_append_time_replaces_the_create_time() -> None:
    batch = _batch()
    (future,) = _append(batch, 1)
    batch.complete(7, log_append_time_ms=5555)
    assert future.result().timestamp == 5555


def test_failure_reaches_every_future_and_callback() -> None:
    batch = _batch()
    seen: list[tuple[object, object]] = []
    futures = _append(batch, 2, callback=lambda md, exc: seen.append((md, exc)))
    error = NotEnoughReplicasError("orders-3")
    batch.fail(error)
    for future in futures:
        with pytest.raises(NotEnoughReplicasError):
            future.result()
        assert future.exception() is error
    assert seen == [(None, error), (None, error)]


def test_record_errors_fail_only_the_named_records() -> None:
    batch = _batch()
    futures = _append(batch, 3)
    bad = InvalidRecordError("record 1: bad timestamp")
    batch.fail(InvalidRecordError("batch rejected"), record_errors={1: bad})
    assert futures[1].exception() is bad
    assert "batch rejected" in str(futures[0].exception())


def test_completing_twice_is_a_bug() -> None:
    batch = _batch()
    _append(batch, 1)
    batch.complete(0, -1)
    with pytest.raises(IllegalStateError, match="already succeeded; cannot become failed"):
        batch.fail(RuntimeError("late"))


def test_callbacks_get_metadata_and_their_exceptions_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    batch = _batch()
    got: list[object] = []

    def boom(md: object, exc: object) -> None:
        raise ValueError("user bug")

    batch.try_append(1, None, b"a", (), boom)
    batch.try_append(2, None, b"b", (), lambda md, exc: got.append((md, exc)))
    with caplog.at_level(logging.ERROR):
        batch.complete(10, -1)
    assert got == [(RecordMetadata("orders", 3, 11, 2, -1, 1), None)]
    assert "exception in a send callback" in caplog.text
    assert "user bug" in caplog.text


def test_a_callback_does_not_keep_its_record_future_alive() -> None:
    """A record sent with a callback and whose future the caller dropped leaves no future
    (nor any other object the cyclic garbage collector walks) behind until the batch is
    done: per-record callbacks on 1 MB batches were a third of the producer's CPU in GC."""
    batch = _batch()
    got: list[object] = []
    future = batch.try_append(5, b"k", b"value", (), lambda md, exc: got.append(md))
    assert future is not None
    gone = weakref.ref(future)
    del future
    assert gone() is None
    assert not any(gc.is_tracked(item) for item in batch.thunks or () if not callable(item))
    batch.complete(10, -1)
    assert got == [RecordMetadata("orders", 3, 10, 5, 1, 5)]


def test_callbacks_and_futures_say_which_time_the_timestamp_is() -> None:
    created, appended = _batch(), _batch()
    got: list[Any] = []
    futures = [
        b.try_append(5, None, b"v", (), lambda md, exc: got.append(md)) for b in (created, appended)
    ]
    created.complete(10, -1)
    appended.complete(20, log_append_time_ms=7777)
    assert [(md.offset, md.timestamp, md.timestamp_type) for md in got] == [
        (10, 5, 0),
        (20, 7777, 1),
    ]
    assert [f.result() for f in futures] == got  # type: ignore[union-attr]
    assert got[1].topic_partition == TopicPartition("orders", 3)
    assert got[1].log_start_offset is None


def test_callbacks_get_offset_minus_one_with_acks_0() -> None:
    batch = _batch()
    got: list[Any] = []
    _append(batch, 2, callback=lambda md, exc: got.append(md.offset))
    batch.complete(-1, -1)  # acks=0: the broker gives no offsets
    assert got == [-1, -1]


def test_result_with_timeout_raises_when_still_pending() -> None:
    batch = _batch()
    (future,) = _append(batch, 1)
    with pytest.raises(KafkaTimeoutError, match="orders-3"):
        future.result(timeout=0)  # times out at once
    assert not future.cancel()
    assert not future.cancelled()


def test_waiting_thread_wakes_on_completion() -> None:
    batch = _batch()
    (future,) = _append(batch, 1)
    results: list[RecordMetadata] = []
    thread = threading.Thread(target=lambda: results.append(future.result(timeout=10)))
    thread.start()
    batch.complete(42, -1)
    thread.join(10)
    assert results == [RecordMetadata("orders", 3, 42, 1000, -1, 2)]


def test_done_callbacks_run_on_completion_or_at_once_when_done() -> None:
    batch = _batch()
    first, second = _append(batch, 2)
    calls: list[str] = []
    first.add_done_callback(lambda f: calls.append("first"))
    assert calls == []
    batch.complete(0, -1)
    assert calls == ["first"]
    second.add_done_callback(lambda f: calls.append("second"))
    assert calls == ["first", "second"]


def _as_completed_waiting_on(
    futures: list[concurrent.futures.Future[Any]],
) -> Iterator[concurrent.futures.Future[Any]]:
    """``as_completed(futures)``, advanced until its waiter is installed on every one.

    The generator installs its waiter before yielding the first finished future, so an
    already finished probe, passed first, is yielded once that is done: whatever
    completes the futures afterwards, on any thread, must wake that waiter.
    """
    probe: concurrent.futures.Future[Any] = concurrent.futures.Future()
    probe.set_result(None)
    pending = concurrent.futures.as_completed([probe, *futures], timeout=10)  # a safety net
    assert next(pending) is probe
    return pending


def test_concurrent_futures_wait_and_as_completed_work() -> None:
    batch = _batch()
    futures = _append(batch, 3)
    done, not_done = concurrent.futures.wait(futures, timeout=0)
    assert not done and len(not_done) == 3  # nothing delivered yet
    pending = _as_completed_waiting_on(futures)
    sender = threading.Thread(target=batch.complete, args=(5, -1))
    sender.start()
    assert sorted(f.result().offset for f in pending) == [5, 6, 7]
    sender.join(10)
    done, not_done = concurrent.futures.wait(futures, timeout=0)
    assert len(done) == 3 and not not_done


def test_as_completed_waits_for_pending_records() -> None:
    batch = _batch()
    futures = _append(batch, 2)
    pending = _as_completed_waiting_on(futures)
    sender = threading.Thread(target=batch.fail, args=(NotEnoughReplicasError(),))
    sender.start()
    finished = list(pending)
    sender.join(10)
    assert len(finished) == 2
    assert all(isinstance(f.exception(), NotEnoughReplicasError) for f in finished)


def test_asyncio_wrap_future_works() -> None:
    batch = _batch()
    (future,) = _append(batch, 1)

    async def main() -> RecordMetadata:
        wrapped = asyncio.wrap_future(future)  # registers for completion on any thread
        assert not wrapped.done()
        sender = threading.Thread(target=batch.complete, args=(9, -1))
        sender.start()
        try:
            return await asyncio.wait_for(wrapped, 10)  # a safety net
        finally:
            sender.join(10)

    assert asyncio.run(main()).offset == 9


def test_split_moves_futures_and_callbacks_to_the_new_batches() -> None:
    batch = _batch(batch_size=100_000)
    seen: list[int] = []
    futures = [
        batch.try_append(i, None, bytes(40), (), lambda md, exc: seen.append(md.offset))  # type: ignore[union-attr]
        for i in range(6)
    ]
    done_calls: list[int] = []
    futures[4].add_done_callback(lambda f: done_calls.append(f.result().offset))  # type: ignore[union-attr]
    waiter_results: list[RecordMetadata] = []
    waiter = threading.Thread(target=lambda: waiter_results.append(futures[5].result(timeout=10)))  # type: ignore[union-attr]
    waiter.start()
    records = [
        (r.timestamp, r.key, r.value, r.headers) for r in RecordBatch(batch.close()).records()
    ]
    children = batch.split(lambda: RecordBatchBuilder(CompressionType.NONE, 200), records)
    assert len(children) == 3
    assert [c.record_count for c in children] == [2, 2, 2]
    assert [c.order for c in children] == [(1, 0), (1, 1), (1, 2)]
    for index, child in enumerate(children):
        child.complete(index * 100, -1)
    waiter.join(10)
    assert [f.result().offset for f in futures] == [0, 1, 100, 101, 200, 201]  # type: ignore[union-attr]
    assert waiter_results[0].offset == 201
    assert seen == [0, 1, 100, 101, 200, 201]
    assert done_calls == [200]


def test_rewritten_producer_state_keeps_a_valid_crc() -> None:
    builder = RecordBatchBuilder(CompressionType.NONE, 1000)
    builder.set_producer_state(7, 0, 0)
    builder.append(1, b"k", b"v")
    rewritten = rewrite_producer_state(builder.build(), 7, 1, 0)
    batch = RecordBatch(rewritten)
    batch.validate()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 0)


def test_set_producer_state_after_build_rewrites_the_bytes() -> None:
    batch = _batch()
    _append(batch, 2)
    batch.set_producer_state(11, 2, 40)
    first = RecordBatch(batch.close())
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (11, 2, 40)
    batch.set_producer_state(11, 3, 0)
    second = RecordBatch(batch.close())
    second.validate()
    assert (second.producer_epoch, second.base_sequence, second.record_count) == (3, 0, 2)
