"""librdkafka's statistics callback over ``KafkaProducer.metrics()``.

No Java counterpart (Java reports through JMX ``metrics()``); librdkafka calls
``stats_cb(json_text)`` every ``statistics.interval.ms``. Here a ``StatisticsReporter``
(one daemon thread per producer that sets both) calls ``stats_cb`` with the producer's
``metrics()`` (Java's names) and librdkafka's top-level fields whose meaning kclient can
give: ``name`` / ``client_id``, ``type`` ("producer"), ``ts`` (monotonic µs), ``time``
(wall clock, s), ``age`` (µs since the producer started), ``msg_size`` (bytes of records
waiting in ``buffer.memory``) and ``msg_size_max`` (``buffer.memory``). The thread ends
when the producer closes (``stop``: at once, it never delays ``close()``) or is dropped;
an exception from ``stats_cb`` is logged and the next interval comes as usual.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class MetricsSource(Protocol):
    """What the reporter reads: a ``KafkaProducer``."""

    def metrics(self) -> dict[str, float]: ...


def statistics_json(metrics: dict[str, float], client_id: str, started_ns: int) -> str:
    """librdkafka's top-level statistics fields, plus ``metrics`` (Java's names)."""
    now_ns = time.monotonic_ns()
    total = int(metrics.get("buffer-total-bytes", 0))
    available = int(metrics.get("buffer-available-bytes", 0))
    return json.dumps(
        {
            "name": client_id,
            "client_id": client_id,
            "type": "producer",
            "ts": now_ns // 1000,
            "time": int(time.time()),
            "age": (now_ns - started_ns) // 1000,
            "msg_size": total - available,
            "msg_size_max": total,
            "metrics": metrics,
        }
    )


class StatisticsReporter:
    """Calls ``stats_cb(json_text)`` every ``interval_ms`` until ``stop()``."""

    def __init__(
        self,
        producer: MetricsSource,
        client_id: str,
        interval_ms: int,
        stats_cb: Callable[[str], object],
    ) -> None:
        self._producer = weakref.ref(producer)
        self._client_id = client_id
        self._interval_s = interval_ms / 1000
        self._stats_cb = stats_cb
        self._stopped = threading.Event()
        self._started_ns = time.monotonic_ns()
        self._thread = threading.Thread(
            target=self._run, name=f"kclient-producer-statistics | {client_id}", daemon=True
        )

    def start(self) -> StatisticsReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        """No more calls after the one running now (if any); does not wait for it."""
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            producer = self._producer()
            if producer is None:
                return
            try:
                text = statistics_json(producer.metrics(), self._client_id, self._started_ns)
                del producer
                self._stats_cb(text)
            except Exception:
                log.exception("[%s] exception in stats_cb (ignored)", self._client_id)


def start_statistics(producer: MetricsSource, config: object) -> StatisticsReporter | None:
    """The producer's reporter, started, when its config sets ``statistics.interval.ms``
    (and so ``stats_cb``); None otherwise."""
    interval_ms: int = getattr(config, "statistics_interval_ms", 0)
    stats_cb: Callable[[str], object] | None = getattr(config, "stats_cb", None)
    if interval_ms <= 0 or stats_cb is None:
        return None
    client_id: str = getattr(config, "client_id", "")
    return StatisticsReporter(producer, client_id, interval_ms, stats_cb).start()
