import pytest

from kclient import errors
from kclient.errors import IllegalStateError, KafkaTimeoutError, RecordTooLargeError
from kclient.protocol import ApiKey
from tests.sender.sender_helpers import (
    answer_like_a_broker,
    batches_in,
    body,
    make,
    ok,
    partitions_in,
    produce_response,
)

NOT_LEADER = errors.NotLeaderOrFollowerError.code
TOO_LARGE = errors.MessageTooLargeError.code


def test_nothing_is_sent_before_linger() -> None:
    h = make(linger_ms=20)
    h.send("t", 0)
    h.run()
    assert h.produce_requests() == []
    h.clock.advance(20)
    h.run()
    assert len(h.produce_requests()) == 1


def test_exactly_one_produce_request_per_node() -> None:
    h = make(nodes=2, topics={"a": 2, "b": 2})  # partition p is led by node p % 2
    for topic in ("a", "b"):
        for partition in (0, 1):
            h.send(topic, partition)
    h.run()
    requests = h.produce_requests()
    assert sorted(r.destination for r in requests) == [0, 1]
    by_node = {r.destination: partitions_in(r) for r in requests}
    assert by_node == {0: [("a", 0), ("b", 0)], 1: [("a", 1), ("b", 1)]}
    assert body(requests[0])["acks"] == -1
    assert requests[0].max_version == 12  # v13 needs every topic's id (none here)


def test_response_completes_every_record_with_its_offset() -> None:
    h = make()
    futures = h.send("t", 0, n=3)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, base_offset=500))
    h.run()
    assert [f.result(0).offset for f in futures] == [500, 501, 502]
    assert h.acc.pool.available_bytes == h.acc.pool.total_bytes
    assert h.sender.metrics.records_sent_total == 3


def test_acks_zero_completes_when_written() -> None:
    h = make(acks=0)
    (future,) = h.send("t", 0)
    h.run(2)
    assert future.result(0).offset == -1
    assert not h.client.requests
    assert h.client.sent[0].expect_response is False


def test_acks_zero_with_one_request_in_flight_sends_the_next_batch() -> None:
    # max.in.flight=1 mutes the partition while its batch is out; with acks=0 the write
    # completes the batch and must unmute it too (seen against Apache Kafka: the second
    # batch of the partition was never sent and flush() hung)
    h = make(acks=0, max_in_flight=1)
    (first,) = h.send("t", 0)
    h.run(2)
    assert first.result(0).offset == -1
    (second,) = h.send("t", 0)
    h.run(2)
    assert second.result(0).offset == -1
    assert len(h.client.sent) == 2


def test_retriable_error_retries_after_backoff_and_refreshes_metadata() -> None:
    h = make(retry_backoff_ms=100, retry_backoff_max_ms=100)
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    version = h.client.metadata.update_version
    h.client.respond(ok(request, code=NOT_LEADER))
    h.run()
    assert not future.done()
    assert h.client.metadata.update_version > version or h.client.metadata.update_requested()
    h.clock.advance(99)
    h.run()
    assert h.produce_requests() == []
    h.clock.advance(1)
    h.run()
    (retry,) = h.produce_requests()
    h.client.respond(ok(retry, base_offset=7))
    h.run()
    assert future.result(0).offset == 7
    assert h.sender.metrics.record_retries.rate_per_s(h.clock.monotonic_ms()) > 0


def test_fatal_broker_error_fails_the_records_naming_the_partition() -> None:
    h = make()
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=errors.TopicAuthorizationFailedError.code))
    h.run()
    with pytest.raises(errors.TopicAuthorizationFailedError, match="t-0"):
        future.result(0)


def test_retries_stop_at_the_retries_setting() -> None:
    h = make(retries=1, retry_backoff_ms=1, retry_backoff_max_ms=1)
    (future,) = h.send("t", 0)
    for _ in range(2):
        h.run()
        (request,) = h.produce_requests()
        h.client.respond(ok(request, code=errors.NotEnoughReplicasError.code))
        h.run()
        h.clock.advance(10)
    with pytest.raises(errors.NotEnoughReplicasError):
        future.result(0)


def test_disconnect_is_retried() -> None:
    h = make(retry_backoff_ms=10, retry_backoff_max_ms=10)
    (future,) = h.send("t", 0)
    h.run()
    h.client.disconnect(0)
    h.run()
    assert not future.done()
    h.clock.advance(10)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, base_offset=1))
    h.run()
    assert future.result(0).offset == 1


def test_queued_batches_expire_at_delivery_timeout_without_a_leader() -> None:
    h = make(topics={"t": 1}, leaders={("t", 0): -1}, delivery_timeout_ms=3000)
    (future,) = h.send("t", 0)
    h.run()
    assert h.client.metadata.update_requested()
    h.clock.advance(3000)
    h.run()
    with pytest.raises(
        KafkaTimeoutError, match=r"expiring 1 record\(s\) for t-0: 3000 ms.*'delivery.timeout.ms'"
    ):
        future.result(0)
    assert h.acc.pool.available_bytes == h.acc.pool.total_bytes


def test_in_flight_batches_expire_and_a_late_answer_is_ignored() -> None:
    h = make(delivery_timeout_ms=1000, request_timeout_ms=5000)
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    h.clock.advance(1000)
    h.run()
    with pytest.raises(KafkaTimeoutError):
        future.result(0)
    h.client.respond(ok(request, base_offset=3))
    h.run()
    assert isinstance(future.exception(0), KafkaTimeoutError)


def test_each_in_flight_batch_expires_at_its_own_deadline_after_earlier_ones_completed() -> None:
    h = make(delivery_timeout_ms=1000, request_timeout_ms=5000, topics={"t": 2})
    (first,) = h.send("t", 0)
    h.run()
    h.clock.advance(500)
    (second,) = h.send("t", 1)
    h.run()
    first_request, _ = h.produce_requests()
    h.client.respond(ok(first_request, base_offset=7))
    h.run()
    assert first.result(0).offset == 7
    h.clock.advance(500)  # the first batch's deadline: nothing in flight expires now
    h.run()
    assert not second.done()
    h.clock.advance(499)
    h.run()
    assert not second.done()
    h.clock.advance(1)  # the second batch's own deadline
    h.run()
    assert isinstance(second.exception(0), KafkaTimeoutError)


def test_message_too_large_splits_the_batch() -> None:
    h = make(batch_size=4096)
    futures = h.send("t", 0, value=bytes(50), n=40)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=TOO_LARGE))
    h.acc.batch_size = 1024
    h.run(2)  # the response arrives, then the split batches go out (one per request)
    offset = 0
    sizes = []
    while h.produce_requests():
        (request,) = h.produce_requests()
        ((_, batch),) = batches_in(request).items()
        sizes.append(batch.record_count)
        h.client.respond(ok(request, base_offset=offset))
        offset += batch.record_count
        h.run()
    assert sizes == [16, 16, 8]
    assert [f.result(0).offset for f in futures] == list(range(40))
    assert h.sender.metrics.batch_splits == 1


def test_a_single_record_too_large_for_the_broker_fails() -> None:
    h = make()
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=TOO_LARGE))
    h.run()
    with pytest.raises(RecordTooLargeError, match="larger than the broker accepts"):
        future.result(0)


def test_a_batch_under_batch_size_but_too_large_for_the_broker_splits_until_it_fits() -> None:
    h = make(batch_size=16_384)
    small_1 = h.send("t", 0, value=bytes(800))
    big = h.send("t", 0, value=bytes(5_000))
    small_2 = h.send("t", 0, value=bytes(800))
    accepted = answer_like_a_broker(h, message_max_bytes=2_000)
    assert [count for _, count, _ in accepted] == [1, 1]
    assert [f.result(0).offset for f in small_1 + small_2] == [0, 1]
    with pytest.raises(
        RecordTooLargeError, match=r"\(50\d\d bytes .*'message.max.bytes'.* than 2000"
    ):
        big[0].result(0)
    assert len(h.client.sent) == 4  # the batch once, then its three pieces: no loop
    assert h.clock.monotonic_ms() == 0  # failed at once, not after delivery.timeout.ms
    assert h.sender.metrics.batch_splits == 1
    assert h.acc.pool.available_bytes == h.acc.pool.total_bytes
    assert not h.sender.has_pending_work()


def test_records_each_too_large_for_the_broker_all_fail_at_once() -> None:
    h = make(batch_size=16_384)
    futures = h.send("t", 0, value=bytes(5_000), n=3)
    assert answer_like_a_broker(h, message_max_bytes=2_000) == []
    for future in futures:
        assert isinstance(future.exception(0), RecordTooLargeError)
    assert len(h.client.sent) == 4
    assert h.clock.monotonic_ms() == 0


def test_repeated_splits_keep_shrinking_and_deliver_in_order() -> None:
    h = make(batch_size=16_384)
    futures = h.send("t", 0, value=bytes(300), n=8)
    accepted = answer_like_a_broker(h, message_max_bytes=700)
    assert all(size <= 700 for _, _, size in accepted)
    assert sum(count for _, count, _ in accepted) == 8
    assert [f.result(0).offset for f in futures] == list(range(8))
    assert h.sender.metrics.batch_splits >= 2


def test_max_in_flight_one_without_idempotence_sends_one_batch_per_partition_at_a_time() -> None:
    h = make(max_in_flight=1, batch_size=200)
    h.send("t", 0, value=bytes(100), n=3)  # three batches
    h.run(3)
    assert len(h.produce_requests()) == 1
    h.client.respond(ok(h.produce_requests()[0]))
    h.run(2)
    assert len(h.produce_requests()) == 1


def test_unknown_version_fails_the_batch_clearly() -> None:
    h = make()
    h.client.prepare_response(None, api_key=ApiKey.PRODUCE, version_mismatch=True)
    (future,) = h.send("t", 0)
    h.run(2)
    assert isinstance(future.exception(0), errors.UnsupportedVersionError)


def test_record_errors_fail_the_named_records() -> None:
    h = make()
    futures = h.send("t", 0, n=2)
    h.run()
    (_request,) = h.produce_requests()
    h.client.respond(
        produce_response(
            {("t", 0): (errors.InvalidRecordError.code, -1)},
            record_errors=[{"batch_index": 1, "batch_index_error_message": "bad"}],
        )
    )
    h.run()
    assert "t-0 record 1: bad" in str(futures[1].exception(0))
    assert isinstance(futures[0].exception(0), errors.InvalidRecordError)


def test_graceful_close_sends_what_is_queued() -> None:
    h = make(linger_ms=60_000)
    (future,) = h.send("t", 0)
    h.sender.initiate_close()
    assert h.sender.has_pending_work()
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, base_offset=9))
    h.run()
    assert future.result(0).offset == 9
    assert not h.sender.has_pending_work()
    with pytest.raises(IllegalStateError):
        h.send("t", 0)


def test_abort_fails_queued_and_in_flight_records_clearly() -> None:
    h = make(batch_size=200)
    futures = h.send("t", 0, value=bytes(100), n=3)
    h.run()
    h.sender.abort_incomplete_batches(IllegalStateError("the producer was closed"))
    for future in futures:
        with pytest.raises(IllegalStateError, match="closed"):
            future.result(0)
    assert not h.acc.has_incomplete()
    assert h.acc.pool.available_bytes == h.acc.pool.total_bytes
