"""The one-partition Produce fast path (``produce_fast``) against the generic codec.

``frame.encode_request``/``decode_response`` try it first for Produce; it must give the
very bytes and bodies the generic codec gives, and step aside (None) for every other
shape, so behaviour is the same whichever way a frame goes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.protocol import ApiKey
from kclient.protocol.frame import (
    _decode_response,
    _encode_request,
    decode_response,
    encode_request,
    encode_response,
    frame_bytes,
)
from kclient.protocol.produce_fast import decode_produce, encode_produce

VERSIONS = range(3, 13)


def produce_body(
    records: bytes, *, index: int = 0, topic: str = "t", txn: str | None = None, acks: int = -1
) -> dict[str, Any]:
    return {
        "transactional_id": txn,
        "acks": acks,
        "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": index, "records": records}]}],
    }


def answer_body(version: int, *, code: int = 0, topic: str = "t") -> dict[str, Any]:
    part: dict[str, Any] = {
        "index": 3,
        "error_code": code,
        "base_offset": 41,
        "log_append_time_ms": -1,
    }
    if version >= 5:
        part["log_start_offset"] = 2
    return {"responses": [{"name": topic, "partition_responses": [part]}], "throttle_time_ms": 0}


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    size=st.sampled_from([0, 1, 126, 127, 128, 16_383, 16_384, 16_385, 70_000]),
    index=st.integers(0, 2**31 - 1),
    correlation_id=st.integers(0, 2**31 - 1),
    topic=st.text(min_size=1, max_size=40),
    txn=st.one_of(st.none(), st.text(max_size=20)),
    acks=st.sampled_from([-1, 0, 1]),
)
def test_a_one_partition_request_is_the_generic_encoders_bytes(  # noqa: PLR0917
    version: int, size: int, index: int, correlation_id: int, topic: str, txn: str | None, acks: int
) -> None:
    body = produce_body(bytes(size), index=index, topic=topic, txn=txn, acks=acks)
    fast = encode_produce(version, correlation_id, "client-1", body, _encode_request)
    assert fast is not None
    generic = _encode_request(ApiKey.PRODUCE, version, correlation_id, "client-1", body)
    assert frame_bytes(fast) == frame_bytes(generic)
    assert frame_bytes(
        encode_request(ApiKey.PRODUCE, version, correlation_id, "client-1", body)
    ) == (frame_bytes(generic))


def test_a_large_batch_is_passed_by_reference() -> None:
    records = bytes(100_000)
    frame = encode_produce(9, 1, "c", produce_body(records), _encode_request)
    assert frame is not None
    assert any(buffer is records for buffer in frame)


@pytest.mark.parametrize(
    "body",
    [
        {**produce_body(b"x"), "topic_data": []},
        {
            **produce_body(b"x"),
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x"}] * 2}],
        },
        {**produce_body(b"x"), "topic_data": produce_body(b"x")["topic_data"] * 2},
        produce_body(None),  # type: ignore[arg-type]
        produce_body(memoryview(b"x")),  # type: ignore[arg-type]
        {**produce_body(b"x"), "extra": 1},
    ],
)
def test_other_shapes_take_the_generic_way(body: dict[str, Any]) -> None:
    assert encode_produce(9, 1, "c", body, _encode_request) is None


def test_out_of_range_values_get_the_generic_error() -> None:
    body = produce_body(b"x", index=2**31)
    assert encode_produce(9, 1, "c", body, _encode_request) is None
    with pytest.raises(Exception) as fast_error:
        encode_request(ApiKey.PRODUCE, 9, 1, "c", body)
    with pytest.raises(Exception) as generic_error:
        _encode_request(ApiKey.PRODUCE, 9, 1, "c", body)
    assert type(fast_error.value) is type(generic_error.value)
    assert str(fast_error.value) == str(generic_error.value)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("code", [0, 6, 10])
@pytest.mark.parametrize("topic", ["t", "é" * 40])
def test_a_one_partition_answer_decodes_as_the_generic_decoder_does(
    version: int, code: int, topic: str
) -> None:
    frame = frame_bytes(
        encode_response(ApiKey.PRODUCE, version, 77, answer_body(version, code=code, topic=topic))
    )[4:]
    fast = decode_produce(version, frame)
    assert fast is not None
    generic = _decode_response(ApiKey.PRODUCE, version, frame)
    assert fast == generic
    assert list(fast[1]) == list(generic[1])  # the same keys in the same order
    assert list(fast[1]["responses"][0]["partition_responses"][0]) == list(
        generic[1]["responses"][0]["partition_responses"][0]
    )
    assert decode_response(ApiKey.PRODUCE, version, frame) == generic


@pytest.mark.parametrize("version", [8, 9, 12])
def test_answers_with_record_errors_messages_or_more_partitions_take_the_generic_way(
    version: int,
) -> None:
    with_errors = answer_body(version, code=87)
    part = with_errors["responses"][0]["partition_responses"][0]
    part["record_errors"] = [{"batch_index": 0, "batch_index_error_message": "bad"}]
    part["error_message"] = "invalid record"
    two = answer_body(version)
    two["responses"][0]["partition_responses"] *= 2
    for body in (with_errors, two):
        frame = frame_bytes(encode_response(ApiKey.PRODUCE, version, 5, body))[4:]
        assert decode_produce(version, frame) is None
        assert decode_response(ApiKey.PRODUCE, version, frame) == _decode_response(
            ApiKey.PRODUCE, version, frame
        )


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_a_truncated_or_padded_answer_takes_the_generic_way(version: int) -> None:
    frame = frame_bytes(encode_response(ApiKey.PRODUCE, version, 5, answer_body(version)))[4:]
    for broken in (frame[:-1], frame + b"\x00", frame[:10]):
        assert decode_produce(version, broken) is None
