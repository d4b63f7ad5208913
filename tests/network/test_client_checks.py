"""NetworkClient's per-request shortcuts (the check ``send`` skips after ``ready``, the cached
version per node and api) against what they stand for, on random scripts of sends, answers,
broken answers, disconnects, timeouts and version changes on MockSelector + MockClock."""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient import errors
from kclient.network import ClientRequest, ClientResponse, Metadata, NetworkClient, Node
from kclient.network.api_versions import NodeApiVersions
from kclient.network.config import NetworkClientConfig
from kclient.network.connection_states import NO_DELAY_LIMIT_MS, Address, ConnectionState
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.testing import MockClock, MockSelector, api_versions_body, metadata_update_with
from kclient.testing.selector import SentRequest, response_payload

PROPS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NODES = (0, 1)
SOME_NODE = st.sampled_from([0, 0, 0, 1])  # mostly one: its requests get answered
PRODUCE_BODY = {
    "transactional_id": None,
    "acks": 1,
    "timeout_ms": 1000,
    "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}],
}
PRODUCE_ANSWER = {
    "responses": [
        {"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5}]}
    ],
    "throttle_time_ms": 0,
}


def _resolve(host: str, port: int) -> list[Address]:
    return [(socket.AF_INET, "10.0.0.1", port)]


@dataclass
class Run:
    clock: MockClock
    selector: MockSelector
    client: NetworkClient
    produce_max: dict[int, int]  # node → the Produce version its next connection supports
    log: list[Any]

    def node(self, node_id: int) -> Node:
        node = self.client.metadata.fetch().node_by_id(node_id)
        assert node is not None
        return node


def make_run(max_in_flight: int) -> Run:
    clock = MockClock()
    selector = MockSelector()
    produce_max: dict[int, int] = dict.fromkeys(NODES, SUPPORTED_VERSIONS[ApiKey.PRODUCE][1])

    def versions(request: Any) -> dict[str, Any]:
        table = dict(SUPPORTED_VERSIONS)
        table[ApiKey.PRODUCE] = (3, produce_max[request.node_id])
        return api_versions_body(table)

    selector.serve(ApiKey.API_VERSIONS, versions)
    metadata = Metadata(rng=random.Random(11))
    metadata.add("t", clock.monotonic_ms())
    wanted = metadata.new_metadata_request(clock.monotonic_ms())
    body = metadata_update_with(len(NODES), {"t": 2})
    metadata.update(wanted.request_version, body, False, clock.monotonic_ms())
    config = NetworkClientConfig(
        max_in_flight_requests_per_connection=max_in_flight, request_timeout_ms=30_000
    )
    client = NetworkClient(
        selector, metadata, config, clock=clock, rng=random.Random(7), resolver=_resolve
    )
    return Run(clock, selector, client, produce_max, [])


def summary(response: ClientResponse) -> tuple[Any, ...]:
    error = response.error
    return (
        int(response.api_key),
        response.destination,
        response.api_version,
        response.correlation_id,
        response.body,
        response.received_time_ms,
        response.request_latency_ms,
        response.disconnected,
        response.timed_out,
        None if error is None else (type(error).__name__, str(error)),
        None if response.version_mismatch is None else str(response.version_mismatch),
    )


def state(run: Run) -> tuple[Any, ...]:
    client = run.client
    in_flight = client.in_flight_requests
    states = client.connection_states
    return (
        in_flight.count,
        in_flight.earliest_deadline_ms,
        in_flight._deadline_exact,
        sorted(
            (node, [r.correlation_id for r in queue]) for node, queue in in_flight._requests.items()
        ),
        sorted(
            (node, s.state.name, s.throttle_until_ms, s.failed_attempts)
            for node, s in states._states.items()
        ),
        sorted(states.ready_nodes.items()),
        sorted((node, list(ids)) for node, ids in client._unanswered.items()),
        sorted(client.connection_failures().items()),
        [(r.node_id, r.header, r.body) for r in run.selector.sent],
        client._correlation_id,
    )


def expected_version(run: Run, node_id: int, api_key: int, max_version: int | None) -> int:
    """What the version lookup stands for, computed afresh (no cache)."""
    versions = run.client.api_versions(node_id)
    assert versions is not None
    fresh = NodeApiVersions(versions.versions, node_id)
    return fresh.latest_usable_version(api_key, None, max_version)


def answer(run: Run, node_id: int, request: SentRequest, how: str) -> None:
    request.answered = True
    if request.api_key == ApiKey.METADATA:
        body: dict[str, Any] = metadata_update_with(len(NODES), {"t": 2})
    else:
        body = dict(PRODUCE_ANSWER)
    if how == "throttle":
        body["throttle_time_ms"] = 250
    correlation_id = request.header.correlation_id + (1 if how == "mismatch" else 0)
    payload = response_payload(request, body, correlation_id=correlation_id)
    if how == "garbage":
        payload = payload[:6]
    elif how == "short":
        payload = payload[:2]
    run.selector.receive(node_id, payload)


def poll(run: Run, timeout_ms: int, now_ms: int) -> None:
    responses = run.client.poll(timeout_ms, now_ms)
    run.log.append(("poll", [summary(r) for r in responses], run.selector.poll_timeouts_ms[-1]))


def step(run: Run, op: tuple[Any, ...]) -> None:
    client, selector, now = run.client, run.selector, run.clock.monotonic_ms()
    kind = op[0]
    if kind == "ready":  # polling (past the backoff or throttling) until it is, if op[2]
        for _ in range(4):
            node = run.node(op[1])
            is_ready = client.ready(node, now)
            run.log.append(("ready", op[1], is_ready))
            if is_ready or not op[2]:
                break
            delay_ms = client.poll_delay_ms(node, now)
            if 0 < delay_ms < 60_000:
                run.clock.advance(delay_ms)
                now = run.clock.monotonic_ms()
            poll(run, 0, now)
    elif kind == "send":
        _, node_id, what, max_version, then_poll = op
        states = client.connection_states
        sendable = (
            states.state(node_id) is ConnectionState.READY
            and states.node_state(node_id).throttle_until_ms <= now
            and selector.is_channel_ready(node_id)
            and client.in_flight_requests.can_send_more(node_id)
        )
        api_key = ApiKey.METADATA if what == "metadata" else ApiKey.PRODUCE
        body = {"topics": [{"name": "t"}]} if what == "metadata" else dict(PRODUCE_BODY)
        request = ClientRequest(
            node_id,
            api_key,
            body,
            now,
            expect_response=what != "acks0",
            callback=lambda response: run.log.append(("callback", summary(response))),
            max_version=max_version,
        )
        try:
            client.send(request, now)
        except errors.IllegalStateError as exc:
            # refused by the client's own check (which send skips after ready: what it
            # remembered must still hold), not by the selector further down
            assert not sendable, exc
            assert str(exc).startswith(f"node {node_id} is not ready for a request"), exc
            run.log.append(("refused", str(exc)))
        else:
            assert sendable
            sent = selector._sends.get(node_id)
            assert sent is not None
            version = client.in_flight_requests._requests[node_id][-1].api_version
            assert version == expected_version(run, node_id, api_key, max_version)
        if then_poll:  # written
            poll(run, 0, now)
    elif kind == "answer":  # the oldest unanswered requests (any node), in one poll or more
        _, hows, then_poll = op
        for how, request in zip(hows, selector.unanswered(), strict=False):
            answer(run, request.node_id, request, how)
        if then_poll:
            poll(run, 0, now)
    elif kind in ("server_disconnect", "versions"):  # reported by a poll at once
        if kind == "versions":  # the node's next connection supports another Produce range
            run.produce_max[op[1]] = op[2]
        if selector.is_connected(op[1]):  # (the mock would report a pending one connected too)
            selector.server_disconnect(op[1])
            poll(run, 0, now)
    elif kind == "disconnect":
        client.disconnect(op[1])
    elif kind == "refresh":  # a metadata refresh due: nodes look unready until it is sent
        client.metadata.request_update()
    elif kind == "tick":
        run.clock.advance(op[1])
        now = run.clock.monotonic_ms()
        in_flight = client.in_flight_requests
        deadlines = [r.send_time_ms + r.request_timeout_ms + 1 for r in in_flight]
        expected = max(0, min(deadlines) - now) if deadlines else NO_DELAY_LIMIT_MS
        assert in_flight.next_timeout_ms(now) == expected
    elif kind == "poll":
        poll(run, op[1], now)
    elif kind == "poll_ready":  # an event loop's callback: the I/O only
        responses = client.poll_ready(now)
        run.log.append(("poll_ready", [summary(r) for r in responses]))
    run.log.append(state(run))


HOWS = st.sampled_from(["ok"] * 16 + ["throttle", "mismatch", "garbage", "short"])
SEND = st.tuples(
    st.just("send"),
    SOME_NODE,
    st.sampled_from(["produce"] * 6 + ["acks0", "metadata", "metadata"]),
    st.sampled_from([None, None, None, 5, 9]),
    st.sampled_from([True, True, True, False]),  # written at once (or with a later one)
)
ANSWER = st.tuples(
    st.just("answer"),
    st.lists(HOWS, min_size=1, max_size=4),
    st.sampled_from([True, True, False]),
)
READY = st.tuples(st.just("ready"), SOME_NODE, st.booleans())
DISRUPT = st.one_of(
    st.tuples(st.just("server_disconnect"), SOME_NODE),
    st.tuples(st.just("disconnect"), SOME_NODE),
    st.tuples(st.just("versions"), SOME_NODE, st.sampled_from([7, 9, 12])),
    st.tuples(st.just("tick"), st.just(31_000)),  # past request.timeout.ms
    st.tuples(st.just("refresh")),
)
BY_KIND = {
    "send": SEND,
    "answer": ANSWER,
    "ready": READY,
    "tick": st.tuples(st.just("tick"), st.sampled_from([1, 300])),
    "poll": st.tuples(st.just("poll"), st.sampled_from([0, 100, 60_000])),
    "poll_ready": st.tuples(st.just("poll_ready")),
    "disrupt": DISRUPT,
}
# mostly sends and answers (one_of would weigh each kind alike)
OPS = st.sampled_from(
    ["send"] * 6
    + ["answer"] * 5
    + ["ready"] * 2
    + ["tick", "tick", "poll", "poll_ready", "disrupt"]
).flatmap(BY_KIND.__getitem__)
WARM_UP = [("ready", 0, True), ("ready", 1, True)]


def play(ops: list[tuple[Any, ...]], max_in_flight: int) -> list[Any]:
    run = make_run(max_in_flight)
    for op in WARM_UP + ops:
        step(run, op)
    return run.log


@PROPS
@given(st.lists(OPS, min_size=8, max_size=50), st.sampled_from([1, 2, 5]))
def test_sends_checked_once_and_cached_versions_hold(
    ops: list[tuple[Any, ...]], max_in_flight: int
) -> None:
    # step() asserts each send against the full check and each version against a fresh
    # lookup
    play(ops, max_in_flight)


@pytest.mark.parametrize("change", ["disconnect", "send", "poll"])
def test_send_checks_again_when_the_node_changed_since_ready(change: str) -> None:
    run = make_run(1 if change == "send" else 5)
    # one answered Produce first: the version is cached
    for op in [*WARM_UP, ("send", 0, "produce", None, True), ("answer", ["ok"], True)]:
        step(run, op)
    client, now = run.client, run.clock.monotonic_ms()
    if change == "poll":  # an answer asking for a pause waits for the next poll
        step(run, ("send", 0, "produce", None, True))
        step(run, ("answer", ["throttle"], False))
    assert client.ready(run.node(0), now)
    if change == "disconnect":
        client.disconnect(0)
    elif change == "send":  # one in flight already: the maximum here
        step(run, ("send", 0, "produce", None, False))
    else:
        step(run, ("poll", 0))
    request = ClientRequest(0, ApiKey.PRODUCE, dict(PRODUCE_BODY), now)
    with pytest.raises(errors.IllegalStateError, match="node 0 is not ready for a request"):
        client.send(request, now)
