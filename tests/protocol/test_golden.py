"""Golden frames captured from real clients (librdkafka, kafka-python, aiokafka) and tansu.

See tests/fixtures/protocol/README.md for how they were captured. Every frame of an API
kclient declares must decode to what the client sent and re-encode to the same bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from kclient.errors import ProtocolDecodeError
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.frame import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    frame_bytes,
    peek_correlation_id,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol" / "captured.json"
EXCHANGES: list[dict[str, Any]] = json.loads(FIXTURES.read_text())
KNOWN = [e for e in EXCHANGES if e["api_key"] in SUPPORTED_VERSIONS]


def _as_unknown(exchange: dict[str, Any], api_key: int = 32000) -> dict[str, Any]:
    """A captured request with its api key (the frame's first two bytes) changed to one no
    Kafka defines: the captures' last unknown APIs (KIP-714's) are known now."""
    frame = bytearray.fromhex(exchange["request"])
    frame[0:2] = struct.pack(">h", api_key)
    return {**exchange, "api_key": api_key, "request": frame.hex(), "response": None}


UNKNOWN = [e for e in EXCHANGES if e["api_key"] not in SUPPORTED_VERSIONS] + [_as_unknown(KNOWN[0])]


def _id(e: dict[str, Any]) -> str:
    return f"{e['client']}-key{e['api_key']}-v{e['api_version']}-corr{e['correlation_id']}"


def _find(client: str, api_key: int, version: int | None = None) -> dict[str, Any]:
    for e in EXCHANGES:
        wanted = version is None or e["api_version"] == version
        if e["client"] == client and e["api_key"] == api_key and wanted:
            return e
    raise LookupError(f"no {client} api {api_key} v{version} frame in the fixtures")


def _request(client: str, api_key: int, version: int | None = None) -> Any:
    return decode_request(bytes.fromhex(_find(client, api_key, version)["request"]))


def _response(client: str, api_key: int, version: int | None = None) -> dict[str, Any]:
    e = _find(client, api_key, version)
    return decode_response(e["api_key"], e["api_version"], bytes.fromhex(e["response"]))[1]


def _batch_size(records: memoryview) -> int:
    """Size a RecordBatch v2 declares for itself (baseOffset + batchLength + rest)."""
    assert records[16] == 2, "magic byte of a v2 record batch"
    return 12 + int(struct.unpack_from(">i", records, 8)[0])


def test_fixtures_cover_the_interesting_versions() -> None:
    seen = {(e["api_key"], e["api_version"]) for e in KNOWN}
    for expected in [(18, 0), (18, 1), (18, 3), (18, 4), (0, 3), (0, 7), (0, 9), (0, 10)]:
        assert expected in seen
    assert {(3, 4), (3, 5), (3, 12), (1, 6), (1, 16), (2, 2), (2, 7), (22, 4)} <= seen
    assert {(19, 4), (19, 7), (20, 4), (20, 6)} <= seen


@pytest.mark.parametrize("exchange", KNOWN, ids=_id)
def test_request_decodes_and_reencodes_to_identical_bytes(exchange: dict[str, Any]) -> None:
    frame = bytes.fromhex(exchange["request"])
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version) == (exchange["api_key"], exchange["api_version"])
    assert header.correlation_id == exchange["correlation_id"]
    assert header.client_id is not None and header.client_id.startswith("golden-")
    again = encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, body
    )
    assert frame_bytes(again) == struct.pack(">i", len(frame)) + frame


@pytest.mark.parametrize("exchange", [e for e in KNOWN if e["response"]], ids=_id)
def test_response_decodes_and_reencodes_to_identical_bytes(exchange: dict[str, Any]) -> None:
    frame = bytes.fromhex(exchange["response"])
    key, version = exchange["api_key"], exchange["api_version"]
    correlation_id, body = decode_response(key, version, frame)
    assert correlation_id == exchange["correlation_id"] == peek_correlation_id(frame)
    again = frame_bytes(encode_response(key, version, correlation_id, body))
    assert again == struct.pack(">i", len(frame)) + frame


@pytest.mark.parametrize("exchange", UNKNOWN, ids=_id)
def test_unknown_apis_are_refused_but_their_headers_parse(exchange: dict[str, Any]) -> None:
    frame = bytes.fromhex(exchange["request"])
    header, offset = decode_request_header(frame)
    assert header.api_key == exchange["api_key"]
    assert header.correlation_id == exchange["correlation_id"]
    assert header.client_id is not None and header.client_id.startswith("golden-")
    # client id is a classic int16-length string even in request header v2
    assert offset == 8 + 2 + len(header.client_id.encode())
    with pytest.raises(ProtocolDecodeError, match=f"unknown api key {exchange['api_key']}"):
        decode_request(frame)


def test_librdkafka_api_versions_v3_carries_its_software_name_in_a_flexible_body() -> None:
    header, body = _request("librdkafka-producer", ApiKey.API_VERSIONS, 3)
    assert header.client_id == "golden-librdkafka"
    assert body == {
        "client_software_name": "confluent-kafka-python",
        "client_software_version": "2.16.1-rdkafka-2.16.0",
    }


def test_kafka_python_api_versions_v4() -> None:
    header, body = _request("kafka-python-producer", ApiKey.API_VERSIONS, 4)
    assert header.client_id == "golden-kafka-python"
    assert body == {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}


def test_old_clients_send_empty_api_versions_bodies() -> None:
    assert _request("aiokafka-producer", ApiKey.API_VERSIONS, 0)[1] == {}
    assert _request("kafka-python-producer-0.11", ApiKey.API_VERSIONS, 1)[1] == {}


def test_tansu_api_versions_v3_response_keeps_its_default_valued_tags() -> None:
    exchange = _find("librdkafka-producer", ApiKey.API_VERSIONS, 3)
    frame = bytes.fromhex(exchange["response"])
    # response header v0 even though the body is flexible: the error code follows directly
    assert frame[4:6] == b"\x00\x00"
    body = _response("librdkafka-producer", ApiKey.API_VERSIONS, 3)
    assert body["error_code"] == 0
    produce = next(k for k in body["api_keys"] if k["api_key"] == ApiKey.PRODUCE)
    assert produce["max_version"] >= 9
    # tansu writes every tagged field, even at its default; they decode as present
    assert body["finalized_features_epoch"] == -1
    assert body["supported_features"] == [] and body["finalized_features"] == []
    assert body["zk_migration_ready"] is False


def test_librdkafka_produce_v10() -> None:
    header, body = _request("librdkafka-producer", ApiKey.PRODUCE, 10)
    assert header.client_id == "golden-librdkafka"
    assert body["acks"] == -1 and body["timeout_ms"] == 30000
    assert body["transactional_id"] is None
    (topic,) = body["topic_data"]
    assert topic["name"] == "golden"
    (partition,) = topic["partition_data"]
    records = partition["records"]
    assert isinstance(records, memoryview)
    assert len(records) == _batch_size(records) == 77


def test_kafka_python_produce_v9_carries_three_partitions_in_one_request() -> None:
    _, body = _request("kafka-python-producer", ApiKey.PRODUCE, 9)
    (topic,) = body["topic_data"]
    assert topic["name"] == "golden"
    assert sorted(p["index"] for p in topic["partition_data"]) == [0, 1, 2]
    for partition in topic["partition_data"]:
        assert len(partition["records"]) == _batch_size(partition["records"]) == 84
    response = _response("kafka-python-producer", ApiKey.PRODUCE, 9)
    results = response["responses"][0]["partition_responses"]
    assert [r["error_code"] for r in results] == [0, 0, 0]
    assert all(r["base_offset"] == 1 for r in results)


def test_non_flexible_produce_v3_and_v7() -> None:
    header, body = _request("kafka-python-producer-0.11", ApiKey.PRODUCE, 3)
    assert header.client_id == "golden-kafka-python-old"
    assert body["acks"] == -1
    records = body["topic_data"][0]["partition_data"][0]["records"]
    assert len(records) == _batch_size(records) == 80
    header, body = _request("aiokafka-producer", ApiKey.PRODUCE, 7)
    assert body["acks"] == 1 and body["timeout_ms"] == 40000
    assert body["topic_data"][0]["partition_data"][0]["index"] == 2
    response = _response("kafka-python-producer-0.11", ApiKey.PRODUCE, 3)
    (result,) = response["responses"][0]["partition_responses"]
    assert result == {"index": 1, "error_code": 0, "base_offset": 2, "log_append_time_ms": -1}


def test_metadata_v12_request_and_tansu_response() -> None:
    _, body = _request("librdkafka-producer", ApiKey.METADATA, 12)
    assert [t["name"] for t in body["topics"]] == ["golden"]
    assert body["allow_auto_topic_creation"] is True
    response = _response("librdkafka-producer", ApiKey.METADATA, 12)
    (broker,) = response["brokers"]
    assert broker["host"] == "127.0.0.1" and broker["rack"] is None
    assert response["cluster_id"] == "tansu_cluster"
    (topic,) = response["topics"]
    assert topic["name"] == "golden" and topic["topic_id"].int != 0
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1, 2]
    assert all(p["leader_id"] == broker["node_id"] for p in topic["partitions"])


def test_metadata_v4_from_a_pinned_old_client() -> None:
    _, body = _request("kafka-python-producer-0.11", ApiKey.METADATA, 4)
    assert body == {"topics": [{"name": "golden"}], "allow_auto_topic_creation": True}


def test_init_producer_id_v4_from_librdkafka_and_kafka_python() -> None:
    _, body = _request("librdkafka-producer", ApiKey.INIT_PRODUCER_ID, 4)
    assert body["transactional_id"] is None
    assert (body["producer_id"], body["producer_epoch"]) == (-1, -1)
    response = _response("kafka-python-producer", ApiKey.INIT_PRODUCER_ID, 4)
    assert response["error_code"] == 0 and response["producer_id"] >= 0


def test_fetch_v16_by_topic_id_and_v6_by_name() -> None:
    _, body = _request("librdkafka-consumer", ApiKey.FETCH, 16)
    (topic,) = body["topics"]
    assert "topic" not in topic and topic["topic_id"].int != 0
    response = _response("librdkafka-consumer", ApiKey.FETCH, 16)
    partition = response["responses"][0]["partitions"][0]
    assert partition["high_watermark"] == 1
    assert len(partition["records"]) == _batch_size(partition["records"])
    assert response["node_endpoints"] == []  # tansu writes the empty tagged array
    _, body = _request("kafka-python-consumer-1.0", ApiKey.FETCH, 6)
    assert body["topics"][0]["topic"] == "golden"
    response = _response("kafka-python-consumer-1.0", ApiKey.FETCH, 6)
    records = response["responses"][0]["partitions"][0]["records"]
    assert _batch_size(records) <= len(records)  # several batches back to back


def test_list_offsets_v7_and_v2() -> None:
    _, body = _request("librdkafka-consumer", ApiKey.LIST_OFFSETS, 7)
    assert body["topics"][0]["partitions"][0]["timestamp"] == -2  # earliest
    assert body["isolation_level"] == 1
    _, body = _request("kafka-python-consumer-1.0", ApiKey.LIST_OFFSETS, 2)
    assert body["topics"][0]["partitions"] == [{"partition_index": 1, "timestamp": -2}]


def test_create_and_delete_topics_from_both_admin_clients() -> None:
    _, body = _request("librdkafka-admin", ApiKey.CREATE_TOPICS, 4)
    (topic,) = body["topics"]
    assert (topic["name"], topic["num_partitions"], topic["replication_factor"]) == (
        "golden-admin",
        2,
        1,
    )
    _, body = _request("kafka-python-admin", ApiKey.CREATE_TOPICS, 7)
    assert body["topics"][0]["name"] == "golden-kp"
    response = _response("kafka-python-admin", ApiKey.CREATE_TOPICS, 7)
    assert response["topics"][0]["topic_config_error_code"] == 0  # a default tansu still sends
    _, body = _request("librdkafka-admin", ApiKey.DELETE_TOPICS, 4)
    assert body["topic_names"] == ["golden-admin"]
    _, body = _request("kafka-python-admin", ApiKey.DELETE_TOPICS, 6)
    assert body["topics"][0]["name"] == "golden-kp"
