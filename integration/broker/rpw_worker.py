"""A read-process-write worker for the transaction tests (run as a process, killed by them).

``python -m integration.broker.rpw_worker BOOTSTRAP GROUP TRANSACTIONAL_ID [HANG_AT]``: consumes
``rpw-in`` with a confluent-kafka group consumer (read_committed), writes each value to
``rpw-out`` as ``out:<value>`` with kclient's transactional producer and commits the
consumed offsets in the same transaction. Prints ``committed <n>`` after each commit and
exits once it read every input (the tests write them all first) and 1 s passed without
more; 30 s without input at all ends it too (joining the group waits for a killed member's
2 s session to expire; a loaded machine can pause a fetch for over a second). With
HANG_AT, once it committed that many records it writes one more transaction (records and
offsets sent), prints ``open`` and waits there, to be killed in the middle of it.
"""

from __future__ import annotations

import sys
import time

import confluent_kafka

from kclient import KafkaProducer, OffsetAndMetadata, TopicPartition


def main(bootstrap: str, group: str, transactional_id: str, hang_at: int = -1) -> None:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # short: the next worker's join waits for a killed member's session to end
            "session.timeout.ms": 2000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe(["rpw-in"])
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(timeout=30)
    committed = 0
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 30:
        messages = [m for m in consumer.consume(20, 0.2) if m.error() is None]
        if not messages:
            if time.monotonic() - idle_since >= 1 and read_everything(consumer):
                break
            continue
        idle_since = time.monotonic()
        producer.begin_transaction()
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for m in messages:
            producer.send("rpw-out", b"out:" + (m.value() or b""), partition=m.partition())
            offsets[TopicPartition("rpw-in", m.partition())] = OffsetAndMetadata(m.offset() + 1)
        producer.send_offsets_to_transaction(offsets, group)
        if 0 <= hang_at <= committed:
            producer.flush()
            print("open", flush=True)
            time.sleep(60)
        producer.commit_transaction(timeout=30)
        committed += len(messages)
        print(f"committed {committed}", flush=True)
    producer.close(timeout=5)
    consumer.close()


def read_everything(consumer: confluent_kafka.Consumer) -> bool:
    """Whether the consumer holds every partition of ``rpw-in`` and is at its end."""
    partitions = consumer.list_topics("rpw-in", timeout=10).topics["rpw-in"].partitions
    assigned = {tp.partition for tp in consumer.assignment() if tp.topic == "rpw-in"}
    if assigned != set(partitions):
        return False
    for tp in consumer.position([confluent_kafka.TopicPartition("rpw-in", p) for p in partitions]):
        _, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        if high > 0 and tp.offset < high:
            return False
    return True


if __name__ == "__main__":
    main(*sys.argv[1:4], *(int(a) for a in sys.argv[4:5]))
