"""``BatchBuilder.append`` (kclient.aio's ``create_batch``) checks each record as
aiokafka's builder does: a key or value that is not bytes-like, a bad timestamp or bad
headers raise at ``append`` (before, a str value was taken and failed later, as a row of
``send_batch``'s ``SendBatchError``), and a bytearray is copied, so changing it after
``append`` does not change the record."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.aio.batch import BatchBuilder
from tests.test_aio_batch import BatchCountingClient, producer, run


@pytest.mark.parametrize(
    ("record", "error", "message"),
    [
        ({"value": "text"}, TypeError, "value must be bytes or None, got str"),
        ({"value": 5}, TypeError, "value must be bytes or None, got int"),
        ({"key": "k"}, TypeError, "key must be bytes or None, got str"),
        ({"timestamp": -5}, ValueError, "timestamp_ms must be >= 0"),
        ({"timestamp": 1.5}, TypeError, "timestamp_ms must be an int"),
        ({"headers": [("h", "text")]}, TypeError, r"headers\[0\] \('h'\): the value must be"),
    ],
)
def test_a_bad_record_is_refused_at_append_and_nothing_is_added(
    record: dict[str, Any], error: type[Exception], message: str
) -> None:
    batch = BatchBuilder(16384)
    arguments = {"key": None, "value": b"v", "timestamp": None} | record
    with pytest.raises(error, match=message):
        batch.append(**arguments)
    assert (batch.record_count(), batch.size()) == (0, 0)


def test_a_bytearray_is_copied_at_append() -> None:
    client = BatchCountingClient()
    data = bytearray(b"first")

    async def scenario() -> None:
        async with producer(client) as p:
            batch = p.create_batch()
            assert batch.append(key=memoryview(b"k"), value=data, timestamp=None) is not None
            data[:] = b"later"
            await (await p.send_batch(batch, "t", partition=0))

    run(scenario())
    (record,) = client.records[("t", 0)]
    assert (record.key, record.value) == (b"k", b"first")
