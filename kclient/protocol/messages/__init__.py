"""Declarations of every API kclient speaks, by api key.

Corresponds to Kafka's ``ApiKeys`` enum plus the request/response message JSON files;
one module per API holds its REQUEST and RESPONSE declarations. Immutable data.

Version ranges are those Apache Kafka 4.1 accepts (stable versions; the KIP-896 baseline
at the low end), read from the 4.1 protocol guide (kafka.apache.org/41/design/protocol).
The consumer group APIs go below that baseline, to v0: kafka-python pinned to an old
``api_version`` still sends JoinGroup v0-v1, FindCoordinator v0, OffsetCommit v0-v1 and
OffsetFetch v0, and the embedded broker serves them.
"""

from __future__ import annotations

from enum import IntEnum

from kclient.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_client_quotas,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    get_telemetry_subscriptions,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    push_telemetry,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from kclient.protocol.schema import Message


class ApiKey(IntEnum):
    """The api keys kclient declares (Kafka's ``ApiKeys`` ids)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72


_MODULES = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.END_TXN: end_txn,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.SASL_HANDSHAKE: sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl_authenticate,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.OFFSET_DELETE: offset_delete,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions,
    ApiKey.LIST_TRANSACTIONS: list_transactions,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: get_telemetry_subscriptions,
    ApiKey.PUSH_TELEMETRY: push_telemetry,
}

REQUESTS: dict[int, Message] = {key: mod.REQUEST for key, mod in _MODULES.items()}
RESPONSES: dict[int, Message] = {key: mod.RESPONSE for key, mod in _MODULES.items()}

SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    key: (mod.REQUEST.valid.low, mod.REQUEST.valid.high) for key, mod in _MODULES.items()
}


def request_schema(api_key: int) -> Message:
    """The request declaration for ``api_key``; ``KeyError`` if kclient does not speak it."""
    try:
        return REQUESTS[api_key]
    except KeyError:
        raise KeyError(f"kclient does not speak api key {api_key}") from None


def response_schema(api_key: int) -> Message:
    """The response declaration for ``api_key``; ``KeyError`` if kclient does not speak it."""
    try:
        return RESPONSES[api_key]
    except KeyError:
        raise KeyError(f"kclient does not speak api key {api_key}") from None


__all__ = [
    "REQUESTS",
    "RESPONSES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "request_schema",
    "response_schema",
]
