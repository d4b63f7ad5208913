"""The one-partition Produce fast path (``produce_fast``) against the generic codec.

``frame.encode_request``/``decode_response`` try it first for Produce; it must give the
very bytes and bodies the generic codec gives, and step aside (None) for every other
shape, so behaviour is the same whichever way a frame goes. Every test runs against both
implementations: the C one (``kclient.protocol._produce``, built by the test command: if it
is missing the import below fails) and the Python reference.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kclient.protocol._produce as c_produce
from kclient.protocol import ApiKey, produce_fast
from kclient.protocol.frame import (
    _decode_response,
    _encode_request,
    decode_response,
    encode_request,
    encode_response,
    frame_bytes,
)
from kclient.protocol.produce_fast import decode_produce_py, encode_produce_py
from kclient.record import ACCELERATED

VERSIONS = range(3, 14)  # v13 names the topic by id (KIP-516)
TOPIC_ID = uuid.UUID("8f1c62a4-5b0e-4c43-9a55-33b1f0e1d2c7")
IMPLS = ["c", "python"]
Encode = Callable[..., Any]
Decode = Callable[..., Any]


def encoder(impl: str) -> Encode:
    return c_produce.encode_produce if impl == "c" else encode_produce_py


def decoder(impl: str) -> Decode:
    return c_produce.decode_produce if impl == "c" else decode_produce_py


def test_the_c_functions_run_when_the_accelerator_is_on() -> None:
    assert produce_fast.C_ACCELERATED == ACCELERATED
    if ACCELERATED:
        assert produce_fast.encode_produce is c_produce.encode_produce
        assert produce_fast.decode_produce is c_produce.decode_produce


def produce_body(
    records: Any,
    *,
    index: int = 0,
    topic: str = "t",
    txn: str | None = None,
    acks: int = -1,
    timeout_ms: int = 30_000,
    topic_id: Any = None,
) -> dict[str, Any]:
    """A one-partition request body; with ``topic_id`` the topic has its id too (as the
    Sender writes it when the metadata gave one)."""
    by_id = {} if topic_id is None else {"topic_id": topic_id}
    return {
        "transactional_id": txn,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [
            {"name": topic, **by_id, "partition_data": [{"index": index, "records": records}]}
        ],
    }


def answer_body(
    version: int, *, code: int = 0, topic: str = "t", topic_id: uuid.UUID = TOPIC_ID
) -> dict[str, Any]:
    part: dict[str, Any] = {
        "index": 3,
        "error_code": code,
        "base_offset": 41,
        "log_append_time_ms": -1,
    }
    if version >= 5:
        part["log_start_offset"] = 2
    named = {"topic_id": topic_id} if version >= 13 else {"name": topic}
    return {"responses": [{**named, "partition_responses": [part]}], "throttle_time_ms": 0}


def short_name(max_bytes: int) -> st.SearchStrategy[str]:
    return st.text(min_size=1, max_size=max_bytes).filter(lambda t: len(t.encode()) <= max_bytes)


INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
SIZES = [0, 1, 126, 127, 128, 16_382, 16_383, 16_384, 16_385, 70_000, 2**21]


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=80, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    size=st.sampled_from(SIZES),
    as_bytearray=st.booleans(),
    index=INT32,
    correlation_id=INT32,
    client_id=st.one_of(st.none(), st.text(max_size=30)),
    topic=short_name(126),
    txn=st.one_of(st.none(), st.text(max_size=20)),
    acks=st.one_of(st.sampled_from([-1, 0, 1]), st.integers(-(2**15), 2**15 - 1)),
    timeout_ms=INT32,
    topic_id=st.one_of(st.none(), st.uuids()),
)
def test_a_one_partition_request_is_the_generic_encoders_bytes(  # noqa: PLR0917
    impl: str,
    version: int,
    size: int,
    as_bytearray: bool,
    index: int,
    correlation_id: int,
    client_id: str | None,
    topic: str,
    txn: str | None,
    acks: int,
    timeout_ms: int,
    topic_id: uuid.UUID | None,
) -> None:
    if version == 13 and topic_id is None:
        topic_id = TOPIC_ID  # v13 needs the id; before, an id is there or not (not encoded)
    records = (
        bytearray(size) if as_bytearray else bytes(range(256)) * (size // 256) + bytes(size % 256)
    )
    body = produce_body(
        records,
        index=index,
        topic=topic,
        txn=txn,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_id=topic_id,
    )
    fast = encoder(impl)(version, correlation_id, client_id, body, _encode_request)
    assert fast is not None
    generic = _encode_request(ApiKey.PRODUCE, version, correlation_id, client_id, body)
    assert frame_bytes(fast) == frame_bytes(generic)
    # one buffer up to 16 KiB of records, else the records by reference (NetworkSend)
    if size <= 16_384:
        assert len(fast) == 1
        assert type(fast[0]) is bytearray
    else:
        assert fast[1] is records
        assert len(fast) == (3 if version >= 9 else 2)
    assert frame_bytes(
        encode_request(ApiKey.PRODUCE, version, correlation_id, client_id, body)
    ) == (frame_bytes(generic))


@pytest.mark.parametrize("impl", IMPLS)
def test_a_large_batch_is_passed_by_reference(impl: str) -> None:
    records = bytes(100_000)
    frame = encoder(impl)(9, 1, "c", produce_body(records), _encode_request)
    assert frame is not None
    assert any(buffer is records for buffer in frame)


ODD_BODIES = [
    {**produce_body(b"x"), "topic_data": []},
    {
        **produce_body(b"x"),
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x"}] * 2}],
    },
    {**produce_body(b"x"), "topic_data": produce_body(b"x")["topic_data"] * 2},
    produce_body(None),
    produce_body(memoryview(b"x")),
    produce_body(b"x", index=True),
    produce_body(b"x", index=1.0),  # type: ignore[arg-type]
    {**produce_body(b"x"), "extra": 1},
    {k: v for k, v in produce_body(b"x").items() if k != "acks"},
    {**produce_body(b"x"), "topic_data": [{"name": "t", "partition_data": []}]},
    {**produce_body(b"x"), "topic_data": [{"name": "t"}]},
    {**produce_body(b"x"), "topic_data": [{"name": "t", "partition_data": [{"index": 0}]}]},
    {
        **produce_body(b"x"),
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"", "x": 1}]}],
    },
    {**produce_body(b"x"), "topic_data": [{"name": "t", "partition_data": [], "x": 1}]},
    {**produce_body(b"x"), "topic_data": [["not a dict"]]},
    {**produce_body(b"x"), "topic_data": "x"},
    {**produce_body(b"x"), "topic_data": None},
    {**produce_body(b"x"), "transactional_id": ["unhashable"]},
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("body", ODD_BODIES)
def test_other_shapes_take_the_generic_way(impl: str, body: dict[str, Any]) -> None:
    assert encoder(impl)(9, 1, "c", body, _encode_request) is None


class _Str(str):
    pass


def _same_types_by_other_containers() -> list[tuple[str, Any]]:
    body = produce_body(b"abc", topic="t")
    as_tuples = {
        **body,
        "topic_data": ({"name": "t", "partition_data": body["topic_data"][0]["partition_data"]},),
    }
    return [
        ("ordered dict", OrderedDict(body)),
        ("tuples", as_tuples),
        ("str subclass topic", produce_body(b"abc", topic=_Str("t"))),
        ("str subclass transactional id", produce_body(b"abc", txn=_Str("x"))),
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("label", "body"), _same_types_by_other_containers())
def test_other_containers_give_what_the_python_reference_gives(
    impl: str, label: str, body: Any
) -> None:
    expected = encode_produce_py(9, 5, "c", body, _encode_request)
    got = encoder(impl)(9, 5, "c", body, _encode_request)
    assert (got is None) == (expected is None)
    if expected is not None:
        assert frame_bytes(got) == frame_bytes(expected)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("version", "correlation_id", "body"),
    [
        (9, 1, produce_body(b"x", index=2**31)),
        (9, 1, produce_body(b"x", index=-(2**31) - 1)),
        (9, 1, produce_body(b"x", index=2**100)),
        (3, 1, produce_body(b"x", index=2**63)),
        (9, 2**31, produce_body(b"x")),
        (8, -(2**31) - 1, produce_body(b"x")),
        (9, 2**64, produce_body(b"x")),
        (9, 1, produce_body(b"x", acks=2**15)),
        (4, 1, produce_body(b"x", timeout_ms=-(2**31) - 1)),
        (9, 1, produce_body(b"x", timeout_ms=2**80)),
        (2**70, 1, produce_body(b"x")),
        (-1, 1, produce_body(b"x")),
        (13, 1, produce_body(b"x")),
        (2, 1, produce_body(b"x")),
        (9.0, 1, produce_body(b"x")),
        (9, 1.0, produce_body(b"x")),
        (9, True, produce_body(b"x")),
    ],
)
def test_out_of_range_values_get_the_generic_error(
    impl: str, version: Any, correlation_id: Any, body: dict[str, Any]
) -> None:
    assert encoder(impl)(version, correlation_id, "c", body, _encode_request) is None
    try:
        generic = _encode_request(ApiKey.PRODUCE, version, correlation_id, "c", body)
    except Exception as exc:
        with pytest.raises(type(exc)) as fast_error:
            encode_request(ApiKey.PRODUCE, version, correlation_id, "c", body)
        assert str(fast_error.value) == str(exc)
    else:  # a float version or a bool correlation id the generic codec takes
        got = encode_request(ApiKey.PRODUCE, version, correlation_id, "c", body)
        assert frame_bytes(got) == frame_bytes(generic)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("code", [0, 6, 10])
@pytest.mark.parametrize("topic", ["t", "é" * 40])
def test_a_one_partition_answer_decodes_as_the_generic_decoder_does(
    impl: str, version: int, code: int, topic: str
) -> None:
    frame = frame_bytes(
        encode_response(ApiKey.PRODUCE, version, 77, answer_body(version, code=code, topic=topic))
    )[4:]
    fast = decoder(impl)(version, frame)
    assert fast is not None
    generic = _decode_response(ApiKey.PRODUCE, version, frame)
    assert_same_answer(fast, generic)
    assert decode_response(ApiKey.PRODUCE, version, frame) == generic


def assert_same_answer(fast: Any, generic: tuple[int, dict[str, Any]]) -> None:
    assert fast == generic
    assert list(fast[1]) == list(generic[1])  # the same keys in the same order
    topic, generic_topic = fast[1]["responses"][0], generic[1]["responses"][0]
    assert list(topic) == list(generic_topic)
    part = topic["partition_responses"][0]
    assert list(part) == list(generic_topic["partition_responses"][0])
    assert all(
        type(v) is type(g)
        for v, g in zip(
            part.values(), generic_topic["partition_responses"][0].values(), strict=True
        )
    )


ANSWERS = st.fixed_dictionaries(
    {
        "version": st.sampled_from(VERSIONS),
        "correlation_id": INT32,
        "topic": st.one_of(st.just(""), short_name(126)),
        "index": INT32,
        "code": st.integers(-(2**15), 2**15 - 1),
        "base": INT64,
        "append": INT64,
        "start": INT64,
        "throttle": INT32,
        "topic_id": st.uuids(),
    }
)


def answer_frame(a: dict[str, Any]) -> bytes:
    version = a["version"]
    part: dict[str, Any] = {
        "index": a["index"],
        "error_code": a["code"],
        "base_offset": a["base"],
        "log_append_time_ms": a["append"],
    }
    if version >= 5:
        part["log_start_offset"] = a["start"]
    named = {"topic_id": a["topic_id"]} if version >= 13 else {"name": a["topic"]}
    body = {
        "responses": [{**named, "partition_responses": [part]}],
        "throttle_time_ms": a["throttle"],
    }
    return frame_bytes(encode_response(ApiKey.PRODUCE, version, a["correlation_id"], body))[4:]


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=150, deadline=None)
@given(answer=ANSWERS, as_bytearray=st.booleans())
def test_any_written_answer_decodes_as_the_generic_decoder_does(
    impl: str, answer: dict[str, Any], as_bytearray: bool
) -> None:
    frame = answer_frame(answer)
    version = answer["version"]
    fast = decoder(impl)(version, bytearray(frame) if as_bytearray else frame)
    assert fast is not None
    assert_same_answer(fast, _decode_response(ApiKey.PRODUCE, version, frame))


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=300, deadline=None)
@given(answer=ANSWERS, data=st.data())
def test_a_garbled_answer_is_none_or_what_the_generic_decoder_reads(
    impl: str, answer: dict[str, Any], data: st.DataObject
) -> None:
    frame = bytearray(answer_frame(answer))
    version = answer["version"]
    how = data.draw(st.sampled_from(["truncate", "extend", "flip", "flip two"]))
    if how == "truncate":
        del frame[data.draw(st.integers(0, len(frame) - 1)) :]
    elif how == "extend":
        frame += data.draw(st.binary(min_size=1, max_size=8))
    else:
        for _ in range(1 if how == "flip" else 2):
            frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    fast = decoder(impl)(version, bytes(frame))  # never raises
    assert fast == decode_produce_py(version, bytes(frame))
    try:
        generic = _decode_response(ApiKey.PRODUCE, version, bytes(frame))
    except Exception:
        assert fast is None
    else:
        if fast is not None:
            assert_same_answer(fast, generic)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", [8, 9, 12, 13])
def test_answers_with_record_errors_messages_or_more_partitions_take_the_generic_way(
    impl: str, version: int
) -> None:
    with_errors = answer_body(version, code=87)
    part = with_errors["responses"][0]["partition_responses"][0]
    part["record_errors"] = [{"batch_index": 0, "batch_index_error_message": "bad"}]
    part["error_message"] = "invalid record"
    two = answer_body(version)
    two["responses"][0]["partition_responses"] *= 2
    two_topics = answer_body(version)
    two_topics["responses"] *= 2
    long_name = answer_body(version, topic="x" * 127)
    for body in (with_errors, two, two_topics, long_name):
        frame = frame_bytes(encode_response(ApiKey.PRODUCE, version, 5, body))[4:]
        # v3-v8 names have an int16 length; v13 has no name
        if body is not long_name or 9 <= version <= 12:
            assert decoder(impl)(version, frame) is None
        assert decode_response(ApiKey.PRODUCE, version, frame) == _decode_response(
            ApiKey.PRODUCE, version, frame
        )


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", [3, 5, 8, 9, 12, 13])
def test_a_truncated_or_padded_answer_takes_the_generic_way(impl: str, version: int) -> None:
    frame = frame_bytes(encode_response(ApiKey.PRODUCE, version, 5, answer_body(version)))[4:]
    for broken in (frame[:-1], frame + b"\x00", frame[:10], frame[:6], b""):
        assert decoder(impl)(version, broken) is None


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", [2, 14, -1, 2**70, 9.0, None, "9"])
def test_an_answer_at_another_version_takes_the_generic_way(impl: str, version: Any) -> None:
    frame = frame_bytes(encode_response(ApiKey.PRODUCE, 9, 5, answer_body(9)))[4:]
    assert decoder(impl)(version, frame) is None


@pytest.mark.parametrize("impl", IMPLS)
def test_a_bad_utf8_name_or_a_view_gives_what_the_python_reference_gives(impl: str) -> None:
    for version in (3, 9):
        frame = frame_bytes(encode_response(ApiKey.PRODUCE, version, 5, answer_body(version)))[4:]
        bad = frame.replace(b"t", b"\xff", 1)
        assert decoder(impl)(version, bad) is None
        view = memoryview(frame)
        assert decoder(impl)(version, view) == decode_produce_py(version, view)
        assert decoder(impl)(version, view) is not None


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_byte_of_an_answer_changed_gives_none_or_the_generic_answer(
    impl: str, version: int
) -> None:
    frame = answer_frame(
        {
            "version": version,
            "correlation_id": 7,
            "topic": "topic",
            "index": 1,
            "code": 0,
            "base": 2,
            "append": 3,
            "start": 4,
            "throttle": 5,
            "topic_id": TOPIC_ID,
        }
    )
    for pos, old in enumerate(frame):
        for new in {0, 1, 2, 3, 0x7F, 0x80, 0xFF, (old + 1) % 256, (old - 1) % 256} - {old}:
            changed = frame[:pos] + bytes([new]) + frame[pos + 1 :]
            fast = decoder(impl)(version, changed)
            assert fast == decode_produce_py(version, changed), (pos, new)
            try:
                generic = _decode_response(ApiKey.PRODUCE, version, changed)
            except Exception:
                assert fast is None, (pos, new)
            else:
                if fast is not None:
                    assert_same_answer(fast, generic)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", [3, 9])
@pytest.mark.parametrize("value", [2**31 - 1, -(2**31), 0, -1])
def test_int32_limits_are_encoded(impl: str, version: int, value: int) -> None:
    body = produce_body(b"abc", index=value, timeout_ms=value)
    fast = encoder(impl)(version, value, "c", body, _encode_request)
    assert fast is not None
    generic = _encode_request(ApiKey.PRODUCE, version, value, "c", body)
    assert frame_bytes(fast) == frame_bytes(generic)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_name_of_127_bytes_or_more_takes_the_generic_way(impl: str) -> None:
    frame = frame_bytes(encode_response(ApiKey.PRODUCE, 9, 5, answer_body(9, topic="x" * 126)))[4:]
    fast = decoder(impl)(9, frame)
    assert fast is not None
    assert fast[1]["responses"][0]["name"] == "x" * 126
    # a one-byte length of 128 (its varint continues) in a frame of a 127-byte name's size
    longer = frame[:6] + b"\x80x" + frame[7:]
    assert len(longer) == 47 + 127
    assert decoder(impl)(9, longer) is None


V13_ODD_BODIES = [
    produce_body(b"x"),  # no id: v13 would send the zero uuid, not this path's business
    produce_body(b"x", topic_id=str(TOPIC_ID)),
    produce_body(b"x", topic_id=TOPIC_ID.int),
    produce_body(b"x", topic_id=None)
    | {"topic_data": [{"name": "t", "x": 1, "partition_data": []}]},
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("body", V13_ODD_BODIES)
def test_v13_without_a_uuid_takes_the_generic_way(impl: str, body: dict[str, Any]) -> None:
    assert encoder(impl)(13, 1, "c", body, _encode_request) is None
    assert (
        encoder(impl)(12, 1, "c", body, _encode_request) is None
        or "topic_id" not in (body["topic_data"][0])
    )


@pytest.mark.parametrize("impl", IMPLS)
def test_v13_names_the_topic_by_id_and_the_answer_is_matched_by_it(impl: str) -> None:
    """The id, not the name, is on the wire at v13; two ids of one name are two prefixes."""
    first = encoder(impl)(13, 1, "c", produce_body(b"abc", topic_id=TOPIC_ID), _encode_request)
    other = uuid.UUID(int=7)
    second = encoder(impl)(13, 1, "c", produce_body(b"abc", topic_id=other), _encode_request)
    assert first is not None and second is not None
    assert TOPIC_ID.bytes in frame_bytes(first) and other.bytes in frame_bytes(second)
    assert b"\x02t" not in frame_bytes(first)  # no compact name "t"
    frame = frame_bytes(encode_response(ApiKey.PRODUCE, 13, 5, answer_body(13)))[4:]
    answer = decoder(impl)(13, frame)
    assert answer is not None
    assert answer[1]["responses"][0]["topic_id"] == TOPIC_ID
    assert type(answer[1]["responses"][0]["topic_id"]) is uuid.UUID
    # one object per id, shared by both decoders (answers name the same topics again)
    again = decoder(impl)(13, frame)
    assert again is not None
    assert again[1]["responses"][0]["topic_id"] is answer[1]["responses"][0]["topic_id"]
    assert produce_fast.topic_id(TOPIC_ID.bytes) is answer[1]["responses"][0]["topic_id"]
