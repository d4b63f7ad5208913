"""KSelector's ``poll``, ``send`` and ``is_channel_ready`` on scripted sockets: results,
errors (with their messages), interest changes, select timeouts, idle bookkeeping and bytes
on the wire, step by step (``selector_impls``)."""

from __future__ import annotations

import struct
import threading
from typing import Any

import pytest

from kclient.clock import SYSTEM_CLOCK, SystemClock
from kclient.errors import IllegalStateError
from kclient.network.channel import NetworkSend
from kclient.network.selector import KSelector
from tests.network.selector_impls import (
    READ,
    WRITE,
    Harness,
    ScriptedSelector,
    Sock,
    outcome,
    run,
    snapshot,
)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def steps(h: Harness, *actions: Any) -> list[Any]:
    """Runs each action (a callable taking the harness) and observes what it did."""
    seen = []
    for action in actions:
        seen.append(outcome(lambda action=action: action(h)))
        seen.append(snapshot(h))
    return seen


def poll(timeout_ms: int = 100) -> Any:
    return lambda h: h.sel.poll(timeout_ms)


def test_a_round_trip_is_reported() -> None:
    def scenario(h: Harness) -> list[Any]:
        sock = h.add(1)
        sock.chunks.extend([frame(b"answer")])
        return steps(
            h,
            lambda h: h.clock.advance(3),
            lambda h: h.send(1, b"request"),
            poll(),  # reports the send, waits for the answer
            lambda h: h.clock.advance(5),
            lambda h: h.readiness.ready((1, READ)),
            poll(),
            poll(),  # nothing: the lists are fresh, the old ones kept by callers stay
        )

    py = run(scenario)
    sent, after_send, after_answer = py[3], py[5], py[11]
    assert sent["idle"] == [(1, 3)]  # the write counts as use
    assert after_send["completed_sends"] == [(1, 7)]
    assert after_send["readiness_log"][-1] == ("select", 0.1, "float")
    assert after_answer["completed_receives"] == [(1, b"answer")]
    assert after_answer["idle"] == [(1, 8)]  # and so does the read


def test_an_ack_free_send_makes_poll_return_at_once() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1)
        return steps(h, lambda h: h.send(1, b"fire", awaits_response=False), poll(500))

    py = run(scenario)
    assert py[3]["readiness_log"][-1] == ("select", 0, "int")


def test_partial_writes_then_writability_finish_the_send() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(takes=[3, BlockingIOError(), 4, 100]))
        return steps(
            h,
            lambda h: h.send(1, b"0123456789abcdef"),  # 3 bytes, then write interest
            poll(),  # writes nothing (EAGAIN)
            lambda h: h.readiness.ready((1, WRITE)),
            poll(),  # 4 more
            lambda h: h.readiness.ready((1, READ | WRITE)),
            poll(),  # the rest: the send completes, write interest dropped
        )

    py = run(scenario)
    assert [s["completed_sends"] for s in py[3::4]] == [[], [(1, 16)], []]
    assert py[-1]["written"][1] == b"0123456789abcdef"
    assert ("modify", 1, READ) in py[-1]["readiness_log"]


def test_frames_split_across_reads_and_several_per_read() -> None:
    def scenario(h: Harness) -> list[Any]:
        data = frame(b"a" * 10) + frame(b"") + frame(b"b" * 30) + frame(b"c" * 200)
        h.add(1, Sock(chunks=[data[:3], data[3:25], data[25:60], data[60:]]), chunk_bytes=64)
        return steps(
            h, *[a for _ in range(4) for a in (lambda h: h.readiness.ready((1, READ)), poll())]
        )

    py = run(scenario)
    got = [r for s in py[3::4] for r in s["completed_receives"]]
    assert got == [(1, b"a" * 10), (1, b""), (1, b"b" * 30), (1, b"c" * 200)]


@pytest.mark.parametrize(
    "chunks",
    [
        [b""],  # the peer closed
        [ConnectionResetError(104, "Connection reset by peer")],
        [BlockingIOError(11, "Resource temporarily unavailable")],
        [struct.pack(">i", (1 << 20) + 1) + b"x"],  # above receive.message.max.bytes
        [struct.pack(">i", -5)],
    ],
    ids=["closed", "reset", "eagain", "oversized", "negative"],
)
def test_a_failed_read_disconnects(chunks: list[Any]) -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(chunks=chunks))
        h.add(2, Sock(chunks=[frame(b"fine")]))
        return steps(
            h, lambda h: h.readiness.ready((1, READ), (2, READ), (1, READ)), poll(), poll()
        )

    py = run(scenario)
    failed = py[3]
    assert list(failed["disconnected"]) == [1]
    assert failed["completed_receives"] == [(2, b"fine")]  # the other channel carries on
    assert 1 not in failed["channels"] and failed["closed"][1]
    assert ("unregister", 1) in failed["readiness_log"]


def test_a_failed_write_in_send_is_reported_by_the_next_poll() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(takes=[BrokenPipeError(32, "Broken pipe")]))
        return steps(h, lambda h: h.send(1, b"request"), poll(), lambda h: h.send(1, b"again"))

    py = run(scenario)
    assert py[3]["disconnected"] == {
        1: ("KafkaConnectionError", "connection to node 1 at 10.0.0.1:9092 lost: broken pipe")
    }
    assert py[4][0] == "IllegalStateError"  # gone: not connected any more


def test_a_failed_write_on_writability_disconnects() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(takes=[2, BlockingIOError(), ConnectionResetError(104, "reset")]))
        return steps(
            h,
            lambda h: h.send(1, b"request"),
            poll(),
            lambda h: h.readiness.ready((1, WRITE)),
            poll(),
        )

    py = run(scenario)
    assert list(py[-1]["disconnected"]) == [1]


def test_send_refuses_an_unknown_node_and_a_second_send() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(accept=2))
        return steps(
            h,
            lambda h: h.send(9, b"nobody"),
            lambda h: h.send(1, b"first"),
            lambda h: h.send(1, b"second"),  # the first is not written yet
        )

    py = run(scenario)
    assert py[0] == ("IllegalStateError", "cannot send to node 9: not connected")
    assert py[4][0] == "IllegalStateError"


def test_a_muted_channel_is_not_read() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(chunks=[frame(b"later")]))
        return steps(
            h,
            lambda h: h.sel.mute(1),
            lambda h: h.readiness.ready((1, READ)),
            poll(),
            lambda h: h.sel.unmute(1),
            lambda h: h.readiness.ready((1, READ)),
            poll(),
        )

    py = run(scenario)
    assert py[5]["completed_receives"] == [] and py[-1]["completed_receives"] == [(1, b"later")]


def test_a_connecting_channel_is_finished_by_poll() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1)
        h.add(2, Sock(chunks=[frame(b"x")]))
        h.sel.channel(1).connected = False  # TCP still connecting
        h.sel._set_interest(h.sel.channel(1))
        return steps(
            h,
            lambda h: h.sel.is_channel_ready(1),
            lambda h: h.readiness.ready((1, WRITE), (2, READ)),
            poll(),
            lambda h: h.sel.is_channel_ready(1),
        )

    py = run(scenario)
    assert py[0] == ("ok", "False") and py[6] == ("ok", "True")
    assert py[5]["connected"] == [1] and py[5]["completed_receives"] == [(2, b"x")]


def test_idle_connections_close_at_their_deadline() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1)
        h.clock.advance(50)
        h.add(2, Sock(chunks=[frame(b"a"), frame(b"b")]))
        return steps(
            h,
            lambda h: h.clock.advance(40),
            poll(),  # nothing is due yet: node 1 was used 90 ms ago
            lambda h: h.clock.advance(20),
            lambda h: h.readiness.ready((2, READ)),
            poll(),  # node 1 idle 110 ms > 100: closed
            lambda h: h.clock.advance(100),
            lambda h: h.readiness.ready((2, READ)),
            poll(),  # node 2 was just used
            lambda h: h.clock.advance(101),
            poll(),  # now node 2 is idle too
        )

    py = run(scenario, max_idle_ms=100)
    assert py[3]["disconnected"] == {} and py[3]["idle_next_check"] == 101
    assert list(py[9]["disconnected"]) == [1]
    assert "connections.max.idle.ms=100" in py[9]["disconnected"][1][1]
    assert py[15]["disconnected"] == {} and list(py[-1]["disconnected"]) == [2]


def test_a_channel_closed_earlier_in_the_same_poll_is_skipped() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(chunks=[b"", frame(b"never")]))
        return steps(h, lambda h: h.readiness.ready((1, READ), (1, READ | WRITE)), poll())

    py = run(scenario)
    assert list(py[-1]["disconnected"]) == [1] and py[-1]["completed_receives"] == []


def test_the_waker_is_drained() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(chunks=[frame(b"x")]))
        h.sel.wakeup()
        return steps(h, lambda h: h.readiness.ready(("waker", READ), (1, READ)), poll())

    py = run(scenario)
    assert py[-1]["completed_receives"] == [(1, b"x")]


def test_waiters_are_released_before_select_and_a_closed_selector_refuses() -> None:
    def scenario(h: Harness) -> list[Any]:
        gates = [threading.Lock(), threading.Lock()]
        for gate in gates:
            gate.acquire()
        h.sel.release_before_select.extend(gates)
        seen = steps(h, poll(0))
        seen.append([gate.locked() for gate in gates] + [len(h.sel.release_before_select)])
        h.sel.close()
        seen.append(outcome(lambda: h.sel.poll(0)))
        return seen

    py = run(scenario)
    assert py[2] == [False, False, 0]
    assert py[3] == ("IllegalStateError", "the selector is closed")


def test_keyword_and_odd_calls_work() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1, Sock(chunks=[frame(b"x")]))
        return steps(
            h,
            lambda h: h.sel.is_channel_ready(node_id=1),
            lambda h: h.readiness.ready((1, READ)),
            lambda h: h.sel.poll(timeout_ms=7),
            lambda h: h.sel.poll(10**30),  # capped like any other large timeout
            lambda h: h.sel.poll(2.5),
        )

    py = run(scenario)
    assert py[0] == ("ok", "True")


def test_a_select_answer_that_is_not_pairs_fails() -> None:
    def scenario(h: Harness) -> list[Any]:
        h.add(1)
        key = h.readiness.get_map()[h.socks[1]]
        h.readiness.select = lambda timeout=None: [(key, READ, 0)]  # type: ignore[method-assign]
        return steps(h, poll())

    py = run(scenario)
    # the select result's shape is checked (TypeError compiled, ValueError from the source)
    assert py[0][0] in ("TypeError", "ValueError")


def test_is_channel_ready_without_the_node() -> None:
    h = Harness()
    try:
        assert h.sel.is_channel_ready(5) is False
        h.add(5)
        assert h.sel.is_channel_ready(5) is True
        with pytest.raises(IllegalStateError):
            h.sel.connect(5, "127.0.0.1", 1)  # already connected: the Python connect says so
    finally:
        h.close()


def test_the_system_clock_is_read_as_systemclock_reads_it() -> None:
    class Later(SystemClock):  # another clock: its own monotonic_ms is called
        def monotonic_ms(self) -> int:
            return 42

    for clock in (SYSTEM_CLOCK, Later()):
        sel = KSelector(clock, selector=ScriptedSelector())
        try:
            sel.register(1, Sock(), "10.0.0.1:9092")
            before = clock.monotonic_ms()
            sel.send(NetworkSend(1, [b"request"]))
            after = clock.monotonic_ms()
            [(node_id, used_ms)] = sel._idle._last_active_ms.items()
            assert node_id == 1 and before <= used_ms <= after
        finally:
            sel.close()
