"""The producer's MetadataResponse reader: the same body as the codec's, minus the topics
it was not asked for, each kept topic's partitions decoded one at a time; malformed bytes
are the codec's ``DecodeError``. Bodies generated from the declaration (hypothesis)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import ProtocolDecodeError
from kclient.network.metadata_response import PartitionsView, decode_metadata_response
from kclient.protocol import ApiKey
from kclient.protocol.codec import UNKNOWN_TAGGED
from kclient.protocol.frame import decode_response, encode_response, frame_bytes
from kclient.protocol.messages.metadata import RESPONSE
from kclient.protocol.schema import Field

VERSIONS = range(RESPONSE.valid.low, RESPONSE.valid.high + 1)
NAMES = ["wanted", "other", "x", "wanted-too"]


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    return {
        "int16": st.integers(-(2**15), 2**15 - 1),
        "int32": st.integers(-(2**31), 2**31 - 1),
        "bool": st.booleans(),
        "string": st.sampled_from(NAMES),
        "uuid": st.uuids(),
    }[kind]


def _value(fld: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if fld.is_array:
        item = _struct(fld.fields, version, flexible) if fld.is_struct else _scalar(fld.item_type)
        base: st.SearchStrategy[Any] = st.lists(item, max_size=4)
    else:
        base = _scalar(fld.type)
    return st.none() | base if version in fld.nullable_versions else base


def _struct(
    fields: tuple[Field, ...], version: int, flexible: bool
) -> st.SearchStrategy[dict[str, Any]]:
    required = {f.key: _value(f, version, flexible) for f in fields if version in f.versions}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    if flexible:
        optional[UNKNOWN_TAGGED] = st.dictionaries(
            st.integers(0, 50), st.binary(max_size=5), min_size=1, max_size=2
        )
    return st.fixed_dictionaries(required, optional=optional)


def frame(version: int, body: dict[str, Any]) -> bytes:
    return frame_bytes(encode_response(ApiKey.METADATA, version, 77, body))[4:]


def materialized(body: dict[str, Any]) -> dict[str, Any]:
    for topic in body["topics"]:
        assert isinstance(topic["partitions"], PartitionsView)
        topic["partitions"] = list(topic["partitions"])
    return body


@pytest.mark.parametrize("version", VERSIONS)
@settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_body_is_the_codecs_without_the_topics_not_wanted(
    version: int, data: st.DataObject
) -> None:
    body = data.draw(_struct(RESPONSE.fields, version, RESPONSE.is_flexible(version)))
    wire = frame(version, body)
    _, expected = decode_response(ApiKey.METADATA, version, wire)
    expected["topics"] = [t for t in expected["topics"] if t["name"] in ("wanted", "wanted-too")]
    correlation_id, got = decode_metadata_response(
        version, wire, lambda name: name in ("wanted", "wanted-too")
    )
    assert correlation_id == 77
    assert materialized(got) == expected


@pytest.mark.parametrize("version", [1, 8, 9, 12, 13])
def test_truncated_or_corrupted_bytes_are_decode_errors(version: int) -> None:
    body = {
        "brokers": [{"node_id": 0, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 0,
        "topics": [
            {
                "error_code": 0,
                "name": name,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": 0,
                        "leader_epoch": 1,
                        "replica_nodes": [0, 1],
                        "isr_nodes": [0],
                        "offline_replicas": [],
                    }
                    for p in range(3)
                ],
            }
            for name in ("other", "wanted")
        ],
    }
    wire = frame(version, body)
    rng = random.Random(version)
    for cut in range(len(wire)):
        with pytest.raises(ProtocolDecodeError):
            decode_metadata_response(version, wire[:cut], lambda name: name == "wanted")
    for _ in range(300):
        corrupted = bytearray(wire)
        corrupted[rng.randrange(4, len(wire))] = rng.randrange(256)
        try:
            _, got = decode_metadata_response(version, corrupted, lambda name: True)
        except ProtocolDecodeError:
            continue  # anything else (an IndexError, a MemoryError, ...) fails the test
        materialized(got)  # what the reader accepted, the partitions decode


def test_a_huge_topic_nobody_asked_for_is_stepped_over_without_objects() -> None:
    import tracemalloc

    partitions = [
        {
            "error_code": 0,
            "partition_index": p,
            "leader_id": 0,
            "leader_epoch": 0,
            "replica_nodes": [0],
            "isr_nodes": [0],
            "offline_replicas": [],
        }
        for p in range(20_000)
    ]
    body = {
        "brokers": [{"node_id": 0, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 0,
        "topics": [
            {"error_code": 0, "name": "noise", "is_internal": False, "partitions": partitions},
            {"error_code": 0, "name": "wanted", "is_internal": False, "partitions": []},
        ],
    }
    wire = frame(12, body)
    del body, partitions
    tracemalloc.start()
    try:
        _, got = decode_metadata_response(12, wire, lambda name: name == "wanted")
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [t["name"] for t in got["topics"]] == ["wanted"]
    assert peak_bytes < 200_000  # decoding the 20,000 partitions would take about 10 MB
