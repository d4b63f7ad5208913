"""KIP-714 metrics push (kclient.sender.telemetry): the state machine driven through the
Sender's loop on a MockClient and a MockClock — what is sent, when, and after which answer."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kclient.errors import IllegalStateError
from kclient.network.api_versions import NodeApiVersions
from kclient.network.kafka_client import ClientRequest
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.otlp import CUMULATIVE, DELTA, MetricsData, decode_metrics_data
from kclient.record.compression import CompressionType, decompress
from kclient.sender.telemetry import (
    NEVER_MS,
    TRANSITIONS,
    ClientTelemetryReporter,
    TelemetrySender,
    TelemetryState,
    error_interval_ms,
)
from kclient.sender.telemetry_metrics import TelemetryMetrics, telemetry_name
from tests.sender.sender_helpers import Harness, make

INSTANCE = uuid.UUID("11111111-2222-3333-4444-555555555555")
INTERVAL_MS = 10_000
PREFIX = "org.apache.kafka.producer."


def subscription(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "client_instance_id": INSTANCE,
        "subscription_id": 7,
        "accepted_compression_types": [],
        "push_interval_ms": INTERVAL_MS,
        "telemetry_max_bytes": 1 << 20,
        "delta_temporality": False,
        "requested_metrics": [PREFIX + "record.send"],
    }
    body.update(overrides)
    return body


class Setup:
    """A Sender with telemetry; ``values`` are the producer's metrics the push reads."""

    def __init__(self, *, telemetry_apis: bool = True, seed: int = 1) -> None:
        self.h: Harness = make()
        if telemetry_apis:
            self.h.client.set_node_api_versions(
                NodeApiVersions({int(k): v for k, v in SUPPORTED_VERSIONS.items()})
            )
        self.values = {"record-send-total": 10.0, "record-send-rate": 2.5, "batch-size-avg": 9.0}
        clock = self.h.clock
        self.metrics = TelemetryMetrics(
            lambda: self.values, lambda: clock.time_ms() * 1_000_000, (("client_id", "p1"),)
        )
        self.reporter = ClientTelemetryReporter(
            self.metrics.collect, retry_backoff_ms=100, rng=random.Random(seed)
        )
        self.h.sender.telemetry = TelemetrySender(
            self.reporter, self.h.client, request_timeout_ms=30_000, monotonic_ms=clock.monotonic_ms
        )

    def run(self, times: int = 1) -> None:
        self.h.run(times)

    def telemetry_requests(self) -> list[ClientRequest]:
        return [
            r
            for r in self.h.client.sent
            if r.api_key in (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY)
        ]

    def last(self) -> ClientRequest:
        return self.telemetry_requests()[-1]

    def answer(self, body: dict[str, Any]) -> None:
        self.h.client.respond(body)
        self.run()

    def subscribe(self, **overrides: Any) -> None:
        self.run()
        assert self.last().api_key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
        self.answer(subscription(**overrides))

    def push_body(self) -> dict[str, Any]:
        request = self.last()
        assert request.api_key == ApiKey.PUSH_TELEMETRY
        return dict(request.body_for(0))

    def pushed(self) -> MetricsData:
        body = self.push_body()
        payload = body["metrics"]
        if body["compression_type"]:
            payload = decompress(CompressionType(body["compression_type"]), payload)
        return decode_metrics_data(payload)

    def until_push_or(self, done: Callable[[], bool]) -> None:
        """Advance in 100 ms steps until ``done()``."""
        for _ in range(10 * INTERVAL_MS // 100):
            if done():
                return
            self.h.clock.advance(100)
            self.run()
        raise AssertionError("never done")

    def until_push(self) -> int:
        """Advance in 100 ms steps until a push is sent; returns the ms waited."""
        waited = 0
        count = len(self.telemetry_requests())
        while len(self.telemetry_requests()) == count:
            self.h.clock.advance(100)
            waited += 100
            self.run()
            assert waited < 10 * INTERVAL_MS, "no push came"
        return waited


def test_nothing_is_sent_to_a_cluster_without_the_telemetry_apis() -> None:
    s = Setup(telemetry_apis=False)
    s.run(3)
    s.h.clock.advance(10 * INTERVAL_MS)
    s.run(3)
    assert s.telemetry_requests() == []
    assert s.reporter.stopped
    assert s.reporter.client_instance_id(0) is None


def test_nothing_is_sent_to_a_broker_listing_only_get_telemetry_subscriptions() -> None:
    s = Setup(telemetry_apis=False)  # as tansu: 71 listed, 72 not
    versions = {int(k): v for k, v in SUPPORTED_VERSIONS.items() if k != ApiKey.PUSH_TELEMETRY}
    s.h.client.set_node_api_versions(NodeApiVersions(versions))
    s.run(3)
    assert s.telemetry_requests() == []
    assert s.reporter.stopped


def test_first_request_asks_with_the_zero_uuid_then_pushes_the_subscribed_metrics() -> None:
    s = Setup()
    s.run()
    assert s.last().body_for(0)["client_instance_id"] == uuid.UUID(int=0)
    s.answer(subscription())
    assert s.reporter.client_instance_id(0) == INSTANCE
    assert s.reporter.state is TelemetryState.PUSH_NEEDED
    waited = s.until_push()
    assert INTERVAL_MS // 2 <= waited <= INTERVAL_MS * 3 // 2  # the first push is jittered
    body = s.push_body()
    assert (body["client_instance_id"], body["subscription_id"]) == (INSTANCE, 7)
    assert body["terminating"] is False and body["compression_type"] == 0
    data = s.pushed()
    # only the names the prefix selects
    assert data.metric_names() == [PREFIX + "record.send.rate", PREFIX + "record.send.total"]
    rate, total = data.metrics()
    assert not rate.sum and rate.points[0].value == 2.5
    assert total.sum and total.monotonic and total.temporality == CUMULATIVE
    assert total.points[0].value == 10.0
    assert data.resource_metrics[0].attributes == (("client_id", "p1"),)
    s.answer({"throttle_time_ms": 0, "error_code": 0})
    assert s.reporter.pushes == 1
    assert s.until_push() == INTERVAL_MS  # the next ones every push.interval.ms
    assert s.last().api_key == ApiKey.PUSH_TELEMETRY


def test_first_push_jitter_differs_between_clients() -> None:
    waits = set()
    for seed in range(4):
        s = Setup(seed=seed)
        s.subscribe()
        waits.add(s.until_push())
    assert len(waits) > 1


@pytest.mark.parametrize("everything", ["", "*"])
def test_an_empty_string_or_a_star_selects_every_metric(everything: str) -> None:
    s = Setup()
    s.subscribe(requested_metrics=[everything])
    s.until_push()
    assert sorted(s.pushed().metric_names()) == sorted(telemetry_name(n) for n in s.values)


def test_no_requested_metrics_means_no_push_and_a_new_subscription_later() -> None:
    s = Setup()
    s.subscribe(requested_metrics=[])
    s.until_push()
    assert s.last().api_key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
    assert s.last().body_for(0)["client_instance_id"] == INSTANCE  # the one it was given
    assert not any(r.api_key == ApiKey.PUSH_TELEMETRY for r in s.telemetry_requests())


def test_delta_temporality_pushes_what_changed_since_the_last_push() -> None:
    s = Setup()
    s.subscribe(delta_temporality=True)
    s.until_push()
    first = s.pushed().metrics()[1]
    assert first.temporality == DELTA and first.points[0].value == 10.0
    s.answer({"throttle_time_ms": 0, "error_code": 0})
    s.values["record-send-total"] = 25.0
    s.until_push()
    second = s.pushed().metrics()[1]
    assert second.points[0].value == 15.0
    assert second.points[0].start_time_unix_nano == first.points[0].time_unix_nano


def test_the_first_accepted_compression_kclient_writes_is_used() -> None:
    s = Setup()
    s.subscribe(accepted_compression_types=[99, int(CompressionType.GZIP), 4])
    s.until_push()
    assert s.push_body()["compression_type"] == int(CompressionType.GZIP)
    assert s.pushed().metric_names()  # decompresses and decodes


@pytest.mark.parametrize("code", [117, 76])  # UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION
def test_subscription_errors_ask_for_the_subscription_again_at_once(code: int) -> None:
    s = Setup()
    s.subscribe()
    s.until_push()
    s.answer({"throttle_time_ms": 0, "error_code": code})
    s.run()  # the answer came in the last loop's poll; this one asks
    assert s.last().api_key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
    assert s.last().body_for(0)["client_instance_id"] == INSTANCE


@pytest.mark.parametrize("code", [118, 89])  # TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED
def test_too_large_or_throttled_waits_a_push_interval(code: int) -> None:
    s = Setup()
    s.subscribe()
    s.until_push()
    s.answer({"throttle_time_ms": 0, "error_code": code})
    assert s.until_push() == INTERVAL_MS
    assert s.last().api_key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS


@pytest.mark.parametrize("code", [87, 42, 35, 1])  # INVALID_RECORD, INVALID_REQUEST, ...
def test_errors_retrying_cannot_resolve_stop_the_push(code: int) -> None:
    s = Setup()
    s.subscribe()
    s.until_push()
    s.answer({"throttle_time_ms": 0, "error_code": code})
    count = len(s.telemetry_requests())
    s.h.clock.advance(100 * INTERVAL_MS)
    s.run(3)
    assert len(s.telemetry_requests()) == count
    assert error_interval_ms(code, INTERVAL_MS) == NEVER_MS


def test_a_lost_connection_asks_again_after_the_retry_backoff() -> None:
    s = Setup()
    s.run()
    s.h.client.disconnect(s.last().destination)
    s.run()
    assert s.reporter.state is TelemetryState.SUBSCRIPTION_NEEDED
    count = len(s.telemetry_requests())
    s.h.clock.advance(100)
    s.run(2)  # reconnects, then asks
    assert len(s.telemetry_requests()) == count + 1


def test_closing_sends_one_terminating_push() -> None:
    s = Setup()
    s.subscribe()
    s.reporter.initiate_close(s.h.clock.monotonic_ms())
    s.run()
    body = s.push_body()
    assert body["terminating"] is True
    assert s.pushed().metric_names()
    s.answer({"throttle_time_ms": 0, "error_code": 0})
    assert s.reporter.state is TelemetryState.TERMINATED
    count = len(s.telemetry_requests())
    s.h.clock.advance(10 * INTERVAL_MS)
    s.run()
    assert len(s.telemetry_requests()) == count


def test_the_sender_closing_pushes_the_terminating_push_within_its_loop() -> None:
    s = Setup()
    s.subscribe()
    s.h.client.prepare_response(
        {"throttle_time_ms": 0, "error_code": 0}, api_key=ApiKey.PUSH_TELEMETRY
    )
    s.h.sender.initiate_close()
    s.h.sender.run()
    assert s.push_body()["terminating"] is True
    assert s.reporter.state is TelemetryState.TERMINATED


def test_closing_while_waiting_after_an_error_still_sends_the_terminating_push() -> None:
    s = Setup()
    s.subscribe()
    s.until_push()
    s.answer({"throttle_time_ms": 0, "error_code": 118})  # TELEMETRY_TOO_LARGE: wait
    assert s.reporter.state is TelemetryState.SUBSCRIPTION_NEEDED
    s.reporter.initiate_close(s.h.clock.monotonic_ms())
    s.run()
    assert s.push_body()["terminating"] is True


@pytest.mark.parametrize("state", list(TelemetryState), ids=lambda s: s.name)
@pytest.mark.parametrize("subscribed", [True, False])
def test_closing_is_allowed_from_every_state(state: TelemetryState, subscribed: bool) -> None:
    s = Setup()
    if subscribed:
        s.subscribe()
    s.reporter.state = state
    s.reporter.initiate_close(0)  # never raises: close() must always return
    assert s.reporter.state in (
        TelemetryState.TERMINATED,
        TelemetryState.TERMINATING_PUSH_NEEDED,
        TelemetryState.TERMINATING_PUSH_IN_PROGRESS,
    )


def test_a_metric_that_cannot_be_read_stops_the_push_not_the_producer() -> None:
    s = Setup()
    s.subscribe()

    def broken() -> dict[str, float]:
        raise RuntimeError("boom")

    s.metrics._snapshot = broken
    s.until_push_or(lambda: s.reporter.stopped)
    assert s.reporter.stopped
    assert s.h.sender.running  # the Sender goes on
    s.run()


def test_closing_without_a_subscription_sends_nothing() -> None:
    s = Setup()
    s.reporter.initiate_close(0)
    s.run(2)
    assert s.telemetry_requests() == []
    assert s.reporter.state is TelemetryState.TERMINATED


def test_moves_outside_the_table_are_refused() -> None:
    reporter = ClientTelemetryReporter(lambda sub, now, term: MetricsData(), retry_backoff_ms=100)
    assert TelemetryState.PUSH_IN_PROGRESS not in TRANSITIONS[TelemetryState.SUBSCRIPTION_NEEDED]
    with pytest.raises(IllegalStateError, match="no move"):
        reporter._move(TelemetryState.PUSH_IN_PROGRESS)
    assert all(TelemetryState.TERMINATED in v for s, v in TRANSITIONS.items() if v)
