"""Property tests over every declared message and version.

- Round trip: bodies generated from the declarations encode, decode back to the same
  dict, and re-encode to the same bytes (tagged and unknown tagged fields included).
- Oracle: kafka-python 3.0.12 carries its own copy of Kafka's message definitions and
  its own encoder; for bodies without tagged fields it must produce our bytes exactly.
- Fuzz: random and mutated bytes given to every decoder raise only kclient's
  ``ProtocolDecodeError``/``UnsupportedVersionError``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import struct
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import ProtocolDecodeError, UnsupportedVersionError
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.codec import UNKNOWN_TAGGED, plan
from kclient.protocol.frame import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    frame_bytes,
    peek_correlation_id,
)
from kclient.protocol.messages import REQUESTS, RESPONSES
from kclient.protocol.schema import Field, Message

with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )
    from kafka.protocol.admin.transactions import (
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )
    from kafka.protocol.consumer import (
        FetchRequest,
        FetchResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.producer import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        EndTxnRequest,
        EndTxnResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        ProduceRequest,
        ProduceResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )
    from kafka.protocol.sasl import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

KAFKA_PYTHON: dict[int, tuple[Any, Any]] = {
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.FETCH: (FetchRequest, FetchResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    ApiKey.CREATE_PARTITIONS: (CreatePartitionsRequest, CreatePartitionsResponse),
    ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, DescribeConfigsResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    ),
    ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.ADD_PARTITIONS_TO_TXN: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    ApiKey.ADD_OFFSETS_TO_TXN: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    ApiKey.END_TXN: (EndTxnRequest, EndTxnResponse),
    ApiKey.TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    ApiKey.SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    ApiKey.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    ApiKey.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    ApiKey.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    ApiKey.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    ApiKey.OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
    ApiKey.DESCRIBE_TRANSACTIONS: (DescribeTransactionsRequest, DescribeTransactionsResponse),
    ApiKey.LIST_TRANSACTIONS: (ListTransactionsRequest, ListTransactionsResponse),
    ApiKey.DESCRIBE_PRODUCERS: (DescribeProducersRequest, DescribeProducersResponse),
    ApiKey.WRITE_TXN_MARKERS: (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    ApiKey.ALTER_CLIENT_QUOTAS: (AlterClientQuotasRequest, AlterClientQuotasResponse),
}

VERSIONS = [(key, v) for key, (lo, hi) in SUPPORTED_VERSIONS.items() for v in range(lo, hi + 1)]
CASES = [(kind, key, v) for key, v in VERSIONS for kind in ("request", "response")]


def _layout(fields: tuple[Field, ...], version: int, flexible: bool) -> tuple[Any, ...]:
    """What the codecs and ``bodies`` read of ``fields`` at ``version``: each present
    field's name, type, nullability, tag, declared default and sub-fields."""
    return tuple(
        (
            f.name,
            f.type,
            version in f.nullable_versions,
            flexible and version in f.tagged_versions,
            f.tag,
            repr(f.default),
            _layout(f.fields, version, flexible),
        )
        for f in fields
        if version in f.versions
    )


def _distinct_layouts(cases: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """One case (the newest version) per distinct layout of each message.

    Many versions only change what a peer may do, not the bytes (``ProduceRequest`` v4-v7,
    ``MetadataResponse`` v1-v2, ...): those versions have the same strategy, the same
    careful codec and the same generated source but for the version number in the frame
    header. A property run per such version only drew more examples of one layout (about
    40% of this module's and test_fast_path's time); ``test_every_version_frames_and_reads
    _its_default_body`` checks the version-specific parts (header, dispatch, the
    whole-frame fast paths) at every version. Produce keeps every version: its hand-
    written fast path (produce_fast) branches on the version number itself."""
    newest: dict[tuple[Any, ...], tuple[str, int, int]] = {}
    for kind, key, version in cases:
        msg = REQUESTS[key] if kind == "request" else RESPONSES[key]
        flexible = msg.is_flexible(version)
        layout = (kind, key, flexible, _layout(msg.fields, version, flexible))
        if key == ApiKey.PRODUCE:
            layout += (version,)
        newest[layout] = (kind, key, version)
    return sorted(newest.values(), key=cases.index)


#: KCLIENT_FUZZ_SCALE=0.25: a quarter of the examples, and of the layouts (the suite's runs on
#: other CPythons and its pure-Python run; the accelerated run has them all)
FUZZ_SCALE = float(os.environ.get("KCLIENT_FUZZ_SCALE", "1"))

#: The producer's own messages: every layout of theirs at any fuzz scale.
PRODUCER_APIS = (ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.INIT_PRODUCER_ID)


def _sampled(layouts: list[tuple[str, int, int]], scale: float) -> list[tuple[str, int, int]]:
    """``layouts`` at a fuzz scale below 1: every layout of the producer's own messages, and
    of the others an evenly spread share ``scale`` (each one is data the same generated
    codec reads: another CPython or the pure-Python build meets the same code in any of
    them, and the accelerated run checks every one)."""
    if scale >= 1:
        return layouts
    step = max(1, round(1 / scale))
    others = [case for case in layouts if case[1] not in PRODUCER_APIS]
    kept = set(others[::step])
    return [case for case in layouts if case[1] in PRODUCER_APIS or case in kept]


#: The property tests' cells: every layout once (see ``_distinct_layouts``), sampled at a
#: fuzz scale below 1.
LAYOUTS = _sampled(_distinct_layouts(CASES), FUZZ_SCALE)


def _case_id(case: Any) -> str:
    return str(case.name if isinstance(case, ApiKey) else case)


def _settings(examples: int) -> settings:
    return settings(
        max_examples=max(1, round(examples * FUZZ_SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---- bodies generated from the declarations -------------------------------------------------

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        bits = _INTS[kind]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if kind in ("uint16", "uint32"):
        return st.integers(0, 2 ** int(kind[4:]) - 1)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=8),
        "bytes": st.binary(max_size=8),
        "records": st.binary(max_size=24),
        "uuid": st.uuids(),
    }[kind]


def _value(fld: Field, version: int, flexible: bool, tagged: bool) -> st.SearchStrategy[Any]:
    if fld.is_array:
        if fld.is_struct:
            item = _struct(fld.fields, version, flexible, tagged)
        else:
            item = _scalar(fld.item_type)
        base: st.SearchStrategy[Any] = st.lists(item, max_size=3)
    elif fld.is_struct:
        base = _struct(fld.fields, version, flexible, tagged)
    else:
        base = _scalar(fld.type)
    return st.none() | base if version in fld.nullable_versions else base


def _struct(
    fields: tuple[Field, ...], version: int, flexible: bool, tagged: bool
) -> st.SearchStrategy[dict[str, Any]]:
    present = [f for f in fields if version in f.versions]
    tagged_fields = [f for f in present if flexible and version in f.tagged_versions]
    required = {
        f.key: _value(f, version, flexible, tagged) for f in present if f not in tagged_fields
    }
    optional: dict[str, st.SearchStrategy[Any]] = {}
    if tagged and flexible:
        for f in tagged_fields:
            optional[f.key] = _value(f, version, flexible, tagged)
        first_free = max((f.tag or 0 for f in tagged_fields), default=-1) + 1
        optional[UNKNOWN_TAGGED] = st.dictionaries(
            st.integers(first_free, 5000), st.binary(max_size=6), min_size=1, max_size=2
        )
    return st.fixed_dictionaries(required, optional=optional)


def _message(kind: str, api_key: int) -> Message:
    return REQUESTS[api_key] if kind == "request" else RESPONSES[api_key]


@functools.cache
def bodies(kind: str, api_key: int, version: int, tagged: bool = True) -> Any:
    msg = _message(kind, api_key)
    return _struct(msg.fields, version, msg.is_flexible(version), tagged)


def _encode(kind: str, api_key: int, version: int, body: dict[str, Any]) -> bytes:
    if kind == "request":
        buffers = encode_request(api_key, version, 123, "props", body)
    else:
        buffers = encode_response(api_key, version, 123, body)
    data = frame_bytes(buffers)
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    return data[4:]


# ---- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "api_key", "version"), LAYOUTS, ids=_case_id)
@_settings(10)
@given(data=st.data())
def test_round_trip(kind: str, api_key: int, version: int, data: st.DataObject) -> None:
    body = data.draw(bodies(kind, api_key, version))
    frame = _encode(kind, api_key, version, body)
    if kind == "request":
        header, decoded = decode_request(frame)
        assert (header.api_key, header.api_version, header.correlation_id) == (
            api_key,
            version,
            123,
        )
        assert header.client_id == "props"
    else:
        correlation_id, decoded = decode_response(api_key, version, frame)
        assert correlation_id == 123
    assert decoded == body
    assert _encode(kind, api_key, version, decoded) == frame


def _sample(fields: tuple[Field, ...], version: int, flexible: bool) -> dict[str, Any]:
    """A fixed body: every regular field at its default, arrays of structs with one item."""
    body: dict[str, Any] = {}
    for fld in fields:
        if version not in fld.versions or (flexible and version in fld.tagged_versions):
            continue
        if fld.is_struct:
            item = _sample(fld.fields, version, flexible)
            body[fld.key] = [item] if fld.is_array else item
        elif fld.is_array:
            body[fld.key] = list(fld.default_value(version))  # a declared () reads as []
        else:
            body[fld.key] = fld.default_value(version)
    return body


@pytest.mark.parametrize(("kind", "api_key", "version"), CASES, ids=_case_id)
def test_every_version_frames_and_reads_its_default_body(
    kind: str, api_key: int, version: int
) -> None:
    # the version-specific parts that LAYOUTS runs once per layout: the header, the
    # dispatch on the version, and the whole-frame fast paths generated per version
    msg = _message(kind, api_key)
    flexible = msg.is_flexible(version)
    body = _sample(msg.fields, version, flexible)
    body_plan = plan(msg, version)
    if kind == "request":
        frame = _encode(kind, api_key, version, body)
        header, decoded = decode_request(frame)
        assert (header.api_key, header.api_version, header.correlation_id) == (
            api_key,
            version,
            123,
        )
        assert header.client_id == "props" and decoded == body
        template = bytearray(struct.pack(">ihhih", 0, api_key, version, 0, 5) + b"props")
        if flexible:
            template.append(0)  # no header tagged fields
        assert frame_bytes(body_plan.request_encoder()(template, 123, body))[4:] == frame
    else:
        frame = _encode(kind, api_key, version, body)
        assert decode_response(api_key, version, frame) == (123, body)
        header_version = 1 if flexible and api_key != ApiKey.API_VERSIONS else 0
        assert body_plan.response_decoder(header_version)(frame) == (123, body)


# ---- kafka-python as an independent oracle --------------------------------------------------


# kafka-python patches these int32 fields into "bitfield"s of another name; the oracle
# leaves them at their default on both sides.
BITFIELDS = {
    "cluster_authorized_operations",
    "topic_authorized_operations",
    "authorized_operations",
}


def _to_kafka_python(cls: Any, fields: tuple[Field, ...], version: int, body: Any) -> Any:
    kwargs = {}
    for fld in fields:
        if version not in fld.versions or fld.key not in body:
            continue
        if fld.key in BITFIELDS:
            body[fld.key] = fld.default_value(version)
            continue
        value = body[fld.key]
        if fld.is_struct and value is not None:
            sub = getattr(cls, fld.item_type)
            if fld.is_array:
                value = [_to_kafka_python(sub, fld.fields, version, v) for v in value]
            else:
                value = _to_kafka_python(sub, fld.fields, version, value)
        kwargs[fld.key] = value
    return cls(**kwargs)


def _in(versions: str, version: int) -> bool:
    """``version`` in a range as Kafka's JSON writes it: "none", "3", "3+", "0-2"."""
    if versions == "none":
        return False
    low, _, high = versions.replace("+", "-").partition("-")
    return int(low) <= version and (high == "" or version <= int(high))


def _their_layout(fields: list[dict[str, Any]], version: int, flexible: bool) -> tuple[Any, ...]:
    """``_layout`` of kafka-python's copy of a message's JSON."""
    return tuple(
        (
            f["name"],
            f["type"],
            _in(f.get("nullableVersions", "none"), version),
            flexible and _in(f.get("taggedVersions", "none"), version),
            f.get("tag"),
            f.get("default"),
            _their_layout(f.get("fields", []), version, flexible),
        )
        for f in fields
        if _in(f.get("versions", "none"), version)
    )


def _oracle_cases() -> list[tuple[str, int, int]]:
    """One case per layout of ours and kafka-python's together (see ``_distinct_layouts``:
    the oracle encodes bodies only, so the version number itself plays no part)."""
    newest: dict[tuple[Any, ...], tuple[str, int, int]] = {}
    for kind, key, version in CASES:
        msg = _message(kind, key)
        flexible = msg.is_flexible(version)
        if key not in KAFKA_PYTHON:
            continue  # kafka-python declares no telemetry API (KIP-714: keys 71, 72)
        theirs = KAFKA_PYTHON[key][0 if kind == "request" else 1]._json
        if not _in(theirs["validVersions"], version):
            continue  # newer than kafka-python knows (ApiVersions v5: Kafka 4.4)
        their_flexible = _in(theirs["flexibleVersions"], version)
        common = [
            _their_layout(c["fields"], version, their_flexible)
            for c in theirs.get("commonStructs", [])
        ]
        layout = (kind, key, flexible, _layout(msg.fields, version, flexible), their_flexible)
        layout += (_their_layout(theirs["fields"], version, their_flexible), tuple(common))
        newest[layout] = (kind, key, version)
    return sorted(newest.values(), key=CASES.index)


@pytest.mark.parametrize(("kind", "api_key", "version"), _oracle_cases(), ids=_case_id)
@_settings(6)
@given(data=st.data())
def test_same_bytes_as_kafka_python(
    kind: str, api_key: int, version: int, data: st.DataObject
) -> None:
    body = data.draw(bodies(kind, api_key, version, tagged=False))
    msg = _message(kind, api_key)
    cls = KAFKA_PYTHON[api_key][0 if kind == "request" else 1]
    theirs = bytes(_to_kafka_python(cls[version], msg.fields, version, body).encode(header=False))
    ours = frame_bytes(plan(msg, version).encode(body))  # after BITFIELDS were reset
    assert ours == theirs


# ---- fuzz -----------------------------------------------------------------------------------


def mutations(frame: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    """``frame`` truncated, overwritten, with bytes inserted or deleted, or with huge
    lengths planted; and random bytes after its header. Cheap, so many per example."""
    ops = ("truncate", "overwrite", "insert", "delete", "max_length", "tail")
    for _ in range(count):
        data = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(max(len(data), 1))
            op = rng.choice(ops)
            if op == "truncate":
                del data[at:]
            elif op == "overwrite" and data:
                data[at] = rng.randrange(256)
            elif op == "insert":
                data[at:at] = rng.randbytes(rng.randint(1, 4))
            elif op == "delete":
                del data[at : at + rng.randint(1, 4)]
            elif op == "max_length":  # a huge length or count where one might be
                data[at : at + 4] = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\x0f"])
            else:
                data[at:] = rng.randbytes(rng.randint(0, 32))
        yield bytes(data)


@pytest.mark.parametrize(("kind", "api_key", "version"), LAYOUTS, ids=_case_id)
@_settings(8)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_fuzzed_frames_raise_only_protocol_errors(
    kind: str, api_key: int, version: int, data: st.DataObject, seed: int
) -> None:
    valid = _encode(kind, api_key, version, data.draw(bodies(kind, api_key, version)))
    for frame in mutations(valid, random.Random(seed), 40):
        with contextlib.suppress(ProtocolDecodeError, UnsupportedVersionError):
            if kind == "request":
                decode_request_header(frame)
                decode_request(frame)
            else:
                peek_correlation_id(frame)
                decode_response(api_key, version, frame)


@_settings(300)
@given(st.binary(max_size=48))
def test_random_request_frames_raise_only_protocol_errors(frame: bytes) -> None:
    try:
        decode_request(frame)
    except (ProtocolDecodeError, UnsupportedVersionError):
        pass
