"""The body of a node's ProduceRequest: the grouping part of Java's
``Sender.sendProduceRequest``, with each topic's id (KIP-516) beside its name.

``produce_topic_data`` groups a node's drained batches by topic. A topic goes with its id
when the metadata gave it one; the request may use Produce v13 (topics by id) only when
every topic has one (``names`` is then the request's own id → name map, which matches a v13
answer back to the batches: a metadata refresh meanwhile may give a new id to a topic made
again under its name). Runs on the Sender thread (``sender.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kclient.errors import IllegalStateError
from kclient.network.cluster import TopicPartition
from kclient.sender.batch import ProducerBatch

TopicData = tuple[
    list[dict[str, Any]], dict[TopicPartition, ProducerBatch], dict[uuid.UUID, str] | None, int, int
]
"""(topic_data, batch by partition, id → name of every topic or None, bytes, records)"""


def produce_topic_data(
    batches: list[ProducerBatch], topic_ids: Mapping[str, uuid.UUID]
) -> TopicData:
    """The ``topic_data`` of a ProduceRequest holding ``batches`` (each topic with its id
    from ``topic_ids`` when it has one), the batches by partition, the topics by id (None
    unless every topic has an id), and the request's record bytes and record count."""
    names: dict[uuid.UUID, str] | None = {}
    topic_data: list[dict[str, Any]]
    if len(batches) == 1:  # the usual case at linger 0: nothing to group
        batch = batches[0]
        tp = batch.tp
        data = _built(batch)
        partition_data = [{"index": tp.partition, "records": data}]
        topic_id = topic_ids.get(tp.topic)
        if topic_id is None:
            names = None
            topic_data = [{"name": tp.topic, "partition_data": partition_data}]
        else:
            names = {topic_id: tp.topic}
            topic_data = [
                {"name": tp.topic, "topic_id": topic_id, "partition_data": partition_data}
            ]
        return topic_data, {tp: batch}, names, len(data), batch.builder.record_count
    by_topic: dict[str, list[dict[str, Any]]] = {}
    by_tp: dict[TopicPartition, ProducerBatch] = {}
    size = records = 0
    for batch in batches:
        data = _built(batch)
        tp = batch.tp
        part = {"index": tp.partition, "records": data}
        parts = by_topic.get(tp.topic)
        if parts is None:
            by_topic[tp.topic] = [part]
        else:
            parts.append(part)
        by_tp[tp] = batch
        size += len(data)
        records += batch.builder.record_count
    topic_data = []
    for topic, parts in by_topic.items():
        topic_id = topic_ids.get(topic)
        if topic_id is None:
            names = None
            topic_data.append({"name": topic, "partition_data": parts})
        else:
            if names is not None:
                names[topic_id] = topic
            topic_data.append({"name": topic, "topic_id": topic_id, "partition_data": parts})
    return topic_data, by_tp, names, size, records


def _built(batch: ProducerBatch) -> bytes:
    data = batch.records
    if data is None:
        raise IllegalStateError(f"batch for {batch.tp} was drained but not built")
    return data
