"""A transaction whose offsets name a topic that does not exist, on the embedded broker
(issue 31, item 1): the broker's error, naming the topic, at once; the transaction then
aborts and the producer goes on; ``close()`` and a script that simply ends (the producer
closed at interpreter exit) return quickly — before, the offsets were retried for ever
in the background, the abort timed out and the script hung at exit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import confluent_kafka
import pytest

from kclient import KafkaProducer, OffsetAndMetadata, TopicPartition, errors
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedBroker

MISSING = {TopicPartition("no-such-topic", 0): OffsetAndMetadata(1)}


@pytest.fixture
def broker() -> object:
    with EmbeddedBroker() as b:
        b.create_topic("out", partitions=1)
        yield b


def _committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(values) < 1:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_offsets_of_a_missing_topic_fail_at_once_and_the_producer_goes_on(
    broker: EmbeddedBroker,
) -> None:
    producer = KafkaProducer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "hangs-sync"}
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("out", b"aborted")
        start = time.monotonic()
        with pytest.raises(errors.TransactionRequiresAbortError, match="no-such-topic") as info:
            producer.send_offsets_to_transaction(MISSING, "g")
        assert time.monotonic() - start < 5
        assert isinstance(info.value.__cause__, errors.UnknownTopicOrPartitionError)
        start = time.monotonic()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send("out", b"committed")
        producer.commit_transaction()
        assert time.monotonic() - start < 5
    finally:
        start = time.monotonic()
        producer.close()
        assert time.monotonic() - start < 5
    assert _committed(broker.bootstrap_servers, "out") == [b"committed"]


_SCRIPT = """
import sys, time
from kclient import KafkaProducer, OffsetAndMetadata, TopicPartition

producer = KafkaProducer(
    {"bootstrap.servers": sys.argv[1], "transactional.id": "hangs-exit", "max.block.ms": 2000}
)
producer.init_transactions()
producer.begin_transaction()
producer.send("out", b"left open")
try:
    producer.send_offsets_to_transaction(
        {TopicPartition("no-such-topic", 0): OffsetAndMetadata(1)}, "g"
    )
except Exception as exc:
    print(type(exc).__name__, exc, flush=True)
print("script done", flush=True)
# no abort, no close: the producer is closed at interpreter exit
"""


def test_a_script_that_ends_inside_a_failed_transaction_exits(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    script = tmp_path / "txn_exit.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(script), broker.bootstrap_servers],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"the script did not exit within 30 s:\n{output}")
    took_s = time.monotonic() - start
    assert process.returncode == 0, output
    assert "TransactionRequiresAbortError" in output and "no-such-topic" in output, output
    assert took_s < 15, output


def test_aio_transaction_of_a_missing_input_topic_fails_at_once(broker: EmbeddedBroker) -> None:
    async def main() -> float:
        start = time.monotonic()
        async with AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, transactional_id="hangs-aio"
        ) as producer:
            with pytest.raises(errors.TransactionRequiresAbortError, match="'in'"):
                async with producer.transaction():  # README's example: "in" does not exist
                    await producer.send("out", b"result")
                    await producer.send_offsets_to_transaction({TopicPartition("in", 0): 43}, "w")
            async with producer.transaction():  # aborted: the producer goes on
                await producer.send_and_wait("out", b"committed")
        return time.monotonic() - start

    assert asyncio.run(main()) < 10
    assert _committed(broker.bootstrap_servers, "out") == [b"committed"]
