"""Cluster metadata as the producer tracks it: Kafka's ``Metadata`` / ``ProducerMetadata``.

``Node``, ``PartitionInfo`` and ``Cluster`` (in ``cluster.py``, re-exported here) are
immutable and may be shared by any thread. ``Metadata`` is shared by the producer's
caller threads (``add``, ``fetch``, ``await_update``) and the Sender thread (everything
else); every method takes its lock.

A MetadataResponse never mutates the current ``Cluster``: ``Metadata.update`` builds a new
one and swaps it in, so a reader holding a ``Cluster`` always sees one consistent view.

``Metadata`` tracks the topics in use (each expires ``metadata.max.idle.ms`` after its
last ``add``), the age of the last full refresh (``metadata.max.age.ms``), whether an
update was requested, the retry backoff after a failed refresh (``retry.backoff.ms``),
and per-topic errors: fatal ones (invalid topic name, not authorized) that sends to the
topic must fail with, and recoverable ones (unknown topic, no leader) kept for messages.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kclient import errors
from kclient.errors import IllegalStateError, KafkaError
from kclient.network.cluster import (
    Cluster,
    Node,
    PartitionInfo,
    TopicPartition,
    cluster_from_response,
)
from kclient.network.connection_states import ExponentialBackoff
from kclient.network.warn_limit import WarnLimiter

log = logging.getLogger(__name__)

__all__ = [
    "Cluster",
    "Metadata",
    "MetadataRequestAndVersion",
    "Node",
    "PartitionInfo",
    "TopicPartition",
    "cluster_from_response",
]


WaitForFn = Callable[[threading.Condition, Callable[[], bool], float | None], bool]
"""``wait_for(condition, predicate, timeout_s)``: ``Condition.wait_for`` on a held condition."""


def _real_wait_for(
    condition: threading.Condition, predicate: Callable[[], bool], timeout_s: float | None
) -> bool:
    return condition.wait_for(predicate, timeout_s)


_LONG_AGO_MS = -(2**62)  # a due time already passed


@dataclass(frozen=True)
class MetadataRequestAndVersion:
    """What to send for the next refresh, and the request version that asked for it."""

    body: dict[str, Any]
    request_version: int
    is_partial_update: bool


class Metadata:
    """The producer's metadata: topics in use, the current Cluster, refresh bookkeeping.

    ``wait_for`` is how ``await_update`` blocks (``Condition.wait_for`` by default): a seam
    so tests can know a caller is waiting, without sleeping.
    """

    def __init__(
        self,
        *,
        refresh_backoff_ms: int = 100,
        refresh_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300_000,
        metadata_max_idle_ms: int = 300_000,
        allow_auto_topic_creation: bool = True,
        log_prefix: str = "",
        rng: random.Random | None = None,
        wait_for: WaitForFn | None = None,
    ) -> None:
        self.refresh_backoff_ms = refresh_backoff_ms
        self._refresh_backoff = ExponentialBackoff(
            min(refresh_backoff_ms, refresh_backoff_max_ms), 2, refresh_backoff_max_ms, 0.2, rng
        )
        self._attempts = 0  # refreshes failed in a row
        self._backoff_ms = refresh_backoff_ms
        """Wait after the last refresh: ``retry.backoff.ms``, growing exponentially (to
        ``retry.backoff.max.ms``, ±20 % jitter) while refreshes keep failing (Java's
        ``Metadata.timeToAllowUpdate``)."""
        self.metadata_max_age_ms = metadata_max_age_ms
        self.metadata_max_idle_ms = metadata_max_idle_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._prefix = log_prefix
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        """Waiters in ``await_update``; methods that only read or write take ``_lock``."""
        self._wait_for = wait_for or _real_wait_for
        self._cluster = Cluster.empty()
        self._bootstrap_addresses: tuple[tuple[str, int], ...] = ()
        self._topics: dict[str, int] = {}  # topic → expiry time (ms)
        self._new_topics: set[str] = set()
        self._topic_errors: dict[str, KafkaError] = {}
        self._fatal_topic_errors: dict[str, KafkaError] = {}
        self._fatal_error: KafkaError | None = None
        self._leader_epochs: dict[TopicPartition, int] = {}
        self._last_refresh_ms: int | None = None  # None: never tried
        self._last_successful_refresh_ms: int | None = None
        self._need_full_update = False
        self._need_partial_update = False
        self._request_version = 0
        self._update_version = 0
        self._closed = False
        self._warnings = WarnLimiter()
        self._next_update_ms = _LONG_AGO_MS
        """When a refresh is due (ms, the monotonic clock): recomputed under ``_lock`` by
        every method that changes what it depends on, read without it (one int, replaced
        whole) by ``time_to_next_update`` on every poll."""

    # ---- reading (any thread) -----------------------------------------------------------

    def fetch(self) -> Cluster:
        """The current Cluster (immutable; swapped whole, so no lock is needed to read it)."""
        return self._cluster

    @property
    def update_version(self) -> int:
        """Increases by one with every successful update (or fatal error)."""
        with self._lock:
            return self._update_version

    def topics(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._topics)

    def topic_error(self, topic: str) -> KafkaError | None:
        """The last error the cluster reported for the topic (fatal or not), if any."""
        with self._lock:
            return self._fatal_topic_errors.get(topic) or self._topic_errors.get(topic)

    def maybe_raise_for_topic(self, topic: str) -> None:
        """Raise the fatal error for the topic (invalid name, not authorized) or the client."""
        with self._lock:
            if self._fatal_error is not None:
                raise self._fatal_error
            error = self._fatal_topic_errors.get(topic)
            if error is not None:
                raise error

    # ---- topics (producer's caller threads) --------------------------------------------

    def add(self, topic: str, now_ms: int) -> None:
        """Note that the topic is in use; a topic never seen before is fetched at once."""
        with self._lock:
            if topic not in self._topics:
                self._new_topics.add(topic)
                self._request_update_for_new_topics()
            self._topics[topic] = now_ms + self.metadata_max_idle_ms

    def forget(self, topic: str) -> None:
        """Stop fetching the topic: a ``send`` waited for it in vain and nothing of it is
        queued (a name the cluster refused would otherwise be asked for, and warned about,
        at every refresh until ``metadata.max.idle.ms``)."""
        with self._lock:
            self._topics.pop(topic, None)
            self._new_topics.discard(topic)
            self._topic_errors.pop(topic, None)
            self._fatal_topic_errors.pop(topic, None)

    def request_update(self) -> int:
        """Ask for a full refresh as soon as the backoff allows; returns the current version."""
        with self._lock:
            self._need_full_update = True
            self._schedule_update()
            return self._update_version

    def request_update_for_topic(self, topic: str) -> int:
        with self._lock:
            if topic in self._new_topics:
                return self._request_update_for_new_topics()
            self._need_full_update = True
            self._schedule_update()
            return self._update_version

    def _request_update_for_new_topics(self) -> int:
        self._last_refresh_ms = None  # new topics skip the backoff
        self._need_partial_update = True
        self._request_version += 1
        self._schedule_update()
        return self._update_version

    def await_update(self, last_version: int, timeout_ms: int) -> bool:
        """Block the calling thread until ``update_version`` exceeds ``last_version``.

        Returns False when ``timeout_ms`` passes first. Raises the fatal error, if any.
        """
        with self._lock:
            done = self._wait_for(
                self._cond,
                lambda: (
                    self._update_version > last_version
                    or self._closed
                    or self._fatal_error is not None
                ),
                max(timeout_ms, 0) / 1000.0,
            )
            if self._fatal_error is not None:
                raise self._fatal_error
            if self._closed:
                raise IllegalStateError("metadata was closed while waiting for an update")
            return bool(done)

    # ---- refresh bookkeeping (Sender thread) -------------------------------------------

    def bootstrap(self, addresses: Sequence[tuple[str, int]]) -> None:
        with self._lock:
            self._bootstrap_addresses = tuple(addresses)
            self._cluster = Cluster.bootstrap(addresses)
            self._need_full_update = True
            self._update_version += 1
            self._schedule_update()

    @property
    def bootstrap_addresses(self) -> tuple[tuple[str, int], ...]:
        """``bootstrap.servers`` as (host, port) pairs; empty if never bootstrapped."""
        return self._bootstrap_addresses

    def rebootstrap(self) -> bool:
        """Forget the cluster's brokers and start again from ``bootstrap.servers`` (KIP-899),
        whose names are resolved anew at each connection attempt. The topics in use and
        their known leader epochs stay. False (nothing done) if the metadata is still the
        bootstrap list or was never bootstrapped."""
        with self._lock:
            if self._cluster.is_bootstrap_configured or not self._bootstrap_addresses:
                return False
            log.info(
                "%srebootstrapping with bootstrap.servers %s",
                self._prefix,
                ", ".join(f"{host}:{port}" for host, port in self._bootstrap_addresses),
            )
            self.bootstrap(self._bootstrap_addresses)
            return True

    def update_requested(self) -> bool:
        with self._lock:
            return self._need_full_update or self._need_partial_update

    def time_to_next_update(self, now_ms: int) -> int:
        """Milliseconds until a refresh is due (0 = now): requested, or older than max age."""
        due_ms = self._next_update_ms - now_ms  # no lock: this runs on every poll
        return due_ms if due_ms > 0 else 0

    def _schedule_update(self) -> None:
        """Recompute ``_next_update_ms`` (under ``_lock``): once the backoff after the last
        refresh has passed, and then at once if one was requested (or none succeeded yet),
        else when the last successful one is ``metadata.max.age.ms`` old."""
        last_ms = self._last_refresh_ms
        allow_ms = _LONG_AGO_MS if last_ms is None else last_ms + self._backoff_ms
        successful_ms = self._last_successful_refresh_ms
        if self._need_full_update or self._need_partial_update or successful_ms is None:
            expire_ms = _LONG_AGO_MS
        else:
            expire_ms = successful_ms + self.metadata_max_age_ms
        self._next_update_ms = expire_ms if expire_ms > allow_ms else allow_ms

    def new_metadata_request(self, now_ms: int) -> MetadataRequestAndVersion:
        """The MetadataRequest body for the next refresh.

        Only the new topics (partial update) when no full refresh is needed and the last
        full one is younger than ``metadata.max.age.ms``; otherwise every topic in use.
        """
        with self._lock:
            partial = (
                not self._need_full_update
                and self._last_successful_refresh_ms is not None
                and self._last_successful_refresh_ms + self.metadata_max_age_ms > now_ms
            )
            names = sorted(self._new_topics) if partial else sorted(self._topics)
            body = {
                "topics": [{"name": name} for name in names],
                "allow_auto_topic_creation": self.allow_auto_topic_creation,
            }
            return MetadataRequestAndVersion(body, self._request_version, partial)

    def update(
        self,
        request_version: int,
        response: Mapping[str, Any],
        is_partial_update: bool,
        now_ms: int,
    ) -> None:
        """Replace the Cluster with one built from a MetadataResponse body."""
        with self._lock:
            if self._closed:
                raise IllegalStateError("metadata update after close")
            self._need_partial_update = request_version < self._request_version
            self._last_refresh_ms = now_ms
            self._attempts = 0
            self._backoff_ms = self.refresh_backoff_ms
            self._update_version += 1
            if not is_partial_update:
                self._need_full_update = False
                self._last_successful_refresh_ms = now_ms
            previous = self._cluster
            response_topics: set[str] = {
                t["name"] for t in response.get("topics") or () if t.get("name") is not None
            }
            keep_from_previous = (
                [t for t in previous.topics if t in self._topics and t not in response_topics]
                if is_partial_update
                else []
            )
            self._record_errors(response, now_ms)
            cluster = cluster_from_response(
                response,
                keep_topic=lambda name, _internal: self._retain_topic(name, now_ms),
                previous=previous,
                previous_topics_to_keep=keep_from_previous,
            )
            self._cluster = self._keep_newer_leaders(previous, cluster)
            for topic in response_topics:
                self._new_topics.discard(topic)
            for tp in [tp for tp in self._leader_epochs if tp.topic not in self._topics]:
                del self._leader_epochs[tp]
            log.debug("%supdated cluster metadata to %r", self._prefix, self._cluster)
            self._schedule_update()
            self._cond.notify_all()

    def update_partition_leadership(
        self, leaders: Mapping[TopicPartition, tuple[int, int]], endpoints: Sequence[Node]
    ) -> set[TopicPartition]:
        """Follow the leader hints of a Produce answer (KIP-951; Java's
        ``Metadata.updatePartitionLeadership``): ``leaders`` maps a partition to the
        ``(leader id, leader epoch)`` its old leader named, ``endpoints`` are the answer's
        ``node_endpoints`` (they replace known nodes of the same id, and add new ones).

        A hint is taken when the partition is known, the leader's node is known (here or
        in ``endpoints``) and its epoch is newer than the one known; a hint of the epoch and
        leader already known is kept as it is. Returns the partitions whose leader is now
        the hinted one (taken or already known): their batches may go there at once. Stale
        or unusable hints change nothing, and are not returned. Swaps in a new Cluster only
        if something changed; ``update_version`` does not move (as in Java: a hint is not a
        metadata response)."""
        with self._lock:
            if self._closed or not leaders:
                return set()
            cluster = self._cluster
            nodes = {node.id: node for node in cluster.nodes}
            nodes_changed = False
            for node in endpoints:
                if node.id >= 0 and nodes.get(node.id) != node:
                    nodes[node.id] = node
                    nodes_changed = True
            followed: set[TopicPartition] = set()
            moved: dict[TopicPartition, PartitionInfo] = {}
            for tp, (leader_id, epoch) in leaders.items():
                info = cluster.partition(tp)
                leader = nodes.get(leader_id)
                if info is None or leader is None or leader_id < 0 or epoch < 0:
                    continue
                known = info.leader_epoch
                if known is not None and epoch <= known:
                    if epoch == known and info.leader is not None and info.leader.id == leader_id:
                        followed.add(tp)
                    continue
                moved[tp] = PartitionInfo(
                    info.topic,
                    info.partition,
                    leader,
                    info.replicas,
                    info.in_sync_replicas,
                    info.offline_replicas,
                    epoch,
                )
                self._leader_epochs[tp] = epoch
                followed.add(tp)
            if moved or nodes_changed:
                self._cluster = self._with_partitions(cluster, nodes, moved)
                log.debug(
                    "%sleaders from Produce answers: %s",
                    self._prefix,
                    {
                        str(tp): (i.leader.id if i.leader else -1, i.leader_epoch)
                        for tp, i in moved.items()
                    },
                )
            return followed

    @staticmethod
    def _with_partitions(
        cluster: Cluster, nodes: Mapping[int, Node], moved: Mapping[TopicPartition, PartitionInfo]
    ) -> Cluster:
        """``cluster`` with its nodes replaced by ``nodes`` (every partition's leader and
        replicas re-pointed to the node objects of the same ids) and the partitions of
        ``moved`` replaced."""

        def same(node: Node | None) -> Node | None:
            return None if node is None else nodes.get(node.id, node)

        resolved: dict[tuple[Node, ...], tuple[Node, ...]] = {(): ()}

        def group(members: tuple[Node, ...]) -> tuple[Node, ...]:
            found = resolved.get(members)
            if found is None:
                found = resolved[members] = tuple(nodes.get(n.id, n) for n in members)
            return found

        partitions: list[PartitionInfo] = []
        for topic in cluster.topics:
            for info in cluster.partitions_for_topic(topic):
                info = moved.get(info.topic_partition, info)
                partitions.append(
                    PartitionInfo(
                        info.topic,
                        info.partition,
                        same(info.leader),
                        group(info.replicas),
                        group(info.in_sync_replicas),
                        group(info.offline_replicas),
                        info.leader_epoch,
                    )
                )
        return cluster.replaced(nodes.values(), partitions, same(cluster.controller))

    def failed_update(self, now_ms: int) -> None:
        """A refresh failed; the next one waits for the retry backoff, which doubles (up to
        ``retry.backoff.max.ms``) with each failure in a row."""
        with self._lock:
            self._last_refresh_ms = now_ms
            self._backoff_ms = self._refresh_backoff.backoff_ms(self._attempts)
            self._attempts += 1
            self._schedule_update()

    def fatal_error(self, error: KafkaError | None) -> None:
        """An error no retry will fix by itself (e.g. authentication); waiters get it until
        it is cleared with None (e.g. once authentication succeeds)."""
        with self._lock:
            if error is None and self._fatal_error is None:
                return
            self._fatal_error = error
            self._cond.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    # ---- internals -----------------------------------------------------------------

    def _retain_topic(self, topic: str, now_ms: int) -> bool:
        """ProducerMetadata.retainTopic: drop topics not added within metadata.max.idle.ms."""
        expiry_ms = self._topics.get(topic)
        if expiry_ms is None:
            return False
        if topic in self._new_topics:
            return True
        if expiry_ms <= now_ms:
            log.debug("%sremoving unused topic %s from the metadata", self._prefix, topic)
            del self._topics[topic]
            self._topic_errors.pop(topic, None)
            self._fatal_topic_errors.pop(topic, None)
            return False
        return True

    def _record_errors(self, response: Mapping[str, Any], now_ms: int) -> None:
        for topic in response.get("topics") or ():
            name = topic.get("name")
            if name is None or name not in self._topics:
                continue
            code = topic.get("error_code", 0)
            self._fatal_topic_errors.pop(name, None)
            self._topic_errors.pop(name, None)
            if code == 0:
                for p in topic.get("partitions") or ():
                    if p.get("error_code", 0) and errors.for_code(p["error_code"]).invalid_metadata:
                        self._need_full_update = True
                continue
            cls = errors.for_code(code)
            if cls in (errors.InvalidTopicError, errors.TopicAuthorizationFailedError):
                self._fatal_topic_errors[name] = cls(f"topic '{name}'")
            else:
                self._topic_errors[name] = cls(f"topic '{name}'")
                if cls.invalid_metadata:
                    self._need_full_update = True
        if self._topic_errors or self._fatal_topic_errors:
            reported = {
                t: type(e).__name__
                for t, e in {**self._topic_errors, **self._fatal_topic_errors}.items()
            }
            # the same errors again (every refresh while a send waits): rate-limited
            level, repeats = self._warnings.level(frozenset(reported.items()), now_ms)
            log.log(
                level, "%smetadata response reported errors: %s%s", self._prefix, reported, repeats
            )

    def _keep_newer_leaders(self, previous: Cluster, cluster: Cluster) -> Cluster:
        """Keep partition info whose leader epoch is newer than the response's (stale broker).

        A topic whose id changed (deleted and made again under its name, KIP-516) starts
        its epochs again: the epochs seen for the old topic are forgotten (as Java's
        ``Metadata`` does), else the new topic's leaders would look stale for ever."""
        stale: list[PartitionInfo] = []
        fresh: list[PartitionInfo] = []
        old_ids = previous.topic_ids
        for topic in cluster.topics:
            old_id = old_ids.get(topic)
            new_id = cluster.topic_ids.get(topic)
            if old_id is not None and new_id is not None and old_id != new_id:
                log.info(
                    "%stopic %s was made again (its id changed from %s to %s): forgetting "
                    "the leader epochs seen for it",
                    self._prefix,
                    topic,
                    old_id,
                    new_id,
                )
                for tp in [tp for tp in self._leader_epochs if tp.topic == topic]:
                    del self._leader_epochs[tp]
            for info in cluster.partitions_for_topic(topic):
                tp = info.topic_partition
                seen = self._leader_epochs.get(tp)
                if info.leader_epoch is not None and seen is not None and info.leader_epoch < seen:
                    old = previous.partition(tp)
                    if old is not None:
                        stale.append(old)
                        continue
                if info.leader_epoch is not None:
                    self._leader_epochs[tp] = info.leader_epoch
                fresh.append(info)
        if not stale:
            return cluster
        self._need_full_update = True
        log.debug("%skeeping newer leaders for %s", self._prefix, [str(i) for i in stale])
        return cluster.replaced(cluster.nodes, fresh + stale, cluster.controller)
