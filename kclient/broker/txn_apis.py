"""TxnApis: the transaction requests of ``KafkaApis``.

InitProducerId (v0-v5; without a transactional id too), AddPartitionsToTxn (v0-v3 from
producers; v4-v5 batched, with ``verify_only``, as brokers send it), AddOffsetsToTxn
(v0-v4), EndTxn (v0-v5), TxnOffsetCommit (v0-v5), and for admin tools ListTransactions
(v0-v1: the ids this broker coordinates), DescribeTransactions (v0), DescribeProducers
(v0: the producer state of the partitions this broker leads) and WriteTxnMarkers (v0-v1:
what ``kafka-transactions.sh abort`` sends to end a hanging transaction). Each handler
turns the request body into a call of the broker's ``TransactionCoordinator`` (or, for
TxnOffsetCommit, of its ``GroupCoordinator`` and ``PendingTxnOffsets``) and its result
into the response of the request's version; no transaction logic lives here.

Transaction version 2 (KIP-890 part 2), decided per request version as Kafka 4.x does:
EndTxn v5 bumps the epoch and answers the producer id and epoch of the next transaction,
TxnOffsetCommit v5 adds the group's offsets partition itself (no AddOffsetsToTxn). The
broker advertises the finalized feature ``transaction.version`` (``finalized_features``);
at level 1 (``BrokerConfig.transaction_version``) EndTxn and TxnOffsetCommit are
advertised up to v4 and a v5 request is answered UNSUPPORTED_VERSION. Called on request
handler threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kclient import errors
from kclient.broker.consumer_offsets import OffsetAndMetadata, TopicPartition
from kclient.broker.controller import Controller, Partition
from kclient.broker.group_coordinator import GroupCoordinator
from kclient.broker.offset_metadata_manager import offsets_to_commit, partition_errors
from kclient.broker.request_channel import Request
from kclient.broker.txn_coordinator import EndTxnResult, TransactionCoordinator
from kclient.broker.txn_markers import GROUP_OFFSETS_TOPIC
from kclient.broker.txn_metadata import TV_0, TV_2, TransactionState
from kclient.broker.txn_offsets import PendingTxnOffsets
from kclient.broker.txn_state import txn_partition_for
from kclient.protocol import ApiKey

#: Highest versions served with transaction version 1 (below the declared ones).
_TV1_MAX_VERSIONS = {int(ApiKey.END_TXN): 4, int(ApiKey.TXN_OFFSET_COMMIT): 4}
#: The first version of EndTxn / TxnOffsetCommit in transaction version 2.
_TV2_VERSION = 5
TRANSACTION_VERSION_FEATURE = "transaction.version"
#: Kafka's highest ``transaction.version`` level (TransactionVersion.TV_2)
MAX_TRANSACTION_VERSION = 2
#: The finalized features' epoch (Kafka: the metadata offset they were last set at; a
#: client keeps the features of the highest epoch it has seen).
FINALIZED_FEATURES_EPOCH = 1


def max_versions(transaction_version: int) -> dict[int, int]:
    """Highest versions served where they are below the declared ones."""
    return {} if transaction_version >= 2 else dict(_TV1_MAX_VERSIONS)


def finalized_features(transaction_version: int) -> dict[str, Any]:
    """The feature fields of an ApiVersions v3+ response: ``transaction.version`` is
    supported up to 2 and finalized at ``transaction_version``."""
    return {
        "supported_features": [
            {"name": TRANSACTION_VERSION_FEATURE, "min_version": 0,
             "max_version": MAX_TRANSACTION_VERSION},
        ],
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": [
            {"name": TRANSACTION_VERSION_FEATURE, "max_version_level": transaction_version,
             "min_version_level": transaction_version},
        ],
    }  # fmt: skip


_UNKNOWN_TOPIC = errors.UnknownTopicOrPartitionError.code
_NOT_ATTEMPTED = errors.OperationNotAttemptedError.code
_UNSUPPORTED = errors.UnsupportedVersionError.code
_NOT_LEADER = errors.NotLeaderOrFollowerError.code


class TxnApis:
    """Handlers of the transaction APIs of one broker."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        group_coordinator: GroupCoordinator,
        pending_offsets: PendingTxnOffsets,
        controller: Controller,
        send: Callable[[Request, dict[str, Any]], None],
    ) -> None:
        self.coordinator = coordinator
        self.group_coordinator = group_coordinator
        self.pending_offsets = pending_offsets
        self.controller = controller
        self._send = send
        self._max_versions = max_versions(coordinator.transaction_version)

    def handlers(self) -> dict[int, Callable[[Request], None]]:
        return {
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.handle_add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.handle_add_offsets_to_txn,
            ApiKey.END_TXN: self.handle_end_txn,
            ApiKey.TXN_OFFSET_COMMIT: self.handle_txn_offset_commit,
            ApiKey.LIST_TRANSACTIONS: self.handle_list_transactions,
            ApiKey.DESCRIBE_TRANSACTIONS: self.handle_describe_transactions,
            ApiKey.DESCRIBE_PRODUCERS: self.handle_describe_producers,
            ApiKey.WRITE_TXN_MARKERS: self.handle_write_txn_markers,
        }

    def _reply(self, request: Request, body: dict[str, Any], failed: int = 0) -> None:
        request.error_count += failed
        self._send(request, body)

    def _exists(self, topic: str, index: int) -> bool:
        t = self.controller.topic(topic)
        return t is not None and 0 <= index < len(t.partitions)

    # ---- InitProducerId ----------------------------------------------------------------

    def handle_init_producer_id(self, request: Request) -> None:
        """InitProducerId: the transaction coordinator's for a transactional id, else (an
        idempotent producer) a fresh producer id at epoch 0, as Kafka does."""
        body = request.parsed_body()
        producer_id = body.get("producer_id", -1)
        epoch = body.get("producer_epoch", -1)
        if (producer_id == -1) != (epoch == -1):
            result_error, pid, new_epoch = errors.InvalidRequestError.code, -1, -1
        elif body["transactional_id"] is None:
            try:
                result_error, pid, new_epoch = 0, self.controller.allocate_producer_id(), 0
            except errors.BrokerResponseError as exc:
                result_error, pid, new_epoch = exc.code, -1, -1
        else:
            result = self.coordinator.handle_init_producer_id(
                body["transactional_id"],
                body["transaction_timeout_ms"],
                None if producer_id == -1 else (producer_id, epoch),
            )
            result_error, pid, new_epoch = result.error, result.producer_id, result.producer_epoch
        self._reply(
            request,
            {"error_code": result_error, "producer_id": pid, "producer_epoch": new_epoch},
            1 if result_error else 0,
        )

    # ---- AddPartitionsToTxn ------------------------------------------------------------

    def handle_add_partitions_to_txn(self, request: Request) -> None:
        body = request.parsed_body()
        if request.header.api_version <= 3:
            codes = self._add_partitions(
                body["v3_and_below_transactional_id"],
                body["v3_and_below_producer_id"],
                body["v3_and_below_producer_epoch"],
                body["v3_and_below_topics"],
                verify_only=False,
            )
            self._reply(
                request,
                {"results_by_topic_v3_and_below": _topic_results(codes)},
                sum(1 for c in codes.values() if c),
            )
            return
        results = []
        failed = 0
        for txn in body["transactions"]:
            codes = self._add_partitions(
                txn["transactional_id"],
                txn["producer_id"],
                txn["producer_epoch"],
                txn["topics"],
                verify_only=txn.get("verify_only", False),
            )
            failed += sum(1 for c in codes.values() if c)
            results.append(
                {
                    "transactional_id": txn["transactional_id"],
                    "topic_results": _topic_results(codes),
                }
            )
        self._reply(request, {"error_code": 0, "results_by_transaction": results}, failed)

    def _add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        topics: list[dict[str, Any]],
        *,
        verify_only: bool,
    ) -> dict[TopicPartition, int]:
        wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
        if verify_only:
            return self.coordinator.handle_verify_partitions(
                transactional_id, producer_id, epoch, wanted
            )
        unknown = {tp for tp in wanted if not self._exists(*tp)}
        if unknown:  # Kafka's answer: the unknown ones, and nothing attempted for the rest
            return {tp: _UNKNOWN_TOPIC if tp in unknown else _NOT_ATTEMPTED for tp in wanted}
        error = self.coordinator.handle_add_partitions(transactional_id, producer_id, epoch, wanted)
        return dict.fromkeys(wanted, error)

    def verify_transaction(
        self, partition: Partition, transactional_id: str, producer_id: int, epoch: int, add: bool
    ) -> int:
        """The produce path's call to the transaction coordinator (in-process): add the
        partition to the transaction (Produce v12+, transaction version 2) or verify it is
        in (older versions); an error code for the append."""
        tp = (partition.topic.name, partition.index)
        if add:
            return self.coordinator.add_partition_for_produce(
                transactional_id, producer_id, epoch, tp
            )
        self.coordinator.verify_partition(transactional_id, *tp, producer_id, epoch)
        return 0

    # ---- AddOffsetsToTxn / EndTxn ------------------------------------------------------

    def handle_add_offsets_to_txn(self, request: Request) -> None:
        body = request.parsed_body()
        error = self.coordinator.handle_add_offsets(
            body["transactional_id"], body["producer_id"], body["producer_epoch"], body["group_id"]
        )
        self._reply(request, {"error_code": error}, 1 if error else 0)

    def handle_end_txn(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        if version > self._max_versions.get(ApiKey.END_TXN, version):
            result = EndTxnResult(_UNSUPPORTED)  # transaction version 2 is off
        else:
            result = self.coordinator.handle_end_txn(
                body["transactional_id"],
                body["producer_id"],
                body["producer_epoch"],
                body["committed"],
                TV_2 if version >= _TV2_VERSION else TV_0,
            )
        self._reply(
            request,
            {
                "error_code": result.error,
                "producer_id": result.producer_id,
                "producer_epoch": result.producer_epoch,
            },
            1 if result.error else 0,
        )

    # ---- TxnOffsetCommit ---------------------------------------------------------------

    def handle_txn_offset_commit(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        group_id = body["group_id"]
        now_ms = self.group_coordinator.time_ms()
        codes, valid = offsets_to_commit(
            body["topics"],
            lambda topic, partition: 0 if self._exists(topic, partition) else _UNKNOWN_TOPIC,
            self.group_coordinator.config.offset_metadata_max_bytes,
            lambda p: now_ms,
        )
        if valid:
            error = self._txn_offset_commit(body, version, group_id, valid)
            codes.update(dict.fromkeys(valid, error))
        topics = partition_errors(body["topics"], codes)
        self._reply(request, {"topics": topics}, sum(1 for c in codes.values() if c))

    def _txn_offset_commit(
        self,
        body: dict[str, Any],
        version: int,
        group_id: str,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> int:
        if version > self._max_versions.get(ApiKey.TXN_OFFSET_COMMIT, version):
            return _UNSUPPORTED  # transaction version 2 is off
        producer_id, epoch = body["producer_id"], body["producer_epoch"]
        transactional_id = body["transactional_id"]
        error = self.group_coordinator.offset_manager.validate_txn_commit(
            group_id,
            body.get("generation_id", -1),
            body.get("member_id", ""),
            body.get("group_instance_id"),
        )
        if error:
            return error
        # no marker between the check (or the implicit add) and the offsets' add
        with self.coordinator.state.locked(transactional_id):
            if version >= _TV2_VERSION:  # the implicit AddOffsetsToTxn of version 2
                error = self.coordinator.add_partition_for_produce(
                    transactional_id,
                    producer_id,
                    epoch,
                    (GROUP_OFFSETS_TOPIC, txn_partition_for(group_id)),
                )
                if error == errors.NotEnoughReplicasError.code:
                    error = errors.CoordinatorNotAvailableError.code  # Kafka's answer here
            else:
                error = self.coordinator.check_offsets_in_transaction(
                    transactional_id, producer_id, epoch, group_id
                )
            if error:
                return error
            try:
                self.pending_offsets.add(producer_id, group_id, offsets)
            except errors.KafkaStorageError:
                return errors.CoordinatorNotAvailableError.code
        return 0

    # ---- ListTransactions / DescribeTransactions ---------------------------------------

    def handle_list_transactions(self, request: Request) -> None:
        body = request.parsed_body()
        known = {s.value for s in TransactionState}
        wanted = set(body["state_filters"])
        error, found = self.coordinator.list_transactions(
            wanted & known, set(body["producer_id_filters"]), body.get("duration_filter", -1)
        )
        if wanted and not wanted & known:
            found = []  # only unknown states asked for: nothing matches
        self._reply(
            request,
            {
                "error_code": error,
                "unknown_state_filters": sorted(wanted - known),
                "transaction_states": [
                    {
                        "transactional_id": m.transactional_id,
                        "producer_id": m.producer_id,
                        "transaction_state": m.state.value,
                    }
                    for m in found
                ],
            },
            1 if error else 0,
        )

    def handle_describe_transactions(self, request: Request) -> None:
        body = request.parsed_body()
        described = []
        for transactional_id in body["transactional_ids"]:
            error, m = self.coordinator.describe_transaction(transactional_id)
            out: dict[str, Any] = {"error_code": error, "transactional_id": transactional_id}
            if m is not None:
                topics: dict[str, list[int]] = {}
                for topic, index in sorted(m.partitions):
                    topics.setdefault(topic, []).append(index)
                out |= {
                    "transaction_state": m.state.value,
                    "transaction_timeout_ms": m.timeout_ms,
                    "transaction_start_time_ms": m.txn_start_ms,
                    "producer_id": m.producer_id,
                    "producer_epoch": m.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                }
            described.append(out)
        failed = sum(1 for d in described if d["error_code"])
        self._reply(request, {"transaction_states": described}, failed)

    # ---- DescribeProducers / WriteTxnMarkers ---------------------------------------------

    def _led(self, topic: str, index: int) -> tuple[int, Partition | None]:
        """(error code, partition) for a partition this broker must lead."""
        partition = self.controller.partition(topic, index)
        if partition is None:
            return _UNKNOWN_TOPIC, None
        if partition.leader_id != self.coordinator.node_id:
            return _NOT_LEADER, None
        return 0, partition

    def handle_describe_producers(self, request: Request) -> None:
        topics = []
        for t in request.parsed_body()["topics"]:
            partitions = []
            for index in t["partition_indexes"]:
                error, partition = self._led(t["name"], index)
                out: dict[str, Any] = {"partition_index": index, "error_code": error}
                if partition is not None:
                    with partition.lock:
                        out["active_producers"] = [
                            {
                                "producer_id": producer_id,
                                "producer_epoch": entry.epoch,
                                "last_sequence": entry.last_seq,
                                "last_timestamp": (
                                    entry.batches[-1].timestamp if entry.batches else -1
                                ),
                                "coordinator_epoch": entry.coordinator_epoch,
                                "current_txn_start_offset": entry.current_txn_first_offset,
                            }
                            for producer_id, entry in partition.producer_state.active_producers()
                        ]
                partitions.append(out)
            topics.append({"name": t["name"], "partitions": partitions})
        failed = sum(1 for t in topics for p in t["partitions"] if p["error_code"])
        self._reply(request, {"topics": topics}, failed)

    def handle_write_txn_markers(self, request: Request) -> None:
        """Write each marker to the partitions it names that this broker leads (Kafka's
        ``handleWriteTxnMarkersRequest``): what an admin's abort of a hanging transaction
        sends; the coordinators of this cluster write their markers in-process."""
        now_ms = self.coordinator.time_ms()
        results = []
        failed = 0
        for marker in request.parsed_body()["markers"]:
            topics = []
            for t in marker["topics"]:
                partitions = []
                for index in t["partition_indexes"]:
                    error, partition = self._led(t["name"], index)
                    if partition is not None:
                        error = self.coordinator.markers.write(
                            partition,
                            producer_id=marker["producer_id"],
                            producer_epoch=marker["producer_epoch"],
                            coordinator_epoch=marker["coordinator_epoch"],
                            committed=marker["transaction_result"],
                            now_ms=now_ms,
                        )
                    failed += 1 if error else 0
                    partitions.append({"partition_index": index, "error_code": error})
                topics.append({"name": t["name"], "partitions": partitions})
            results.append({"producer_id": marker["producer_id"], "topics": topics})
        self._reply(request, {"markers": results}, failed)


def _topic_results(codes: dict[TopicPartition, int]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "partition_error_code": code}
        )
    return [{"name": t, "results_by_partition": parts} for t, parts in by_topic.items()]
