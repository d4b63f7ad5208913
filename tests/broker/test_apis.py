"""Apis with no sockets: requests are encoded, decoded, handled; responses decoded back."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.broker.request_channel import CloseConnectionResponse, NoOpResponse, SendResponse
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.frame import decode_response
from kclient.record import iter_batches

NONE = 0


def error_name(code: int) -> str:
    return errors.error_name(code)


# ---- ApiVersions -------------------------------------------------------------------------


SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
#: Declared in the protocol package, not served by this broker: not advertised (KIP-714's
#: APIs only with ``client_telemetry=True``, as Kafka only with a client-telemetry plugin).
UNSERVED: frozenset[int] = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})
#: Served below the declared version with transaction version 1 (KIP-890 part 2 off).
TV1_SERVED_UP_TO = {ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 4}


def test_api_versions_lists_every_api_and_produce_from_v0(harness: Any) -> None:
    body = harness.call(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert body["error_code"] == NONE
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    for key, (low, high) in SUPPORTED_VERSIONS.items():
        if key in SASL_APIS or key in UNSERVED:
            assert key not in ranges  # a PLAINTEXT/SSL listener does not serve SASL
            continue
        assert ranges[key][1] == high
        assert ranges[key][0] == (0 if key == ApiKey.PRODUCE else low)
    assert 10 in ranges  # FindCoordinator: librdkafka's LZ4 feature needs it listed
    # KIP-890 part 2: transaction.version finalized at 2, as on Kafka 4.x
    assert body["finalized_features"] == [
        {"name": "transaction.version", "max_version_level": 2, "min_version_level": 2}
    ]
    assert body["finalized_features_epoch"] >= 0
    assert body["supported_features"] == [
        {"name": "transaction.version", "min_version": 0, "max_version": 2}
    ]


def test_transaction_version_1_caps_end_txn_and_txn_offset_commit_at_v4(
    make_harness: Any,
) -> None:
    h = make_harness(transaction_version=1)
    body = h.call(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    for key, high in TV1_SERVED_UP_TO.items():
        assert ranges[key][1] == high
    assert body["finalized_features"] == [
        {"name": "transaction.version", "max_version_level": 1, "min_version_level": 1}
    ]


@pytest.mark.parametrize(
    ("cluster_id", "node_id", "code"),
    [
        ("kclient-embedded", 0, NONE),  # this node of this cluster
        (None, -1, NONE),  # a bootstrap connection: the client knows neither yet
        ("kclient-embedded", 3, 129),  # another node of this cluster
        ("another-cluster", 0, 129),  # another cluster
    ],
)
def test_api_versions_v5_refuses_a_connection_meant_for_another_node_or_cluster(
    harness: Any, cluster_id: str | None, node_id: int, code: int
) -> None:
    """KIP-1242: REBOOTSTRAP_REQUIRED (129), with no api keys, to a misrouted connection."""
    body = harness.call(
        ApiKey.API_VERSIONS,
        5,
        {
            "client_software_name": "t",
            "client_software_version": "1",
            "cluster_id": cluster_id,
            "node_id": node_id,
        },
    )
    assert body["error_code"] == code
    assert bool(body["api_keys"]) == (code == NONE)


def test_a_sasl_listener_advertises_sasl_handshake_v1_and_sasl_authenticate(
    make_harness: Any,
) -> None:
    h = make_harness(security_protocol="SASL_PLAINTEXT", sasl_users={"alice": "secret"})
    body = h.call(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    # v0 listed, as Kafka 3 does (librdkafka 2.0 needs it), though a v0 request is refused
    assert ranges[ApiKey.SASL_HANDSHAKE] == (0, 1)
    assert ranges[ApiKey.SASL_AUTHENTICATE] == SUPPORTED_VERSIONS[ApiKey.SASL_AUTHENTICATE]
    assert ranges[ApiKey.PRODUCE][0] == 0 and ApiKey.METADATA in ranges


def test_sasl_requests_on_a_listener_without_sasl_get_clean_errors(harness: Any) -> None:
    handshake = harness.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert handshake == {
        "error_code": errors.UnsupportedSaslMechanismError.code,
        "mechanisms": [],
    }
    auth = harness.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00a\x00b"})
    assert auth["error_code"] == errors.IllegalSaslStateError.code
    assert "no SASL" in auth["error_message"]


def test_sasl_requests_after_authentication_get_illegal_sasl_state(make_harness: Any) -> None:
    # the Processor answers them before authentication; these reach Apis only after it
    h = make_harness(security_protocol="SASL_PLAINTEXT", sasl_users={"alice": "secret"})
    handshake = h.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert handshake["error_code"] == errors.IllegalSaslStateError.code
    assert handshake["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    auth = h.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b""})
    assert auth["error_code"] == errors.IllegalSaslStateError.code


def test_api_versions_newer_than_supported_gets_a_v0_error_response(harness: Any) -> None:
    request = harness.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    request.unsupported_version = True  # what the Processor sets for e.g. v99
    response = harness.handle(request)
    frame = b"".join(bytes(b) for b in response.buffers)[4:]
    _, body = decode_response(ApiKey.API_VERSIONS, 0, frame)
    assert body["error_code"] == errors.UnsupportedVersionError.code
    served = {int(k) for k in SUPPORTED_VERSIONS} - set(SASL_APIS) - UNSERVED
    assert {k["api_key"] for k in body["api_keys"]} >= served


# ---- Metadata, CreateTopics, DeleteTopics ---------------------------------------------------


def test_metadata_auto_creates_a_requested_topic(harness: Any) -> None:
    body = harness.call(
        ApiKey.METADATA, 12, {"topics": [{"name": "orders"}], "allow_auto_topic_creation": True}
    )
    assert [b["node_id"] for b in body["brokers"]] == [0]
    assert body["controller_id"] == 0
    (topic,) = body["topics"]
    assert topic["error_code"] == NONE and topic["name"] == "orders"
    assert [p["leader_id"] for p in topic["partitions"]] == [0]


def test_metadata_without_auto_creation_reports_unknown_topic(make_harness: Any) -> None:
    h = make_harness(auto_create_topics=False)
    body = h.call(ApiKey.METADATA, 12, {"topics": [{"name": "nope"}]})
    assert body["topics"][0]["error_code"] == errors.UnknownTopicOrPartitionError.code
    body = h.call(
        ApiKey.METADATA, 12, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": False}
    )
    assert h.controller.topic("nope") is None


def test_metadata_request_may_forbid_auto_creation(harness: Any) -> None:
    body = harness.call(
        ApiKey.METADATA, 9, {"topics": [{"name": "x"}], "allow_auto_topic_creation": False}
    )
    assert body["topics"][0]["error_code"] == errors.UnknownTopicOrPartitionError.code


def test_metadata_rejects_invalid_topic_names(harness: Any) -> None:
    body = harness.call(ApiKey.METADATA, 12, {"topics": [{"name": "bad name!"}]})
    assert body["topics"][0]["error_code"] == errors.InvalidTopicError.code


def test_metadata_null_topics_lists_all(harness: Any) -> None:
    harness.controller.create_topic("a", 2)
    harness.controller.create_topic("b", 1)
    body = harness.call(ApiKey.METADATA, 12, {"topics": None})
    assert sorted((t["name"], len(t["partitions"])) for t in body["topics"]) == [
        ("a", 2),
        ("b", 1),
    ]


def test_create_topics_reports_each_topic(harness: Any) -> None:
    def create(name: str, partitions: int, rf: int = -1, configs: Any = ()) -> int:
        body = harness.call(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": rf,
                        "configs": [{"name": k, "value": v} for k, v in configs],
                    }
                ],
                "timeout_ms": 1000,
            },
        )
        code: int = body["topics"][0]["error_code"]
        return code

    assert create("t1", 3) == NONE
    assert len(harness.controller.topic("t1").partitions) == 3
    assert create("t1", 3) == errors.TopicAlreadyExistsError.code
    assert create("t2", 0) == errors.InvalidPartitionsError.code
    assert create("t3", 1, rf=2) == errors.InvalidReplicationFactorError.code
    assert create("t4", 1, configs=[("no.such.config", "1")]) == errors.InvalidConfigError.code
    assert (
        create("t5", 1, configs=[("message.timestamp.type", "Sometime")])
        == errors.InvalidConfigError.code
    )
    assert create("t6", -1, configs=[("message.timestamp.type", "LogAppendTime")]) == NONE
    assert len(harness.controller.topic("t6").partitions) == 1  # num.partitions


def test_partitions_per_topic_and_per_request_are_capped(make_harness: Any) -> None:
    h = make_harness(max_partitions_per_topic=100)

    def create(*topics: tuple[str, int]) -> list[tuple[int, str | None]]:
        body = h.call(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {"name": n, "num_partitions": p, "replication_factor": -1, "configs": []}
                    for n, p in topics
                ],
                "timeout_ms": 1000,
            },
        )
        return [(t["error_code"], t["error_message"]) for t in body["topics"]]

    # before: a 46-byte request for 1,000,000 partitions took 1.1 GB and stalled the broker
    ((code, message),) = create(("huge", 1_000_000))
    assert code == errors.InvalidPartitionsError.code
    assert message is not None and "max.partitions.per.topic" in message
    assert h.controller.topic("huge") is None
    results = create(("a", 60), ("b", 60), ("c", 40))
    assert [code for code, _ in results] == [NONE, errors.PolicyViolationError.code, NONE]
    assert "max.partitions.per.topic" in (results[1][1] or "")
    with pytest.raises(errors.ConfigError, match="max.partitions.per.topic"):
        make_harness(num_partitions=101, max_partitions_per_topic=100)


def test_delete_topics_by_name(harness: Any) -> None:
    harness.controller.create_topic("gone", 1)
    body = harness.call(
        ApiKey.DELETE_TOPICS, 5, {"topic_names": ["gone", "never"], "timeout_ms": 1000}
    )
    codes = {r["name"]: r["error_code"] for r in body["responses"]}
    assert codes == {"gone": NONE, "never": errors.UnknownTopicOrPartitionError.code}
    assert harness.controller.topic("gone") is None


# ---- Produce -------------------------------------------------------------------------------


def test_produce_assigns_consecutive_offsets(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    first = harness.produce("t", make_batch([b"a", b"b", b"c"]))
    second = harness.produce("t", make_batch([b"d"]))
    assert (first["error_code"], first["base_offset"]) == (NONE, 0)
    assert (second["error_code"], second["base_offset"]) == (NONE, 3)
    assert first["log_append_time_ms"] == -1
    batches = list(harness.controller.partition("t", 0).log.iter_batches())
    assert [b.base_offset for b in batches] == [0, 3]
    assert [r.value for b in batches for r in b.records()] == [b"a", b"b", b"c", b"d"]
    assert harness.controller.partition("t", 0).log.high_watermark == 4


def test_produce_with_log_append_time(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
    result = harness.produce("t", make_batch([b"x", b"y"], timestamp_ms=5))
    assert result["log_append_time_ms"] == harness.now_ms
    (stored,) = harness.controller.partition("t", 0).log.iter_batches()
    assert [r.timestamp for r in stored.records()] == [harness.now_ms] * 2  # CRC rewritten


def test_produce_acks_zero_sends_no_response_and_closes_on_error(
    harness: Any, make_batch: Any
) -> None:
    harness.controller.create_topic("t", 1)
    request = harness.request(
        ApiKey.PRODUCE,
        9,
        {
            "acks": 0,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": make_batch([b"a"])}]}
            ],
        },
    )
    assert isinstance(harness.handle(request), NoOpResponse)
    bad = harness.request(
        ApiKey.PRODUCE,
        9,
        {
            "acks": 0,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "nope", "partition_data": [{"index": 0, "records": make_batch([b"a"])}]}
            ],
        },
    )
    assert isinstance(harness.handle(bad), CloseConnectionResponse)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unknown topic", errors.UnknownTopicOrPartitionError),
        ("unknown partition", errors.UnknownTopicOrPartitionError),
        ("bad acks", errors.InvalidRequiredAcksError),
        ("crc", errors.CorruptMessageError),
        ("truncated", errors.CorruptMessageError),
        ("trailing garbage", errors.CorruptMessageError),
        ("no records", errors.CorruptMessageError),
        ("too large", errors.MessageTooLargeError),
        ("count mismatch", errors.CorruptMessageError),
    ],
)
def test_produce_errors_are_per_partition(
    make_harness: Any, make_batch: Any, case: str, expected: type[errors.BrokerResponseError]
) -> None:
    h = make_harness(message_max_bytes=2000)
    h.controller.create_topic("t", 1)
    good = make_batch([b"v" * 10])
    topic, partition, acks, records = "t", 0, 1, good
    if case == "unknown topic":
        topic = "missing"
    elif case == "unknown partition":
        partition = 7
    elif case == "bad acks":
        acks = 2
    elif case == "crc":
        records = good[:-1] + bytes([good[-1] ^ 0xFF])
    elif case == "truncated":
        records = good[:-3]
    elif case == "trailing garbage":
        records = good + b"\x00" * 20
    elif case == "no records":
        records = None
    elif case == "too large":
        records = make_batch([b"v" * 3000])
    elif case == "count mismatch":
        from crc32c import crc32c

        from kclient.record.layout import ATTRIBUTES_OFFSET, CRC, CRC_OFFSET

        raw = bytearray(good)
        raw[57:61] = (5).to_bytes(4, "big")  # records count
        CRC.pack_into(raw, CRC_OFFSET, crc32c(memoryview(raw)[ATTRIBUTES_OFFSET:]))
        records = bytes(raw)
    result = h.produce(topic, records, partition=partition, acks=acks)
    assert error_name(result["error_code"]) == expected.name
    assert h.controller.partition("t", 0).log.high_watermark == 0


def test_produce_to_a_follower_gets_not_leader_with_the_current_leader(
    make_harness: Any, make_batch: Any
) -> None:
    h = make_harness(brokers=2)
    h.controller.create_topic("t", 1)
    leader = h.controller.partition("t", 0).leader_id
    follower = 1 - leader
    body = h.call(
        ApiKey.PRODUCE,
        10,
        {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": make_batch([b"a"])}]}
            ],
        },
        node=follower,
    )
    part = body["responses"][0]["partition_responses"][0]
    assert part["error_code"] == errors.NotLeaderOrFollowerError.code
    assert part["current_leader"]["leader_id"] == leader
    assert [e["node_id"] for e in body["node_endpoints"]] == [leader]


def test_zstd_needs_produce_v7(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    zstd = make_batch([b"a" * 100], compression="zstd")
    assert harness.produce("t", zstd, version=3)["error_code"] == (
        errors.UnsupportedCompressionTypeError.code
    )
    assert harness.produce("t", zstd, version=7)["error_code"] == NONE


# ---- idempotent producers ---------------------------------------------------------------


def test_init_producer_id_gives_distinct_ids(harness: Any) -> None:
    a = harness.call(
        ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1}
    )
    b = harness.call(
        ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1}
    )
    assert a["error_code"] == b["error_code"] == NONE
    assert a["producer_id"] != b["producer_id"] and a["producer_epoch"] == 0


def test_duplicate_batch_returns_original_offset_and_is_not_stored_twice(
    harness: Any, make_batch: Any
) -> None:
    harness.controller.create_topic("t", 1)
    pid = harness.call(
        ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1}
    )["producer_id"]
    harness.produce("t", make_batch([b"other"]))
    b0 = make_batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
    b1 = make_batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=2)
    first = harness.produce("t", b0)
    second = harness.produce("t", b1)
    retry = harness.produce("t", b0)  # a retry of an acknowledged batch
    assert (first["error_code"], first["base_offset"]) == (NONE, 1)
    assert (second["error_code"], second["base_offset"]) == (NONE, 3)
    assert (retry["error_code"], retry["base_offset"]) == (NONE, 1)
    assert harness.controller.partition("t", 0).log.high_watermark == 4


def test_sequence_gap_and_stale_epoch_are_rejected(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    pid = 4242

    def send(epoch: int, seq: int, n: int = 1) -> int:
        code: int = harness.produce(
            "t",
            make_batch([b"x"] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq),
        )["error_code"]
        return code

    assert send(1, 17) == NONE  # an unknown producer may start anywhere
    assert send(1, 19) == errors.OutOfOrderSequenceNumberError.code  # gap
    assert send(1, 18, n=2) == NONE
    assert send(0, 20) == errors.InvalidProducerEpochError.code  # older epoch
    assert send(2, 5) == errors.OutOfOrderSequenceNumberError.code  # new epoch, seq != 0
    assert send(2, 0) == NONE
    assert harness.controller.partition("t", 0).log.high_watermark == 4


# ---- Fetch, ListOffsets ----------------------------------------------------------------


def test_fetch_returns_stored_batches_as_written(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    harness.produce("t", make_batch([b"a", b"b"], keys=[b"k", None], headers=[("h", b"1")]))
    harness.produce("t", make_batch([b"c"] * 3, compression="gzip"))
    stored = b"".join(bytes(b.raw) for b in harness.controller.partition("t", 0).log.iter_batches())
    body = harness.call(ApiKey.FETCH, 11, harness.fetch_body("t", 0))
    part = body["responses"][0]["partitions"][0]
    assert part["error_code"] == NONE and part["high_watermark"] == 5
    assert bytes(part["records"]) == stored
    records = [r for b in iter_batches(part["records"]) for r in b.records()]
    assert [(r.offset, r.key, r.value) for r in records][:2] == [(0, b"k", b"a"), (1, None, b"b")]
    assert records[0].headers == [("h", b"1")]
    # from the middle: the batch holding offset 3 is returned whole
    body = harness.call(ApiKey.FETCH, 11, harness.fetch_body("t", 3))
    (b,) = iter_batches(body["responses"][0]["partitions"][0]["records"])
    assert b.base_offset == 2


def test_fetch_offset_out_of_range(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    harness.produce("t", make_batch([b"a"]))
    body = harness.call(ApiKey.FETCH, 11, harness.fetch_body("t", 5))
    part = body["responses"][0]["partitions"][0]
    assert part["error_code"] == errors.OffsetOutOfRangeError.code


def test_fetch_returns_at_least_one_batch_beyond_max_bytes(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    for _ in range(3):
        harness.produce("t", make_batch([b"z" * 500]))
    body = harness.call(ApiKey.FETCH, 11, harness.fetch_body("t", 0, partition_max_bytes=10))
    got = list(iter_batches(body["responses"][0]["partitions"][0]["records"]))
    assert [b.base_offset for b in got] == [0]


def test_fetch_long_poll_completes_on_append(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    request = harness.request(ApiKey.FETCH, 11, harness.fetch_body("t", 0, max_wait_ms=10_000))
    assert harness.handle(request) is None  # parked in the purgatory
    assert harness.purgatory.watched() == 1
    produce = harness.request(
        ApiKey.PRODUCE,
        9,
        {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": make_batch([b"late"])}]}
            ],
        },
    )
    harness.apis[0].handle(produce)  # the append completes the fetch on this thread
    responses = [harness.channel.receive_response(0), harness.channel.receive_response(0)]
    (response,) = [r for r in responses if r is not None and r.request is request]
    assert isinstance(response, SendResponse)
    assert (
        response.request.api_remote_complete_time_ns >= response.request.api_local_complete_time_ns
    )
    part = harness.decode(response)["responses"][0]["partitions"][0]
    assert [r.value for b in iter_batches(part["records"]) for r in b.records()] == [b"late"]


def test_fetch_long_poll_expires_after_max_wait(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    request = harness.request(ApiKey.FETCH, 11, harness.fetch_body("t", 0, max_wait_ms=100))
    assert harness.handle(request) is None  # parked in the purgatory
    harness.clock.advance(99)
    assert harness.purgatory.expire_due() == 0
    assert harness.channel.receive_response(0) is None  # still waiting at 99 ms
    assert harness.purgatory.watched() == 1
    harness.clock.advance(1)
    assert harness.purgatory.expire_due() == 1
    response = harness.channel.receive_response(0)
    assert isinstance(response, SendResponse) and response.request is request
    part = harness.decode(response)["responses"][0]["partitions"][0]
    assert part["error_code"] == NONE and bytes(part["records"] or b"") == b""
    assert harness.purgatory.watched() == 0
    assert harness.purgatory.expire_due() == 0  # answered once


def test_list_offsets_earliest_latest_and_by_timestamp(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    harness.produce("t", make_batch([b"a", b"b"], timestamp_ms=1000))  # ts 1000, 1001
    harness.produce("t", make_batch([b"c"], timestamp_ms=5000))

    def lookup(ts: int) -> tuple[int, int]:
        body = harness.call(
            ApiKey.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": ts}]}],
            },
        )
        p = body["topics"][0]["partitions"][0]
        assert p["error_code"] == NONE
        return p["offset"], p["timestamp"]

    assert lookup(-2)[0] == 0
    assert lookup(-1)[0] == 3
    assert lookup(1001) == (1, 1001)
    assert lookup(1002) == (2, 5000)
    assert lookup(9999) == (-1, -1)
    assert lookup(-3) == (2, 5000)


def test_find_coordinator_names_the_coordinator_of_each_group(make_harness: Any) -> None:
    h = make_harness(brokers=3)
    body = h.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g1", "g2"]})
    # "g1".hashCode() = 3242 -> __consumer_offsets partition 42 -> broker 42 % 3 = 0; g2: 1
    assert [(c["key"], c["error_code"], c["node_id"], c["port"]) for c in body["coordinators"]] == [
        ("g1", NONE, 0, 9092),
        ("g2", NONE, 1, 9093),
    ]
    old = h.call(ApiKey.FIND_COORDINATOR, 0, {"key": "g2"})
    assert (old["error_code"], old["node_id"], old["host"], old["port"]) == (
        NONE,
        1,
        "127.0.0.1",
        9093,
    )
    h.controller.broker_stopped(0)  # its groups move to the next live broker
    moved = h.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0})
    assert (moved["error_code"], moved["node_id"]) == (NONE, 1)


def test_find_coordinator_of_a_transactional_id_names_this_broker(harness: Any) -> None:
    body = harness.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["t"]})
    found = body["coordinators"][0]
    assert (found["error_code"], found["node_id"], found["port"]) == (NONE, 0, 9092)
