"""``send``'s partition, timestamp_ms and headers arguments: a bad one is refused with a
typed error naming the argument, before anything is queued; good ones of other integer
types or a headers mapping are taken."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.producer import KafkaProducer
from tests.test_producer import LiveMockClient


class NumpyLikeInt:
    """An integer type that is not int (numpy's int64 behaves so)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"timestamp_ms": "now"},
            TypeError,
            r"timestamp_ms must be an int \(milliseconds since the epoch\) or None, got str",
        ),
        ({"timestamp_ms": 1.5}, TypeError, "timestamp_ms must be an int .* got float"),
        ({"timestamp_ms": True}, TypeError, "timestamp_ms must be an int .* got bool"),
        ({"timestamp_ms": -5}, ValueError, "timestamp_ms must be >= 0 or None, got -5"),
        ({"timestamp_ms": -(2**70)}, ValueError, "timestamp_ms must be >= 0"),
        ({"partition": "0"}, TypeError, "partition must be an int .* got str"),
        ({"partition": NumpyLikeInt(-2)}, ValueError, "partition must be >= 0 or None, got -2"),
        ({"headers": b"h=1"}, TypeError, "headers must be a list of .* got bytes"),
        ({"headers": [("a", b"1", 3)]}, TypeError, r"headers\[0\] must be a .* pair"),
        ({"headers": [("a", b"1"), ("b", "text")]}, TypeError, r"headers\[1\] \('b'\): the val"),
        ({"headers": [(1, b"1")]}, TypeError, r"headers\[0\]: the key must be str, got int"),
    ],
)
def test_a_bad_argument_is_refused_naming_it_and_nothing_is_queued(
    producer: KafkaProducer,
    client: LiveMockClient,
    kwargs: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        producer.send("t", b"v", **kwargs)
    producer.flush(10)
    assert not any(client.records.values())


def test_other_integer_types_and_a_headers_mapping_are_taken(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    md = producer.send(
        "t",
        b"v",
        partition=NumpyLikeInt(2),
        timestamp_ms=NumpyLikeInt(1234),
        headers={"trace": b"1", "empty": None},
    ).result(10)
    assert (md.partition, md.timestamp) == (2, 1234)
    (record,) = client.records[("t", 2)]
    assert record.headers == [("trace", b"1"), ("empty", None)]
