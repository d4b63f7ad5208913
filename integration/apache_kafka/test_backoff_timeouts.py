"""KIP-601 (``socket.connection.setup.timeout.ms``) and KIP-1102's trigger
(``metadata.recovery.rebootstrap.trigger.ms``) on Apache Kafka 4.4, observed through
kclient's own log records and their times, not through sleeps.

- KIP-601: the node is SIGSTOPped, so TCP connects (the kernel accepts) but the TLS
  handshake never completes; each attempt is given up after the setup timeout, which
  doubles with ±20 % jitter per failed attempt up to ``….max.ms``.
- KIP-1102: the node is SIGSTOPped while the producer waits for a new topic's metadata;
  the refresh gets no answer, and after ``metadata.recovery.rebootstrap.trigger.ms`` (not
  ``request.timeout.ms``) the producer rebootstraps; SIGCONT, and the record is delivered.
  (Before: the poll slept until the unanswered refresh's ``request.timeout.ms``, so the
  rebootstrap came then.)

The node is always resumed (SIGCONT, by pid, in ``finally``)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from integration.apache_kafka.readback import unique
from kclient import KafkaProducer
from kclient.errors import KafkaTimeoutError
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka

pytestmark = pytest.mark.parametrize("apache_kafka", [VERSIONS[0]], indirect=True)

_TIMED_OUT = re.compile(r"timed out after (\d+) ms \(socket\.connection\.setup\.timeout\.ms\)")


@contextmanager
def _paused(kafka: ApacheKafka) -> Iterator[None]:
    kafka.pause_broker(1)
    try:
        yield
    finally:
        kafka.resume_broker(1)


def _messages(caplog: pytest.LogCaptureFixture) -> list[tuple[float, str]]:
    return [(record.created, record.getMessage()) for record in caplog.records]


# ---- KIP-601 ---------------------------------------------------------------------------------


def test_kip601_setup_timeout_doubles_with_jitter_up_to_its_max(
    apache_kafka: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {
        **apache_kafka.client_config("SSL"),
        "socket.connection.setup.timeout.ms": 250,
        "socket.connection.setup.timeout.max.ms": 1_000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 50,
        "max.block.ms": 5_000,
    }
    with caplog.at_level(logging.DEBUG, logger="kclient"), _paused(apache_kafka):
        producer = KafkaProducer(settings)
        try:
            with pytest.raises(KafkaTimeoutError) as info:
                producer.send(unique("kip601"), b"v")
        finally:
            producer.close(timeout=0)
    assert "socket.connection.setup.timeout.ms" in str(info.value)
    timeouts: list[int] = []
    took_ms: list[float] = []
    started: float | None = None
    for created, message in _messages(caplog):
        if message.startswith("[kclient") and "connecting to node -1 at" in message:
            started = created
        found = _TIMED_OUT.search(message)
        if found and started is not None:
            timeouts.append(int(found.group(1)))
            took_ms.append((created - started) * 1000)
            started = None
    assert len(timeouts) >= 4, timeouts
    for attempt, timeout_ms in enumerate(timeouts):
        base_ms = min(250 * 2**attempt, 1_000)
        assert 0.8 * base_ms <= timeout_ms <= min(1.2 * base_ms, 1_000), timeouts
        assert timeout_ms - 5 <= took_ms[attempt] <= timeout_ms + 300, (timeouts, took_ms)
    exact = [min(250 * 2**attempt, 1_000) for attempt in range(len(timeouts))]
    assert timeouts != exact  # jittered


# ---- KIP-1102 ---------------------------------------------------------------------------------


def test_kip1102_no_metadata_for_the_trigger_time_rebootstraps(
    apache_kafka: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    ready = unique("kip1102-ready")
    later = unique("kip1102-later")
    apache_kafka.create_topic(ready, 1)
    apache_kafka.create_topic(later, 1)
    settings = {
        "bootstrap.servers": apache_kafka.bootstrap_servers,
        "metadata.recovery.rebootstrap.trigger.ms": 2_000,
        "request.timeout.ms": 20_000,
        "delivery.timeout.ms": 60_000,
        "max.block.ms": 30_000,
    }
    with caplog.at_level(logging.INFO, logger="kclient"), KafkaProducer(settings) as producer:
        assert producer.send(ready, b"first").result(timeout=30).offset == 0
        with _paused(apache_kafka):
            paused_at = time.time()
            result: list[object] = []
            waiter = threading.Thread(
                target=lambda: result.append(producer.send(later, b"after the rebootstrap"))
            )
            waiter.start()  # its metadata refresh goes unanswered
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not any(
                "rebootstrapping" in m for _, m in _messages(caplog)
            ):
                waiter.join(0.05)
        waiter.join(30)
        assert result, "send did not return"
        future = result[0]
        assert future.result(timeout=30).offset == 0  # type: ignore[attr-defined]
    rebootstraps = [
        (created, message) for created, message in _messages(caplog) if "rebootstrapping" in message
    ]
    assert rebootstraps, [m for _, m in _messages(caplog)]
    created, message = rebootstraps[0]
    assert "no metadata for" in message, message
    waited_s = created - paused_at
    assert 1.9 <= waited_s < 6, waited_s  # the trigger (2 s), not request.timeout.ms (20 s)
