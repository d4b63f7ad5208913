"""A Sender on a MockClient and a MockClock, plus request/response helpers (SenderTest)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kclient import errors
from kclient.network.kafka_client import ClientRequest
from kclient.protocol import ApiKey
from kclient.record import RecordBatch
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.future import FutureRecordMetadata
from kclient.sender.idempotence import TransactionManager
from kclient.sender.sender import Sender
from kclient.testing import MockClock
from kclient.testing.client import MockClient, metadata_update_with
from tests.sender.helpers import accumulator


@dataclass
class Harness:
    clock: MockClock
    client: MockClient
    acc: RecordAccumulator
    sender: Sender
    tm: TransactionManager | None

    def send(
        self, topic: str, partition: int, value: bytes = b"v", n: int = 1
    ) -> list[FutureRecordMetadata]:
        queues = self.acc.topic_queues(topic)
        if not queues.num_partitions:
            self.acc.update_topic(queues, self.client.metadata.fetch())
        return [
            self.acc.append(queues, partition, 1_000, None, value, None, None, 0, 82 + len(value))
            for _ in range(n)
        ]

    def run(self, times: int = 1) -> None:
        for _ in range(times):
            self.sender.run_once()

    def produce_requests(self) -> list[ClientRequest]:
        return [r for r in self.client.requests if r.api_key == ApiKey.PRODUCE]


def make(
    *,
    nodes: int = 1,
    topics: dict[str, int] | None = None,
    leaders: dict[tuple[str, int], int] | None = None,
    idempotent: bool = False,
    acks: int = -1,
    retries: int = 2_147_483_647,
    max_in_flight: int = 5,
    request_timeout_ms: int = 30_000,
    topic_ids: dict[str, uuid.UUID] | None = None,
    **acc_kwargs: Any,
) -> Harness:
    clock = MockClock()
    client = MockClient(
        clock,
        metadata_update_with(nodes, topics or {"t": 1}, leaders=leaders, topic_ids=topic_ids),
        request_timeout_ms=request_timeout_ms,
    )
    tm = TransactionManager() if idempotent else None
    acc_kwargs.setdefault("linger_ms", 0)
    acc = accumulator(clock, tm=tm, **acc_kwargs)
    sender = Sender(
        client,
        acc,
        clock=clock,
        acks=acks,
        max_request_size=1 << 20,
        request_timeout_ms=request_timeout_ms,
        retries=retries,
        retry_backoff_ms=100,
        guarantee_message_order=max_in_flight == 1 and not idempotent,
        transaction_manager=tm,
    )
    return Harness(clock, client, acc, sender, tm)


def body(request: ClientRequest) -> dict[str, Any]:
    return dict(request.body_for(12))


def partitions_in(request: ClientRequest) -> list[tuple[str, int]]:
    return sorted(
        (topic["name"], part["index"])
        for topic in body(request)["topic_data"]
        for part in topic["partition_data"]
    )


def batches_in(request: ClientRequest) -> dict[tuple[str, int], RecordBatch]:
    return {
        (topic["name"], part["index"]): RecordBatch(part["records"])
        for topic in body(request)["topic_data"]
        for part in topic["partition_data"]
    }


def produce_response(parts: dict[tuple[str, int], tuple[int, int]], **extra: Any) -> dict[str, Any]:
    """``parts[(topic, partition)] = (error_code, base_offset)``."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (code, offset) in parts.items():
        by_topic.setdefault(topic, []).append(
            {
                "index": partition,
                "error_code": code,
                "base_offset": offset,
                "log_append_time_ms": -1,
                "log_start_offset": 0,
                "record_errors": [],
                "error_message": None,
                **extra,
            }
        )
    return {
        "responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()],
        "throttle_time_ms": 0,
    }


def ok(request: ClientRequest, base_offset: int = 0, code: int = 0) -> dict[str, Any]:
    """A response giving every partition of ``request`` the same error code / offset."""
    return produce_response({tp: (code, base_offset) for tp in partitions_in(request)})


def init_pid_response(producer_id: int = 1000, epoch: int = 0, code: int = 0) -> dict[str, Any]:
    return {
        "error_code": code,
        "producer_id": producer_id,
        "producer_epoch": epoch,
        "throttle_time_ms": 0,
    }


def answer_like_a_broker(h: Harness, message_max_bytes: int) -> list[tuple[int, int, int]]:
    """Answer every produce request as a broker with ``message.max.bytes`` would (one
    partition per request), without moving the clock; returns the accepted batches'
    ``(base_sequence, record_count, size)``."""
    offset = 0
    accepted = []
    for _ in range(50):
        h.run(2)  # the answer arrives, then what it leads to goes out
        if not h.produce_requests():
            return accepted
        request = h.produce_requests()[0]
        ((tp, batch),) = batches_in(request).items()
        if batch.size_in_bytes > message_max_bytes:
            message = (
                f"record batch of {batch.size_in_bytes} bytes is larger than {message_max_bytes}"
            )
            h.client.respond(
                produce_response(
                    {tp: (errors.MessageTooLargeError.code, -1)}, error_message=message
                )
            )
        else:
            accepted.append((batch.base_sequence, batch.record_count, batch.size_in_bytes))
            h.client.respond(ok(request, base_offset=offset))
            offset += batch.record_count
    raise AssertionError("the producer kept sending")
