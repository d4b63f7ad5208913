"""Changes to an existing topic, for the ``Controller`` (``kclient/broker/controller.py``):
more partitions (CreatePartitions) and new configs (IncrementalAlterConfigs), as Kafka's
controller applies them. Both are kept in ``topics.json`` with a log dir and are seen by
every broker of the process at once.

``TopicChanges`` is a base class of ``Controller``; any thread (request handlers, the
Python API), under the controller's lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from kclient import errors
from kclient.broker.topic_config import validate_topic_configs

if TYPE_CHECKING:
    from kclient.broker.config import BrokerConfig
    from kclient.broker.controller import Partition, Topic

log = logging.getLogger("kclient.broker.controller")


class TopicChanges:
    """``create_partitions`` and ``alter_topic_configs`` (see the module docstring)."""

    if TYPE_CHECKING:  # set by Controller.__init__
        config: BrokerConfig
        broker_ids: list[int]
        lock: threading.RLock
        topics: dict[str, Topic]
        _creating: set[str]
        _next_leader_start: int

        def _new_partition(
            self, topic: Topic, index: int, start: int, replication_factor: int
        ) -> Partition: ...

        def existing_topic(self, name: str) -> Topic: ...

        def _elect(self, partition: Partition) -> bool: ...

        def _save_topics(self) -> None: ...

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> int:
        """Grow topic ``name`` to ``count`` partitions (CreatePartitions, the Python API);
        the new ones get the topic's replication factor, their leaders spread over the
        brokers. Returns how many were added. Raises the Kafka error for an unknown topic,
        a count that is not larger, or one over ``max.partitions.per.topic``."""
        cap = self.config.max_partitions_per_topic
        with self.lock:
            topic = self.existing_topic(name)
            if name in self._creating:
                raise errors.ReassignmentInProgressError(
                    f"partitions of topic {name!r} are being created; try again"
                )
            current = len(topic.partitions)
            if count < current:
                raise errors.InvalidPartitionsError(
                    f"topic {name!r} has {current} partitions, more than the {count} asked "
                    "for; partitions can only be added"
                )
            if count == current:
                raise errors.InvalidPartitionsError(
                    f"topic {name!r} already has {count} partitions"
                )
            if count > cap:
                raise errors.InvalidPartitionsError(
                    f"{count} partitions is more than this broker allows per topic "
                    f"('max.partitions.per.topic' is {cap})"
                )
            replication_factor = len(topic.partitions[0].replicas)
            n_brokers = len(self.broker_ids)
            if replication_factor > n_brokers:
                raise errors.InvalidReplicationFactorError(
                    f"topic {name!r} has replication factor {replication_factor}, more than "
                    f"the {n_brokers} brokers the cluster has now"
                )
            if validate_only:
                return count - current
            start = self._next_leader_start
            self._next_leader_start += 1
            self._creating.add(name)  # one change to the topic at a time
        added: list[Partition] = []
        try:
            for p in range(current, count):  # one by one: a failure leaves the opened ones
                added.append(self._new_partition(topic, p, start, replication_factor))  # noqa: PERF401
            with self.lock:
                if topic.deleted:
                    raise errors.UnknownTopicOrPartitionError(f"topic {name!r} was deleted")
                for partition in added:
                    with partition.lock:
                        self._elect(partition)
                topic.partitions.extend(added)  # complete partitions, appended at once
                try:
                    self._save_topics()  # the partitions exist once this is written
                except OSError:
                    del topic.partitions[current:]
                    raise
        except (OSError, errors.BrokerResponseError) as exc:
            for partition in added:
                with partition.lock, contextlib.suppress(OSError):
                    partition.leader_id = -1
                    partition.log.delete()
            if isinstance(exc, OSError):
                raise errors.KafkaStorageError(
                    f"cannot add partitions to topic {name!r}: {exc}"
                ) from exc
            raise
        finally:
            with self.lock:
                self._creating.discard(name)
        log.info("topic %s now has %d partitions (%d added)", name, count, count - current)
        return count - current

    def alter_topic_configs(
        self, name: str, configs: dict[str, str], *, validate_only: bool = False
    ) -> None:
        """Replace topic ``name``'s configs (IncrementalAlterConfigs); they take effect at
        once and are kept in ``topics.json`` with a log dir. Raises the Kafka error for an
        unknown topic or a bad config."""
        validate_topic_configs(configs)
        with self.lock:
            topic = self.existing_topic(name)
            if validate_only:
                return
            before, topic.configs = topic.configs, dict(configs)  # one assignment: readers
            try:  # see the old configs or the new ones, never a mix
                self._save_topics()
            except OSError as exc:
                topic.configs = before
                raise errors.KafkaStorageError(
                    f"cannot change the configs of topic {name!r}: {exc}"
                ) from exc
        log.info("topic %s configs are now %s", name, configs)
