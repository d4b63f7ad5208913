"""Fixtures for the broker's unit tests: Apis, Controller and RequestChannel with no sockets,
no threads and a fake clock."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from kclient.broker.apis import Apis
from kclient.broker.client_quotas import ClientQuotas
from kclient.broker.config import BrokerConfig
from kclient.broker.controller import BrokerEndpoint, Controller
from kclient.broker.purgatory import DelayedOperationPurgatory
from kclient.broker.quota_factory import QuotaManagers
from kclient.broker.request_channel import Request, RequestChannel, Response, SendResponse
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_request, decode_response, encode_request
from kclient.record import RecordBatchBuilder
from kclient.testing import MockClock

NOW_MS = 1_700_000_000_000


def batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    compression: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int = NOW_MS,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    """One v2 record batch as a client would send it (base offset 0)."""
    builder = RecordBatchBuilder(compression, batch_size=1 << 30)
    if producer_id >= 0:
        builder.set_producer_state(producer_id, producer_epoch, base_sequence)
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        builder.append(timestamp_ms + i, key, value, headers)
    return builder.build()


class ApiHarness:
    """An Apis per broker over one Controller, answering into one RequestChannel.

    Wall time is ``now_ms``; monotonic time is ``clock``, shared by the Apis and the fetch
    purgatory, which runs no reaper thread: ``clock.advance`` then ``purgatory.expire_due()``
    expires the long polls whose ``max_wait_ms`` passed.
    """

    def __init__(self, brokers: int = 1, **settings: Any) -> None:
        self.config = BrokerConfig(**settings)
        self.now_ms = NOW_MS
        self.clock = MockClock()
        self.controller = Controller(self.config, range(brokers))
        for node in range(brokers):
            self.controller.broker_started(BrokerEndpoint(node, "127.0.0.1", 9092 + node))
        self.purgatory = DelayedOperationPurgatory("test-fetch", self.clock.monotonic_ns)
        self.purgatory.start(reaper_thread=False)
        self.controller.add_append_listener(self.purgatory.check_and_complete)
        self.channel = RequestChannel(100)
        self.channel.add_processor(0, lambda: None)
        #: the cluster's client quotas (broker defaults from ``settings``) and one set of
        #: quota managers per broker
        self.client_quotas = ClientQuotas(self.config.quota_defaults())
        self.quotas = [
            QuotaManagers(
                self.client_quotas,
                num_samples=self.config.quota_window_num,
                window_size_seconds=self.config.quota_window_size_seconds,
            )
            for _ in range(brokers)
        ]
        self.apis = [
            Apis(
                node,
                self.controller,
                self.channel,
                self.purgatory,
                self.config,
                time_ms=lambda: self.now_ms,
                monotonic_ns=self.clock.monotonic_ns,
                quotas=self.quotas[node],
            )
            for node in range(brokers)
        ]
        self._correlation = itertools.count(1)

    def request(
        self, api_key: int, version: int, body: dict[str, Any], client_id: str = "unit-test"
    ) -> Request:
        corr = next(self._correlation)
        frame = b"".join(encode_request(api_key, version, corr, client_id, body))[4:]
        header, decoded = decode_request(frame)
        return Request(
            processor=0,
            connection_id="conn-1",
            header=header,
            body=decoded,
            frame=frame,
            start_time_ns=0,
            api_name=ApiKey(api_key).name,
        )

    def handle(self, request: Request, node: int = 0) -> Response | None:
        self.apis[node].handle(request)
        return self.channel.receive_response(0)

    def call(self, api_key: int, version: int, body: dict[str, Any], node: int = 0) -> Any:
        """Handle a request and decode the response body it produced right away."""
        response = self.handle(self.request(api_key, version, body), node)
        assert isinstance(response, SendResponse), response
        return self.decode(response)

    @staticmethod
    def decode(response: SendResponse) -> dict[str, Any]:
        h = response.request.header
        frame = b"".join(bytes(b) for b in response.buffers)[4:]
        corr, body = decode_response(h.api_key, h.api_version, frame)
        assert corr == h.correlation_id
        return body

    def produce(
        self,
        topic: str,
        records: bytes | None,
        *,
        partition: int = 0,
        acks: int = 1,
        version: int = 9,
        node: int = 0,
        transactional_id: str | None = None,
    ) -> dict[str, Any]:
        """The one partition response of a Produce request."""
        body = self.call(
            ApiKey.PRODUCE,
            version,
            {
                "transactional_id": transactional_id,
                "acks": acks,
                "timeout_ms": 30000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": records}]}
                ],
            },
            node,
        )
        result: dict[str, Any] = body["responses"][0]["partition_responses"][0]
        return result

    def fetch_body(
        self,
        topic: str,
        offset: int,
        *,
        partition: int = 0,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        partition_max_bytes: int = 1 << 20,
        max_bytes: int = 50 << 20,
    ) -> dict[str, Any]:
        return {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": partition_max_bytes,
                        }
                    ],
                }
            ],
        }

    def close(self) -> None:
        self.purgatory.shutdown()
        self.controller.close()


@pytest.fixture
def harness() -> Iterator[ApiHarness]:
    h = ApiHarness()
    yield h
    h.close()


@pytest.fixture
def make_harness() -> Iterator[Any]:
    made: list[ApiHarness] = []

    def make(brokers: int = 1, **settings: Any) -> ApiHarness:
        h = ApiHarness(brokers, **settings)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


@pytest.fixture
def make_batch() -> Any:
    return batch
