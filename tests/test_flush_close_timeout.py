"""``flush`` and ``close`` refuse a timeout that is not a number of seconds >= 0 (as
Java's ``close(Duration)`` refuses a negative one), naming the method; before, a negative
timeout reported "did not complete within -1 s" and a string raised a bare operand error.
``close(0)`` on an idle producer does not warn about records it is failing: there are none."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kclient.producer import KafkaProducer
from tests.test_producer import LiveMockClient


def producer(client: LiveMockClient, **settings: Any) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers="127.0.0.1:9092", kafka_client=client, **settings)


@pytest.mark.parametrize("method", ["flush", "close"])
@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        (-1, ValueError, r"timeout must be >= 0 seconds or None, got -1"),
        (float("nan"), ValueError, r"timeout must be >= 0 seconds or None, got nan"),
        ("5", TypeError, r"timeout must be a number of seconds or None, got str"),
        (True, TypeError, r"timeout must be a number of seconds or None, got bool"),
    ],
)
def test_a_bad_timeout_is_refused_naming_the_method(
    method: str, timeout: Any, error: type[Exception], message: str
) -> None:
    client = LiveMockClient()
    p = producer(client)
    try:
        with pytest.raises(error, match=rf"{method}\(\) {message}"):
            getattr(p, method)(timeout)
        md = p.send("t", b"still open").result(10)  # the refused call changed nothing
        assert md.topic == "t"
    finally:
        p.close()


def test_close_zero_on_an_idle_producer_does_not_warn_of_failed_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = LiveMockClient()
    p = producer(client)
    p.send("t", b"v").result(10)
    with caplog.at_level(logging.WARNING, logger="kclient"):
        p.close(0)
    assert "failing the records not yet delivered" not in caplog.text


def test_close_zero_with_lingering_records_warns_and_fails_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = LiveMockClient()
    p = producer(client, linger_ms=60_000)
    future = p.send("t", b"v")
    with caplog.at_level(logging.WARNING, logger="kclient"):
        p.close(0)
    assert "failing the records not yet delivered" in caplog.text
    assert future.exception(10) is not None
