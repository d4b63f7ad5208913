"""GetTelemetrySubscriptions and PushTelemetry (KIP-714): Kafka's ``ClientMetricsManager``
with a receiver that keeps what clients push, decoded, for the user to look at
(``EmbeddedCluster.telemetry()``).

One manager per cluster (a client may ask one broker and push to another); served only with
``BrokerConfig.client_telemetry`` (else ApiVersions does not list the two APIs, as a Kafka
broker without a client-telemetry plugin). The subscription is the cluster's one
``client_telemetry_metrics`` (prefixes; ``""``: every metric) and
``client_telemetry_push_interval_ms``, changed at run time with ``set_subscription``.
A push is checked as Kafka checks it — known instance and subscription id, an accepted
codec, at most ``telemetry.max.bytes``, nothing after a terminating push — and a payload
that does not decompress or decode as OTLP ``MetricsData`` is answered INVALID_RECORD and
kept with its error: a bad push never harms the broker. Pushes are not throttled.
Request handler threads call in; a lock guards the state.
"""

from __future__ import annotations

import threading
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kclient import errors
from kclient.broker.request_channel import Request
from kclient.protocol import ApiKey
from kclient.protocol.otlp import MetricsData, decode_metrics_data
from kclient.protocol.types import ZERO_UUID
from kclient.record.compression import CompressionType, decompress, ensure_available

#: Kafka's ``telemetry.max.bytes`` default.
TELEMETRY_MAX_BYTES = 1024 * 1024
#: Kafka's client-metrics ``interval.ms`` default (5 minutes).
DEFAULT_PUSH_INTERVAL_MS = 300_000
_MAX_KEPT = 10_000


@dataclass(frozen=True, slots=True)
class ReceivedTelemetry:
    """One PushTelemetry request as the broker took it."""

    client_instance_id: uuid.UUID
    client_id: str | None
    node_id: int
    subscription_id: int
    terminating: bool
    compression_type: int
    size_bytes: int
    metrics: MetricsData | None
    """The decoded payload; None if it did not decode (``error`` says why)."""
    error: str | None = None

    def metric_names(self) -> list[str]:
        """The names of the pushed metrics (none if the payload did not decode)."""
        return self.metrics.metric_names() if self.metrics is not None else []


def _accepted_codecs() -> tuple[int, ...]:
    """The codecs this broker can read, in Kafka's order of preference."""
    accepted = []
    for codec in (
        CompressionType.ZSTD,
        CompressionType.LZ4,
        CompressionType.GZIP,
        CompressionType.SNAPPY,
    ):
        try:
            ensure_available(codec)
        except errors.KafkaError:
            continue
        accepted.append(int(codec))
    return tuple(accepted)


class ClientMetricsManager:
    """The cluster's client-metrics subscription and the pushes it received."""

    def __init__(
        self,
        metrics: tuple[str, ...] = ("",),
        push_interval_ms: int = DEFAULT_PUSH_INTERVAL_MS,
        *,
        max_bytes: int = TELEMETRY_MAX_BYTES,
        delta_temporality: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self._accepted = _accepted_codecs()
        self._max_bytes = max_bytes
        self._delta = delta_temporality
        self._metrics: tuple[str, ...] = ()
        self._interval_ms = 0
        self._subscription_id = 0
        self._clients: dict[uuid.UUID, bool] = {}
        """Known client instance ids → whether it sent its terminating push."""
        self._received: list[ReceivedTelemetry] = []
        self.set_subscription(metrics, push_interval_ms)

    def set_subscription(self, metrics: tuple[str, ...] | list[str], push_interval_ms: int) -> None:
        """Ask every client for the metrics named by these prefixes (``""``: all; none:
        nothing) every ``push_interval_ms``; clients learn it at their next request (their
        pushes under the old subscription get UNKNOWN_SUBSCRIPTION_ID)."""
        if push_interval_ms <= 0:
            raise errors.ConfigError(
                f"the client metrics push interval must be > 0 ms, got {push_interval_ms}"
            )
        wanted = tuple(metrics)
        with self._lock:
            self._metrics = wanted
            self._interval_ms = push_interval_ms
            # as Kafka: the id identifies the subscription's content
            self._subscription_id = zlib.crc32(
                repr((wanted, push_interval_ms, self._delta)).encode()
            ) - (1 << 31)

    def received(self) -> list[ReceivedTelemetry]:
        """Every push received so far, oldest first (the last 10,000)."""
        with self._lock:
            return list(self._received)

    # ---- the two APIs ----------------------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID) -> dict[str, Any]:
        """A GetTelemetrySubscriptions answer: a new instance id for the zero one."""
        with self._lock:
            if instance_id == ZERO_UUID:
                instance_id = uuid.uuid4()
            self._clients.setdefault(instance_id, False)
            return {
                "throttle_time_ms": 0,
                "error_code": 0,
                "client_instance_id": instance_id,
                "subscription_id": self._subscription_id,
                "accepted_compression_types": list(self._accepted),
                "push_interval_ms": self._interval_ms,
                "telemetry_max_bytes": self._max_bytes,
                "delta_temporality": self._delta,
                "requested_metrics": list(self._metrics),
            }

    def push(self, body: dict[str, Any], client_id: str | None, node_id: int) -> int:
        """Take a PushTelemetry request; returns its error code (0: taken)."""
        instance_id: uuid.UUID = body["client_instance_id"]
        payload: bytes = body["metrics"]
        codec: int = body["compression_type"]
        with self._lock:
            terminated = self._clients.get(instance_id)
            if terminated is None or body["subscription_id"] != self._subscription_id:
                return errors.UnknownSubscriptionIdError.code
            if terminated:
                return 42  # INVALID_REQUEST: a push after the terminating one
            if codec != 0 and codec not in self._accepted:
                return errors.UnsupportedCompressionTypeError.code
            if len(payload) > self._max_bytes:
                return errors.TelemetryTooLargeError.code
            if body["terminating"]:
                self._clients[instance_id] = True
        metrics: MetricsData | None = None
        problem: str | None = None
        try:
            data = (
                decompress(CompressionType(codec), payload, max_bytes=16 * self._max_bytes)
                if codec
                else payload
            )
            metrics = decode_metrics_data(data)
        except Exception as exc:  # a bad payload is the client's problem, never the broker's
            problem = f"{type(exc).__name__}: {exc}"
        kept = ReceivedTelemetry(
            instance_id,
            client_id,
            node_id,
            body["subscription_id"],
            bool(body["terminating"]),
            codec,
            len(payload),
            metrics,
            problem,
        )
        with self._lock:
            self._received.append(kept)
            del self._received[:-_MAX_KEPT]
        return 0 if problem is None else errors.InvalidRecordError.code


class ClientMetricsApis:
    """The two KIP-714 APIs of one broker, over the cluster's manager."""

    def __init__(
        self,
        node_id: int,
        manager: ClientMetricsManager,
        send: Callable[[Request, dict[str, Any]], None],
    ) -> None:
        self._node_id = node_id
        self.manager = manager
        self._send = send

    def handlers(self) -> dict[int, Callable[[Request], None]]:
        return {
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: self.handle_get_telemetry_subscriptions,
            ApiKey.PUSH_TELEMETRY: self.handle_push_telemetry,
        }

    def handle_get_telemetry_subscriptions(self, request: Request) -> None:
        body = request.body
        assert body is not None
        self._send(request, self.manager.get_subscriptions(body["client_instance_id"]))

    def handle_push_telemetry(self, request: Request) -> None:
        body = request.body
        assert body is not None
        code = self.manager.push(body, request.header.client_id, self._node_id)
        if code:
            request.error_count += 1
        self._send(request, {"throttle_time_ms": 0, "error_code": code})
