"""``decode_request(frame, max_items)``: a server's bound on the array entries one request
may make it decode, the same on the generated fast path and the careful path."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.errors import ProtocolDecodeError
from kclient.protocol import ApiKey
from kclient.protocol.codec import plan
from kclient.protocol.codegen import _FastPathMiss as FastPathMiss
from kclient.protocol.frame import decode_request, decode_request_header, encode_request
from kclient.protocol.messages.produce import REQUEST as PRODUCE_REQUEST
from kclient.testing.hostile import produce_request


def metadata_request(topics: int) -> bytes:
    body: dict[str, Any] = {"topics": [{"name": f"t{i}"} for i in range(topics)]}
    return b"".join(encode_request(ApiKey.METADATA, 12, 7, "c", body))[4:]


def produce_frame(partitions: int) -> bytes:
    return produce_request("t", None, partitions)[4:]  # the frame without its size


def test_entries_at_the_limit_decode_and_one_more_is_refused() -> None:
    frame = produce_frame(99)  # 1 topic + 99 partitions = 100 entries
    _, body = decode_request(frame, max_items=100)
    assert len(body["topic_data"][0]["partition_data"]) == 99
    with pytest.raises(ProtocolDecodeError, match="more than 99 array items in one message"):
        decode_request(frame, max_items=99)


def test_the_generated_fast_path_counts_entries_too() -> None:
    """It decodes within the budget and leaves a body over it to the careful path."""
    frame = produce_frame(99)
    _, body_at = decode_request_header(frame)
    fast = plan(PRODUCE_REQUEST, 9).fast_decode
    body, _ = fast(memoryview(frame), body_at, 100)
    assert len(body["topic_data"][0]["partition_data"]) == 99
    with pytest.raises(FastPathMiss):
        fast(memoryview(frame), body_at, 99)


def test_without_a_limit_anything_decodes() -> None:
    _, body = decode_request(metadata_request(5000))
    assert len(body["topics"]) == 5000
