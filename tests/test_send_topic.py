"""A topic that is not a ``str`` (``None``, an int, bytes) is refused by ``send``,
``send_batch`` and ``partitions_for`` with a TypeError naming it, before it reaches the
producer's metadata, and the producer keeps working. Before, ``send(None, ...)`` put
``None`` among the metadata's topics: the I/O thread died sorting them with the others
and every later send failed. A ``str`` subclass (a ``str`` enum) is taken as its value.
kclient.aio's ``send`` to a partition the topic lacks says so in one sentence once
``max_block_ms`` ran out."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import pytest

from kclient.aio import AIOKafkaProducer
from kclient.errors import KafkaTimeoutError
from kclient.producer import KafkaProducer
from tests.test_aio_loop import LoopMockClient, run
from tests.test_producer import LiveMockClient

BAD_TOPICS = [None, 5, b"t"]


class Topic(str, enum.Enum):
    ORDERS = "t"


CALLS: dict[str, Callable[[KafkaProducer, Any], object]] = {
    "send": lambda p, topic: p.send(topic, b"v"),
    "send_batch": lambda p, topic: p.send_batch(topic, [b"v"]),
    "partitions_for": lambda p, topic: p.partitions_for(topic),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("topic", BAD_TOPICS, ids=repr)
def test_a_topic_that_is_not_a_str_is_refused_and_the_producer_keeps_working(
    producer: KafkaProducer, client: LiveMockClient, call: str, topic: Any
) -> None:
    with pytest.raises(TypeError, match=f"topic must be a str, got {type(topic).__name__}"):
        CALLS[call](producer, topic)
    md = producer.send("t", b"after").result(10)
    assert (md.topic, md.offset) == ("t", 0)
    assert [r.value for r in client.records[("t", md.partition)]] == [b"after"]


def test_a_str_enum_topic_is_sent_to_its_value(
    producer: KafkaProducer, client: LiveMockClient
) -> None:
    md = producer.send(Topic.ORDERS, b"v").result(10)
    assert type(md.topic) is str
    assert md.topic == "t"
    assert [r.value for r in client.records[("t", md.partition)]] == [b"v"]


def test_aio_send_refuses_a_topic_that_is_not_a_str_and_keeps_working() -> None:
    client = LoopMockClient()

    async def scenario() -> Any:
        async with AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", kafka_client=client) as p:
            for topic in BAD_TOPICS:
                with pytest.raises(TypeError, match="topic must be a str"):
                    await p.send(topic, b"v")
                with pytest.raises(TypeError, match="topic must be a str"):
                    await p.partitions_for(topic)
            return await p.send_and_wait("t", b"after")

    md = run(scenario())
    assert (md.topic, md.offset) == ("t", 0)
    assert [r.value for r in client.records[("t", md.partition)]] == [b"after"]


def test_aio_send_to_a_partition_the_topic_lacks_says_so_once_max_block_ms_ran_out() -> None:
    client = LoopMockClient()

    async def scenario() -> str:
        async with AIOKafkaProducer(
            bootstrap_servers="127.0.0.1:1", kafka_client=client, max_block_ms=50
        ) as p:
            with pytest.raises(KafkaTimeoutError) as caught:
                await p.send("t", b"v", partition=7)
            return str(caught.value)

    assert run(scenario()) == (
        "partition 7 of topic 't' not present in metadata after 50 ms ('max_block_ms') "
        "(the topic's partition count is 1)"
    )
