"""Frames and headers, version-specific layouts, and what the codec does at its edges."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from kclient.errors import ProtocolDecodeError, ProtocolEncodeError, UnsupportedVersionError
from kclient.protocol import ApiKey, RequestHeader
from kclient.protocol.codec import Writer, plan
from kclient.protocol.frame import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    frame_bytes,
    peek_correlation_id,
    request_header_version,
    response_header_version,
)
from kclient.protocol.messages import REQUESTS, RESPONSES

TOPIC_ID = uuid.UUID(int=1)
PRODUCE: dict[str, Any] = {
    "transactional_id": None,
    "acks": -1,
    "timeout_ms": 30000,
    "topic_data": [
        {"name": "t", "topic_id": TOPIC_ID, "partition_data": [{"index": 0, "records": b"abc"}]}
    ],
}


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


FETCH: dict[str, Any] = {"max_wait_ms": 0, "min_bytes": 1, "topics": []}


def _frame(buffers: list[Any]) -> bytes:
    """An encoded frame without its size prefix, checking the prefix on the way."""
    data = frame_bytes(buffers)
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    return data[4:]


# Written by hand from the protocol guide, not produced by the encoder under test.
PRODUCE_LAYOUTS = {
    3: "0000 0003 0000002a 0002 6964"  # header v1: key, version, correlation id, "id"
    " ffff ffff 00007530"  # null transactional id, acks -1, timeout
    " 00000001 0001 74"  # 1 topic, name "t"
    " 00000001 00000000 00000003 616263",  # 1 partition, index 0, records "abc"
    9: "0000 0009 0000002a 0002 6964 00"  # header v2: client id stays int16-length
    " 00 ffff 00007530"  # compact null transactional id
    " 02 02 74"  # compact array of 1, compact string "t"
    " 02 00000000 04 616263 00"  # partitions, compact records, partition tags
    " 00 00",  # topic tags, request tags
    13: "0000 000d 0000002a 0002 6964 00"
    " 00 ffff 00007530"
    " 02 00000000000000000000000000000001"  # topic id instead of name
    " 02 00000000 04 616263 00"
    " 00 00",
}


@pytest.mark.parametrize("version", sorted(PRODUCE_LAYOUTS))
def test_produce_request_layout_by_version(version: int) -> None:
    frame = _frame(encode_request(ApiKey.PRODUCE, version, 42, "id", PRODUCE))
    assert frame == _hex(PRODUCE_LAYOUTS[version])
    header, body = decode_request(frame)
    assert header == RequestHeader(0, version, 42, "id")
    topic = body["topic_data"][0]
    assert ("name" in topic, "topic_id" in topic) == (version < 13, version >= 13)
    assert topic["partition_data"][0]["records"] == b"abc"


def test_header_versions_follow_body_flexibility() -> None:
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.PRODUCE, 9) == 2
    assert response_header_version(ApiKey.PRODUCE, 8) == 0
    assert response_header_version(ApiKey.PRODUCE, 9) == 1
    assert request_header_version(ApiKey.METADATA, 9) == 2
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    for version in range(5):
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0
    with pytest.raises(ProtocolEncodeError, match="api key 99"):
        request_header_version(99, 0)


def test_api_versions_v4_response_uses_header_v0() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 13}]}
    frame = _frame(encode_response(ApiKey.API_VERSIONS, 4, 42, body))
    assert frame == _hex("0000002a 0000 02 0000 0003 000d 00 00000000 00")
    correlation_id, decoded = decode_response(ApiKey.API_VERSIONS, 4, frame)
    assert correlation_id == 42 and decoded == {**body, "throttle_time_ms": 0}


def test_flexible_metadata_response_uses_header_v1() -> None:
    for version, header in ((8, "00000007"), (9, "00000007 00")):
        empty = {"brokers": [], "topics": []}
        body = frame_bytes(plan(RESPONSES[ApiKey.METADATA], version).encode(empty))
        assert _frame(encode_response(ApiKey.METADATA, version, 7, empty)) == _hex(header) + body


def test_null_client_id() -> None:
    frame = _frame(encode_request(ApiKey.API_VERSIONS, 0, 1, None, {}))
    assert frame == _hex("0012 0000 00000001 ffff")
    assert decode_request(frame) == (RequestHeader(18, 0, 1, None), {})


def test_request_header_tagged_fields_are_skipped_for_flexible_versions() -> None:
    # ApiVersions v3 with one header tagged field (tag 5, 2 bytes) before the body
    frame = _hex("0012 0003 00000009 0001 63 01 05 02 aaaa 02 61 02 62 00")
    header, offset = decode_request_header(frame)
    assert header == RequestHeader(18, 3, 9, "c")
    assert offset == 16
    assert decode_request(frame)[1] == {"client_software_name": "a", "client_software_version": "b"}


def test_request_header_of_unknown_api_parses_the_v1_part() -> None:
    frame = _hex("03e7 0001 00000005 0002 6869 01 02 03")
    header, offset = decode_request_header(frame)
    assert header == RequestHeader(999, 1, 5, "hi")
    assert offset == 12
    with pytest.raises(ProtocolDecodeError, match="unknown api key 999"):
        decode_request(frame)


@pytest.mark.parametrize("version", [0, 2, 14])
def test_known_api_at_unsupported_version_is_unsupported_version_error(version: int) -> None:
    frame = _hex(f"0000 {version:04x} 00000001 ffff" + (" 00" if version >= 9 else ""))
    assert decode_request_header(frame)[0].api_version == version
    with pytest.raises(UnsupportedVersionError, match=f"ProduceRequest v{version}.*v3-13"):
        decode_request(frame)
    with pytest.raises(UnsupportedVersionError):
        decode_response(ApiKey.PRODUCE, version, _hex("00000001"))
    with pytest.raises(ProtocolEncodeError, match="not supported"):
        encode_request(ApiKey.PRODUCE, version, 1, None, PRODUCE)


def test_bytes_after_a_request_body_are_ignored_as_kafka_brokers_do() -> None:
    # librdkafka 2.16's all-topics Metadata v13 request, as captured (header, then body).
    frame = bytes.fromhex("0003000d00000003000772646b61666b6100" + "00000000" + "010000")
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 13, 3)
    assert body["topics"] is None  # all topics
    assert body["allow_auto_topic_creation"] is False
    plain = _frame(encode_request(ApiKey.API_VERSIONS, 0, 1, "c", {}))
    assert decode_request(plain + b"\x00")[1] == decode_request(plain)[1]


def test_truncated_frame_error_names_the_field_and_offset() -> None:
    frame = _frame(encode_request(ApiKey.PRODUCE, 3, 42, "id", PRODUCE))
    with pytest.raises(ProtocolDecodeError) as info:
        decode_request(frame[:-1])  # one byte short of the records
    message = str(info.value)
    assert message == (
        "ProduceRequest v3: cannot read records at byte offset 39"
        " (field topic_data[0].partition_data[0].records): needs 3 bytes, 2 left"
    )


def test_truncation_inside_a_run_of_fixed_fields_names_the_field() -> None:
    frame = _frame(encode_request(ApiKey.FETCH, 4, 1, None, {**FETCH, "max_bytes": 9}))
    with pytest.raises(ProtocolDecodeError) as info:
        decode_request(frame[:20])  # header is 10 bytes: replica_id, max_wait_ms, 2 of min_bytes
    assert "int32 at byte offset 18 (field min_bytes): needs 4 bytes, 2 left" in str(info.value)


def test_encode_errors_name_the_field() -> None:
    with pytest.raises(ProtocolEncodeError, match=r"field acks: 'x' is not a valid int16"):
        encode_request(ApiKey.PRODUCE, 9, 1, None, {**PRODUCE, "acks": "x"})
    with pytest.raises(ProtocolEncodeError, match=r"field acks: 40000 is not a valid int16"):
        encode_request(ApiKey.PRODUCE, 9, 1, None, {**PRODUCE, "acks": 40000})
    bad = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [
            {
                "name": "t",
                "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": "text"}],
            }
        ],
    }
    with pytest.raises(
        ProtocolEncodeError, match=r"topic_data\[0\].partition_data\[1\].records: expected bytes"
    ):
        encode_request(ApiKey.PRODUCE, 9, 1, None, bad)
    with pytest.raises(ProtocolEncodeError, match=r"topic_data\[0\].name: expected str"):
        encode_request(
            ApiKey.PRODUCE,
            3,
            1,
            None,
            {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": None, "partition_data": []}]},
        )
    with pytest.raises(ProtocolEncodeError, match="expected a dict"):
        encode_request(ApiKey.PRODUCE, 3, 1, None, [])  # type: ignore[arg-type]
    with pytest.raises(ProtocolEncodeError, match="api key 99"):
        encode_request(99, 0, 1, None, {})


def test_records_are_emitted_by_reference_and_concatenated() -> None:
    chunks = [bytearray(b"first-"), memoryview(b"second-"), b"third"]
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": chunks}]}],
    }
    buffers = encode_request(ApiKey.PRODUCE, 9, 1, "c", body)
    for chunk in chunks:
        assert any(buf is chunk for buf in buffers)
    frame = _frame(buffers)
    records = decode_request(frame)[1]["topic_data"][0]["partition_data"][0]["records"]
    assert records == b"first-second-third"


def test_decoded_records_are_zero_copy_views_of_the_frame() -> None:
    frame = _frame(encode_request(ApiKey.PRODUCE, 9, 1, "c", PRODUCE))
    records = decode_request(frame)[1]["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is frame


def test_null_and_empty_records() -> None:
    for records in (None, b""):
        body = {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
        }
        frame = _frame(encode_request(ApiKey.PRODUCE, 9, 1, None, body))
        decoded = decode_request(frame)[1]["topic_data"][0]["partition_data"][0]["records"]
        assert decoded == records


def test_unknown_tagged_fields_survive_a_round_trip() -> None:
    frame = _hex(
        "0000 0009 00000001 ffff 00"
        " 00 ffff 00007530 02 02 74"
        " 02 00000000 04 616263 02 07 02 6869 08 00"  # partition: tags 7 ("hi") and 8 (empty)
        " 00 01 1e 01 ff"  # topic: no tags; request: tag 30
    )
    _, body = decode_request(frame)
    partition = body["topic_data"][0]["partition_data"][0]
    assert partition["_unknown_tagged_fields"] == {7: b"hi", 8: b""}
    assert body["_unknown_tagged_fields"] == {30: b"\xff"}
    assert _frame(encode_request(ApiKey.PRODUCE, 9, 1, None, body)) == frame


def test_unknown_tagged_fields_may_not_reuse_a_declared_tag() -> None:
    # tag 0 is current_leader
    partition = {"index": 0, "error_code": 0, "base_offset": 0, "_unknown_tagged_fields": {0: b"x"}}
    body = {"responses": [{"name": "t", "partition_responses": [partition]}]}
    with pytest.raises(ProtocolEncodeError, match="tag 0 is invalid or declared"):
        encode_response(ApiKey.PRODUCE, 10, 1, body)


def test_tagged_fields_are_written_exactly_when_present() -> None:
    leader = {"leader_id": 3, "leader_epoch": 7}
    partition: dict[str, Any] = {
        "index": 0,
        "error_code": 6,
        "base_offset": -1,
        "current_leader": leader,
    }
    body = {"responses": [{"name": "t", "partition_responses": [partition]}]}
    frame = _frame(encode_response(ApiKey.PRODUCE, 10, 1, body))
    assert _hex("01 00 09 00000003 00000007 00") in frame  # tag 0, 9 bytes, struct, its tags
    decoded = decode_response(ApiKey.PRODUCE, 10, frame)[1]
    assert decoded["responses"][0]["partition_responses"][0]["current_leader"] == leader
    assert "node_endpoints" not in decoded
    for absent in ({}, {"current_leader": None}):
        plain = {**partition, **absent}
        if not absent:
            del plain["current_leader"]
        body = {"responses": [{"name": "t", "partition_responses": [plain]}]}
        decoded = decode_response(ApiKey.PRODUCE, 10, _frame(encode_response(0, 10, 1, body)))[1]
        assert "current_leader" not in decoded["responses"][0]["partition_responses"][0]


def test_missing_keys_encode_as_their_declared_defaults() -> None:
    frame = _frame(encode_request(ApiKey.FETCH, 4, 1, None, FETCH))
    _, body = decode_request(frame)
    assert body == {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 0x7FFFFFFF,
        "isolation_level": 0,
        "topics": [],
    }
    metadata = decode_request(_frame(encode_request(ApiKey.METADATA, 4, 1, None, {"topics": []})))[
        1
    ]
    assert metadata == {"topics": [], "allow_auto_topic_creation": True}


@pytest.mark.parametrize("careful", [False, True])
def test_a_missing_field_without_a_default_is_refused(careful: bool) -> None:
    body_plan = plan(REQUESTS[ApiKey.PRODUCE], 9)
    encode = body_plan.encode_careful_into if careful else body_plan.encode_into
    no_acks = {k: v for k, v in PRODUCE.items() if k != "acks"}
    with pytest.raises(ProtocolEncodeError, match=r"^ProduceRequest v9: field acks: missing"):
        encode(Writer(), no_acks)
    no_index = {**PRODUCE, "topic_data": [{"name": "t", "partition_data": [{"records": b""}]}]}
    with pytest.raises(
        ProtocolEncodeError, match=r"field topic_data\[0\].partition_data\[0\].index: missing"
    ):
        encode(Writer(), no_index)


@pytest.mark.parametrize("careful", [False, True])
def test_a_misspelt_field_is_refused_not_sent_as_the_default(careful: bool) -> None:
    body_plan = plan(REQUESTS[ApiKey.PRODUCE], 9)
    encode = body_plan.encode_careful_into if careful else body_plan.encode_into
    with pytest.raises(ProtocolEncodeError, match=r"^ProduceRequest v9: unknown field 'ackz'"):
        encode(Writer(), {**PRODUCE, "ackz": -1})
    with pytest.raises(ProtocolEncodeError, match=r"unknown field 'indx'"):
        topic = {"name": "t", "partition_data": [{"index": 0, "indx": 1, "records": b""}]}
        encode(Writer(), {**PRODUCE, "topic_data": [topic]})
    with pytest.raises(ProtocolEncodeError, match=r"unknown field 'ackz'"):
        encode_request(ApiKey.PRODUCE, 9, 1, None, {**PRODUCE, "ackz": -1})


def test_keys_of_fields_that_other_versions_have_are_ignored() -> None:
    # topic_id exists from v13 on: one body serves every version
    topic = {**PRODUCE["topic_data"][0], "topic_id": uuid.uuid4()}
    with_later = {**PRODUCE, "topic_data": [topic]}
    assert frame_bytes(encode_request(0, 3, 1, None, with_later)) == frame_bytes(
        encode_request(0, 3, 1, None, PRODUCE)
    )


def test_fetch_v15_moves_replica_id_into_a_tagged_field() -> None:
    body = {**FETCH, "replica_id": 5, "replica_state": {"replica_id": 5, "replica_epoch": 9}}
    v14 = decode_request(_frame(encode_request(ApiKey.FETCH, 14, 1, None, body)))[1]
    v15 = decode_request(_frame(encode_request(ApiKey.FETCH, 15, 1, None, body)))[1]
    assert v14["replica_id"] == 5 and "replica_state" not in v14
    assert "replica_id" not in v15 and v15["replica_state"] == body["replica_state"]


def test_metadata_topics_are_nullable_from_v1_only() -> None:
    v1 = _frame(encode_request(ApiKey.METADATA, 1, 1, None, {"topics": None}))
    assert v1.endswith(_hex("ffffffff"))
    assert decode_request(v1)[1] == {"topics": None}
    with pytest.raises(ProtocolEncodeError, match="field topics: None given"):
        encode_request(ApiKey.METADATA, 0, 1, None, {"topics": None})


def test_api_versions_response_falls_back_to_v0() -> None:
    # A broker that does not know the requested version answers in v0 with error 35.
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    frame = _frame(encode_response(ApiKey.API_VERSIONS, 0, 3, body))
    assert decode_response(ApiKey.API_VERSIONS, 3, frame) == (3, body)
    with pytest.raises(ProtocolDecodeError):
        decode_response(ApiKey.API_VERSIONS, 3, frame[:-1])


def test_a_plan_decodes_a_bare_body() -> None:
    body_plan = plan(RESPONSES[ApiKey.INIT_PRODUCER_ID], 4)
    data = frame_bytes(body_plan.encode({"error_code": 0, "producer_id": 7, "producer_epoch": 2}))
    assert data == _hex("00000000 0000 0000000000000007 0002 00")
    assert body_plan.decode_all(data)["producer_id"] == 7
    with pytest.raises(ProtocolDecodeError, match="InitProducerIdResponse v4.*1 unexpected bytes"):
        body_plan.decode_all(data + b"\x00")


def test_peek_correlation_id() -> None:
    assert peek_correlation_id(_hex("0000002a ffff")) == 42
    with pytest.raises(ProtocolDecodeError, match="response header: cannot read int32"):
        peek_correlation_id(b"\x00\x01")
