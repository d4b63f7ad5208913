"""``RecordAccumulator.append_bulk`` and ``SendBatchResult`` with the mock client and clock:
rows appended a run at a time are sent, split and completed like ``append``'s."""

from __future__ import annotations

from array import array

from kclient import errors
from kclient.sender.bulk import SendBatchResult
from tests.sender.sender_helpers import Harness, batches_in, make, ok

TOO_LARGE = errors.MessageTooLargeError.code


def append_rows(h: Harness, values: list[bytes | None], partition: int) -> SendBatchResult:
    """Rows to ``partition`` as send_batch appends them (``append_bulk``)."""
    queues = h.acc.topic_queues("t")
    if not queues.num_partitions:
        h.acc.update_topic(queues, h.client.metadata.fetch())
    timestamps = [1_000] * len(values)
    result = SendBatchResult("t", values, None, timestamps)
    error = h.acc.append_bulk(
        queues,
        array("q", [partition]) * len(values),
        timestamps,
        None,
        values,
        0,
        len(values),
        result._results,
        result._deltas,
        0,
    )
    assert error is None
    return result


def test_a_run_fills_the_open_batch_and_new_batches_follow() -> None:
    h = make(batch_size=1024)
    result = append_rows(h, [bytes([i]) * 50 for i in range(40)], partition=0)
    assert list(result._deltas) == [*range(16), *range(16), *range(8)]  # 40 rows of ~57 B, 1 KiB
    assert len({id(r) for r in result._results}) == 3
    h.run()
    (request,) = h.produce_requests()
    sent = batches_in(request)[("t", 0)]
    assert [r.value for r in sent.records()] == [bytes([i]) * 50 for i in range(16)]


def test_rows_follow_their_batch_through_a_split() -> None:
    h = make(batch_size=4096)
    values = [bytes([i]) * 50 for i in range(40)]
    result = append_rows(h, values, partition=0)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=TOO_LARGE))
    h.acc.batch_size = 1024
    h.run(2)  # the response arrives, then the split batches go out
    offset = 0
    while h.produce_requests():
        (request,) = h.produce_requests()
        ((_, batch),) = batches_in(request).items()
        h.client.respond(ok(request, base_offset=offset))
        offset += batch.record_count
        h.run()
    metadata = result.result(0)
    assert [md.offset for md in metadata] == list(range(40))
    assert all(md.serialized_value_size == 50 for md in metadata)
    futures = result.futures()
    assert [f.result(0).offset for f in futures if f is not None] == list(range(40))


def test_a_refused_batch_fails_every_row_in_it() -> None:
    h = make()
    result = append_rows(h, [b"a", b"b", b"c"], partition=0)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=errors.InvalidRecordError.code))
    h.run()
    failed = result.exceptions(0)
    assert sorted(failed) == [0, 1, 2]
    assert all(isinstance(e, errors.InvalidRecordError) for e in failed.values())
