"""Helpers for the consumer group integration tests: confluent-kafka group consumers
driven from one thread, a record tally that sees duplicates, polling with deadlines."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import confluent_kafka

from kclient.broker import EmbeddedCluster

#: settings that keep a test's group short: rebalances are noticed within 100 ms
FAST_GROUP = {
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 100,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "topic.metadata.refresh.interval.ms": 500,
    "reconnect.backoff.max.ms": 200,
}


def produce(bootstrap: str, topic: str, start: int, n: int, partitions: int) -> None:
    """Values ``v-<start>`` .. ``v-<start+n-1>``, spread round-robin over the partitions."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        producer.produce(topic, f"v-{i}".encode(), partition=i % partitions)
    assert producer.flush(15) == 0


class GroupMember:
    """A confluent-kafka consumer in a group that commits each record synchronously once
    it has recorded it (at-least-once processing; exactly once unless a commit is lost)."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        self.consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **FAST_GROUP, **conf}
        )
        self.consumer.subscribe([topic])
        self.closed = False

    def poll_into(self, seen: dict[tuple[int, int], list[bytes]]) -> int:
        """Consume what is ready, record it, commit it; how many records."""
        got = 0
        for msg in self.consumer.consume(100, 0.05):
            if msg.error() is not None:
                continue  # e.g. a partition EOF; errors are not expected here
            value = msg.value()
            assert value is not None
            seen.setdefault((msg.partition(), msg.offset()), []).append(value)
            self.consumer.commit(message=msg, asynchronous=False)
            got += 1
        return got

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def consume_until(
    members: Iterable[GroupMember],
    seen: dict[tuple[int, int], list[bytes]],
    done: Callable[[], bool],
    timeout_s: float = 20.0,
) -> None:
    """Poll every member in turn until ``done()`` (bounded by ``timeout_s``)."""
    live = list(members)
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout_s} s: {len(seen)} records"
        for m in live:
            m.poll_into(seen)


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what or condition}"
        time.sleep(0.02)


def stable_with(cluster: EmbeddedCluster, group: str, members: int) -> bool:
    d = cluster.describe_group(group)
    return d is not None and d.state == "Stable" and len(d.members) == members
