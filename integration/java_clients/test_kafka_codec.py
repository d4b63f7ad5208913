"""The embedded broker's answers, read by Apache Kafka's own generated message classes
(``kafka-clients``) and written back by Kafka's serializer: the very same bytes, nothing
left over. Among them the Produce v11 NOT_LEADER_OR_FOLLOWER answer with its KIP-951
leader hints, the one @platformatic/kafka 1.35.0 fails to decode ("Out of bounds") while
brokers restart: it is Kafka's, byte for byte. And kclient's own Produce v13 requests (KIP-516:
topics by id), from the C fast path, its Python twin and the generic encoder, read the
same way."""

from __future__ import annotations

import base64
import socket
import struct
import uuid
from typing import Any

from kclient.broker.cluster import EmbeddedCluster
from kclient.protocol import ApiKey, produce_fast
from kclient.protocol.frame import (
    _encode_request,
    encode_request,
    frame_bytes,
    response_header_version,
)
from kclient.record import RecordBatchBuilder
from kclient.testing.java_clients import run_steps


def answer_body(address: str, api_key: int, version: int, body: dict[str, Any]) -> bytes:
    """The response body (after its header) a broker sends to one request."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"".join(bytes(b) for b in encode_request(api_key, version, 7, "c", body)))
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        frame = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", frame)[0] == 7
    header = 4 + (1 if response_header_version(api_key, version) >= 1 else 0)
    return frame[header:]


def records() -> bytes:
    builder = RecordBatchBuilder("none", batch_size=1 << 20)
    builder.append(1_700_000_000_000, b"k", b"v")
    return bytes(builder.build())


def produce(partitions: list[int]) -> dict[str, Any]:
    data = [{"index": p, "records": records()} for p in partitions]
    return {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": "t", "partition_data": data}]}


def produce_by_id(topic_id: uuid.UUID, partitions: list[int]) -> dict[str, Any]:
    """A v13 body as the Sender makes it: the topic by name and id (the name is not sent)."""
    data = [{"index": p, "records": records()} for p in partitions]
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": "t", "topic_id": topic_id, "partition_data": data}],
    }


def _java_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: url-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _request_body(frame: bytes) -> bytes:
    """A request frame's body: after the size, the v2 header (api key, version, correlation
    id, client id, no tagged fields)."""
    (client_id_len,) = struct.unpack_from(">h", frame, 12)
    return frame[14 + max(client_id_len, 0) + 1 :]


def test_kclients_produce_v13_requests_read_and_write_back_the_same_with_kafkas_classes() -> None:
    topic_id = uuid.UUID("6a1f7c1e-0d35-4c11-8a49-0f3e2a9b7d11")
    one = produce_by_id(topic_id, [0])
    frames = {
        "fast path (C when built)": frame_bytes(encode_request(ApiKey.PRODUCE, 13, 9, "c", one)),
        "python twin": frame_bytes(
            produce_fast.encode_produce_py(13, 9, "c", one, _encode_request) or []
        ),
        "generic, three partitions": frame_bytes(
            _encode_request(ApiKey.PRODUCE, 13, 9, "c", produce_by_id(topic_id, [0, 1, 2]))
        ),
    }
    assert frames["fast path (C when built)"] == frames["python twin"]
    steps = [
        f"kafka_decode kind=request api={int(ApiKey.PRODUCE)} version=13 "
        f"hex={_request_body(frame).hex()}"
        for frame in frames.values()
    ]
    with EmbeddedCluster(brokers=1) as cluster:
        results = dict(zip(frames, run_steps(cluster.bootstrap_servers, steps), strict=True))
    for name, result in results.items():
        assert "error" not in result, (name, result)
        assert result["left"] == 0, (name, result)
        assert result["same"], (name, result["kafka_hex"], result["text"])
        assert f"topicId={_java_uuid(topic_id)}" in result["text"], (name, result["text"])


def test_every_answer_reads_and_writes_back_the_same_with_kafkas_own_classes() -> None:
    with EmbeddedCluster(brokers=3) as cluster:
        cluster.create_topic("t", 3, replication_factor=3)
        topic = cluster.controller.topic("t")
        assert topic is not None
        topic_id = topic.topic_id
        led = {cluster.leader("t", p): p for p in range(3)}
        node = 0
        address = cluster.broker_address(node)
        cases: dict[str, tuple[int, int, dict[str, Any]]] = {
            "produce v11 not leader (KIP-951 hints)": (
                ApiKey.PRODUCE, 11, produce([p for n, p in led.items() if n != node]),
            ),
            "produce v11 written": (ApiKey.PRODUCE, 11, produce([led[node]])),
            "produce v9": (ApiKey.PRODUCE, 9, produce([0, 1, 2])),
            "metadata v12": (ApiKey.METADATA, 12, {"topics": None}),
            "api versions v3": (
                ApiKey.API_VERSIONS, 3,
                {"client_software_name": "c", "client_software_version": "1"},
            ),
            "find coordinator v4": (
                ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]},
            ),
            "init producer id v5": (
                ApiKey.INIT_PRODUCER_ID, 5,
                {"transactional_id": None, "transaction_timeout_ms": 60000},
            ),
            "list offsets v8": (
                ApiKey.LIST_OFFSETS, 8,
                {"replica_id": -1, "isolation_level": 1, "topics": [
                    {"name": "t", "partitions": [{"partition_index": p, "timestamp": -1}
                                                 for p in range(3)]}]},
            ),
            "describe configs v4": (
                ApiKey.DESCRIBE_CONFIGS, 4,
                {"resources": [{"resource_type": 2, "resource_name": "t",
                                "configuration_keys": None}]},
            ),
            "fetch v12": (
                ApiKey.FETCH, 12,
                {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                 "isolation_level": 1, "topics": [{"topic": "t", "partitions": [
                     {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                     for p in range(3)]}]},
            ),
            "metadata v13": (ApiKey.METADATA, 13, {"topics": [{"name": "t"}]}),
            "api versions v4": (
                ApiKey.API_VERSIONS, 4,
                {"client_software_name": "c", "client_software_version": "1"},
            ),
            "list groups v5": (ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}),
            "describe groups v5": (ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"]}),
            "offset fetch v9": (
                ApiKey.OFFSET_FETCH, 9, {"groups": [{"group_id": "g", "topics": None}]},
            ),
            "create topics v7": (
                ApiKey.CREATE_TOPICS, 7,
                {"topics": [{"name": "n", "num_partitions": 2, "replication_factor": 3,
                             "assignments": [], "configs": []}], "timeout_ms": 5000},
            ),
            "delete topics v6": (
                ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "n"}], "timeout_ms": 5000},
            ),
            "describe producers v0": (
                ApiKey.DESCRIBE_PRODUCERS, 0,
                {"topics": [{"name": "t", "partition_indexes": [0, 1, 2]}]},
            ),
            "list transactions v1": (ApiKey.LIST_TRANSACTIONS, 1, {}),
            "produce v13 written (by topic id)": (
                ApiKey.PRODUCE, 13, produce_by_id(topic_id, [led[node]]),
            ),
            "produce v13 unknown topic id": (
                ApiKey.PRODUCE, 13, produce_by_id(uuid.UUID(int=1), [0]),
            ),
        }  # fmt: skip
        bodies = {
            name: answer_body(address, api, version, body)
            for name, (api, version, body) in cases.items()
        }
        steps = [
            f"kafka_decode api={int(cases[name][0])} version={cases[name][1]} hex={body.hex()}"
            for name, body in bodies.items()
        ]
        results = dict(zip(bodies, run_steps(cluster.bootstrap_servers, steps), strict=True))
    for name, result in results.items():
        assert "error" not in result, (name, result)
        assert result["left"] == 0, (name, result)
        assert result["same"], (name, bodies[name].hex(), result["kafka_hex"], result["text"])
    assert f"topicId={_java_uuid(topic_id)}" in results["produce v13 written (by topic id)"]["text"]
    assert "errorCode=100" in results["produce v13 unknown topic id"]["text"]  # UNKNOWN_TOPIC_ID
    hinted = results["produce v11 not leader (KIP-951 hints)"]["text"]
    assert "errorCode=6" in hinted and "currentLeader=LeaderIdAndEpoch(leaderId=" in hinted
    assert "errorMessage=null" in hinted and "nodeEndpoints=[NodeEndpoint(" in hinted
