"""The coordinator requests that put a consumer group's offsets into a transaction:
Java's ``AddOffsetsToTxnHandler`` (to the transaction coordinator) and
``TxnOffsetCommitHandler`` (to the group's coordinator), behind
``send_offsets_to_transaction``.

Owned by the Sender thread; handlers run under the transaction manager's lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kclient import errors
from kclient.network.cluster import TopicPartition
from kclient.protocol import ApiKey
from kclient.protocol.messages import find_coordinator, txn_offset_commit
from kclient.sender.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from kclient.sender.txn_requests import (
    FENCED,
    NOT_COORDINATOR,
    TRANSACTION_ABORTABLE,
    UNKNOWN_PRODUCER,
    TxnRequestHandler,
)
from kclient.sender.txn_state import TransactionalRequestResult

if TYPE_CHECKING:
    from kclient.sender.transaction_manager import TransactionManager


class AddOffsetsToTxnHandler(TxnRequestHandler):
    """AddOffsetsToTxn: the group's offsets join the transaction; then TxnOffsetCommit."""

    api_key = ApiKey.ADD_OFFSETS_TO_TXN

    def __init__(
        self,
        tm: TransactionManager,
        result: TransactionalRequestResult,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        group: ConsumerGroupMetadata,
    ) -> None:
        super().__init__(tm, result)
        self.offsets = offsets
        self.group = group

    def body(self, version: int) -> dict[str, Any]:
        return {**self._ids(), "group_id": self.group.group_id}

    def handle_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        tm = self.tm
        code = body.get("error_code", 0)
        if code == 0:
            tm.transaction_started = True  # the group's offsets partition is in it
            if not self.result.is_completed:  # else the transaction is being aborted
                tm.pending_txn_offset_commits.update(self.offsets)
                tm.enqueue(TxnOffsetCommitHandler(tm, self.result, self.group))
        elif errors.for_code(code).retriable:
            self.retry(code, now_ms)
        elif code in UNKNOWN_PRODUCER:
            self.abortable(self.error(code), needs_epoch_bump=True)
        elif code in FENCED:
            self.fatal(self.fenced())
        elif code in (
            errors.TransactionalIdAuthorizationFailedError.code,
            errors.InvalidTxnStateError.code,
        ):
            self.fatal(self.error(code))
        elif code == errors.GroupAuthorizationFailedError.code:
            self.abortable(self.error(code, f": not allowed to use group {self.group.group_id!r}"))
        elif code == TRANSACTION_ABORTABLE:
            self.abortable(self.error(code))
        else:
            self.unexpected(code)


class TxnOffsetCommitHandler(TxnRequestHandler):
    """TxnOffsetCommit to the group coordinator; partitions that fail retriably are sent
    again until every offset is accepted. In transaction version 2 (v5) it adds the
    group's offsets to the transaction itself."""

    api_key = ApiKey.TXN_OFFSET_COMMIT

    @property
    def request_max_version(self) -> int | None:
        if self.tm.is_transaction_v2:
            return None
        return txn_offset_commit.LAST_VERSION_BEFORE_TRANSACTION_V2

    def __init__(
        self,
        tm: TransactionManager,
        result: TransactionalRequestResult,
        group: ConsumerGroupMetadata,
    ) -> None:
        super().__init__(tm, result)
        self.group = group

    @property
    def coordinator_type(self) -> int | None:
        return find_coordinator.GROUP

    @property
    def coordinator_key(self) -> str:
        return self.group.group_id

    def body(self, version: int) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, om in sorted(self.tm.pending_txn_offset_commits.items()):
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": om.offset,
                    "committed_leader_epoch": -1 if om.leader_epoch is None else om.leader_epoch,
                    "committed_metadata": om.metadata,
                }
            )
        group = self.group
        return {
            **self._ids(),
            "group_id": group.group_id,
            "generation_id": group.generation_id,
            "member_id": group.member_id,
            "group_instance_id": group.group_instance_id,
            "topics": [{"name": topic, "partitions": parts} for topic, parts in by_topic.items()],
        }

    def handle_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        tm = self.tm
        pending = tm.pending_txn_offset_commits
        lookup = False
        for topic in body.get("topics") or ():
            for part in topic.get("partitions") or ():
                tp = TopicPartition(topic["name"], part["partition_index"])
                code = part.get("error_code", 0)
                if code == 0:
                    pending.pop(tp, None)
                elif code in NOT_COORDINATOR or code == errors.RequestTimedOutError.code:
                    lookup = True
                elif code == errors.UnknownTopicOrPartitionError.code:
                    self._unknown_partition(tp)
                    break
                elif errors.for_code(code).retriable:
                    continue
                else:
                    self._failed(tp, code)
                    break
        if self.result.is_completed:
            pending.clear()
        elif not pending:
            self.result.done()
        else:
            if lookup:
                tm.lookup_coordinator(find_coordinator.GROUP, self.group.group_id)
            tm.last_problem = f"TxnOffsetCommit: {len(pending)} offsets not accepted yet"
            tm.retry(self, now_ms)

    def _unknown_partition(self, tp: TopicPartition) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION: Java retries it (the coordinator's metadata may lag a
        topic just created), but offsets name partitions the consumer has read, so it nearly
        always means the topic does not exist, and retrying can never succeed: the
        transaction must be aborted (a lagging coordinator costs one aborted transaction)."""
        code = errors.UnknownTopicOrPartitionError.code
        self.abortable(
            self.error(
                code,
                f" (group {self.group.group_id!r}): the cluster has no partition {tp.partition} "
                f"of topic {tp.topic!r}; offsets can be committed only for partitions that "
                "exist (the ones the consumer read)",
            )
        )

    def _failed(self, tp: TopicPartition, code: int) -> None:
        group = self.group.group_id
        if code in (
            errors.GroupAuthorizationFailedError.code,
            errors.FencedInstanceIdError.code,
            TRANSACTION_ABORTABLE,
        ):
            self.abortable(self.error(code, f" ({tp}, group {group!r})"))
        elif code in (errors.UnknownMemberIdError.code, errors.IllegalGenerationError.code):
            self.abortable(
                errors.CommitFailedError(
                    f"the offsets of group {group!r} were refused ({errors.error_name(code)}): "
                    "the consumer's generation or member id is stale (the group rebalanced)"
                )
            )
        elif code in FENCED:
            self.fatal(self.fenced())
        elif code in UNKNOWN_PRODUCER:  # v5's implicit add found no such producer
            self.abortable(self.error(code, f" ({tp}, group {group!r})"), needs_epoch_bump=True)
        else:
            self.fatal(self.error(code, f" ({tp}, group {group!r})"))
