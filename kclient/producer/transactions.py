"""KafkaProducer's transactions: Java's ``KafkaProducer.initTransactions``,
``beginTransaction``, ``sendOffsetsToTransaction``, ``commitTransaction``,
``abortTransaction`` and KIP-939's ``prepareTransaction``.

``ProducerTransactions`` is a base class of ``KafkaProducer`` (``kafka_producer.py``),
holding only these methods: they drive the producer's ``TransactionManager``
(``kclient/sender/transaction_manager.py``) and the blocking ones wait on the caller's
thread for the Sender to finish the coordinator requests, up to ``timeout`` seconds
(``max.block.ms`` when None). Callers' threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kclient.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from kclient.sender import transaction_manager
from kclient.sender.offsets import ConsumerGroupMetadata, group_metadata_of, offsets_of
from kclient.sender.txn_completion import PreparedTxn
from kclient.sender.txn_state import TransactionalRequestResult

if TYPE_CHECKING:
    from kclient.sender.sender import Sender


class ProducerTransactions:
    """The transaction methods of ``KafkaProducer`` (see the module docstring)."""

    if TYPE_CHECKING:  # set by KafkaProducer.__init__
        _txn: transaction_manager.TransactionManager | None
        _sender: Sender
        _max_block_ms: int
        _unusable: str | KafkaError | None
        """Why ``send`` must fail: closed or forked (a str), or the producer's fatal error."""

        def flush(self, timeout: float | None = None) -> None: ...

        def _raise_unusable(self) -> None: ...

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the ``transactional.id`` with its coordinator: fence older producers of
        the same id and finish (commit or abort) a transaction they left open. Call once,
        before ``begin_transaction``. Waits up to ``timeout`` seconds (``max.block.ms`` if
        None); after a ``KafkaTimeoutError``, call it again to go on waiting."""
        txn = self._transactional("init_transactions")
        self._await(txn.initialize_transactions(), timeout, "init_transactions")

    def begin_transaction(self) -> None:
        """Open a transaction: records sent until ``commit_transaction`` are written
        atomically (readers with ``isolation.level=read_committed`` see all or none)."""
        self._transactional("begin_transaction").begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, Any],
        group_metadata: str | ConsumerGroupMetadata | object,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets as part of the open transaction (they take
        effect only if it commits): ``{TopicPartition: OffsetAndMetadata}`` (the next offset
        to read) and the group id, or its ``ConsumerGroupMetadata``."""
        group = group_metadata_of(group_metadata)
        by_partition = offsets_of(offsets)
        txn = self._transactional("send_offsets_to_transaction")
        if not by_partition:
            return
        result = txn.send_offsets_to_transaction(by_partition, group)
        self._await(result, timeout, "send_offsets_to_transaction")

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it. Raises
        ``TransactionRequiresAbortError`` if the transaction failed (abort it and go on),
        ``ProducerFencedError`` and other fatal errors if the producer is finished, and
        ``KafkaTimeoutError`` after ``timeout`` seconds (``max.block.ms`` if None): then call
        it again, which resumes the same commit."""
        txn = self._transactional("commit_transaction")
        self._await(txn.begin_commit(), timeout, "commit_transaction")

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records still queued fail with ``TransactionAbortedError``
        and nothing of it becomes visible to read_committed readers. Like
        ``commit_transaction``, a timed-out call may be made again to resume."""
        txn = self._transactional("abort_transaction")
        self._await(txn.begin_abort(), timeout, "abort_transaction")

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTxn:
        """Hand the open transaction to another process to complete (KIP-939's
        ``prepareTransaction``): flush, check that every record of it was delivered, and
        return its transactional id, producer id and epoch. From then on ``send`` raises and
        ``close()`` leaves the transaction open instead of aborting it; complete it with
        ``kclient.sender.txn_completion.complete_transaction`` (from any process) before
        ``transaction.timeout.ms`` runs out, or the coordinator aborts it. Raises
        ``TransactionRequiresAbortError`` if a record of it failed."""
        txn = self._transactional("prepare_transaction")
        self.flush(timeout)
        pid = txn.prepare()
        return PreparedTxn(txn.txn_id, pid.producer_id, pid.epoch)

    def _transactional(self, operation: str) -> transaction_manager.TransactionManager:
        if self._txn is None:
            raise IllegalStateError(
                f"{operation}() needs a transactional producer: set 'transactional.id'"
            )
        if isinstance(self._unusable, str):  # closed or forked (a fatal error lets abort run)
            self._raise_unusable()
        return self._txn

    def _await(
        self, result: TransactionalRequestResult, timeout: float | None, operation: str
    ) -> None:
        self._sender.wakeup()
        timeout_s = self._max_block_ms / 1000 if timeout is None else timeout
        if not result.wait(timeout_s):
            txn = self._txn
            problem = txn.last_problem if txn is not None else None
            raise KafkaTimeoutError(
                f"{operation}() did not complete within {timeout_s:g} s"
                + (f" (last: {problem})" if problem else "")
                + f"; call {operation}() again to keep waiting"
            )
        result.raise_error()
