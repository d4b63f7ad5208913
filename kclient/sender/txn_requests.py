"""The transactional producer's coordinator requests: Java's ``TransactionManager`` inner
classes ``TxnRequestHandler``, ``FindCoordinatorHandler``, ``InitProducerIdHandler``,
``AddPartitionsToTxnHandler`` and ``EndTxnHandler`` (the offsets' handlers are in
``txn_offset_requests``).

Each handler builds its request body (for the version the connection negotiated) and
handles the answer: done, retry (after ``retry.backoff.ms``; a coordinator that moved is
looked up again first), abortable (the transaction must be aborted) or fatal (the producer
is finished). Owned by the Sender thread; handlers run under the manager's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kclient import errors
from kclient.errors import KafkaError
from kclient.network.cluster import Node, TopicPartition
from kclient.network.kafka_client import ClientResponse
from kclient.protocol import ApiKey
from kclient.protocol.messages import add_partitions_to_txn, end_txn, find_coordinator
from kclient.sender.txn_state import TransactionalRequestResult, TransactionState

if TYPE_CHECKING:
    from kclient.sender.transaction_manager import TransactionManager

log = logging.getLogger(__name__)

# Java's TransactionManager.Priority: lower goes first.
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_OR_OFFSETS, END_TXN, EPOCH_BUMP = range(5)
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20
"""Backoff after CONCURRENT_TRANSACTIONS on a transaction's first AddPartitionsToTxn: the
previous transaction is still being completed and will be soon (Java's value)."""

NOT_COORDINATOR = frozenset(
    {errors.NotCoordinatorError.code, errors.CoordinatorNotAvailableError.code}
)
FENCED = frozenset({errors.InvalidProducerEpochError.code, errors.ProducerFencedError.code})
UNKNOWN_PRODUCER = frozenset(
    {errors.UnknownProducerIdError.code, errors.InvalidProducerIdMappingError.code}
)
TRANSACTION_ABORTABLE = errors.TransactionAbortableError.code
#: EndTxn answers (transaction version 2) that make the transaction abortable
TV2_ABORTABLE_END = frozenset({TRANSACTION_ABORTABLE, errors.InvalidTxnStateError.code})
_KEY_TYPES = {find_coordinator.GROUP: "group", find_coordinator.TRANSACTION: "transaction"}


class TxnRequestHandler:
    """One coordinator request and what its answer does to the transaction."""

    api_key: ClassVar[ApiKey]
    priority: int = ADD_PARTITIONS_OR_OFFSETS
    is_end_txn: ClassVar[bool] = False
    min_version: int | None = None
    max_version: ClassVar[int | None] = None

    def __init__(self, tm: TransactionManager, result: TransactionalRequestResult) -> None:
        self.tm = tm
        self.result = result
        self.is_retry = False
        self.retry_at_ms = 0

    @property
    def name(self) -> str:
        return type(self).__name__.removesuffix("Handler")

    @property
    def request_max_version(self) -> int | None:
        """The highest version this request may be sent with (None: kclient's)."""
        return self.max_version

    @property
    def coordinator_type(self) -> int | None:
        """Which coordinator the request goes to (None: any broker)."""
        return find_coordinator.TRANSACTION

    @property
    def coordinator_key(self) -> str:
        return self.tm.txn_id

    def retry_backoff_ms(self) -> int:
        return self.tm.retry_backoff_ms

    def body(self, version: int) -> dict[str, Any]:
        raise NotImplementedError

    def handle_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        raise NotImplementedError

    # ---- the answer (Java's TxnRequestHandler.onComplete) ----------------------------------

    def on_complete(self, response: ClientResponse) -> None:
        tm = self.tm
        with tm.lock:
            if tm.in_flight is self:
                tm.in_flight = None
            now_ms = response.received_time_ms
            if response.version_mismatch is not None:
                self.fatal(
                    errors.UnsupportedVersionError(
                        f"{self.name}: the broker does not support transactions "
                        f"({response.version_mismatch}); use a broker that does (Kafka 0.11+, "
                        "tansu), or remove 'transactional.id'"
                    )
                )
            elif response.body is None:
                reason = response.error or "disconnected"
                tm.last_problem = f"{self.name} to node {response.destination}: {reason}"
                log.debug("%s%s; retrying", tm._prefix, tm.last_problem)
                if self.coordinator_type is not None:
                    tm.lookup_coordinator(self.coordinator_type, self.coordinator_key)
                tm.retry(self, now_ms)
            else:
                self.handle_response(response.body, now_ms)

    # ---- outcomes ---------------------------------------------------------------------------

    def retry(self, code: int, now_ms: int, message: str | None = None) -> None:
        tm = self.tm
        name = errors.error_name(code)
        tm.last_problem = f"{self.name}: {name}" + (f" ({message})" if message else "")
        log.debug("%s%s; retrying", tm._prefix, tm.last_problem)
        if code in NOT_COORDINATOR and self.coordinator_type is not None:
            tm.lookup_coordinator(self.coordinator_type, self.coordinator_key)
        tm.retry(self, now_ms)

    def fatal(self, error: KafkaError) -> None:
        # first: a caller woken by the result sees the state
        self.result.fail(self.tm.transition_to_fatal(error))

    def abortable(self, error: KafkaError, *, needs_epoch_bump: bool = False) -> None:
        """The transaction must be aborted; with ``needs_epoch_bump`` (the broker lost or
        refused our producer id) only a new epoch lets the producer go on."""
        tm = self.tm
        if needs_epoch_bump and not tm.require_epoch_bump():
            self.fatal(error)
            return
        if tm.state is TransactionState.ABORTING_TRANSACTION:
            self.result.fail(error)
            return
        tm.transition_to_abortable(error)
        self.result.fail(tm.abortable_error_for_caller())

    def fenced(self) -> KafkaError:
        return self.tm.fenced_error(self.name)

    def error(self, code: int, what: str = "") -> KafkaError:
        return errors.for_code(code)(f"{self.name} for transactional id {self.tm.txn_id!r}{what}")

    def unexpected(self, code: int, message: str | None = None) -> None:
        detail = f": {message}" if message else ""
        self.fatal(self.error(code, f" failed unexpectedly{detail}"))

    def _ids(self) -> dict[str, Any]:
        pid, epoch = self.tm.producer_id_and_epoch
        return {"transactional_id": self.tm.txn_id, "producer_id": pid, "producer_epoch": epoch}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} retry={self.is_retry}>"


class FindCoordinatorHandler(TxnRequestHandler):
    """FindCoordinator (key type TRANSACTION or GROUP), sent to any broker."""

    api_key = ApiKey.FIND_COORDINATOR
    priority = FIND_COORDINATOR

    def __init__(
        self, tm: TransactionManager, result: TransactionalRequestResult, key_type: int, key: str
    ) -> None:
        super().__init__(tm, result)
        self.key_type = key_type
        self.key = key
        if key_type != find_coordinator.GROUP:
            self.min_version = 1  # v0 knows only groups

    @property
    def coordinator_type(self) -> int | None:
        return None

    def body(self, version: int) -> dict[str, Any]:
        if version >= 4:
            return {"key_type": self.key_type, "coordinator_keys": [self.key]}
        if version >= 1:
            return {"key": self.key, "key_type": self.key_type}
        return {"key": self.key}

    def handle_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        coordinators = body.get("coordinators")
        entry: Mapping[str, Any] = body
        if coordinators:
            if len(coordinators) != 1:
                self.fatal(
                    errors.IllegalStateError(
                        f"FindCoordinator answered {len(coordinators)} coordinators for one key"
                    )
                )
                return
            entry = coordinators[0]
        code = entry.get("error_code", 0)
        kind = _KEY_TYPES.get(self.key_type, str(self.key_type))
        if code == 0:
            node = Node(entry["node_id"], entry["host"], entry["port"])
            self.tm.coordinators[self.key_type] = node
            log.info("%sdiscovered %s coordinator %s", self.tm._prefix, kind, node)
            self.result.done()
            return
        message = entry.get("error_message")
        error = self.error(code, f" ({kind} {self.key!r}): {message or 'no detail'}")
        if error.retriable:
            self.retry(code, now_ms, message)
        elif code == errors.TransactionalIdAuthorizationFailedError.code:
            self.fatal(error)
        elif code in (errors.GroupAuthorizationFailedError.code, TRANSACTION_ABORTABLE):
            self.abortable(error)
        else:
            self.fatal(error)


class InitProducerIdHandler(TxnRequestHandler):
    """InitProducerId with the transactional id: a producer id and epoch, fencing older
    producers of the same id; with the current id and epoch (v3+), an epoch bump."""

    api_key = ApiKey.INIT_PRODUCER_ID

    def __init__(
        self, tm: TransactionManager, result: TransactionalRequestResult, *, is_epoch_bump: bool
    ) -> None:
        super().__init__(tm, result)
        self.is_epoch_bump = is_epoch_bump
        self.priority = EPOCH_BUMP if is_epoch_bump else INIT_PRODUCER_ID

    def body(self, version: int) -> dict[str, Any]:
        pid, epoch = self.tm.producer_id_and_epoch if self.is_epoch_bump else (-1, -1)
        return {
            "transactional_id": self.tm.txn_id,
            "transaction_timeout_ms": self.tm.transaction_timeout_ms,
            "producer_id": pid,
            "producer_epoch": epoch,
        }

    def handle_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        tm = self.tm
        code = body.get("error_code", 0)
        if code == 0:
            # a new epoch: each partition starts again at sequence 0 with its next batch
            tm.set_producer_id_and_epoch(body["producer_id"], body["producer_epoch"])
            tm.epoch_bump_required = False
            tm.v1_epoch_in_use = False
            tm.transition_to(TransactionState.READY)
            self.result.done()
            return
        if code in FENCED:
            self.fatal(self.fenced())
        elif errors.for_code(code).retriable:
            self.retry(code, now_ms)
        elif code == errors.InvalidTransactionTimeoutError.code:
            self.fatal(
                self.error(
                    code,
                    f": 'transaction.timeout.ms' ({tm.transaction_timeout_ms} ms) is outside what "
                    "the broker allows (its transaction.max.timeout.ms, 15 minutes by default); "
                    "lower it",
                )
            )
        elif code == errors.InvalidRequestError.code:
            self.fatal(
                self.error(
                    code,
                    ": the broker refused a transactional id, so it probably does not support "
                    "transactions (kclient's embedded broker does not yet); use a broker that "
                    "does, or remove 'transactional.id'",
                )
            )
        elif code == TRANSACTION_ABORTABLE:
            self.abortable(self.error(code))
        elif code in (
            errors.TransactionalIdAuthorizationFailedError.code,
            errors.ClusterAuthorizationFailedError.code,
        ):
            self.fatal(self.error(code, ": this principal may not use the transactional id"))
        else:
            self.unexpected(code)


class AddPartitionsToTxnHandler(TxnRequestHandler):
    """AddPartitionsToTxn v0-v3 (the client versions): every partition written to in the
    transaction, before its first batch."""

    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    max_version = add_partitions_to_txn.CLIENT_MAX_VERSION

    def __init__(
        self,
        tm: TransactionManager,
        result: TransactionalRequestResult,
        partitions: list[TopicPartition],
    ) -> None:
        super().__init__(tm, result)
        self.partitions = partitions
        self._backoff_ms = tm.retry_backoff_ms

    def retry_backoff_ms(self) -> int:
        return min(self.tm.retry_backoff_ms, self._backoff_ms)

    def body(self, version: int) -> dict[str, Any]:
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        ids = self._ids()
        return {
            "v3_and_below_transactional_id": ids["transactional_id"],
            "v3_and_below_producer_id": ids["producer_id"],
            "v3_and_below_producer_epoch": ids["producer_epoch"],
            "v3_and_below_topics": [
                {"name": topic, "partitions": parts} for topic, parts in by_topic.items()
            ],
        }

    def handle_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        tm = self.tm
        self._backoff_ms = tm.retry_backoff_ms
        results: dict[TopicPartition, int] = {}
        for topic in body.get("results_by_topic_v3_and_below") or ():
            for part in topic.get("results_by_partition") or ():
                results[TopicPartition(topic["name"], part["partition_index"])] = part[
                    "partition_error_code"
                ]
        unauthorized: set[str] = set()
        failed: dict[TopicPartition, str] = {}
        for tp, code in results.items():
            if code == 0:
                continue
            if code in NOT_COORDINATOR:
                self.retry(code, now_ms)
                return
            if code == errors.ConcurrentTransactionsError.code:
                if not tm.partitions_in_transaction:  # the previous one is still completing
                    self._backoff_ms = ADD_PARTITIONS_RETRY_BACKOFF_MS
                self.retry(code, now_ms)
                return
            if errors.for_code(code).retriable:
                self.retry(code, now_ms)
                return
            if code in FENCED:
                self.fatal(self.fenced())
                return
            if code in (
                errors.TransactionalIdAuthorizationFailedError.code,
                errors.InvalidTxnStateError.code,
            ):
                self.fatal(self.error(code, f" ({tp})"))
                return
            if code in UNKNOWN_PRODUCER:
                self.abortable(self.error(code, f" ({tp})"), needs_epoch_bump=True)
                return
            if code == TRANSACTION_ABORTABLE:
                self.abortable(self.error(code, f" ({tp})"))
                return
            if code == errors.TopicAuthorizationFailedError.code:
                unauthorized.add(tp.topic)
            elif code != errors.OperationNotAttemptedError.code:
                failed[tp] = errors.error_name(code)
        for tp in self.partitions:
            if tp not in results:
                failed[tp] = "not in the answer"
        ok = not unauthorized and not failed and not any(results.values())
        # Out of the pending set either way: after an error the transaction is aborted, and
        # batches of the partitions that were added may still be sent (Java does the same).
        tm.partitions_added(self.partitions, ok=ok)
        if unauthorized:
            self.abortable(
                errors.TopicAuthorizationFailedError(
                    f"not allowed to write to {', '.join(sorted(unauthorized))}"
                )
            )
        elif not ok:
            detail = ", ".join(f"{tp}: {why}" for tp, why in sorted(failed.items()))
            self.abortable(
                errors.AbortableTransactionError(
                    f"could not add partitions to the transaction: {detail or 'see log'}"
                )
            )
        else:
            log.debug("%sadded %s to the transaction", tm._prefix, self.partitions)
            self.result.done()


class EndTxnHandler(TxnRequestHandler):
    """EndTxn: commit or abort, once every batch of the transaction has completed. In
    transaction version 2 (v5) the answer carries the producer id and epoch to go on with."""

    api_key = ApiKey.END_TXN
    priority = END_TXN
    is_end_txn = True

    @property
    def request_max_version(self) -> int | None:
        return None if self.tm.is_transaction_v2 else end_txn.LAST_VERSION_BEFORE_TRANSACTION_V2

    def __init__(
        self, tm: TransactionManager, result: TransactionalRequestResult, *, committed: bool
    ) -> None:
        super().__init__(tm, result)
        self.committed = committed

    def body(self, version: int) -> dict[str, Any]:
        return {**self._ids(), "committed": self.committed}

    def handle_response(self, body: Mapping[str, Any], now_ms: int) -> None:
        tm = self.tm
        code = body.get("error_code", 0)
        if code == 0:
            log.debug("%stransaction %s", tm._prefix, "committed" if self.committed else "aborted")
            producer_id = body.get("producer_id", -1)
            if producer_id >= 0:  # v5: the epoch was bumped (a new id when it ran out)
                tm.set_producer_id_and_epoch(producer_id, body["producer_epoch"])
                tm.epoch_bump_required = False
            tm.complete_transaction(self.result)
        elif errors.for_code(code).retriable:
            self.retry(code, now_ms)
        elif code in FENCED:
            self.fatal(self.fenced())
        elif code == errors.TransactionalIdAuthorizationFailedError.code or (
            code == errors.InvalidTxnStateError.code and not tm.is_transaction_v2
        ):
            self.fatal(self.error(code))
        elif code in UNKNOWN_PRODUCER or code in TV2_ABORTABLE_END:
            # transaction version 2: INVALID_TXN_STATE is the coordinator's answer to the
            # commit of a transaction it aborted at transaction.timeout.ms (and bumped the
            # epoch for): abortable, as Java's since KAFKA-19177; the abort needs a new epoch
            if tm.state is TransactionState.ABORTING_TRANSACTION:
                self._abort_by_epoch_bump(code)
            else:
                self.abortable(
                    self.error(code),
                    needs_epoch_bump=code in UNKNOWN_PRODUCER
                    or code == errors.InvalidTxnStateError.code,
                )
        else:
            self.unexpected(code)

    def _abort_by_epoch_bump(self, code: int) -> None:
        """The coordinator will not end this transaction for us; a new epoch (InitProducerId
        with the current one, KIP-360) aborts whatever it still holds."""
        tm = self.tm
        if not tm.can_bump_epoch():
            self.fatal(self.error(code, ": and the coordinator cannot bump the epoch"))
            return
        tm.transaction_started = False
        tm.partitions_in_transaction.clear()
        tm.transition_to(TransactionState.INITIALIZING)
        tm.enqueue(InitProducerIdHandler(tm, self.result, is_epoch_bump=True))
