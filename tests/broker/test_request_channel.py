"""RequestChannel: bounded request queue, per-processor response queues, metrics, handlers."""

from __future__ import annotations

import threading

from kclient.broker.handler import RequestHandlerPool
from kclient.broker.metrics import BrokerMetrics, Histogram, Meter, format_snapshot
from kclient.broker.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    SendResponse,
    ShutdownRequest,
    api_metric_name,
)
from kclient.protocol import RequestHeader


class Clock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def make_request(
    processor: int = 0, corr: int = 1, metrics: BrokerMetrics | None = None
) -> Request:
    return Request(
        processor=processor,
        connection_id=f"conn-{corr}",
        header=RequestHeader(3, 12, corr, "c"),
        body={},
        frame=b"",
        start_time_ns=0,
        metrics=metrics,
        api_name="Metadata",
    )


def test_the_request_queue_is_bounded() -> None:
    channel = RequestChannel(2)
    assert channel.send_request(make_request(corr=1))
    assert channel.send_request(make_request(corr=2))
    assert not channel.send_request(make_request(corr=3), timeout_s=0)  # full: refused at once
    assert channel.request_queue_size() == 2
    first = channel.receive_request(0.01)
    assert isinstance(first, Request) and first.header.correlation_id == 1
    assert channel.send_request(make_request(corr=3), timeout_s=0.05)


def test_receive_request_times_out_with_none_and_stamps_dequeue_time() -> None:
    clock = Clock()
    channel = RequestChannel(5, monotonic_ns=clock)
    assert channel.receive_request(0) is None  # empty: no wait
    channel.send_request(make_request())
    clock.ns = 42
    request = channel.receive_request(0.01)
    assert isinstance(request, Request) and request.request_dequeue_time_ns == 42


def test_responses_go_to_the_processor_that_read_the_request() -> None:
    woken: list[int] = []
    channel = RequestChannel(5)
    channel.add_processor(0, lambda: woken.append(0))
    channel.add_processor(1, lambda: woken.append(1))
    channel.send_response(NoOpResponse(make_request(processor=1)))
    channel.send_response(CloseConnectionResponse(make_request(processor=0)))
    assert woken == [1, 0]
    assert isinstance(channel.receive_response(1), NoOpResponse)
    assert isinstance(channel.receive_response(0), CloseConnectionResponse)
    assert channel.receive_response(0) is None
    channel.remove_processor(1)
    channel.send_response(NoOpResponse(make_request(processor=1)))  # dropped, no error
    assert channel.receive_response(1) is None


def test_request_metrics_split_the_time_into_stages() -> None:
    clock = Clock()
    metrics = BrokerMetrics(0, 0)
    channel = RequestChannel(5, metrics, monotonic_ns=clock)
    channel.add_processor(0, lambda: None)
    request = make_request(metrics=metrics)
    channel.send_request(request)
    clock.ns = 2_000_000  # 2 ms in the queue
    channel.receive_request(0.01)
    request.api_local_complete_time_ns = 5_000_000  # 3 ms local
    clock.ns = 5_000_000
    channel.send_response(SendResponse(request, [b"x"]))
    clock.ns = 6_000_000  # 1 ms in the response queue
    channel.receive_response(0)
    request.update_request_metrics(10_000_000)  # 4 ms to send
    snap = metrics.snapshot(10_000_000).requests["Metadata"]
    assert snap.requests == 1
    assert snap.request_queue_time_ms.mean_ms == 2.0
    assert snap.local_time_ms.mean_ms == 3.0
    assert snap.remote_time_ms.mean_ms == 0.0
    assert snap.response_queue_time_ms.mean_ms == 1.0
    assert snap.response_send_time_ms.mean_ms == 4.0
    assert snap.total_time_ms.mean_ms == 10.0
    assert "Metadata" in format_snapshot(metrics.snapshot(10_000_000))


def test_meter_and_histogram() -> None:
    meter = Meter(0)
    for i in range(10):
        meter.mark(i * 1_000_000_000)
    assert meter.count == 10
    assert 0.9 < meter.mean_rate(10_000_000_000) < 1.1
    assert meter.one_minute_rate(10_000_000_000) > 0
    h = Histogram()
    for v in range(1, 101):
        h.update(float(v))
    assert (h.count, h.mean, h.max, h.percentile(0.99)) == (100, 50.5, 100.0, 99.0)


def test_api_metric_names() -> None:
    assert api_metric_name("API_VERSIONS") == "ApiVersions"
    assert api_metric_name("PRODUCE") == "Produce"


class _Apis:
    def __init__(self, channel: RequestChannel) -> None:
        self.channel = channel
        self.seen: list[int] = []

    def handle(self, request: Request) -> None:
        if request.header.correlation_id == 13:
            raise RuntimeError("boom")
        self.seen.append(request.header.correlation_id)
        self.channel.send_response(NoOpResponse(request))


def test_handler_pool_handles_requests_and_survives_errors() -> None:
    channel = RequestChannel(10)
    queued = threading.Condition()
    wakeups = 0

    def wakeup() -> None:  # the Processor's wakeup: called once a response is queued for it
        nonlocal wakeups
        with queued:
            wakeups += 1
            queued.notify_all()

    channel.add_processor(0, wakeup)
    apis = _Apis(channel)
    pool = RequestHandlerPool(channel, apis, 2, name_prefix="test")
    pool.start()
    try:
        for corr in (1, 13, 2):
            channel.send_request(make_request(corr=corr))
        with queued:
            assert queued.wait_for(lambda: wakeups >= 3, timeout=5), f"{wakeups} responses"
        responses = [channel.receive_response(0) for _ in range(3)]
        assert channel.receive_response(0) is None
        kinds = {r.request.header.correlation_id: type(r) for r in responses if r is not None}
        assert kinds == {1: NoOpResponse, 2: NoOpResponse, 13: CloseConnectionResponse}
        assert sorted(apis.seen) == [1, 2]
    finally:
        pool.shutdown()
    assert not any(h.thread.is_alive() for h in pool.handlers)


def test_shutdown_request_is_a_singleton_marker() -> None:
    channel = RequestChannel(2)
    channel.send_shutdown_request()
    assert channel.receive_request(0.01) is ShutdownRequest
