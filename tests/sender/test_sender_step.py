"""The Sender's step (``run_once``): what it logs, and the expiry of queued batches it must
not skip. No sockets: each producer has a MockClient and a MockClock."""

from __future__ import annotations

import logging

import pytest

from kclient import errors
from tests.sender.sender_helpers import make

TOPICS = {"t": 3, "u": 2}


def test_each_produce_request_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    h = make(topics=TOPICS, nodes=2)
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


@pytest.mark.parametrize("in_flight", [False, True])
def test_a_queued_batch_past_the_delivery_timeout_expires_in_the_step(in_flight: bool) -> None:
    """The step skips the expiry when nothing can be due: a batch queued (its leader out)
    past delivery.timeout.ms still fails there, whether or not another is in flight."""
    h = make(topics={"t": 2}, nodes=2, delivery_timeout_ms=35_000, request_timeout_ms=30_000)
    h.run()  # the first step: the cluster is new
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
