"""Completing a prepared transaction from another process (EndTxn with a recorded producer id
and epoch), fencing a transactional id, and one committed offset with metadata, against a
scripted broker."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.protocol import ApiKey
from kclient.sender.coordinator_calls import (
    CoordinatorCalls,
    commit_offset_metadata,
    fetch_offset_metadata,
)
from kclient.sender.txn_completion import (
    PreparedTxn,
    TransactionNotCompletedError,
    complete_transaction,
    fence_transactional_id,
)
from kclient.testing import MockClock
from kclient.testing.client import MockClient, metadata_update_with

TXN = PreparedTxn("kclient-eos-s-7-0", producer_id=4000, epoch=3)


def coordinator(node: int, code: int = 0) -> dict[str, Any]:
    return {
        "coordinators": [
            {
                "key": TXN.transactional_id,
                "node_id": node,
                "host": "localhost",
                "port": 9092 + node,
                "error_code": code,
            }
        ],
        "error_code": code,
        "node_id": node,
        "host": "localhost",
        "port": 9092 + node,
    }


@pytest.fixture
def clock() -> MockClock:
    return MockClock(auto_tick_ms=1)


@pytest.fixture
def client(clock: MockClock) -> MockClient:
    return MockClient(clock, metadata_update_with(3, {"out": 1}))


def bodies(client: MockClient, api_key: ApiKey) -> list[dict[str, Any]]:
    return [dict(r.body_for(4)) for r in client.sent if r.api_key == api_key]


def test_commit_sends_end_txn_with_the_recorded_id_and_epoch_to_the_coordinator(
    client: MockClient, clock: MockClock
) -> None:
    client.prepare_response(coordinator(2), api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response({"error_code": 0}, api_key=ApiKey.END_TXN, node=2)
    complete_transaction(CoordinatorCalls(client, clock), TXN, commit=True, timeout_ms=5_000)
    (find,) = [r for r in client.sent if r.api_key == ApiKey.FIND_COORDINATOR]
    assert find.body_for(4) == {"key_type": 1, "coordinator_keys": [TXN.transactional_id]}
    (end,) = [r for r in client.sent if r.api_key == ApiKey.END_TXN]
    assert end.destination == 2
    assert end.max_version == 4  # never transaction version 2
    assert end.body_for(4) == {
        "transactional_id": TXN.transactional_id,
        "producer_id": 4000,
        "producer_epoch": 3,
        "committed": True,
    }


def test_a_moved_coordinator_is_looked_up_again_and_busy_answers_are_retried(
    client: MockClient, clock: MockClock
) -> None:
    client.prepare_response(coordinator(1), api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response({"error_code": errors.NotCoordinatorError.code}, node=1)
    client.prepare_response(coordinator(0, errors.CoordinatorNotAvailableError.code))
    client.prepare_response(coordinator(2), api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response({"error_code": errors.ConcurrentTransactionsError.code}, node=2)
    client.prepare_response(None, node=2, disconnected=True)
    client.prepare_response(coordinator(2), api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response({"error_code": 0}, api_key=ApiKey.END_TXN, node=2)
    calls = CoordinatorCalls(client, clock, retry_backoff_ms=50)
    start_ms = clock.monotonic_ms()
    complete_transaction(calls, TXN, commit=True, timeout_ms=5_000)
    assert [ApiKey(r.api_key).name for r in client.sent] == [
        "FIND_COORDINATOR",
        "END_TXN",
        "FIND_COORDINATOR",
        "FIND_COORDINATOR",
        "END_TXN",
        "END_TXN",
        "FIND_COORDINATOR",
        "END_TXN",
    ]
    assert clock.monotonic_ms() - start_ms >= 4 * 50  # backed off between attempts


def test_retries_stop_at_the_timeout_naming_the_last_problem(
    client: MockClient, clock: MockClock
) -> None:
    client.prepare_response(coordinator(1), api_key=ApiKey.FIND_COORDINATOR)
    for _ in range(100):
        client.prepare_response({"error_code": errors.ConcurrentTransactionsError.code}, node=1)
    calls = CoordinatorCalls(client, clock, retry_backoff_ms=100)
    start_ms = clock.monotonic_ms()
    with pytest.raises(errors.KafkaTimeoutError, match="CONCURRENT_TRANSACTIONS"):
        complete_transaction(calls, TXN, commit=True, timeout_ms=1_000)
    assert clock.monotonic_ms() - start_ms <= 1_100
    assert 5 <= len(bodies(client, ApiKey.END_TXN)) <= 11


@pytest.mark.parametrize(
    "code",
    [
        errors.ProducerFencedError.code,
        errors.InvalidProducerEpochError.code,
        errors.InvalidTxnStateError.code,
        errors.InvalidProducerIdMappingError.code,
    ],
)
def test_a_transaction_aborted_or_taken_over_is_a_typed_error_with_the_code(
    client: MockClient, clock: MockClock, code: int
) -> None:
    client.prepare_response(coordinator(1), api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response({"error_code": code}, api_key=ApiKey.END_TXN)
    with pytest.raises(TransactionNotCompletedError, match=errors.error_name(code)) as caught:
        complete_transaction(CoordinatorCalls(client, clock), TXN, commit=True, timeout_ms=5_000)
    assert caught.value.error_code == code
    assert len(bodies(client, ApiKey.END_TXN)) == 1  # not retried


def test_a_broker_without_end_txn_is_an_unsupported_version_error(
    client: MockClient, clock: MockClock
) -> None:
    client.prepare_response(coordinator(1), api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response(None, api_key=ApiKey.END_TXN, version_mismatch=True)
    with pytest.raises(errors.UnsupportedVersionError, match="transactions"):
        complete_transaction(CoordinatorCalls(client, clock), TXN, commit=True, timeout_ms=5_000)


def test_fencing_a_transactional_id_sends_init_producer_id_and_returns_the_new_epoch(
    client: MockClient, clock: MockClock
) -> None:
    client.prepare_response(coordinator(1), api_key=ApiKey.FIND_COORDINATOR)
    client.prepare_response({"error_code": errors.ConcurrentTransactionsError.code}, node=1)
    client.prepare_response({"error_code": 0, "producer_id": 4000, "producer_epoch": 4}, node=1)
    calls = CoordinatorCalls(client, clock)
    fenced = fence_transactional_id(
        calls, TXN.transactional_id, transaction_timeout_ms=60_000, timeout_ms=5_000
    )
    assert fenced == PreparedTxn(TXN.transactional_id, 4000, 4)
    assert bodies(client, ApiKey.INIT_PRODUCER_ID)[-1] == {
        "transactional_id": TXN.transactional_id,
        "transaction_timeout_ms": 60_000,
    }


def test_offset_metadata_is_committed_for_a_memberless_group_and_read_back(
    client: MockClient, clock: MockClock
) -> None:
    calls = CoordinatorCalls(client, clock)
    client.prepare_response(coordinator(0), api_key=ApiKey.FIND_COORDINATOR)
    ok = {"topics": [{"name": "out", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    client.prepare_response(ok, api_key=ApiKey.OFFSET_COMMIT, node=0)
    commit_offset_metadata(calls, "g", "out", 0, offset=7, metadata="R 7", timeout_ms=5_000)
    (commit,) = [r for r in client.sent if r.api_key == ApiKey.OFFSET_COMMIT]
    body = commit.body_for(8)
    assert body["group_id"] == "g" and "generation_id_or_member_epoch" not in body
    assert body["topics"][0]["partitions"] == [
        {"partition_index": 0, "committed_offset": 7, "committed_metadata": "R 7"}
    ]
    fetched = {
        "error_code": 0,
        "topics": [
            {
                "name": "out",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 7,
                        "metadata": "R 7",
                        "error_code": 0,
                    }
                ],
            }
        ],
    }
    client.prepare_response(fetched, api_key=ApiKey.OFFSET_FETCH, node=0)
    assert fetch_offset_metadata(calls, "g", "out", 0, timeout_ms=5_000) == (7, "R 7")
    none = {"topics": [{"name": "out", "partitions": [{"partition_index": 0}]}]}
    client.prepare_response(none, api_key=ApiKey.OFFSET_FETCH, node=0)
    assert fetch_offset_metadata(calls, "g", "out", 0, timeout_ms=5_000) is None


def test_metadata_too_large_for_the_broker_is_raised(client: MockClient, clock: MockClock) -> None:
    calls = CoordinatorCalls(client, clock)
    client.prepare_response(coordinator(0), api_key=ApiKey.FIND_COORDINATOR)
    code = errors.OffsetMetadataTooLargeError.code
    answer = {
        "topics": [{"name": "out", "partitions": [{"partition_index": 0, "error_code": code}]}]
    }
    client.prepare_response(answer, api_key=ApiKey.OFFSET_COMMIT)
    with pytest.raises(errors.OffsetMetadataTooLargeError, match="bytes"):
        commit_offset_metadata(
            calls, "g", "out", 0, offset=7, metadata="x" * 5000, timeout_ms=5_000
        )
