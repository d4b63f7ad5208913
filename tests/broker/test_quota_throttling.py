"""Requests over their client's quotas: the throttle time in the answer (and on the request,
for the Processor to mute the connection), a throttled Fetch without records, the request
quota on every API, the throttle-time metrics. Apis with a fake clock, no sockets."""

from __future__ import annotations

from typing import Any

from kclient.broker.client_quotas import entity
from kclient.broker.metrics import BrokerMetrics, format_snapshot
from kclient.broker.request_channel import NoOpResponse, SendResponse
from kclient.protocol import ApiKey

from .conftest import ApiHarness, batch

ONE_KB = [b"x" * 1000]


def produce(h: ApiHarness, client_id: str = "app", acks: int = 1, version: int = 9) -> Any:
    body = {
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(ONE_KB)}]}],
    }
    request = h.request(ApiKey.PRODUCE, version, body, client_id)
    return request, h.handle(request)


def test_a_producer_over_its_byte_rate_is_told_to_wait(make_harness: Any) -> None:
    h = make_harness(quota_producer_byte_rate=300)  # 3 KB per 10 s window
    h.controller.create_topic("t", 1)
    throttles = []
    for _ in range(6):
        request, response = produce(h)
        assert isinstance(response, SendResponse)
        body = h.decode(response)
        assert body["responses"][0]["partition_responses"][0]["error_code"] == 0  # stored
        assert body["throttle_time_ms"] == request.throttle_time_ms
        throttles.append(body["throttle_time_ms"])
    assert throttles[:2] == [0, 0]
    assert all(t > 0 for t in throttles[3:])
    assert throttles == sorted(throttles)  # the more it sends, the longer it waits
    # the throttle time is Kafka's: (rate - quota) / quota * window, the request's size counted
    size = request.size_bytes
    assert throttles[-1] == round((6 * size / 10 - 300) / 300 * 10_000)
    # another client id has its own quota
    request, response = produce(h, client_id="other")
    assert request.throttle_time_ms == 0


def test_an_acks_0_producer_over_its_byte_rate_gets_its_connection_muted(
    make_harness: Any,
) -> None:
    h = make_harness(quota_producer_byte_rate=100)
    h.controller.create_topic("t", 1)
    produce(h, acks=0)
    _, response = produce(h, acks=0)
    assert isinstance(response, NoOpResponse)  # nothing to send, but the throttle stands
    assert response.request.throttle_time_ms > 0


def test_a_consumer_over_its_byte_rate_gets_no_records_until_it_waited(
    make_harness: Any,
) -> None:
    h = make_harness(quota_consumer_byte_rate=500)  # 5 KB per window
    h.controller.create_topic("t", 1)
    for _ in range(8):
        h.produce("t", batch(ONE_KB))

    def fetch(offset: int, max_bytes: int = 50 << 20) -> tuple[int, dict[str, Any]]:
        body = h.fetch_body("t", offset, partition_max_bytes=1 << 20, max_bytes=max_bytes)
        request = h.request(ApiKey.FETCH, 12, body, "consumer")
        response = h.handle(request)
        assert isinstance(response, SendResponse)
        return request.throttle_time_ms, h.decode(response)

    throttle, body = fetch(0)
    assert throttle == 0
    # asked for 50 MB, given at most what one window of the quota allows (and whole batches)
    records = body["responses"][0]["partitions"][0]["records"]
    assert 4000 < len(records) <= 5000
    throttle, body = fetch(4)
    assert throttle > 0 and body["throttle_time_ms"] == throttle
    assert body["responses"] == []  # throttled: no records, and none counted
    # a consumer that waits each throttle time out gets its records once its rate
    # (both answers' bytes) is back within the quota
    waited_ms = 0
    for _ in range(5):
        h.clock.advance(throttle)
        waited_ms += throttle
        throttle, body = fetch(4)
        if not throttle:
            break
    assert throttle == 0
    assert body["responses"][0]["partitions"][0]["records"]
    assert waited_ms >= 2 * len(records) / 500 * 1000 - 10_000


def test_every_api_counts_against_the_request_quota(make_harness: Any) -> None:
    h = make_harness(quota_request_percentage=10)
    # a Metadata request that took its handler thread 5 s: 50 % of 10 s against 10 %
    request = h.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    request.request_dequeue_time_ns = h.clock.monotonic_ns()
    h.clock.advance(5000)
    response = h.handle(request)
    assert isinstance(response, SendResponse)
    assert h.decode(response)["throttle_time_ms"] == 1000  # at most one window
    assert request.throttle_time_ms == 1000
    # a quick one from another client is not throttled
    quick = h.request(
        ApiKey.API_VERSIONS,
        3,
        {"client_software_name": "t", "client_software_version": "1"},
        "quick",
    )
    quick.request_dequeue_time_ns = h.clock.monotonic_ns()
    h.handle(quick)
    assert quick.throttle_time_ms == 0


def test_a_quota_set_at_run_time_applies_and_shows_in_the_metrics(make_harness: Any) -> None:
    h = make_harness()
    h.controller.create_topic("t", 1)
    for _ in range(4):
        request, _ = produce(h)
        assert request.throttle_time_ms == 0  # no quota
    h.client_quotas.set(entity(client_id="app"), {"producer_byte_rate": 100})
    for _ in range(3):
        request, _ = produce(h)
    assert request.throttle_time_ms > 0
    metrics = BrokerMetrics(0, 0)
    metrics.set_client_quotas_source(h.quotas[0].metrics)
    snap = metrics.snapshot(h.clock.monotonic_ns())
    (m,) = snap.client_quotas
    assert (m.quota_type, m.client_id, m.quota) == ("Produce", "app", 100)
    assert m.throttle_count == 3 and m.throttle_time_ms_total > 0
    assert "quota Produce user=- client-id=app" in format_snapshot(snap)


def test_the_network_threads_time_counts_in_the_request_quota(make_harness: Any) -> None:
    h = make_harness(quota_request_percentage=10)
    body = {"topics": [], "allow_auto_topic_creation": False}
    # reading the request cost its Processor 0.9 s: 9 % of the 10 s measured, not over
    request = h.request(ApiKey.METADATA, 12, body, "net")
    request.network_thread_time_ns = 900_000_000
    h.handle(request)
    assert request.throttle_time_ms == 0
    # sending its answer cost another 0.5 s (the Processor reports it afterwards): the
    # next request of that client is over its quota, though it cost nothing itself
    assert request.record_network_thread_time is not None
    request.record_network_thread_time(500_000_000, h.clock.monotonic_ns())
    again = h.request(ApiKey.METADATA, 12, body, "net")
    h.handle(again)
    # (14 % - 10 %) / 10 % * 10 s = 4 s, bounded by one window
    assert again.throttle_time_ms == 1000
