"""The cluster's public value types: Kafka's ``TopicPartition``, ``Node`` and
``PartitionInfo``.

Not compiled (mypyc drops docstrings, and these are public, ``help()`` included); the
compiled ``cluster`` module and the network client use them as they are. Values only: any
thread may share them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic: ``(topic, partition)``, printed ``topic-partition``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Node:
    """A broker: id, host, port and rack. Bootstrap nodes have negative ids."""

    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.address} (id: {self.id} rack: {self.rack})"

    def __hash__(self) -> int:
        # The id alone (equal nodes have equal ids): the producer's step hashes a node per
        # request, and hashing all four fields cost a tuple and a string hash each time.
        return self.id


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition: its leader (None while unknown or offline), replicas and ISR."""

    topic: str
    partition: int
    leader: Node | None
    replicas: tuple[Node, ...] = ()
    in_sync_replicas: tuple[Node, ...] = ()
    offline_replicas: tuple[Node, ...] = ()
    leader_epoch: int | None = None
    topic_partition: TopicPartition = field(init=False, repr=False, compare=False)
    """(topic, partition), made once: the key the producer's maps share."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "topic_partition", TopicPartition(self.topic, self.partition))
