"""An immutable view of a Kafka cluster: Kafka's ``Cluster`` (its ``Node``, ``PartitionInfo``
and ``TopicPartition`` are in ``cluster_types``).

Values only: any thread may share them. ``cluster_from_response`` builds a ``Cluster``
from a decoded MetadataResponse body; ``Metadata.update`` swaps the new one in.

A topic may have hundreds of thousands of partitions, so a partition costs little: a
``PartitionInfo`` has slots and its ``TopicPartition`` made once, partitions with the same
replicas share one tuple of nodes, and the Cluster finds a partition by its index in the
topic's sorted tuple (a dict only for a topic whose partitions are not 0..n-1).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kclient import errors
from kclient.network.cluster_types import Node, PartitionInfo, TopicPartition

# the value types are re-exported from where they were defined before
__all__ = ["Cluster", "Node", "PartitionInfo", "TopicPartition", "cluster_from_response"]


class Cluster:
    """An immutable view of the cluster: nodes, partitions with leaders, controller."""

    def __init__(
        self,
        nodes: Iterable[Node],
        partitions: Iterable[PartitionInfo] = (),
        *,
        cluster_id: str | None = None,
        controller: Node | None = None,
        unauthorized_topics: Iterable[str] = (),
        invalid_topics: Iterable[str] = (),
        internal_topics: Iterable[str] = (),
        is_bootstrap_configured: bool = False,
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> None:
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.topic_ids: Mapping[str, uuid.UUID] = topic_ids if topic_ids is not None else {}
        """Each topic's id (KIP-516), for the topics the metadata named with a non-zero id
        (read-only)."""
        self.cluster_id = cluster_id
        self.controller = controller
        self.unauthorized_topics = frozenset(unauthorized_topics)
        self.invalid_topics = frozenset(invalid_topics)
        self.internal_topics = frozenset(internal_topics)
        self.is_bootstrap_configured = is_bootstrap_configured
        self._nodes_by_id = {node.id: node for node in self.nodes}
        by_topic: dict[str, list[PartitionInfo]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        leaders: dict[TopicPartition, Node] = {}
        for info in partitions:
            by_topic.setdefault(info.topic, []).append(info)
            if info.leader is not None:
                by_node.setdefault(info.leader.id, []).append(info)
                leaders[info.topic_partition] = info.leader
        self._by_topic: dict[str, tuple[PartitionInfo, ...]] = {}
        # topics whose partitions are not exactly 0..n-1 (a partition missing, or given
        # twice: the last one counts, as for the leaders)
        self._sparse: dict[str, dict[int, PartitionInfo]] = {}
        for topic, infos in by_topic.items():
            infos.sort(key=lambda i: i.partition)
            self._by_topic[topic] = ordered = tuple(infos)
            if any(info.partition != index for index, info in enumerate(ordered)):
                self._sparse[topic] = {info.partition: info for info in infos}
        self._available_by_topic = {
            topic: tuple(i for i in infos if i.leader is not None)
            for topic, infos in self._by_topic.items()
        }
        self._by_node = {node_id: tuple(infos) for node_id, infos in by_node.items()}
        self._leaders = leaders
        self._partition_count = sum(len(infos) for infos in self._by_topic.values())

    def replaced(
        self, nodes: Iterable[Node], partitions: Iterable[PartitionInfo], controller: Node | None
    ) -> Cluster:
        """This cluster (its id, topic sets and bootstrap flag) with other nodes,
        partitions and controller."""
        return Cluster(
            nodes,
            partitions,
            cluster_id=self.cluster_id,
            controller=controller,
            unauthorized_topics=self.unauthorized_topics,
            invalid_topics=self.invalid_topics,
            internal_topics=self.internal_topics,
            is_bootstrap_configured=self.is_bootstrap_configured,
            topic_ids=self.topic_ids,
        )

    @classmethod
    def empty(cls) -> Cluster:
        return cls(())

    @classmethod
    def bootstrap(cls, addresses: Sequence[tuple[str, int]]) -> Cluster:
        """A cluster of bootstrap nodes only, with ids -1, -2, … (no partitions yet)."""
        nodes = [Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses)]
        return cls(nodes, is_bootstrap_configured=True)

    def node_by_id(self, node_id: int) -> Node | None:
        return self._nodes_by_id.get(node_id)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        topic, index = tp
        sparse = self._sparse.get(topic)
        if sparse is not None:
            return sparse.get(index)
        infos = self._by_topic.get(topic)
        if infos is None or not 0 <= index < len(infos):
            return None
        return infos[index]

    def leader_for(self, tp: TopicPartition) -> Node | None:
        info = self.partition(tp)
        return info.leader if info is not None else None

    def leaders_by_partition(self) -> Mapping[TopicPartition, Node]:
        """Each partition that has a leader, and the leader (read-only)."""
        return self._leaders

    def partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self._by_topic.get(topic, ())

    def available_partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        """Partitions of the topic that have a leader right now."""
        return self._available_by_topic.get(topic, ())

    def partitions_for_node(self, node_id: int) -> tuple[PartitionInfo, ...]:
        """Partitions the node leads."""
        return self._by_node.get(node_id, ())

    def partition_count_for_topic(self, topic: str) -> int | None:
        infos = self._by_topic.get(topic)
        return len(infos) if infos is not None else None

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._by_topic)

    def __repr__(self) -> str:
        nodes = ", ".join(str(n) for n in self.nodes)
        return f"Cluster(id={self.cluster_id}, nodes=[{nodes}], partitions={self._partition_count})"


def cluster_from_response(
    body: Mapping[str, Any],
    *,
    keep_topic: Callable[[str, bool], bool] | None = None,
    previous: Cluster | None = None,
    previous_topics_to_keep: Iterable[str] = (),
) -> Cluster:
    """Build a Cluster from a MetadataResponse body (dict of the decoded response).

    ``keep_topic(name, is_internal) -> bool`` filters the topics; partitions of
    ``previous_topics_to_keep`` are carried over from ``previous`` (partial updates).
    """
    nodes = [
        Node(b["node_id"], b["host"], b["port"], b.get("rack")) for b in body.get("brokers") or ()
    ]
    by_id = {n.id: n for n in nodes}

    resolved: dict[tuple[int, ...], tuple[Node, ...]] = {(): ()}

    def resolve(ids: Iterable[int] | None) -> tuple[Node, ...]:
        """The nodes of these ids; partitions with the same replicas share the tuple."""
        key = tuple(ids or ())
        nodes = resolved.get(key)
        if nodes is None:
            nodes = resolved[key] = tuple(by_id.get(i) or Node(i, "", -1) for i in key)
        return nodes

    partitions: list[PartitionInfo] = []
    unauthorized: set[str] = set()
    invalid: set[str] = set()
    internal: set[str] = set()
    topic_ids: dict[str, uuid.UUID] = {}
    for topic in body.get("topics") or ():
        name = topic.get("name")
        if name is None:
            continue
        is_internal = bool(topic.get("is_internal"))
        if keep_topic is not None and not keep_topic(name, is_internal):
            continue
        if is_internal:
            internal.add(name)
        code = topic.get("error_code", 0)
        if code == errors.TopicAuthorizationFailedError.code:
            unauthorized.add(name)
        elif code == errors.InvalidTopicError.code:
            invalid.add(name)
        if code != 0:
            continue
        topic_id = topic.get("topic_id")
        if topic_id is not None and topic_id.int != 0:  # Kafka sends the zero uuid if unknown
            topic_ids[name] = topic_id
        for p in topic.get("partitions") or ():
            leader_id = p.get("leader_id", -1)
            epoch = p.get("leader_epoch", -1)
            partitions.append(
                PartitionInfo(
                    name,
                    p["partition_index"],
                    by_id.get(leader_id) if leader_id >= 0 else None,
                    resolve(p.get("replica_nodes")),
                    resolve(p.get("isr_nodes")),
                    resolve(p.get("offline_replicas")),
                    epoch if epoch is not None and epoch >= 0 else None,
                )
            )
    if previous is not None:
        seen = {info.topic for info in partitions} | unauthorized | invalid
        for topic in previous_topics_to_keep:
            if topic in seen:
                continue
            for info in previous.partitions_for_topic(topic):
                leader = by_id.get(info.leader.id) if info.leader is not None else None
                partitions.append(
                    PartitionInfo(
                        info.topic,
                        info.partition,
                        leader,
                        info.replicas,
                        info.in_sync_replicas,
                        info.offline_replicas,
                        info.leader_epoch,
                    )
                )
            if topic in previous.internal_topics:
                internal.add(topic)
            if topic in previous.topic_ids:
                topic_ids[topic] = previous.topic_ids[topic]
    controller_id = body.get("controller_id", -1)
    return Cluster(
        nodes,
        partitions,
        cluster_id=body.get("cluster_id"),
        controller=by_id.get(controller_id) if controller_id is not None else None,
        unauthorized_topics=unauthorized,
        invalid_topics=invalid,
        internal_topics=internal,
        topic_ids=topic_ids,
    )
