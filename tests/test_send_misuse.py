"""Caller mistakes found at the call, not later on the I/O thread (issue 31, item 4): a
``callback`` that cannot be called is refused by ``send`` with a TypeError naming it (in
the C ``send`` and the Python one); ``partitions_for`` after ``close`` says the producer is
closed (before: "cannot send")."""

from __future__ import annotations

import pytest

from kclient.errors import IllegalStateError
from kclient.producer import KafkaProducer
from tests.test_producer import LiveMockClient


@pytest.mark.parametrize("key", [None, "a str key: the general way"])
@pytest.mark.parametrize("callback", ["notcallable", 5, b"x"], ids=repr)
def test_a_callback_that_cannot_be_called_is_refused_at_the_call(
    producer: KafkaProducer, client: LiveMockClient, key: object, callback: object
) -> None:
    producer.send("t", b"warm up").get(10)  # the topic is known: send's fast path
    with pytest.raises(TypeError, match=r"send\(\) callback must be a callable") as info:
        producer.send("t", b"v", key, callback=callback)  # type: ignore[arg-type]
    assert repr(callback) in str(info.value)
    producer.flush(10)
    assert sum(len(r) for r in client.records.values()) == 1  # nothing was queued
    seen: list[object] = []
    producer.send("t", b"v", callback=lambda md, exc: seen.append(exc)).get(10)
    producer.flush(10)
    assert seen == [None]


def test_partitions_for_after_close_says_the_producer_is_closed(
    producer: KafkaProducer,
) -> None:
    assert [p.partition for p in producer.partitions_for("t")] == [0, 1, 2, 3]
    producer.close()
    with pytest.raises(IllegalStateError, match=r"partitions_for\(\).*producer is closed") as info:
        producer.partitions_for("t")
    assert "send" not in str(info.value)
