"""KIP-714 client metrics push: Java's ``ClientTelemetryReporter`` (its sender's state
machine) and the step of ``NetworkClient.TelemetrySender`` that sends its requests.

``ClientTelemetryReporter`` is sans-I/O: it says which request is due (GetTelemetrySub-
scriptions with the client instance id, zero at first; PushTelemetry with the metrics its
subscription selects, compressed and in its temporality) and takes the answers. Its states
and the moves between them are the table ``TRANSITIONS`` (Java's ``ClientTelemetryState``).
``TelemetrySender.maybe_update`` is called by the Sender once per loop, off the per-record
path, and sends the due request to the least-loaded node — only to a node whose ApiVersions
lists both GetTelemetrySubscriptions and PushTelemetry (a Kafka broker does only with a
client-telemetry plugin): when the first node asked does not, the reporter stops, as Java's
does when the API is missing, and nothing is ever sent. (tansu lists GetTelemetrySubscriptions
alone and hands out empty subscriptions: a client there could never push, so it asks nothing.)

Owned by the Sender thread, but for ``client_instance_id``, which any thread may wait on.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kclient.errors import IllegalStateError, error_name
from kclient.network.kafka_client import ClientRequest, ClientResponse, KafkaClient
from kclient.protocol import ApiKey
from kclient.protocol.otlp import MetricsData, encode_metrics_data
from kclient.protocol.types import ZERO_UUID
from kclient.record.compression import CompressionType, compress, ensure_available

log = logging.getLogger(__name__)

DEFAULT_PUSH_INTERVAL_MS = 300_000
"""Java's wait after an error when no subscription gave an interval (5 minutes)."""
NEVER_MS = 2**31 - 1
"""Java's ``Integer.MAX_VALUE`` interval: telemetry stops."""
_INVALID_REQUEST, _UNSUPPORTED_VERSION, _UNSUPPORTED_COMPRESSION = 42, 35, 76
_INVALID_RECORD, _THROTTLED, _UNKNOWN_SUBSCRIPTION, _TOO_LARGE = 87, 89, 117, 118


class TelemetryState(Enum):
    """Java's ``ClientTelemetryState``."""

    SUBSCRIPTION_NEEDED = "subscription needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription in progress"
    PUSH_NEEDED = "push needed"
    PUSH_IN_PROGRESS = "push in progress"
    TERMINATING_PUSH_NEEDED = "terminating push needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating push in progress"
    TERMINATED = "terminated"


_S = TelemetryState
TRANSITIONS: Mapping[TelemetryState, frozenset[TelemetryState]] = {
    _S.SUBSCRIPTION_NEEDED: frozenset(
        {_S.SUBSCRIPTION_IN_PROGRESS, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED}
    ),
    _S.SUBSCRIPTION_IN_PROGRESS: frozenset(
        {_S.PUSH_NEEDED, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED}
    ),
    _S.PUSH_NEEDED: frozenset(
        {_S.PUSH_IN_PROGRESS, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED}
    ),
    _S.PUSH_IN_PROGRESS: frozenset(
        {_S.PUSH_NEEDED, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED}
    ),
    _S.TERMINATING_PUSH_NEEDED: frozenset({_S.TERMINATING_PUSH_IN_PROGRESS, _S.TERMINATED}),
    _S.TERMINATING_PUSH_IN_PROGRESS: frozenset({_S.TERMINATED}),
    _S.TERMINATED: frozenset(),
}
"""Allowed moves (Java's ``ClientTelemetryState.validateTransition``)."""
_IN_PROGRESS = frozenset(
    {_S.SUBSCRIPTION_IN_PROGRESS, _S.PUSH_IN_PROGRESS, _S.TERMINATING_PUSH_IN_PROGRESS}
)


@dataclass(frozen=True, slots=True)
class TelemetrySubscription:
    """What a GetTelemetrySubscriptions answer asks of this client."""

    client_instance_id: uuid.UUID
    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    requested_metrics: tuple[str, ...]

    @property
    def wants_metrics(self) -> bool:
        """False for an empty ``requested_metrics``: no metric is subscribed."""
        return bool(self.requested_metrics)

    def selects(self, name: str) -> bool:
        """Whether the metric ``name`` is subscribed: a requested prefix matches it. An
        empty string (KIP-714's message definition) or ``*`` (Kafka's and librdkafka's
        "all metrics") selects every name."""
        return any(p == "*" or name.startswith(p) for p in self.requested_metrics)


def error_interval_ms(error_code: int, interval_ms: int) -> int:
    """How long to wait after a telemetry answer with ``error_code`` (Java's
    ``ClientTelemetryUtils.maybeFetchErrorIntervalMs``): INVALID_REQUEST, INVALID_RECORD,
    UNSUPPORTED_VERSION and unknown errors stop telemetry (:data:`NEVER_MS`);
    UNKNOWN_SUBSCRIPTION_ID and UNSUPPORTED_COMPRESSION_TYPE ask again at once;
    TELEMETRY_TOO_LARGE and THROTTLING_QUOTA_EXCEEDED wait one push interval."""
    if error_code in (_UNKNOWN_SUBSCRIPTION, _UNSUPPORTED_COMPRESSION):
        return 0
    if error_code in (_TOO_LARGE, _THROTTLED):
        return interval_ms if interval_ms > 0 else DEFAULT_PUSH_INTERVAL_MS
    return NEVER_MS  # INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION, anything else


def preferred_compression(accepted: Sequence[int]) -> CompressionType:
    """The first of the broker's accepted codecs kclient can write (its optional package
    installed), else none."""
    for code in accepted:
        try:
            codec = CompressionType(code)
            ensure_available(codec)
        except Exception:  # an unknown code, or a codec whose package is missing
            continue
        return codec
    return CompressionType.NONE


class ClientTelemetryReporter:
    """The KIP-714 state machine of one producer (Java's ``DefaultClientTelemetrySender``).

    ``collect(subscription, now_ms)`` returns the selected metrics as ``MetricsData``
    (``telemetry_metrics.TelemetryMetrics.collect``). ``rng`` jitters the first push.
    """

    def __init__(
        self,
        collect: Callable[[TelemetrySubscription, int, bool], MetricsData],
        *,
        retry_backoff_ms: int,
        rng: random.Random | None = None,
        log_prefix: str = "",
    ) -> None:
        self._collect = collect
        self._retry_backoff_ms = retry_backoff_ms
        self._rng = rng if rng is not None else random.Random()
        self._prefix = log_prefix
        self.state = TelemetryState.SUBSCRIPTION_NEEDED
        self.subscription: TelemetrySubscription | None = None
        self.next_update_ms = 0
        """When the next request is due (monotonic ms)."""
        self._instance_id_ready = threading.Event()
        self._jitter = True
        self.pushes = 0
        """Pushes answered without error (for tests and logs)."""

    # ---- state ---------------------------------------------------------------------------

    def _move(self, to: TelemetryState) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalStateError(f"telemetry: no move from {self.state.value} to {to.value}")
        self.state = to

    def _wait(self, to: TelemetryState, delay_ms: int, now_ms: int) -> None:
        self._move(to)
        self.next_update_ms = now_ms + delay_ms if delay_ms < NEVER_MS else 2**63 - 1
        if delay_ms >= NEVER_MS:
            self._instance_id_ready.set()  # stopped: waiters get what there is

    @property
    def stopped(self) -> bool:
        """Nothing more will be sent (terminated, or stopped by an error)."""
        return self.state is TelemetryState.TERMINATED or self.next_update_ms == 2**63 - 1

    def stop(self, reason: str, now_ms: int, level: int = logging.INFO) -> None:
        """Send nothing more (the cluster does not accept telemetry, or a fatal answer)."""
        log.log(level, "%sclient metrics push stops: %s", self._prefix, reason)
        if self.state is not TelemetryState.TERMINATED:
            self._move(TelemetryState.TERMINATED)
        self.next_update_ms = 2**63 - 1
        self._instance_id_ready.set()

    def time_to_next_update_ms(self, now_ms: int) -> int:
        """Ms until a request is due (0: now)."""
        if self.state in _IN_PROGRESS or self.state is TelemetryState.TERMINATED:
            return NEVER_MS
        return max(0, min(self.next_update_ms - now_ms, NEVER_MS))

    # ---- requests ------------------------------------------------------------------------

    def create_request(self, now_ms: int) -> tuple[int, dict[str, Any]] | None:
        """The request due now as (api key, body), moving to its IN_PROGRESS state; None
        when nothing is to be sent (the subscription selects no metric: ask again later)."""
        state = self.state
        sub = self.subscription
        if state is TelemetryState.SUBSCRIPTION_NEEDED:
            self._move(TelemetryState.SUBSCRIPTION_IN_PROGRESS)
            instance_id = sub.client_instance_id if sub is not None else ZERO_UUID
            return ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": instance_id}
        if state not in (TelemetryState.PUSH_NEEDED, TelemetryState.TERMINATING_PUSH_NEEDED):
            return None
        assert sub is not None  # a push is only ever due under a subscription
        terminating = state is TelemetryState.TERMINATING_PUSH_NEEDED
        if not sub.wants_metrics and not terminating:
            self._wait(TelemetryState.SUBSCRIPTION_NEEDED, sub.push_interval_ms, now_ms)
            return None
        payload = encode_metrics_data(self._collect(sub, now_ms, terminating))
        codec = preferred_compression(sub.accepted_compression_types)
        if codec is not CompressionType.NONE:
            try:
                payload = compress(codec, payload)
            except Exception as exc:  # as Java: the push goes uncompressed instead
                log.debug("%stelemetry: %s compression failed (%s)", self._prefix, codec, exc)
                codec = CompressionType.NONE
        self._move(
            TelemetryState.TERMINATING_PUSH_IN_PROGRESS
            if terminating
            else TelemetryState.PUSH_IN_PROGRESS
        )
        return ApiKey.PUSH_TELEMETRY, {
            "client_instance_id": sub.client_instance_id,
            "subscription_id": sub.subscription_id,
            "terminating": terminating,
            "compression_type": int(codec),
            "metrics": payload,
        }

    # ---- answers -------------------------------------------------------------------------

    def handle_subscriptions_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        """A GetTelemetrySubscriptions answer."""
        if self.state is not TelemetryState.SUBSCRIPTION_IN_PROGRESS:
            return  # closing meanwhile: the terminating push decides
        code = body["error_code"]
        if code:
            self._on_error(code, now_ms, "GetTelemetrySubscriptions")
            return
        old = self.subscription
        instance_id = body["client_instance_id"]
        if instance_id == ZERO_UUID and old is not None:
            instance_id = old.client_instance_id  # the broker kept the one it gave before
        if instance_id == ZERO_UUID:
            self.stop("the broker assigned no client instance id", now_ms)
            return
        sub = TelemetrySubscription(
            instance_id,
            body["subscription_id"],
            tuple(body["accepted_compression_types"]),
            body["push_interval_ms"],
            body["telemetry_max_bytes"],
            body["delta_temporality"],
            tuple(body["requested_metrics"]),
        )
        self.subscription = sub
        self._instance_id_ready.set()
        interval_ms = sub.push_interval_ms
        if self._jitter:  # Java staggers the first push over [0.5, 1.5) intervals
            self._jitter = False
            interval_ms = int(interval_ms * self._rng.uniform(0.5, 1.5))
        log.debug(
            "%stelemetry subscription %d: %d metric prefix(es), push every %d ms",
            self._prefix,
            sub.subscription_id,
            len(sub.requested_metrics),
            sub.push_interval_ms,
        )
        if sub.wants_metrics:
            self._wait(TelemetryState.PUSH_NEEDED, interval_ms, now_ms)
        else:  # nothing subscribed: ask again after the interval
            self._wait(TelemetryState.SUBSCRIPTION_NEEDED, interval_ms, now_ms)

    def handle_push_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        """A PushTelemetry answer."""
        if self.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS:
            if body["error_code"]:
                log.debug(
                    "%sthe terminating telemetry push failed: %s",
                    self._prefix,
                    error_name(body["error_code"]),
                )
            self._move(TelemetryState.TERMINATED)
            return
        if self.state is not TelemetryState.PUSH_IN_PROGRESS:
            return
        code = body["error_code"]
        if code:
            self._on_error(code, now_ms, "PushTelemetry")
            return
        self.pushes += 1
        sub = self.subscription
        assert sub is not None
        self._wait(TelemetryState.PUSH_NEEDED, sub.push_interval_ms, now_ms)

    def _on_error(self, code: int, now_ms: int, api: str) -> None:
        sub = self.subscription
        delay_ms = error_interval_ms(code, sub.push_interval_ms if sub is not None else -1)
        if delay_ms >= NEVER_MS:
            log.warning(
                "%s%s failed with %s, which retrying cannot resolve: client metrics push stops",
                self._prefix,
                api,
                error_name(code),
            )
        else:
            log.debug("%s%s failed: %s", self._prefix, api, error_name(code))
        self._wait(TelemetryState.SUBSCRIPTION_NEEDED, delay_ms, now_ms)

    def handle_failed_request(self, response: ClientResponse, now_ms: int) -> None:
        """The request got no answer: disconnected or timed out (ask for the subscription
        again after ``retry.backoff.ms``), or no version both sides speak (stop)."""
        if self.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS:
            self._move(TelemetryState.TERMINATED)
            return
        if self.state not in _IN_PROGRESS:
            return
        if response.version_mismatch is not None:
            self.stop(str(response.version_mismatch), now_ms)
            return
        self._wait(TelemetryState.SUBSCRIPTION_NEEDED, self._retry_backoff_ms, now_ms)

    # ---- close, instance id --------------------------------------------------------------

    def initiate_close(self, now_ms: int) -> None:
        """The producer is closing: one last push with ``terminating`` set, if there is a
        subscription that wants metrics; otherwise nothing more (Java's ``initiateClose``)."""
        sub = self.subscription
        if self.state in (TelemetryState.TERMINATED, TelemetryState.TERMINATING_PUSH_NEEDED):
            return
        if self.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS:
            return
        if sub is None or not sub.wants_metrics or self.stopped:
            self._move(TelemetryState.TERMINATED)
            self._instance_id_ready.set()
            return
        self._move(TelemetryState.TERMINATING_PUSH_NEEDED)
        self.next_update_ms = now_ms

    def client_instance_id(self, timeout_s: float) -> uuid.UUID | None:
        """The id the broker assigned, waiting up to ``timeout_s`` for it (any thread);
        None if none came (the cluster does not accept client metrics, or the time ran
        out)."""
        self._instance_id_ready.wait(timeout_s)
        sub = self.subscription
        return sub.client_instance_id if sub is not None else None


class TelemetrySender:
    """Sends the reporter's requests through the Sender's client (Java's
    ``NetworkClient.TelemetrySender``): one in flight at most, to the least-loaded node."""

    def __init__(
        self,
        reporter: ClientTelemetryReporter,
        client: KafkaClient,
        *,
        request_timeout_ms: int,
        monotonic_ms: Callable[[], int],
        log_prefix: str = "",
    ) -> None:
        self.reporter = reporter
        self._client = client
        self._request_timeout_ms = request_timeout_ms
        self._monotonic_ms = monotonic_ms
        self._prefix = log_prefix

    def maybe_update(self, now_ms: int) -> int:
        """Send the due request if a node is ready for it; returns ms until this should be
        called again (the Sender polls no longer than that)."""
        reporter = self.reporter
        wait_ms = reporter.time_to_next_update_ms(now_ms)
        if wait_ms > 0:
            return wait_ms
        client = self._client
        node = client.least_loaded_node(now_ms)
        if node is None:
            return self._request_timeout_ms if client.has_in_flight_requests() else 100
        if not client.ready(node, now_ms):
            return max(client.poll_delay_ms(node, now_ms), 1)
        versions = client.api_versions(node.id)
        if (
            versions is None
            or versions.max_version(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS) is None
            or versions.max_version(ApiKey.PUSH_TELEMETRY) is None
        ):
            reporter.stop(
                f"node {node.id} does not accept client metrics (its ApiVersions lacks "
                "GetTelemetrySubscriptions or PushTelemetry: no client-telemetry plugin)",
                now_ms,
                logging.DEBUG,  # the usual case: no broker plugin, nothing to say
            )
            return NEVER_MS
        try:
            request = reporter.create_request(now_ms)
        except Exception as exc:  # a metric that cannot be read must not stop the producer
            log.warning("%sclient metrics push failed", self._prefix, exc_info=True)
            reporter.stop(f"building the push failed: {exc!r}", now_ms, logging.WARNING)
            return NEVER_MS
        if request is None:
            return reporter.time_to_next_update_ms(now_ms)
        api_key, body = request
        handle = (
            reporter.handle_subscriptions_response
            if api_key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
            else reporter.handle_push_response
        )

        def on_complete(response: ClientResponse) -> None:
            done_ms = self._monotonic_ms()
            try:
                if response.body is None:
                    reporter.handle_failed_request(response, done_ms)
                else:
                    handle(response.body, done_ms)
            except Exception as exc:  # never the producer's problem
                log.warning("%sclient metrics push failed", self._prefix, exc_info=True)
                reporter.stop(f"handling {response!r} failed: {exc!r}", done_ms, logging.WARNING)

        log.debug("%ssending %s to node %d", self._prefix, ApiKey(api_key).name, node.id)
        client.send(
            ClientRequest(
                node.id,
                api_key,
                body,
                now_ms,
                callback=on_complete,
                request_timeout_ms=self._request_timeout_ms,
            ),
            now_ms,
        )
        return self._request_timeout_ms
