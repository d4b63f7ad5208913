"""ClusterConnectionStates: state table, reconnect backoff, setup timeout, address rotation."""

import random
import socket

import pytest

from kclient.errors import IllegalStateError, ProtocolDecodeError
from kclient.network.connection_states import (
    ALLOWED_TRANSITIONS,
    NO_DELAY_LIMIT_MS,
    Address,
    ClusterConnectionStates,
    ConnectionFailures,
    ConnectionState,
    ExponentialBackoff,
)

HOST, PORT = "broker.example", 9092


def one_address(host: str, port: int) -> list[Address]:
    return [(socket.AF_INET, "10.0.0.1", port)]


def states(seed: int = 7, **kwargs: object) -> ClusterConnectionStates:
    return ClusterConnectionStates(rng=random.Random(seed), resolver=one_address, **kwargs)  # type: ignore[arg-type]


def fail_once(cs: ClusterConnectionStates, node: int, now_ms: int) -> int:
    """Connect and fail; returns the backoff the failure set."""
    cs.connecting(node, now_ms, HOST, PORT)
    cs.disconnected(node, now_ms)
    return cs.node_state(node).reconnect_backoff_ms


def test_a_node_never_tried_can_connect_at_once() -> None:
    cs = states()
    assert cs.can_connect(1, 0)
    assert cs.connection_delay(1, 0) == 0
    assert not cs.is_blacked_out(1, 0)


def test_reconnect_backoff_doubles_from_50_ms_to_1000_ms_within_20_percent_jitter() -> None:
    cs = states()
    now_ms = 0
    for attempt in range(12):
        backoff_ms = fail_once(cs, 1, now_ms)
        expected_ms = min(50 * 2**attempt, 1000)
        assert 0.8 * expected_ms <= backoff_ms <= min(1.2 * expected_ms, 1000), attempt
        now_ms += backoff_ms
    assert cs.node_state(1).reconnect_backoff_ms <= 1000


def test_jitter_actually_varies_the_backoff() -> None:
    seen = {fail_once(states(seed=seed), 1, 0) for seed in range(20)}
    assert len(seen) > 5
    assert all(40 <= b <= 60 for b in seen)


def test_a_node_in_backoff_is_blacked_out_until_the_backoff_passes() -> None:
    cs = states()
    backoff_ms = fail_once(cs, 1, 1000)
    assert cs.is_blacked_out(1, 1000 + backoff_ms - 1)
    assert not cs.can_connect(1, 1000 + backoff_ms - 1)
    assert cs.connection_delay(1, 1000 + 10) == backoff_ms - 10
    assert cs.can_connect(1, 1000 + backoff_ms)
    assert cs.connection_delay(1, 1000 + backoff_ms) == 0


def test_success_resets_the_backoff() -> None:
    cs = states()
    for i in range(5):
        fail_once(cs, 1, i * 2000)
    assert cs.node_state(1).reconnect_backoff_ms >= 640
    cs.connecting(1, 20_000, HOST, PORT)
    cs.checking_api_versions(1)
    cs.ready(1)
    cs.disconnected(1, 30_000)
    assert 40 <= cs.node_state(1).reconnect_backoff_ms <= 60


def test_connection_setup_timeout_grows_from_10_s_towards_30_s_and_resets() -> None:
    cs = states()
    cs.connecting(1, 0, HOST, PORT)
    assert 8_000 <= cs.connection_setup_timeout_ms(1) <= 12_000
    assert not cs.is_connection_setup_timeout(1, 8_000)
    assert cs.nodes_with_connection_setup_timeout(12_001) == [1]
    cs.disconnected(1, 12_001)
    cs.connecting(1, 20_000, HOST, PORT)
    assert 16_000 <= cs.connection_setup_timeout_ms(1) <= 24_000
    for t in range(3):
        cs.disconnected(1, 100_000 * (t + 1))
        cs.connecting(1, 100_000 * (t + 1) + 5_000, HOST, PORT)
    assert 24_000 <= cs.connection_setup_timeout_ms(1) <= 30_000
    cs.checking_api_versions(1)
    cs.ready(1)
    assert 8_000 <= cs.connection_setup_timeout_ms(1) <= 12_000


def test_next_setup_timeout_bounds_the_poll() -> None:
    cs = states()
    assert cs.next_setup_timeout_ms(0) >= NO_DELAY_LIMIT_MS - 1
    cs.connecting(1, 0, HOST, PORT)
    assert cs.next_setup_timeout_ms(0) == cs.connection_setup_timeout_ms(1) + 1


def test_states_follow_the_table_and_reject_anything_else() -> None:
    cs = states()
    cs.connecting(1, 0, HOST, PORT)
    assert cs.state(1) is ConnectionState.CONNECTING
    assert cs.is_preparing_connection(1) and not cs.is_ready(1, 0)
    with pytest.raises(IllegalStateError, match="CONNECTING to READY"):
        cs.ready(1)
    cs.checking_api_versions(1)
    assert cs.is_connected(1) and cs.is_preparing_connection(1) and not cs.is_connecting(1)
    cs.ready(1)
    assert cs.is_ready(1, 0)
    with pytest.raises(IllegalStateError, match="READY to CONNECTING"):
        cs.connecting(1, 0, HOST, PORT)
    cs.disconnected(1, 5)
    assert cs.is_disconnected(1)
    assert ConnectionState.READY not in ALLOWED_TRANSITIONS[ConnectionState.DISCONNECTED]


def test_connecting_and_ready_nodes_wait_for_network_events_not_a_timer() -> None:
    cs = states()
    cs.connecting(1, 0, HOST, PORT)
    assert cs.connection_delay(1, 0) == NO_DELAY_LIMIT_MS
    assert cs.is_any_node_connecting()
    cs.checking_api_versions(1)
    assert not cs.is_any_node_connecting()


def test_throttle_makes_a_ready_node_unready_until_it_expires() -> None:
    cs = states()
    cs.connecting(1, 0, HOST, PORT)
    cs.checking_api_versions(1)
    cs.ready(1)
    cs.throttle(1, 500)
    assert not cs.is_ready(1, 499)
    assert cs.poll_delay_ms(1, 100) == 400
    assert cs.is_ready(1, 500)


def test_every_resolved_address_is_tried_in_turn_then_the_name_is_resolved_again() -> None:
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[Address]:
        calls.append(host)
        return [(socket.AF_INET, "10.0.0.1", port), (socket.AF_INET6, "fd00::2", port)]

    cs = ClusterConnectionStates(rng=random.Random(1), resolver=resolver)
    tried = []
    for i in range(4):
        cs.connecting(1, i * 10_000, HOST, PORT)
        tried.append(cs.current_address(1)[1])
        cs.disconnected(1, i * 10_000)
    assert tried == ["10.0.0.1", "fd00::2", "10.0.0.1", "fd00::2"]
    assert calls == [HOST, HOST]


def test_a_node_that_moves_to_another_host_starts_afresh() -> None:
    cs = states()
    for i in range(4):
        fail_once(cs, 1, i * 5000)
    cs.connecting(1, 50_000, "other.example", PORT)
    assert cs.node_state(1).host == "other.example"
    assert cs.node_state(1).failed_attempts == 0


def test_exponential_backoff_without_range_is_constant() -> None:
    backoff = ExponentialBackoff(100, 2, 100, 0.2, random.Random(0))
    assert [backoff.backoff_ms(n) for n in range(4)] == [100, 100, 100, 100]


def test_short_reason_keeps_only_the_reason() -> None:
    from kclient.network.connection_states import short_reason

    assert short_reason("connection to node -1 at h:1 failed: connection refused") == (
        "connection refused"
    )
    assert short_reason("node -2 at 127.0.0.1:9 closed the connection") == "closed the connection"
    assert short_reason("something else") == "something else"


def test_the_timeout_error_carries_the_typed_error_of_the_latest_failure() -> None:
    failures = ConnectionFailures()
    garbage = ProtocolDecodeError("h:1 sent a frame of 1213486160 bytes")
    failures.failed("h:1", "sent a frame of 1213486160 bytes", garbage)
    assert failures.no_broker_reachable_error(1000).__cause__ is garbage
    failures.failed("h:2", "connection refused")  # no typed error behind this one
    assert failures.no_broker_reachable_error(1000).__cause__ is None
    failures.succeeded("h:2")
    failures.failed("h:1", "connection refused")  # the same address, now refused
    assert failures.no_broker_reachable_error(1000).__cause__ is None
