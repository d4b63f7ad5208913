import itertools

import pytest

from kclient import errors
from kclient.protocol import ApiKey
from kclient.sender.idempotence import increment_sequence
from tests.sender.sender_helpers import (
    Harness,
    answer_like_a_broker,
    batches_in,
    init_pid_response,
    make,
    ok,
    produce_response,
)

NOT_LEADER = errors.NotLeaderOrFollowerError.code
OUT_OF_ORDER = errors.OutOfOrderSequenceNumberError.code


def _ready(**kwargs: object) -> Harness:
    h = make(idempotent=True, **kwargs)  # type: ignore[arg-type]
    h.client.prepare_response(init_pid_response(1000, 0), api_key=ApiKey.INIT_PRODUCER_ID)
    h.run(2)
    assert h.tm is not None and h.tm.has_producer_id
    return h


def _state(request: object) -> list[tuple[tuple[str, int], int, int, int, int]]:
    return [
        (tp, b.producer_id, b.producer_epoch, b.base_sequence, b.record_count)
        for tp, b in sorted(batches_in(request).items())  # type: ignore[arg-type]
    ]


def test_producer_id_comes_first_then_batches_carry_it() -> None:
    h = make(idempotent=True)
    h.send("t", 0)
    h.run()
    assert [r.api_key for r in h.client.sent] == [ApiKey.INIT_PRODUCER_ID]
    assert h.produce_requests() == []
    h.client.respond(init_pid_response(1000, 3))
    h.run(2)
    (request,) = h.produce_requests()
    assert _state(request) == [(("t", 0), 1000, 3, 0, 1)]


def test_sequences_advance_per_partition_by_record_count() -> None:
    h = _ready(topics={"t": 2})
    h.send("t", 0, n=3)
    h.send("t", 1, n=2)
    h.run()
    h.client.respond(ok(h.produce_requests()[0]))
    h.run()
    h.send("t", 0, n=1)
    h.send("t", 1, n=1)
    h.run()
    (request,) = h.produce_requests()
    assert [(tp, seq) for tp, _, _, seq, _ in _state(request)] == [(("t", 0), 3), (("t", 1), 2)]


def test_up_to_five_in_flight_and_retries_keep_order_and_sequence() -> None:
    h = _ready(batch_size=200, retry_backoff_ms=10, retry_backoff_max_ms=10)
    futures = h.send("t", 0, value=bytes(100), n=3)  # three batches of one record
    h.run(3)
    first, second, third = h.produce_requests()
    assert [_state(r)[0][3] for r in (first, second, third)] == [0, 1, 2]
    h.client.respond_to(first, ok(first, code=NOT_LEADER))
    h.client.respond_to(second, ok(second, code=OUT_OF_ORDER))  # the broker expected seq 0
    h.client.respond_to(third, ok(third, code=OUT_OF_ORDER))
    h.run()
    h.clock.advance(20)
    h.run(3)
    (resent,) = h.produce_requests()  # only the oldest goes out while the others wait
    assert _state(resent)[0][3] == 0
    h.client.respond(ok(resent, base_offset=10))
    h.run(2)
    (resent,) = h.produce_requests()
    assert _state(resent)[0][3] == 1
    h.client.respond(ok(resent, base_offset=11))
    h.run(2)
    (resent,) = h.produce_requests()
    assert _state(resent)[0][3] == 2
    h.client.respond(ok(resent, base_offset=12))
    h.run()
    assert [f.result(0).offset for f in futures] == [10, 11, 12]
    assert h.tm is not None and h.tm.epoch_bumps == 0


def test_duplicate_sequence_counts_as_delivered() -> None:
    h = _ready()
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, base_offset=42, code=errors.DuplicateSequenceNumberError.code))
    h.run()
    assert future.result(0).offset == 42


def test_unknown_producer_id_bumps_the_epoch_and_resends_from_sequence_zero() -> None:
    h = _ready(retry_backoff_ms=10, retry_backoff_max_ms=10)
    h.send("t", 0)
    h.run()
    h.client.respond(ok(h.produce_requests()[0]))
    h.run()
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    assert _state(request)[0][2:4] == (0, 1)
    h.client.respond(ok(request, code=errors.UnknownProducerIdError.code))
    h.run()
    h.clock.advance(20)
    h.run()
    (resent,) = h.produce_requests()
    assert _state(resent) == [(("t", 0), 1000, 1, 0, 1)]
    h.client.respond(ok(resent, base_offset=5))
    h.run()
    assert future.result(0).offset == 5


def test_out_of_order_for_the_next_expected_batch_bumps_the_epoch() -> None:
    h = _ready(retry_backoff_ms=10, retry_backoff_max_ms=10)
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=OUT_OF_ORDER))
    h.run()
    h.clock.advance(20)
    h.run()
    (resent,) = h.produce_requests()
    assert _state(resent)[0][2:4] == (1, 0)
    h.client.respond(ok(resent, base_offset=0))
    h.run()
    assert future.result(0).offset == 0


def test_a_failed_batch_leaves_a_gap_that_is_closed_by_an_epoch_bump() -> None:
    h = _ready(batch_size=200)
    first, second = h.send("t", 0, value=bytes(100), n=2)
    h.run(2)
    request_a, request_b = h.produce_requests()
    h.client.respond_to(request_a, ok(request_a, code=errors.InvalidRecordError.code))
    h.run()
    assert isinstance(first.exception(0), errors.InvalidRecordError)
    (third,) = h.send("t", 0, value=bytes(100))
    h.run()
    assert len(h.produce_requests()) == 1  # waits: the second batch is still unresolved
    h.client.respond_to(request_b, ok(request_b, code=OUT_OF_ORDER))  # not written
    h.run()
    h.clock.advance(100)  # the retry backoff
    h.run(2)
    resent, last = h.produce_requests()
    assert [_state(r)[0][2:4] for r in (resent, last)] == [(1, 0), (1, 1)]  # new epoch, seq 0
    h.client.respond(ok(resent, base_offset=100))
    h.client.respond(ok(last, base_offset=101))
    h.run()
    assert second.result(0).offset == 100
    assert third.result(0).offset == 101


def test_fatal_init_producer_id_error_fails_every_record() -> None:
    h = make(idempotent=True)
    fatal: list[object] = []
    assert h.tm is not None
    h.tm.on_fatal_error = fatal.append
    (future,) = h.send("t", 0)
    h.client.prepare_response(
        init_pid_response(code=errors.ClusterAuthorizationFailedError.code),
        api_key=ApiKey.INIT_PRODUCER_ID,
    )
    h.run(3)
    with pytest.raises(errors.ClusterAuthorizationFailedError):
        future.result(0)
    assert len(fatal) == 1


def test_retriable_init_producer_id_error_is_retried() -> None:
    h = make(idempotent=True)
    h.client.prepare_response(
        init_pid_response(code=errors.CoordinatorNotAvailableError.code),
        api_key=ApiKey.INIT_PRODUCER_ID,
    )
    h.client.prepare_response(init_pid_response(7, 0), api_key=ApiKey.INIT_PRODUCER_ID)
    h.run(2)
    assert h.tm is not None and not h.tm.has_producer_id
    h.clock.advance(100)
    h.run(2)
    assert h.tm.producer_id_and_epoch == (7, 0)


def test_sequence_numbers_wrap_like_java() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2_147_483_647, 1) == 0
    assert increment_sequence(2_147_483_600, 100) == 52


def test_split_batches_take_over_the_sequence_range() -> None:
    h = _ready(batch_size=4096)
    futures = h.send("t", 0, value=bytes(50), n=40)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(produce_response({("t", 0): (errors.MessageTooLargeError.code, -1)}))
    h.acc.batch_size = 1024
    h.run(2)
    sequences = []
    offset = 0
    while h.produce_requests():
        (request,) = h.produce_requests()
        ((_, _pid, epoch, seq, count),) = _state(request)
        sequences.append((epoch, seq, count))
        h.client.respond(ok(request, base_offset=offset))
        offset += count
        h.run(2)
    assert sequences == [(0, 0, 16), (0, 16, 16), (0, 32, 8)]
    assert futures[-1].result(0).offset == 39


def test_repeated_splits_under_batch_size_keep_the_sequence_range() -> None:
    h = _ready(batch_size=16_384)
    futures = h.send("t", 0, value=bytes(300), n=8)
    accepted = answer_like_a_broker(h, message_max_bytes=700)
    sequences = [(seq, count) for seq, count, _ in accepted]
    assert [seq for seq, _ in sequences] == [0, *itertools.accumulate(c for _, c in sequences)][:-1]
    assert sum(count for _, count in sequences) == 8
    assert [f.result(0).offset for f in futures] == list(range(8))
    assert h.sender.metrics.batch_splits >= 2


@pytest.mark.parametrize(
    "rejection", [errors.UnknownProducerIdError.code, OUT_OF_ORDER], ids=["unknown-pid", "ooo"]
)
def test_a_rejected_retry_resequences_the_batches_waiting_behind_it(rejection: int) -> None:
    """Three batches of a partition all fail (retriable) and wait to be resent; the oldest
    is then rejected (not written). The two behind it were not written either: all three
    go out again under a new epoch from sequence 0, in order, instead of the partition
    stalling until delivery.timeout.ms."""
    h = _ready(batch_size=200, retry_backoff_ms=10, retry_backoff_max_ms=10)
    futures = h.send("t", 0, value=bytes(100), n=3)  # three batches of one record
    h.run(3)
    requests = h.produce_requests()
    assert [_state(r)[0][3] for r in requests] == [0, 1, 2]
    for request in requests:
        h.client.respond_to(request, ok(request, code=NOT_LEADER))
    h.run()
    h.clock.advance(20)
    h.run(3)
    (resent,) = h.produce_requests()  # only the oldest goes out while the others wait
    assert _state(resent)[0][2:4] == (0, 0)
    h.client.respond(ok(resent, code=rejection))
    h.run()
    h.clock.advance(20)
    h.run(3)
    requests = h.produce_requests()
    assert [_state(r)[0][2:4] for r in requests] == [(1, 0), (1, 1), (1, 2)]
    for offset, request in enumerate(requests):
        h.client.respond_to(request, ok(request, base_offset=offset))
    h.run()
    assert [f.result(0).offset for f in futures] == [0, 1, 2]
    assert h.tm is not None and h.tm.epoch_bumps == 1
