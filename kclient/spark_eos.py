"""The exactly-once Spark sink's driver protocol: a two-phase commit of Kafka transactions
that the Spark tasks prepared (the tasks' side is ``spark_eos_task``).

No Kafka class corresponds; it is the commit protocol stream processors use to write to
Kafka exactly once (a sink's "pre-commit" in each task, the "commit" by a coordinator
once every task succeeded), driven by Spark's batch ids. Per batch ``B`` of sink ``S``:

1. ``W B n``: the store records that batch B is being written by at most ``n`` tasks.
   Leftovers of an earlier attempt that this one will not overwrite are aborted first.
2. Each task ``p`` writes its rows in a transaction under ``kclient-eos.S.B.p``:
   ``init_transactions`` (fences and aborts an earlier attempt of the same task), sends,
   flushes, checks every delivery, and *prepares* the transaction (``KafkaProducer.
   prepare_transaction``: closed without committing). It returns its producer id, epoch
   and record count.
3. ``R B p:pid:epoch:count,...``: once every task succeeded, the store records the
   transactions that make up batch B. From here on, B commits whatever happens.
4. The driver commits each one (``txn_completion.complete_transaction``: EndTxn with the
   recorded producer id and epoch; repeating it after a commit is answered NONE).
5. ``D B``: the batch is done.

Replaying batch B (Spark gives the same batch id again after a driver restart): ``D B``
→ skip; ``R B`` → commit the recorded transactions, mark done, no rewrite; ``W`` or an
earlier batch → write B again. For a ``W B' n'`` record, the transactional ids it names
that the new attempt does not reuse (all of them for another batch, partitions ``>= n``
for the same batch) are fenced with InitProducerId, which aborts their open transactions
so they do not hold the last stable offset until ``transaction.timeout.ms``; the ids the
new attempt reuses are fenced by its tasks' own ``init_transactions``.

The store is the committed offset of a consumer group ``kclient-eos.S`` for partition 0
of the sink's topic, with the state in the offset's metadata (``GroupOffsetsStore``). We
chose group offsets over a compacted topic: they live on the same cluster, need no topic
to be created or configured, are read back with one OffsetFetch (a compacted topic needs
a consumer to read its tail), and an OffsetCommit is atomic and durable (replicated in
``__consumer_offsets``) on every broker with groups, tansu and ours included. The cost:
the broker's ``offset.metadata.max.bytes`` (4096 by default) bounds the ``R`` record to
about 100 tasks with rows per batch (``OffsetMetadataTooLargeError`` says so).

A transaction the coordinator aborted before step 4 (``transaction.timeout.ms`` ran out
between the task's first send and the driver's commit, or an operator aborted it) fails
the batch with ``ExactlyOnceRowsLostError``: its rows will never be visible.

Threads: the Spark driver's thread that runs ``foreachBatch`` / ``write_dataframe``.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kclient.errors import ConfigError, KafkaError
from kclient.sender.coordinator_calls import (
    CoordinatorCalls,
    commit_offset_metadata,
    fetch_offset_metadata,
)
from kclient.sender.txn_completion import (
    PreparedTxn,
    TransactionNotCompletedError,
    complete_transaction,
    fence_transactional_id,
)

log = logging.getLogger(__name__)

_SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
_FORMAT = "kclient-eos/1"
WRITING, RECORDED, DONE = "W", "R", "D"
#: ``KCLIENT_EOS_PAUSE_AT=<point>:<batch id>`` pauses the process at that point of that
#: batch (after creating the file ``KCLIENT_EOS_PAUSE_FILE``), for tests that kill the
#: driver there. Points: ``task_prepared`` (in a task), ``recorded``, ``completing``
#: (after the first commit), ``done``.
PAUSE_AT_ENV = "KCLIENT_EOS_PAUSE_AT"
PAUSE_FILE_ENV = "KCLIENT_EOS_PAUSE_FILE"
#: ``KCLIENT_EOS_CRASH_TASK=<sink id>:<partition>``: the first attempt of that task exits
#: its Python worker (``os._exit``) after its rows reached the broker, before preparing.
CRASH_TASK_ENV = "KCLIENT_EOS_CRASH_TASK"


class ExactlyOnceRowsLostError(KafkaError):
    """A batch's transaction was aborted before the driver could commit it: its rows are
    lost (never visible to read_committed consumers) and the batch fails."""


def check_sink_id(sink_id: object) -> str:
    if not isinstance(sink_id, str) or not _SINK_ID.fullmatch(sink_id):
        raise ConfigError(
            "exactly_once=True needs sink_id: a name for this sink, the same across restarts "
            "of the query (1-100 characters of A-Z a-z 0-9 . _ -), "
            f"got {sink_id!r}"
        )
    return sink_id


def transactional_id(sink_id: str, batch_id: int, partition: int) -> str:
    """The transactional id of task ``partition`` of batch ``batch_id`` (at most 143 chars)."""
    return f"kclient-eos.{sink_id}.{batch_id}.{partition}"


def group_id(sink_id: str) -> str:
    return f"kclient-eos.{sink_id}"


@dataclass(frozen=True)
class TaskTxn:
    """What a task hands back: its Spark partition, the prepared transaction's producer id
    and epoch, and how many records it holds."""

    partition: int
    producer_id: int
    epoch: int
    records: int


@dataclass(frozen=True)
class SinkState:
    """The store's record: batch ``batch_id`` is being written by ``tasks`` tasks (W),
    commits ``txns`` (R), or is done (D)."""

    phase: str
    batch_id: int
    tasks: int = 0
    txns: tuple[TaskTxn, ...] = field(default=())

    def encode(self) -> str:
        head = f"{_FORMAT} {self.phase} {self.batch_id}"
        if self.phase == WRITING:
            return f"{head} {self.tasks}"
        if self.phase == RECORDED:
            body = ",".join(
                f"{t.partition}:{t.producer_id}:{t.epoch}:{t.records}" for t in self.txns
            )
            return f"{head} {body}"
        return head

    @classmethod
    def decode(cls, text: str) -> SinkState:
        parts = text.split(" ")
        if len(parts) < 3 or parts[0] != _FORMAT or parts[1] not in (WRITING, RECORDED, DONE):
            raise ConfigError(
                f"the sink's state record {text[:80]!r} was not written by this sink version; "
                "is another program committing offsets for its group?"
            )
        phase, batch_id = parts[1], int(parts[2])
        if phase == WRITING:
            return cls(phase, batch_id, tasks=int(parts[3]))
        if phase == RECORDED:
            txns = (
                tuple(
                    TaskTxn(*(int(x) for x in item.split(":")))
                    for item in parts[3].split(",")
                    if item
                )
                if len(parts) > 3
                else ()
            )
            return cls(phase, batch_id, txns=txns)
        return cls(phase, batch_id)


class StateStore(Protocol):
    def load(self) -> SinkState | None: ...

    def save(self, state: SinkState) -> None: ...


class TxnCompleter(Protocol):
    def commit(self, txn: PreparedTxn) -> None:
        """Commit (raises ``TransactionNotCompletedError`` if it cannot be)."""

    def fence(self, transactional_id: str) -> None:
        """Abort whatever the id has open and fence its producers."""


class GroupOffsetsStore:
    """The sink's state as the committed offset (batch id) and metadata (the record) of
    its group for partition 0 of its topic."""

    def __init__(self, calls: CoordinatorCalls, sink_id: str, topic: str, timeout_ms: int) -> None:
        self._calls = calls
        self._group = group_id(sink_id)
        self._topic = topic
        self._timeout_ms = timeout_ms

    def load(self) -> SinkState | None:
        found = fetch_offset_metadata(
            self._calls, self._group, self._topic, 0, timeout_ms=self._timeout_ms
        )
        return None if found is None else SinkState.decode(found[1])

    def save(self, state: SinkState) -> None:
        commit_offset_metadata(
            self._calls,
            self._group,
            self._topic,
            0,
            offset=state.batch_id,
            metadata=state.encode(),
            timeout_ms=self._timeout_ms,
        )


class CoordinatorTxnCompleter:
    """``TxnCompleter`` over ``txn_completion``, through one client."""

    def __init__(
        self, calls: CoordinatorCalls, transaction_timeout_ms: int, timeout_ms: int
    ) -> None:
        self._calls = calls
        self._transaction_timeout_ms = transaction_timeout_ms
        self._timeout_ms = timeout_ms

    def commit(self, txn: PreparedTxn) -> None:
        complete_transaction(self._calls, txn, commit=True, timeout_ms=self._timeout_ms)

    def fence(self, transactional_id: str) -> None:
        fence_transactional_id(
            self._calls,
            transactional_id,
            transaction_timeout_ms=self._transaction_timeout_ms,
            timeout_ms=self._timeout_ms,
        )


@dataclass(frozen=True)
class BatchOutcome:
    """What ``run_batch`` did: ``written`` (the tasks ran), ``completed`` (a recorded batch
    was committed without rewriting) or ``skipped`` (done before); the records committed."""

    action: str
    records: int
    tasks: int


def pause_point(point: str, batch_id: int) -> None:
    """The fault-injection hook (``PAUSE_AT_ENV``); does nothing unless it names this point."""
    wanted = os.environ.get(PAUSE_AT_ENV)
    if wanted != f"{point}:{batch_id}":
        return
    path = os.environ.get(PAUSE_FILE_ENV)
    log.warning("pausing at %s of batch %d (%s)", point, batch_id, PAUSE_AT_ENV)
    if path:
        with open(path, "w") as f:
            f.write(point)
    time.sleep(300)  # the test kills this process meanwhile


def crash_point(sink_id: str, partition: int, attempt: int) -> None:
    """The task-crash hook (``CRASH_TASK_ENV``); does nothing unless it names this task."""
    if attempt == 0 and os.environ.get(CRASH_TASK_ENV) == f"{sink_id}:{partition}":
        log.warning("crashing task %d of sink %s (%s)", partition, sink_id, CRASH_TASK_ENV)
        os._exit(17)


class ExactlyOnceDriver:
    """Runs the protocol of the module doc for one sink over a store and a completer."""

    def __init__(self, sink_id: str, store: StateStore, completer: TxnCompleter) -> None:
        self.sink_id = sink_id
        self.store = store
        self.completer = completer

    def next_batch_id(self) -> int:
        """For batch jobs: the batch after the last one the store knows of."""
        state = self.store.load()
        return 0 if state is None else state.batch_id + 1

    def run_batch(
        self, batch_id: int, tasks: int, write: Callable[[], Sequence[TaskTxn]]
    ) -> BatchOutcome:
        """Write batch ``batch_id`` with ``tasks`` tasks (``write`` runs them and returns
        what they prepared) exactly once, or finish it if an earlier attempt recorded it."""
        state = self.store.load()
        if state is not None and state.batch_id > batch_id:
            log.warning(
                "sink %s: batch %d is older than the last one recorded (%d); skipping it",
                self.sink_id,
                batch_id,
                state.batch_id,
            )
            return BatchOutcome("skipped", 0, 0)
        if state is not None and state.phase == RECORDED:
            self._complete(state)
            if state.batch_id == batch_id:
                return BatchOutcome("completed", _records(state.txns), len(state.txns))
        elif state is not None and state.phase == DONE and state.batch_id == batch_id:
            log.info("sink %s: batch %d was committed before; skipping it", self.sink_id, batch_id)
            return BatchOutcome("skipped", 0, 0)
        elif state is not None and state.phase == WRITING:
            self._abort_leftovers(state, batch_id, tasks)
        self.store.save(SinkState(WRITING, batch_id, tasks=tasks))
        prepared = [t for t in write() if t.records > 0]
        recorded = SinkState(RECORDED, batch_id, txns=tuple(prepared))
        self.store.save(recorded)
        pause_point("recorded", batch_id)
        self._complete(recorded)
        return BatchOutcome("written", _records(prepared), tasks)

    def _complete(self, state: SinkState) -> None:
        for i, txn in enumerate(state.txns):
            txn_id = transactional_id(self.sink_id, state.batch_id, txn.partition)
            try:
                self.completer.commit(PreparedTxn(txn_id, txn.producer_id, txn.epoch))
            except TransactionNotCompletedError as exc:
                raise ExactlyOnceRowsLostError(
                    f"sink {self.sink_id}: batch {state.batch_id} lost {txn.records} rows: "
                    f"{exc}. The transaction was aborted before the driver could commit it; "
                    "raise 'transaction.timeout.ms' above the time a batch takes to write "
                    "and commit (and within the broker's transaction.max.timeout.ms)"
                ) from exc
            if i == 0:
                pause_point("completing", state.batch_id)
        self.store.save(SinkState(DONE, state.batch_id))
        log.info(
            "sink %s: batch %d committed (%d transactions, %d records)",
            self.sink_id,
            state.batch_id,
            len(state.txns),
            _records(state.txns),
        )
        pause_point("done", state.batch_id)

    def _abort_leftovers(self, state: SinkState, batch_id: int, tasks: int) -> None:
        first = tasks if state.batch_id == batch_id else 0
        for partition in range(first, state.tasks):
            txn_id = transactional_id(self.sink_id, state.batch_id, partition)
            log.info("sink %s: aborting leftover transaction %s", self.sink_id, txn_id)
            self.completer.fence(txn_id)


def _records(txns: Sequence[TaskTxn]) -> int:
    return sum(t.records for t in txns)
