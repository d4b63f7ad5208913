"""What ``send_offsets_to_transaction`` takes: Java's ``OffsetAndMetadata`` and
``ConsumerGroupMetadata`` (from its consumer package), and their validation.

Immutable values: any thread. The offsets are those of the *next* records the consumer
will read (the last processed offset + 1), as with Kafka's consumers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kclient.network.cluster import TopicPartition


@dataclass(frozen=True)
class OffsetAndMetadata:
    """An offset to commit for a partition, with optional metadata text and the leader
    epoch of the last record consumed (``None``: unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.offset, bool) or not isinstance(self.offset, int):
            raise TypeError(f"OffsetAndMetadata.offset must be an int, got {self.offset!r}")
        if self.offset < 0:
            raise ValueError(f"OffsetAndMetadata.offset must be >= 0, got {self.offset}")
        if self.metadata is not None and not isinstance(self.metadata, str):
            raise TypeError(f"OffsetAndMetadata.metadata must be a str, got {self.metadata!r}")
        if self.leader_epoch is not None and (
            isinstance(self.leader_epoch, bool) or not isinstance(self.leader_epoch, int)
        ):
            raise TypeError(
                f"OffsetAndMetadata.leader_epoch must be an int or None, got {self.leader_epoch!r}"
            )


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """The consumer group whose offsets a transaction commits (KIP-447). With only
    ``group_id`` the coordinator cannot fence a zombie consumer; give the generation and
    member id (and ``group_instance_id`` for static members) from the consumer when known."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ValueError(
                f"ConsumerGroupMetadata.group_id must be a non-empty str, got {self.group_id!r}"
            )
        if isinstance(self.generation_id, bool) or not isinstance(self.generation_id, int):
            raise TypeError(
                f"ConsumerGroupMetadata.generation_id must be an int, got {self.generation_id!r}"
            )
        if not isinstance(self.member_id, str):
            raise TypeError(
                f"ConsumerGroupMetadata.member_id must be a str, got {self.member_id!r}"
            )
        if self.group_instance_id is not None and not isinstance(self.group_instance_id, str):
            raise TypeError(
                "ConsumerGroupMetadata.group_instance_id must be a str or None, got "
                f"{self.group_instance_id!r}"
            )


def group_metadata_of(group: object) -> ConsumerGroupMetadata:
    """A group id ``str``, a ``ConsumerGroupMetadata``, or any object with ``group_id``
    (and optionally ``generation_id``, ``member_id``, ``group_instance_id``) attributes."""
    if isinstance(group, ConsumerGroupMetadata):
        return group
    if isinstance(group, str):
        return ConsumerGroupMetadata(group)
    group_id = getattr(group, "group_id", None)
    if group_id is None:
        raise TypeError(
            "group_metadata must be a group id str or an object with group_id, generation_id, "
            f"member_id and group_instance_id (kclient.ConsumerGroupMetadata); got {group!r}"
        )
    return ConsumerGroupMetadata(
        group_id,
        getattr(group, "generation_id", -1),
        getattr(group, "member_id", ""),
        getattr(group, "group_instance_id", None),
    )


def offsets_of(offsets: Mapping[object, object]) -> dict[TopicPartition, OffsetAndMetadata]:
    """``{TopicPartition: OffsetAndMetadata}``; keys may also be ``(topic, partition)``
    tuples or objects with ``topic`` and ``partition`` attributes (confluent-kafka's
    ``TopicPartition``), values plain ``int`` offsets."""
    if not isinstance(offsets, Mapping):
        raise TypeError(
            "offsets must be a dict {TopicPartition: OffsetAndMetadata}, got "
            f"{type(offsets).__name__}"
        )
    result: dict[TopicPartition, OffsetAndMetadata] = {}
    for key, value in offsets.items():
        tp = _topic_partition(key)
        if isinstance(value, OffsetAndMetadata):
            result[tp] = value
        elif isinstance(value, int) and not isinstance(value, bool):
            result[tp] = OffsetAndMetadata(value)
        else:
            raise TypeError(
                f"the offset for {tp} must be an OffsetAndMetadata or an int, got {value!r}"
            )
    return result


def _topic_partition(key: object) -> TopicPartition:
    topic: object
    partition: object
    if isinstance(key, tuple) and len(key) == 2:  # a TopicPartition is a tuple too
        topic, partition = key
    else:
        topic = getattr(key, "topic", None)
        partition = getattr(key, "partition", None)
    if (
        not isinstance(topic, str)
        or not topic
        or isinstance(partition, bool)
        or not isinstance(partition, int)
        or partition < 0
    ):
        raise TypeError(
            f"an offsets key must be a TopicPartition(topic, partition >= 0), got {key!r}"
        )
    return TopicPartition(topic, partition)
