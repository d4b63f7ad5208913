"""The Sender's transactional step: Java's ``Sender.maybeSendAndPollTransactionalRequest``
(and the abort of an open transaction when the producer closes).

Owned by the Sender thread. Each ``run_once`` sends at most one coordinator request (one
is in flight at a time, as in Java) to the coordinator it needs, looking the coordinator
up first when it is unknown or unreachable. Produce requests go on meanwhile: a batch
whose partition the coordinator has not added yet is simply not drained, and EndTxn waits
until every batch has completed. While the transaction is aborting (or must be), batches
still queued fail with ``TransactionAbortedError``: they were never sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kclient.errors import KafkaError, TransactionAbortedError
from kclient.network.kafka_client import ClientRequest, KafkaClient
from kclient.protocol.messages import find_coordinator
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.transaction_manager import TransactionManager
from kclient.sender.txn_requests import TxnRequestHandler

log = logging.getLogger(__name__)

NO_TIMEOUT_MS = 2**31


class TransactionalRequestSender:
    """Sends the transaction manager's requests for the Sender (one step per loop)."""

    def __init__(
        self,
        tm: TransactionManager,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        abort_undrained: Callable[[BaseException], None],
        *,
        request_timeout_ms: int,
        monotonic_ms: Callable[[], int],
        log_prefix: str = "",
    ) -> None:
        self.tm = tm
        self._monotonic_ms = monotonic_ms
        self._client = client
        self._accumulator = accumulator
        self._abort_undrained = abort_undrained
        self._request_timeout_ms = request_timeout_ms
        self._prefix = log_prefix

    def run_once(self, now_ms: int) -> int:
        """Send the next coordinator request if one may go; returns how long the Sender may
        then block (a response wakes it anyway)."""
        tm = self.tm
        if (tm.has_abortable_error or tm.is_aborting) and self._accumulator.has_undrained():
            cause = tm.last_error
            error = TransactionAbortedError(
                f"the transaction of transactional id {tm.txn_id!r} is being aborted"
                + (f" ({cause})" if cause is not None else "")
                + "; this record was not sent"
            )
            error.__cause__ = cause
            self._abort_undrained(error)
        if tm.in_flight is not None:
            return NO_TIMEOUT_MS
        handler, delay_ms = tm.next_request(self._accumulator.has_incomplete, now_ms)
        if handler is None:
            return NO_TIMEOUT_MS if delay_ms is None else delay_ms
        return self._send(handler, now_ms)

    def _send(self, handler: TxnRequestHandler, now_ms: int) -> int:
        tm = self.tm
        client = self._client
        key_type = handler.coordinator_type
        if key_type is not None:
            node = tm.coordinators.get(key_type)
            if node is None:  # FindCoordinator goes first (it has the highest priority)
                tm.lookup_coordinator(key_type, handler.coordinator_key)
                tm.enqueue(handler)
                return 0
        else:
            node = client.least_loaded_node(now_ms)
            if node is None:
                failures = "; ".join(
                    f"{a}: {why}" for a, why in client.connection_failures().items()
                )
                tm.last_problem = f"{handler.name}: no broker is reachable" + (
                    f" ({failures})" if failures else ""
                )
                tm.retry(handler, now_ms)
                client.metadata.request_update()
                return handler.retry_backoff_ms()
        if not client.ready(node, now_ms):
            if client.connection_failed(node):
                tm.last_problem = f"{handler.name}: cannot connect to {node.address}"
                if key_type is not None:
                    tm.lookup_coordinator(key_type, handler.coordinator_key)
                    tm.retry(handler, now_ms)
                    return handler.retry_backoff_ms()
            tm.enqueue(handler)  # wait for the connection
            return client.poll_delay_ms(node, now_ms)
        if key_type == find_coordinator.TRANSACTION:
            tm.on_coordinator_ready(node.id, client.api_versions(node.id))
        request = ClientRequest(
            node.id,
            handler.api_key,
            handler.body,
            now_ms,
            callback=handler.on_complete,
            request_timeout_ms=self._request_timeout_ms,
            min_version=handler.min_version,
            max_version=handler.request_max_version,
        )
        log.debug("%ssending %s to node %d", self._prefix, handler.name, node.id)
        tm.in_flight = handler
        client.send(request, now_ms)
        return NO_TIMEOUT_MS

    def has_pending_work(self) -> bool:
        """Requests still to send for an open transaction (the Sender finishes them on close)."""
        tm = self.tm
        return tm.has_pending_requests and tm.has_ongoing_transaction

    def abort_on_close(self, stop: Callable[[], bool], run_once: Callable[[], object]) -> None:
        """The producer is closing with a transaction open: abort it (Java's Sender.run),
        trying for at most ``request.timeout.ms`` (the coordinator aborts it anyway after
        ``transaction.timeout.ms``)."""
        tm = self.tm
        if tm.prepared:  # another process completes it (prepare_transaction)
            log.info("%sleaving the prepared transaction open", self._prefix)
            tm.close()
            return
        deadline_ms = self._monotonic_ms() + self._request_timeout_ms
        while (
            not stop()
            and tm.has_ongoing_transaction
            and tm.fatal_error is None
            and self._monotonic_ms() < deadline_ms
        ):
            if not tm.is_completing:
                log.info("%saborting the open transaction: the producer is closing", self._prefix)
                try:
                    tm.begin_abort()
                except KafkaError as exc:
                    log.warning("%scould not abort the transaction on close: %s", self._prefix, exc)
                    break
            run_once()
        tm.close()
