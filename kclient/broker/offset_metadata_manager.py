"""OffsetMetadataManager: OffsetCommit, OffsetFetch and OffsetDelete for one coordinator.

Kafka's ``OffsetMetadataManager`` (group-coordinator module) and the offset part of
``GroupCoordinator``: a commit is checked against the group the way Kafka does it
(``validateOffsetCommit``: members of a group with members commit with their member id
and current generation; anyone commits to an Empty group with generation -1, which is
how consumers using ``assign`` and tools commit; a group that does not exist yet is
created by such a commit), then written to the cluster's ``ConsumerOffsets`` before it
is answered. OffsetFetch reads the committed offsets of any group, in any state.
OffsetDelete removes the offsets of an Empty group, or of topics a consumer group does
not subscribe to (else GROUP_SUBSCRIBED_TO_TOPIC).

Requests for topics that do not exist and metadata above ``offset.metadata.max.bytes``
are refused per partition by ``group_apis`` before they get here. Called on request
handler threads; takes the coordinator's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kclient import errors
from kclient.broker.consumer_offsets import OffsetAndMetadata, TopicPartition
from kclient.broker.group_metadata import GroupMetadata, GroupState
from kclient.broker.group_rebalance import store_error

if TYPE_CHECKING:
    from kclient.broker.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)

_S = GroupState
_NONE = 0


def offsets_to_commit(
    topics: Iterable[Mapping[str, Any]],
    partition_error: Callable[[str, int], int],
    max_metadata_bytes: int,
    timestamp_ms: Callable[[Mapping[str, Any]], int],
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetAndMetadata]]:
    """The partitions of an OffsetCommit or TxnOffsetCommit request: (each one's error
    code so far, the offsets of those without one). ``partition_error(topic, partition)``
    says whether it exists; metadata longer than ``max_metadata_bytes`` is
    OFFSET_METADATA_TOO_LARGE; ``timestamp_ms(partition)`` is the commit's time."""
    codes: dict[TopicPartition, int] = {}
    valid: dict[TopicPartition, OffsetAndMetadata] = {}
    for t in topics:
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            metadata = p["committed_metadata"] or ""
            codes[tp] = partition_error(*tp)
            if not codes[tp] and len(metadata) > max_metadata_bytes:
                codes[tp] = errors.OffsetMetadataTooLargeError.code
            if not codes[tp]:
                valid[tp] = OffsetAndMetadata(
                    p["committed_offset"],
                    p.get("committed_leader_epoch", -1),
                    metadata,
                    timestamp_ms(p),
                )
    return codes, valid


def partition_errors(
    topics: Iterable[Mapping[str, Any]], codes: Mapping[TopicPartition, int]
) -> list[dict[str, Any]]:
    """An OffsetCommit / TxnOffsetCommit answer's ``topics``: each requested partition
    with its error code."""
    return [
        {
            "name": t["name"],
            "partitions": [
                {
                    "partition_index": p["partition_index"],
                    "error_code": codes[t["name"], p["partition_index"]],
                }
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]


class OffsetMetadataManager:
    """Committed offsets of the groups one ``GroupCoordinator`` serves."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """Handle an OffsetCommit: an error code per partition."""
        c = self.coordinator
        with c.lock:
            now_ms = c.time_ms()
            error = c.validate_group(group_id, allow_empty=True)
            group = None if error else c.group(group_id, now_ms)
            if group is None and not error:
                if generation_id < 0:
                    # a consumer without group management (assign) or a tool: the group
                    # exists from now on, Empty
                    group = c.group(group_id, now_ms, create=True)
                    log.info("group %s: created by an offset commit", group_id)
                else:
                    error = errors.IllegalGenerationError.code
            if group is not None:
                error = self._validate_commit(group, generation_id, member_id, group_instance_id)
            if not error and group is not None:
                if group.is_in(_S.COMPLETING_REBALANCE):
                    # the member has its new generation but no assignment yet
                    error = errors.RebalanceInProgressError.code
                elif group.is_in(_S.STABLE, _S.PREPARING_REBALANCE):
                    c.rebalance.schedule_heartbeat(group, group.get(member_id))
            if not error:
                try:
                    c.offsets.commit(group_id, c.node_id, offsets)
                except errors.BrokerResponseError as exc:
                    error = store_error(exc)
            return dict.fromkeys(offsets, error)

    def validate_txn_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        """For a TxnOffsetCommit (KIP-447; its offsets are kept by ``txn_offsets``): this
        broker coordinates the group and the committer is as ``commit`` requires; an
        error code. Without generation, member and instance id (a producer given only
        the group id, as before KIP-447) Kafka checks no membership."""
        c = self.coordinator
        with c.lock:
            error = c.validate_group(group_id, allow_empty=True)
            if error:
                return error
            group = c.group(group_id, c.time_ms(), create=generation_id < 0)
            if group is None:
                return errors.IllegalGenerationError.code
            if generation_id < 0 and not member_id and group_instance_id is None:
                return errors.CoordinatorNotAvailableError.code if group.is_in(_S.DEAD) else _NONE
            return self._validate_commit(group, generation_id, member_id, group_instance_id)

    def _validate_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        """Kafka's ``validateOffsetCommit`` (non-transactional)."""
        if group.is_in(_S.DEAD):
            return errors.CoordinatorNotAvailableError.code
        if generation_id < 0 and group.is_in(_S.EMPTY):
            return _NONE  # a consumer without group management, an admin tool
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.coordinator.validate_member(group, member_id, group_instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return errors.IllegalGenerationError.code
            return _NONE
        if not group.is_in(_S.EMPTY):
            return errors.UnknownMemberIdError.code  # only members commit to a live group
        return _NONE

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Handle an OffsetFetch of one group: a group-level error, and the committed
        offset of each partition asked for (None: nothing committed); every committed
        offset of the group when ``partitions`` is None."""
        c = self.coordinator
        with c.lock:
            error = c.validate_group(group_id, allow_empty=True)
        if error:
            return error, {}
        committed = c.offsets.offsets(group_id)
        if partitions is None:
            return _NONE, dict(committed)
        return _NONE, {tp: committed.get(tp) for tp in partitions}

    def delete(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """Handle an OffsetDelete: a group-level error, else an error per partition."""
        c = self.coordinator
        with c.lock:
            error = c.validate_group(group_id)
            group = None if error else c.group(group_id, c.time_ms())
            if group is None or group.is_in(_S.DEAD):
                return error or errors.GroupIdNotFoundError.code, {}
            wanted = list(partitions)
            results: dict[TopicPartition, int] = {}
            if not group.is_in(_S.EMPTY):
                if group.protocol_type != "consumer":
                    return errors.NonEmptyGroupError.code, {}
                subscribed = errors.GroupSubscribedToTopicError.code
                results = {tp: subscribed for tp in wanted if group.is_subscribed_to(tp[0])}
            eligible = [tp for tp in wanted if tp not in results]
            try:
                removed = c.offsets.delete_offsets(group_id, c.node_id, eligible)
            except errors.BrokerResponseError as exc:
                return store_error(exc), {}
            if removed:
                log.info("group %s: deleted %d committed offsets", group_id, removed)
            results.update(dict.fromkeys(eligible, _NONE))
            return _NONE, results
