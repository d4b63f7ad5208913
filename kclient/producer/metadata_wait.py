"""KafkaProducer's wait for a topic's metadata: Java's ``KafkaProducer.waitOnMetadata``.

``ProducerMetadataWait`` is a base class of ``KafkaProducer`` (``kafka_producer.py``),
holding only the wait: ``send`` and ``partitions_for`` block (up to ``max.block.ms``)
until the topic, and the partition if given, is in the metadata. Beyond Java: while no
connection ever succeeded it fails fast once every bootstrap server refuses
(``bootstrap.refused.timeout.ms``, ``kclient/network/bootstrap_refusals.py``) or no
bootstrap name resolves (``bootstrap.resolve.timeout.ms`` above 0), and a topic
whose wait failed with nothing of it queued is forgotten by the metadata. Callers'
threads.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from kclient.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from kclient.network import NetworkClient
from kclient.network.cluster import Cluster

if TYPE_CHECKING:
    from kclient.clock import Clock
    from kclient.network.kafka_client import KafkaClient
    from kclient.network.metadata import Metadata
    from kclient.sender.accumulator import RecordAccumulator
    from kclient.sender.sender import Sender
    from kclient.sender.topic_queues import TopicQueues

_REFUSAL_CHECK_MS = 50
"""How often a metadata wait looks whether every bootstrap server refuses (until one
connection succeeded)."""


class ProducerMetadataWait:
    """The metadata wait of ``KafkaProducer`` (see the module docstring)."""

    if TYPE_CHECKING:  # set by KafkaProducer.__init__
        _clock: Clock
        _client: KafkaClient
        _metadata: Metadata
        _accumulator: RecordAccumulator
        _sender: Sender
        _queues: dict[str, TopicQueues]
        _max_block_ms: int
        _unusable: str | KafkaError | None
        _waiters_lock: threading.Lock
        _metadata_waiters: dict[str, int]

        def _raise_unusable(self) -> None: ...

    def _wait_on_metadata(self, topic: str, partition: int | None) -> tuple[TopicQueues, int]:
        """Java's ``waitOnMetadata``: block (up to ``max.block.ms``) until the topic — and the
        partition, if given — is in the metadata. Returns the queues and the time left."""
        clock = self._clock
        start_ms = clock.monotonic_ms()
        metadata = self._metadata
        with self._waiters_lock:
            self._metadata_waiters[topic] = self._metadata_waiters.get(topic, 0) + 1
        try:
            metadata.add(topic, start_ms)
            cluster = self._await_topic(topic, partition, start_ms)
        except BaseException as exc:
            retried = self._max_block_ms == 0 and isinstance(exc, KafkaTimeoutError)
            self._stop_waiting(topic, gave_up=not retried)
            raise
        self._stop_waiting(topic, gave_up=False)
        queues = self._accumulator.topic_queues(topic)
        self._accumulator.update_topic(queues, cluster)
        self._queues[topic] = queues
        return queues, max(self._max_block_ms - (clock.monotonic_ms() - start_ms), 0)

    def _stop_waiting(self, topic: str, *, gave_up: bool) -> None:
        """A caller's metadata wait for ``topic`` ended; ``gave_up``: it failed (a name the
        cluster refused, a topic that is not there), and if no other caller waits and
        nothing of the topic is queued, the metadata forgets it: no refresh every
        ``retry.backoff.ms`` for it, no warning each time. (With ``max.block.ms`` 0 the
        caller tries again at once, as ``kclient.aio`` does: kept when it timed out.)"""
        with self._waiters_lock:
            waiters = self._metadata_waiters[topic] - 1
            if waiters:
                self._metadata_waiters[topic] = waiters
                return
            del self._metadata_waiters[topic]
            if gave_up and topic not in self._queues:
                self._metadata.forget(topic)

    def _await_topic(self, topic: str, partition: int | None, start_ms: int) -> Cluster:
        """``_wait_on_metadata``'s wait: the cluster once it has the topic (and partition).
        While no connection ever succeeded, the wait wakes every 50 ms to fail fast once
        every bootstrap server refuses (``bootstrap.refused.timeout.ms``) or no bootstrap
        name resolves (``bootstrap.resolve.timeout.ms``)."""
        clock = self._clock
        metadata = self._metadata
        client = self._client if isinstance(self._client, NetworkClient) else None
        cluster = metadata.fetch()
        while True:
            metadata.maybe_raise_for_topic(topic)
            count = cluster.partition_count_for_topic(topic)
            if count and (partition is None or partition < count):
                return cluster
            now_ms = clock.monotonic_ms()
            elapsed_ms = now_ms - start_ms
            if elapsed_ms >= self._max_block_ms:
                raise self._metadata_timeout(topic, partition, count)
            wait_ms = self._max_block_ms - elapsed_ms
            if client is not None and not client.bootstrap_refusals.ever_connected:
                refused = client.bootstrap_error(now_ms)
                if refused is not None:
                    raise refused
                wait_ms = min(wait_ms, _REFUSAL_CHECK_MS)
            version = metadata.request_update_for_topic(topic)
            self._sender.wakeup()
            try:
                metadata.await_update(version, wait_ms)
            except IllegalStateError:  # closed under us: say why, when we know
                if self._unusable is not None:
                    self._raise_unusable()
                raise
            if self._unusable is not None:
                self._raise_unusable()
            cluster = metadata.fetch()

    def _metadata_timeout(self, topic: str, partition: int | None, count: int | None) -> KafkaError:
        max_block_ms = self._max_block_ms
        if count and partition is not None:
            return KafkaTimeoutError(
                f"partition {partition} of topic {topic!r} with partition count {count} is not "
                f"present in metadata after {max_block_ms} ms ('max.block.ms')"
            )
        reason = ""
        topic_error = self._metadata.topic_error(topic)
        if topic_error is not None:
            reason = f"; the cluster says: {topic_error}"
        elif isinstance(self._client, NetworkClient) and self._client.connection_failures():
            return self._client.no_broker_reachable_error(max_block_ms)
        return KafkaTimeoutError(
            f"topic {topic!r} not present in metadata after {max_block_ms} ms "
            f"('max.block.ms'){reason}"
        )
