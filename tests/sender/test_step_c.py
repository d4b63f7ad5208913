"""The Sender's step in C (``kclient.sender._step``: ``send_data``, ``RunOnceMethod``,
``PollNetworkMethod``) against the Python it replaces (``Sender._send_producer_data``,
``run_once``, ``poll_network``): the same random sequences of sends, steps,
answers, clock moves and unreachable or throttled nodes, on two producers that differ only
in the step; after every step both sent the same requests, returned the same poll timeout
and hold the same in-flight, muted, expiry and metadata state.

No sockets: each producer has a MockClient and a MockClock.
"""

from __future__ import annotations

import logging
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient import errors
from kclient.record import _accel
from kclient.sender import sender as sender_module
from tests.sender.sender_helpers import Harness, make, ok, partitions_in

pytestmark = pytest.mark.skipif(
    not _accel.ACCELERATED, reason="the C accelerator is not built (or KCLIENT_PURE_PYTHON)"
)
TOPICS = {"t": 3, "u": 2}

send = st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 2), st.integers(1, 4))
rounds = st.lists(
    st.tuples(
        st.lists(send, max_size=3),  # records queued, then a step
        st.sampled_from([None, 0, 0, 0, 6, 7]),  # the oldest request answered (ok, not
        # leader, timed out), then a step
        st.sampled_from([0, 0, 1, 3, 100, 1_001, 40_000]),  # the clock moves
        st.sampled_from([None, None, "blackout", "throttle", "flush", "flushed", "outage"]),
        # node 0 or 1 goes away (an outage: for longer than delivery.timeout.ms, so that
        # its queued batches expire), or a flush begins (every batch ready) or ends
        st.integers(0, 1),
    ),
    max_size=25,
)


def _record_polls(h: Harness) -> None:
    """Keep the (timeout_ms, now_ms) of each poll of h's network client in h.client.polls."""
    polls: list[tuple[str, int, int]] = []
    poll, poll_ready = h.client.poll, h.client.poll_ready

    def recorded_poll(timeout_ms: int, now_ms: int) -> Any:
        polls.append(("poll", timeout_ms, now_ms))
        return poll(timeout_ms, now_ms)

    def recorded_poll_ready(now_ms: int) -> Any:
        polls.append(("poll_ready", 0, now_ms))
        return poll_ready(now_ms)

    h.client.poll = recorded_poll  # type: ignore[method-assign]
    h.client.poll_ready = recorded_poll_ready  # type: ignore[method-assign]
    h.client.polls = polls  # type: ignore[attr-defined]


def _state(h: Harness, timeout_ms: int) -> dict[str, Any]:
    sender = h.sender
    return {
        "timeout_ms": timeout_ms,
        "polls": list(getattr(h.client, "polls", ())),
        "requests": [
            (
                r.api_key,
                r.destination,
                r.body_for(12),
                r.created_time_ms,
                r.expect_response,
                r.request_timeout_ms,
                r.min_version,
                r.max_version,
            )
            for r in h.produce_requests()
        ],
        "metrics": sender.metrics.snapshot(),
        "in_flight": {tp: len(b) for tp, b in sender._in_flight_batches.items()},
        "expiry": sender._next_expiry_check_ms,
        "muted": sorted(h.acc._drainer.muted),
        "metadata_topics": sorted(h.client.metadata.topics()),
        "update_due": h.client.metadata.time_to_next_update(h.clock.monotonic_ms()),
        "more_ready": h.acc.more_ready,
    }


def _round(h: Harness, one: tuple[Any, ...], futures: list[Any]) -> list[dict[str, Any]]:
    sends, answer, advance_ms, trouble, node = one
    for topic, partition, n in sends:
        if partition < TOPICS[topic]:
            futures.extend(h.send(topic, partition, b"v" * 30, n))
    states = [_state(h, h.sender.run_once())]
    requests = h.produce_requests()
    if answer is not None and requests:
        h.client.respond(ok(requests[0], base_offset=len(futures), code=answer))
        states.append(_state(h, h.sender.poll_network()))  # the answer read, nothing sent
        states.append(_state(h, h.sender.run_once()))
    h.clock.sleep_ms(advance_ms)
    if trouble == "blackout":
        h.client.blackout(node, 500)
    elif trouble == "outage":
        h.client.blackout(node, 60_000)
    elif trouble == "throttle":
        h.client.throttle(node, 300)
    elif trouble == "flush":
        h.acc.begin_flush()
    elif trouble == "flushed" and h.acc._flushes_in_progress:
        h.acc.end_flush()
    states.append({"done": [f.done() for f in futures]})
    return states


@settings(max_examples=150, deadline=None)
@given(
    rounds=rounds,
    nodes=st.integers(1, 2),
    no_leader=st.booleans(),
    idempotent=st.booleans(),
    ordered=st.booleans(),
    linger_ms=st.sampled_from([0, 5]),
    batch_size=st.sampled_from([100, 16_384]),
    acks=st.sampled_from([-1, 1, 0]),
)
def test_the_c_step_does_what_the_python_step_does(  # noqa: PLR0917 -- given's
    rounds: list[tuple[Any, ...]],
    nodes: int,
    no_leader: bool,
    idempotent: bool,
    ordered: bool,
    linger_ms: int,
    batch_size: int,
    acks: int,
) -> None:
    kwargs: dict[str, Any] = {
        "nodes": nodes,
        "topics": TOPICS,
        "leaders": {("u", 1): -1} if no_leader else None,
        "idempotent": idempotent,
        "acks": acks,
        "max_in_flight": 1 if ordered else 5,
        "linger_ms": linger_ms,
        "batch_size": batch_size,
        "delivery_timeout_ms": 35_000,
        "request_timeout_ms": 30_000,
    }
    in_c, in_python = make(**kwargs), make(**kwargs)
    assert in_c.sender._send_data.func is sender_module._step.send_data  # type: ignore[attr-defined]
    in_python.sender._send_data = in_python.sender._send_producer_data
    # the Python run_once and poll_network too (the C ones are the class's methods)
    in_python.sender.run_once = types.MethodType(sender_module.py_run_once, in_python.sender)  # type: ignore[method-assign]
    in_python.sender.poll_network = types.MethodType(  # type: ignore[method-assign]
        sender_module.py_poll_network, in_python.sender
    )
    for h in (in_c, in_python):  # what each step polls the network client with
        _record_polls(h)
    assert isinstance(vars(type(in_c.sender))["run_once"], sender_module._step.RunOnceMethod)  # type: ignore[attr-defined]
    futures_c: list[Any] = []
    futures_py: list[Any] = []
    for one in rounds:
        assert _round(in_c, one, futures_c) == _round(in_python, one, futures_py), one


def test_a_step_with_records_queued_runs_without_the_python() -> None:
    h = make(topics=TOPICS)
    python_steps: list[int] = []
    reference = h.sender._send_producer_data

    def counted(now_ms: int) -> int:
        python_steps.append(now_ms)
        return reference(now_ms)

    h.sender._send_producer_data = counted  # type: ignore[method-assign]
    h.send("t", 0)
    h.run()  # the first step sees the cluster for the first time: the Python's
    h.send("t", 1)
    h.send("u", 0)
    h.run()
    h.run()  # nothing queued: the Python's
    assert len(python_steps) == 2
    assert [partitions_in(r) for r in h.produce_requests()] == [[("t", 0)], [("t", 1), ("u", 0)]]


@pytest.mark.parametrize("step", ["c", "python"])
def test_each_produce_request_is_logged_at_debug(
    step: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = make(topics=TOPICS, nodes=2)
    if step == "python":
        h.sender._send_data = h.sender._send_producer_data
    with caplog.at_level(logging.DEBUG, logger="kclient.sender.sender"):
        h.send("t", 0)
        h.run()
        h.send("t", 1, b"v" * 200)
        h.run()
    lines = [r.getMessage() for r in caplog.records if "produce request" in r.getMessage()]
    assert lines == [
        "produce request to node 0: 1 batches, 69 bytes",
        "produce request to node 1: 1 batches, 270 bytes",
    ]


@pytest.mark.parametrize("step", ["c", "python"])
@pytest.mark.parametrize("in_flight", [False, True])
def test_a_queued_batch_past_the_delivery_timeout_expires_in_the_step(
    step: str, in_flight: bool
) -> None:
    """The step skips the expiry when nothing can be due: a batch queued (its leader out)
    past delivery.timeout.ms still fails there, whether or not another is in flight."""
    h = make(topics={"t": 2}, nodes=2, delivery_timeout_ms=35_000, request_timeout_ms=30_000)
    if step == "python":
        h.sender._send_data = h.sender._send_producer_data
    h.run()  # the first step (the Python's: the cluster is new)
    h.client.blackout(1, 120_000)  # partition 1's leader
    h.clock.sleep_ms(20_000)
    if in_flight:  # its deadline (60 s) is later than the queued batch's (55 s)
        h.send("t", 0)
        h.run()
        assert len(h.produce_requests()) == 1
    (stuck,) = h.send("t", 1)
    h.run()
    h.clock.sleep_ms(34_999)
    h.run()
    assert not stuck.done()
    h.clock.sleep_ms(1)
    h.run()
    assert stuck.done()
    with pytest.raises(errors.KafkaTimeoutError, match="delivery.timeout.ms"):
        stuck.result(timeout=0)


@pytest.mark.parametrize("step", ["c", "python"])
@pytest.mark.parametrize("where", ["class", "instance"])
def test_the_answer_goes_to_the_senders_handle_produce_response(step: str, where: str) -> None:
    """The request's callback calls the sender's _handle_produce_response with the request's
    batches and the response, wherever that method comes from (its class, or set on it)."""
    h = make(topics=TOPICS)
    if step == "python":
        h.sender._send_data = h.sender._send_producer_data
    handled: list[tuple[Any, ...]] = []
    original = h.sender._handle_produce_response

    def handle(by_tp: dict[Any, Any], response: Any) -> None:
        handled.append((sorted(by_tp), response.request.api_key))
        original(by_tp, response)

    if where == "instance":
        h.sender._handle_produce_response = handle  # type: ignore[method-assign]
    else:
        h.sender.__class__ = type(
            "Handled", (type(h.sender),), {"_handle_produce_response": lambda _, *a: handle(*a)}
        )
    h.send("t", 0)
    h.run()  # the first step (the Python's)
    h.send("t", 1)
    h.run()
    for request in h.produce_requests():
        h.client.respond(ok(request))
    h.run()
    assert handled == [([("t", 0)], 0), ([("t", 1)], 0)]
