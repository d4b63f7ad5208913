"""NetworkClient.send's write (the frame, KSelector's send, the in-flight entry, the DEBUG
line) and its poll's callbacks, on a real KSelector over scripted sockets."""

from __future__ import annotations

import errno
import logging
import random
import socket
from typing import Any
from unittest import mock

import pytest

from kclient.network import ClientRequest, Metadata, NetworkClient, Node, selector_connect
from kclient.network import selector as selector_module
from kclient.network.api_versions import NodeApiVersions
from kclient.network.config import NetworkClientConfig
from kclient.network.connection_states import Address
from kclient.protocol import ApiKey
from kclient.protocol.frame import encode_response, frame_bytes
from kclient.testing import MockClock, api_versions_body, metadata_update_with
from tests.network.selector_impls import ScriptedSelector, Sock

PRODUCE_BODY = {
    "transactional_id": None,
    "acks": 1,
    "timeout_ms": 1000,
    "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}],
}


def _resolve(host: str, port: int) -> list[Address]:
    return [(socket.AF_INET, "10.0.0.1", port)]


def make_client(selector_type: Any, socks: dict[int, Sock], timeout_ms: int) -> NetworkClient:
    clock = MockClock()
    sel = selector_type(clock, selector=ScriptedSelector())
    config = NetworkClientConfig(
        max_in_flight_requests_per_connection=5, request_timeout_ms=timeout_ms
    )
    metadata = Metadata(rng=random.Random(11))  # fresh: no refresh due, nodes 0 and 1
    metadata.add("t", clock.monotonic_ms())
    wanted = metadata.new_metadata_request(clock.monotonic_ms())
    metadata.update(
        wanted.request_version, metadata_update_with(2, {"t": 2}), False, clock.monotonic_ms()
    )
    client = NetworkClient(
        sel, metadata, config, clock=clock, rng=random.Random(3), resolver=_resolve
    )
    states = client.connection_states
    for node_id, sock in socks.items():  # READY, with the versions kclient supports
        sel.register(node_id, sock, f"10.0.0.{node_id}:9092")
        states.connecting(node_id, clock.monotonic_ms(), f"b{node_id}", 9092)
        states.checking_api_versions(node_id)
        states.ready(node_id)
        client._api_versions._nodes[node_id] = NodeApiVersions.from_response(
            api_versions_body(), node_id
        )
    return client


def observe(client: NetworkClient, socks: dict[int, Sock]) -> dict[str, Any]:
    in_flight = client.in_flight_requests
    sel: Any = client._selector
    return {
        "in_flight": [
            (
                r.destination,
                int(r.api_key),
                r.api_version,
                r.correlation_id,
                r.send.size,
                r.send.completed,
                r.send_time_ms,
                r.created_time_ms,
                r.request_timeout_ms,
                r.expect_response,
                r.is_internal,
            )
            for r in in_flight
        ],
        "counts": (in_flight.count, in_flight.earliest_deadline_ms, in_flight._deadline_exact),
        "correlation_id": client._correlation_id,
        "checked": dict(client._checked),
        "written": {n: bytes(s.written) for n, s in socks.items()},
        "closed": {n: s.closed for n, s in socks.items()},
        "early_sends": [(s.destination, s.size) for s in sel._early_sends],
        "early_failures": {n: str(e) for n, e in sel._early_failures.items()},
        "sending": sorted(sel._sending),
        "idle": list(sel._idle._last_active_ms.items()),
    }


def play(script: list[tuple[Any, ...]], timeout_ms: int) -> list[Any]:
    socks = {0: Sock(), 1: Sock()}
    client = make_client(selector_module.KSelector, socks, timeout_ms)
    clock: Any = client._clock
    seen: list[Any] = []
    for node_id, acks0, own_timeout_ms, takes, step_ms in script:
        clock.advance(step_ms)
        now = clock.monotonic_ms()
        sock = socks[node_id]
        if takes == "fail":
            sock.takes.append(ConnectionResetError(104, "reset by peer"))
        elif takes is not None:
            sock.takes.append(takes)
        request = ClientRequest(
            node_id,
            ApiKey.PRODUCE,
            dict(PRODUCE_BODY),
            now - 1,
            expect_response=not acks0,
            request_timeout_ms=own_timeout_ms,
        )
        try:
            ready = client.ready(Node(node_id, f"b{node_id}", 9092), now)
            if ready:
                client.send(request, now)
            seen.append(("sent", ready))
        except Exception as exc:
            seen.append(("raised", type(exc).__name__, str(exc)))
        seen.append(observe(client, socks))
    assert seen[0] == ("sent", True)  # the first request is always written (or fails)
    return seen


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO])
def test_each_write_is_logged_at_debug(caplog: pytest.LogCaptureFixture, level: int) -> None:
    script = [(0, False, None, None, 0), (1, True, 700, None, 1), (0, False, None, 3, 0)]
    with caplog.at_level(level, logger="kclient.network.client"):
        play(script, 30_000)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    sent = [message for _, message in lines if "sending PRODUCE v" in message]
    assert len(sent) == (3 if level == logging.DEBUG else 0)


def test_a_write_puts_the_request_on_the_wire_and_in_flight() -> None:
    socks = {0: Sock()}
    client = make_client(selector_module.KSelector, socks, 30_000)
    request = ClientRequest(0, ApiKey.PRODUCE, dict(PRODUCE_BODY), 0, request_timeout_ms=700)
    assert client.ready(Node(0, "b0", 9092), 0)
    client.send(request, 0)
    (entry,) = list(client.in_flight_requests)
    assert entry.request is request and entry.request_timeout_ms == 700
    assert entry.send.completed and entry.correlation_id == 0
    assert client.in_flight_requests.earliest_deadline_ms == 701
    assert len(socks[0].written) == entry.send.size > 0


PRODUCE_ANSWER = {
    "responses": [
        {"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5}]}
    ],
    "throttle_time_ms": 0,
}


class RefusedSocket:
    """What the selector's connect makes instead of a socket here: the reconnection after a
    closed connection is refused at once, the same in every run (a real socket's connect
    would race with the script, and leave the machine)."""

    def __init__(self, *args: Any) -> None:
        pass

    def setblocking(self, flag: bool) -> None:
        pass

    def setsockopt(self, *args: Any) -> None:
        pass

    def connect_ex(self, address: Any) -> int:
        return errno.ECONNREFUSED

    def close(self) -> None:
        pass


def play_polls(script: list[tuple[Any, ...]], raising: bool) -> list[Any]:
    """Requests written on a KSelector, then answered (whole, in pieces, wrong, or the
    connection closed) and polled (``poll`` or ``poll_ready``): what each poll returns, the
    callbacks, the state."""
    socks = {0: Sock(), 1: Sock()}
    client = make_client(selector_module.KSelector, socks, 30_000)
    clock: Any = client._clock
    readiness: Any = client._selector._selector  # type: ignore[attr-defined]
    seen: list[Any] = []

    def callback(response: Any) -> None:
        seen.append(("callback", response.correlation_id, response.body, response.disconnected))
        if raising and response.correlation_id % 2:
            raise ValueError(f"callback {response.correlation_id} failed")

    with mock.patch.object(selector_connect.socket, "socket", RefusedSocket):
        for node_id, how, poll_kind, step_ms in script:
            clock.advance(step_ms)
            now = clock.monotonic_ms()
            if client.ready(Node(node_id, f"b{node_id}", 9092), now):
                request = ClientRequest(
                    node_id, ApiKey.PRODUCE, dict(PRODUCE_BODY), now, callback=callback
                )
                client.send(request, now)
                correlation_id = client.in_flight_requests._requests[node_id][-1].correlation_id
                version = client.in_flight_requests._requests[node_id][-1].api_version
                answer = frame_bytes(
                    encode_response(
                        ApiKey.PRODUCE,
                        version,
                        correlation_id + (how == "mismatch"),
                        PRODUCE_ANSWER,
                    )
                )
                sock = socks[node_id]
                if how == "closed":
                    sock.chunks.append(b"")
                elif how == "split":
                    sock.chunks.extend([answer[:7], answer[7:]])
                else:
                    sock.chunks.append(answer)
            readiness.ready((node_id, 1))
            try:
                polled = client.poll if poll_kind == "poll" else None
                responses = polled(100, now) if polled else client.poll_ready(now)
                seen.append([(r.correlation_id, r.body, r.disconnected) for r in responses])
            except Exception as exc:
                seen.append(("raised", type(exc).__name__, str(exc)))
            seen.append(observe(client, socks))
            seen.append(list(readiness.log))
    return seen


def test_a_failing_callback_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = [(0, "whole", "poll_ready", 0), (0, "whole", "poll", 0), (0, "whole", "poll", 1)]
    with caplog.at_level(logging.ERROR, logger="kclient.network.client"):
        seen = play_polls(script, raising=True)
    lines = [
        (r.levelname, r.getMessage(), r.exc_info and str(r.exc_info[1])) for r in caplog.records
    ]
    called = [e[1] for e in seen if isinstance(e, tuple) and e[0] == "callback"]
    assert called == [0, 1, 2]  # the failing one does not stop the others
    assert lines == [
        (
            "ERROR",
            "[kclient clientId=kclient] uncaught error in a request completion callback",
            "callback 1 failed",
        )
    ]
