"""The bytes of Produce answers, checked field by field against Kafka's ProduceResponse
schema: what strict clients (@platformatic/kafka, the Java client) decode."""

from __future__ import annotations

import struct
from typing import Any

from kclient.broker.request_channel import SendResponse
from kclient.protocol import ApiKey


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    data = s.encode()
    return uvarint(len(data) + 1) + data


def tagged(fields: dict[int, bytes]) -> bytes:
    out = uvarint(len(fields))
    for tag, value in sorted(fields.items()):
        out += uvarint(tag) + uvarint(len(value)) + value
    return out


def test_a_follower_answers_produce_v11_exactly_as_kafka_does(
    make_harness: Any, make_batch: Any
) -> None:
    """NOT_LEADER_OR_FOLLOWER with Kafka's KIP-951 hints and no error message (Kafka sets
    one only for record validation errors): the answer @platformatic/kafka 1.35.0 got
    during broker restarts (it fails to skip any non-empty tagged fields, against Kafka
    3.7+ as here)."""
    h = make_harness(brokers=2)
    h.controller.create_topic("t", 1)
    partition = h.controller.partition("t", 0)
    leader, epoch = partition.leader_id, partition.leader_epoch
    request = h.request(
        ApiKey.PRODUCE,
        11,
        {
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": make_batch([b"a"])}]}
            ],
        },
    )
    response = h.handle(request, 1 - leader)
    assert isinstance(response, SendResponse)
    frame = b"".join(bytes(b) for b in response.buffers)
    size, correlation_id = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and correlation_id == request.header.correlation_id
    endpoint = next(b for b in h.controller.live_brokers() if b.node_id == leader)

    current_leader = struct.pack(">ii", leader, epoch) + tagged({})
    node_endpoint = (
        struct.pack(">i", leader)
        + compact_string(endpoint.host)
        + struct.pack(">i", endpoint.port)
        + compact_string(None)  # rack
        + tagged({})
    )
    expected = (
        tagged({})  # response header v1
        + uvarint(2)  # responses: 1 topic
        + compact_string("t")
        + uvarint(2)  # partition_responses: 1
        + struct.pack(">ihqqq", 0, 6, -1, -1, -1)  # index, NOT_LEADER, offsets
        + uvarint(1)  # record_errors: empty
        + compact_string(None)  # error_message
        + tagged({0: current_leader})
        + tagged({})  # topic
        + struct.pack(">i", 0)  # throttle_time_ms
        + tagged({0: uvarint(2) + node_endpoint})
    )
    assert frame[8:] == expected
