"""KIP-714 metrics push, kclient → the embedded broker: nothing is sent to a broker without
client telemetry; with it, pushes arrive decoded with the subscribed metrics, the last one
terminating, and ``client_instance_id`` is the id the broker gave."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from integration.broker.test_processor import recv_exactly
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.protocol.types import ZERO_UUID

PREFIX = "org.apache.kafka.producer.record.send"


def test_no_push_to_a_broker_without_client_telemetry() -> None:
    with EmbeddedBroker() as broker:
        broker.create_topic("t", 1)
        with KafkaProducer(bootstrap_servers=broker.bootstrap_servers) as producer:
            producer.send("t", b"v").get(10)
            assert producer.client_instance_id(5) is None
        assert broker.client_metrics is None


def test_pushes_arrive_decoded_and_the_last_is_terminating() -> None:
    with EmbeddedBroker(
        client_telemetry=True,
        client_telemetry_metrics=(PREFIX,),
        client_telemetry_push_interval_ms=300,
    ) as broker:
        broker.create_topic("t", 1)
        with KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, client_id="tele"
        ) as producer:
            instance_id = producer.client_instance_id(10)
            assert instance_id is not None
            producer.send("t", b"v").get(10)
            deadline = time.monotonic() + 10
            while len(broker.telemetry()) < 2:
                assert time.monotonic() < deadline, "no pushes within 10 s"
                time.sleep(0.05)
        pushes = broker.telemetry()
        assert all(p.error is None for p in pushes)
        assert {p.client_instance_id for p in pushes} == {instance_id}
        assert {p.client_id for p in pushes} == {"tele"}
        names = pushes[-1].metric_names()
        assert PREFIX + ".total" in names and PREFIX + ".rate" in names
        assert all(n.startswith(PREFIX) for p in pushes for n in p.metric_names())
        assert [p.terminating for p in pushes][-1] is True
        assert not any(p.terminating for p in pushes[:-1])
        total = next(m for m in pushes[-1].metrics.metrics() if m.name == PREFIX + ".total")
        assert total.points[0].value >= 1.0  # the record sent


def test_the_asyncio_producer_pushes_and_terminates_on_stop() -> None:
    async def run(bootstrap: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("t", b"v")
            await asyncio.sleep(0.6)  # a push or two at 300 ms
        finally:
            await producer.stop()

    with EmbeddedBroker(
        client_telemetry=True,
        client_telemetry_metrics=(PREFIX,),
        client_telemetry_push_interval_ms=300,
    ) as broker:
        broker.create_topic("t", 1)
        asyncio.run(run(broker.bootstrap_servers))
        pushes = broker.telemetry()
        assert len(pushes) >= 2
        assert pushes[-1].terminating and not any(p.terminating for p in pushes[:-1])


def _call(sock: socket.socket, api_key: int, body: dict[str, Any], correlation_id: int) -> Any:
    sock.sendall(b"".join(encode_request(api_key, 0, correlation_id, "raw", body)))
    size = int.from_bytes(recv_exactly(sock, 4), "big")
    return decode_response(api_key, 0, recv_exactly(sock, size))[1]


def test_bad_pushes_are_refused_and_the_broker_goes_on() -> None:
    with EmbeddedBroker(client_telemetry=True) as broker:
        host, port = broker.bootstrap_servers.split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sub = _call(
                sock, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": ZERO_UUID}, 1
            )
            push = {
                "client_instance_id": sub["client_instance_id"],
                "subscription_id": sub["subscription_id"],
                "terminating": False,
                "compression_type": 0,
                "metrics": b"\x0a\xff\xff\xff",  # a length past the end
            }
            assert _call(sock, ApiKey.PUSH_TELEMETRY, push, 2)["error_code"] == 87
            gzip_garbage = {**push, "compression_type": 1, "metrics": b"not gzip at all"}
            assert _call(sock, ApiKey.PUSH_TELEMETRY, gzip_garbage, 3)["error_code"] == 87
        assert [p.error is not None for p in broker.telemetry()] == [True, True]
        broker.create_topic("t", 1)
        with KafkaProducer(bootstrap_servers=broker.bootstrap_servers) as producer:
            assert producer.send("t", b"v").get(10).offset == 0
