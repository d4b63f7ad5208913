"""The exactly-once Spark sink's driver protocol: a two-phase commit of Kafka transactions
that the Spark tasks prepared (the tasks' side is ``kclient.spark.eos_task``).

No Kafka class corresponds; it is the commit protocol stream processors use to write to
Kafka exactly once (a sink's "pre-commit" in each task, the "commit" by a coordinator
once every task succeeded), driven by Spark's batch ids. Per batch ``B`` of sink ``S``:

1. ``W B n``: the store records that batch B is being written by at most ``n`` tasks.
   Leftovers of an earlier attempt that this one will not overwrite are aborted first.
2. Each task ``p`` writes its rows in a transaction under ``kclient-eos.S.p`` (the same
   id for task ``p`` of every batch, so the coordinator keeps one id per task slot; a
   retried attempt ``a`` of the task uses ``kclient-eos.S.p.a<a>``, see below):
   it fences the ids of the task's earlier attempts, then ``init_transactions``, sends,
   flushes, checks every delivery, and *prepares* the transaction (``KafkaProducer.
   prepare_transaction``: closed without committing). It returns its producer id, epoch,
   attempt and record count.
3. ``R B p:pid:epoch:count,...``: once every task succeeded, the store records the
   transactions that make up batch B. From here on, B commits whatever happens.
4. The driver commits each one (``txn_completion.complete_transaction``: EndTxn with the
   recorded producer id and epoch; repeating it after a commit is answered NONE).
5. ``D B``: the batch is done.

Replaying batch B (Spark gives the same batch id again after a driver restart): ``D B``
→ skip; ``R B`` → commit the recorded transactions, mark done, no rewrite; ``W`` or an
earlier batch → write B again. For a ``W B' n'`` record, the transactional ids it names
that the new attempt does not reuse (partitions ``>= n``) are fenced with InitProducerId,
which aborts their open transactions so they do not hold the last stable offset until
``transaction.timeout.ms``; the ids the new attempt reuses are fenced by its tasks' own
``init_transactions``. Reusing ids across batches is safe because batches are sequential:
batch B+1's tasks initialise the ids only after B is recorded done (or, when B was left
unfinished, to fence what B left).

Why an id per attempt: when a task fails, Spark starts the next attempt at once, but the
failed attempt's Python worker can still be running (starting up, or waiting in
``init_transactions``). Had both attempts one id, that late ``init_transactions`` would
fence the new attempt's prepared transaction, and the driver's commit would find it
aborted (seen on Apache Kafka 4.4: PRODUCER_FENCED on commit, the batch failed with
``ExactlyOnceRowsLostError``). With an id per attempt a late attempt fences only itself.
Attempt ``a >= 1`` first fences the ids of attempts ``0..a-1`` (InitProducerId), so what a
killed attempt left open does not hold the last stable offset; attempts from the 255th on
share one id. Transactions a batch left open under retried attempts' ids when the whole
batch failed are aborted by the coordinator after ``transaction.timeout.ms``.

The store is committed group offsets for partition 0 of the sink's topic
(``GroupOffsetsStore``): the offset of group ``kclient-eos.S`` packs batch id, phase and
task count; before an ``R`` record, group ``kclient-eos.S.task-p`` gets task p's producer
id and epoch as its offset, and the main record, written last, makes them count. We chose
group offsets over a compacted topic: they live on the same cluster, need no topic to be
created or configured, are read back with OffsetFetch (a compacted topic needs a consumer
to find its last record), and an OffsetCommit is atomic and durable (replicated in
``__consumer_offsets``) on every broker with groups. The state is in the offsets, not in
their metadata strings, because tansu (0.6) keeps offsets but drops metadata; the
metadata repeats the state in words for ``kafka-consumer-groups --describe``. The cost:
one OffsetCommit per task with rows and batch, and one OffsetFetch per task on a replay.

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
#: batch (after writing its process id to the file ``KCLIENT_EOS_PAUSE_FILE``), for
#: tests that kill the driver there. Points: ``task_prepared`` (in a task), ``recorded``,
#: ``completing`` (after the first commit), ``done``.
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


#: attempts from this one on share a transactional id (the task offset keeps 8 bits of it)
MAX_ID_ATTEMPT = 255


def transactional_id(sink_id: str, partition: int, attempt: int = 0) -> str:
    """The transactional id of attempt ``attempt`` of task ``partition`` of every batch of
    the sink (at most 125 characters). One id per task slot and attempt, reused batch after
    batch: a transaction coordinator keeps every transactional id for
    ``transactional.id.expiration.ms`` (7 days), so an id per batch would grow its memory
    with every micro-batch. The first attempt's id has no suffix (what earlier versions
    used for every attempt, so their recorded batches commit under the same id)."""
    attempt = min(attempt, MAX_ID_ATTEMPT)
    suffix = f".a{attempt}" if attempt else ""
    return f"kclient-eos.{sink_id}.{partition}{suffix}"


def group_id(sink_id: str) -> str:
    return f"kclient-eos.{sink_id}"


@dataclass(frozen=True)
class TaskTxn:
    """What a task hands back: its Spark partition, the prepared transaction's producer id
    and epoch, how many records it holds, and the attempt whose transactional id holds it."""

    partition: int
    producer_id: int
    epoch: int
    records: int
    attempt: int = 0


@dataclass(frozen=True)
class SinkState:
    """The store's record: batch ``batch_id`` is being written by ``tasks`` tasks (W),
    commits ``txns`` (R), or is done (D)."""

    phase: str
    batch_id: int
    tasks: int = 0
    txns: tuple[TaskTxn, ...] = field(default=())

    def describe(self) -> str:
        """The record for people (the offsets' metadata): ``kclient-eos/1 R 7 3``."""
        slots = self.tasks if self.phase == WRITING else _slots(self.txns)
        return f"{_FORMAT} {self.phase} {self.batch_id} {slots}"


_PHASE_CODES = {WRITING: 1, RECORDED: 2, DONE: 3}
_PHASES = {code: phase for phase, code in _PHASE_CODES.items()}
_MAX_TASKS = (1 << 18) - 1
_MAX_BATCH_ID = (1 << 43) - 1


def _slots(txns: Sequence[TaskTxn]) -> int:
    return max((t.partition for t in txns), default=-1) + 1


def state_offset(state: SinkState) -> int:
    """The main group's offset for ``state``: batch id, task slots and phase in 63 bits."""
    slots = state.tasks if state.phase == WRITING else _slots(state.txns)
    if not 0 <= state.batch_id <= _MAX_BATCH_ID or slots > _MAX_TASKS:
        raise ConfigError(
            f"batch {state.batch_id} with {slots} tasks is beyond what the exactly-once sink "
            f"records (batch ids up to {_MAX_BATCH_ID}, up to {_MAX_TASKS} tasks)"
        )
    return state.batch_id << 20 | slots << 2 | _PHASE_CODES[state.phase]


#: set in task offsets that carry the attempt: (pid + 1) << 24 | attempt << 16 | epoch.
#: Without it (earlier versions), the offset is (pid + 1) << 16 | epoch and the attempt 0.
_WITH_ATTEMPT = 1 << 62
_MAX_PRODUCER_ID = (1 << 38) - 2


def txn_offset(txn: TaskTxn | None) -> int:
    """A task group's offset: the producer id, attempt and epoch of its prepared
    transaction (0: the task has none in this batch)."""
    if txn is None:
        return 0
    if not 0 <= txn.producer_id <= _MAX_PRODUCER_ID:
        raise ConfigError(f"producer id {txn.producer_id} is beyond what the sink records")
    attempt = min(txn.attempt, MAX_ID_ATTEMPT)
    return _WITH_ATTEMPT | (txn.producer_id + 1) << 24 | attempt << 16 | txn.epoch


def _decode_txn(partition: int, value: int) -> TaskTxn:
    """A task group's offset back to its transaction (counts are not recorded)."""
    if value & _WITH_ATTEMPT:
        value &= ~_WITH_ATTEMPT
        return TaskTxn(partition, (value >> 24) - 1, value & 0xFFFF, 0, (value >> 16) & 0xFF)
    return TaskTxn(partition, (value >> 16) - 1, value & 0xFFFF, 0)


def decode_state(offset: int, task_offsets: Sequence[int]) -> SinkState:
    """The state from the main offset and, for R, the offsets of its task groups."""
    phase = _PHASES.get(offset & 3)
    if phase is None or offset < 0:
        raise ConfigError(
            f"the sink's state offset {offset} was not written by this sink version; is "
            "another program committing offsets for its group?"
        )
    batch_id, slots = offset >> 20, (offset >> 2) & _MAX_TASKS
    if phase == WRITING:
        return SinkState(phase, batch_id, tasks=slots)
    if phase == RECORDED:
        txns = tuple(_decode_txn(p, value) for p, value in enumerate(task_offsets) if value > 0)
        return SinkState(phase, batch_id, txns=txns)
    return SinkState(phase, batch_id)


class StateStore(Protocol):
    def load(self) -> SinkState | None: ...

    def save(self, state: SinkState) -> None: ...


class TxnCompleter(Protocol):
    def commit(self, txn: PreparedTxn) -> None:
        """Commit (raises ``TransactionNotCompletedError`` if it cannot be)."""

    def fence(self, transactional_id: str) -> None:
        """Abort whatever the id has open and fence its producers."""


class OffsetsBackend(Protocol):
    def commit(self, group: str, offset: int, metadata: str) -> None: ...

    def fetch(self, group: str) -> int | None: ...


class CommittedOffsets:
    """``OffsetsBackend`` over OffsetCommit/OffsetFetch of partition 0 of ``topic``."""

    def __init__(self, calls: CoordinatorCalls, topic: str, timeout_ms: int) -> None:
        self._calls = calls
        self._topic = topic
        self._timeout_ms = timeout_ms

    def commit(self, group: str, offset: int, metadata: str) -> None:
        commit_offset_metadata(
            self._calls,
            group,
            self._topic,
            0,
            offset=offset,
            metadata=metadata,
            timeout_ms=self._timeout_ms,
        )

    def fetch(self, group: str) -> int | None:
        found = fetch_offset_metadata(
            self._calls, group, self._topic, 0, timeout_ms=self._timeout_ms
        )
        return None if found is None else found[0]


class GroupOffsetsStore:
    """The sink's state in committed group offsets (see the module doc): the group
    ``kclient-eos.<sink>`` holds batch id, phase and task count; for a recorded batch the
    group ``kclient-eos.<sink>.task-<p>`` holds task p's producer id and epoch, written
    before the main record, which is the atomic switch. The metadata repeats it for people;
    it is not read back (tansu does not keep it)."""

    def __init__(self, backend: OffsetsBackend, sink_id: str) -> None:
        self._backend = backend
        self._group = group_id(sink_id)

    def _task_group(self, partition: int) -> str:
        return f"{self._group}.task-{partition}"

    def load(self) -> SinkState | None:
        offset = self._backend.fetch(self._group)
        if offset is None:
            return None
        slots = (offset >> 2) & _MAX_TASKS if offset & 3 == _PHASE_CODES[RECORDED] else 0
        tasks = [self._backend.fetch(self._task_group(p)) or 0 for p in range(slots)]
        return decode_state(offset, tasks)

    def save(self, state: SinkState) -> None:
        offset = state_offset(state)
        if state.phase == RECORDED:
            by_partition = {t.partition: t for t in state.txns}
            for p in range(_slots(state.txns)):
                txn = by_partition.get(p)
                what = (
                    "none"
                    if txn is None
                    else f"{txn.producer_id}:{txn.epoch}:{txn.records} attempt {txn.attempt}"
                )
                self._backend.commit(
                    self._task_group(p),
                    txn_offset(txn),
                    f"{_FORMAT} batch {state.batch_id} task {p}: {what}",
                )
        self._backend.commit(self._group, offset, state.describe())


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
            f.write(str(os.getpid()))  # the test kills this process by its id too
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
            self._abort_leftovers(state, tasks)
        self.store.save(SinkState(WRITING, batch_id, tasks=tasks))
        prepared = [t for t in write() if t.records > 0]
        recorded = SinkState(RECORDED, batch_id, txns=tuple(prepared))
        self.store.save(recorded)
        pause_point("recorded", batch_id)
        self._complete(recorded)
        return BatchOutcome("written", _records(prepared), tasks)

    def _complete(self, state: SinkState) -> None:
        for i, txn in enumerate(state.txns):
            txn_id = transactional_id(self.sink_id, txn.partition, txn.attempt)
            try:
                self.completer.commit(PreparedTxn(txn_id, txn.producer_id, txn.epoch))
            except TransactionNotCompletedError as exc:
                raise ExactlyOnceRowsLostError(
                    f"sink {self.sink_id}: batch {state.batch_id} lost "
                    + (f"{txn.records} rows" if txn.records else "the rows of a task")
                    + f": {exc}. The transaction was aborted before the driver could commit it; "
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

    def _abort_leftovers(self, state: SinkState, tasks: int) -> None:
        for partition in range(tasks, state.tasks):
            txn_id = transactional_id(self.sink_id, partition)
            log.info("sink %s: aborting leftover transaction %s", self.sink_id, txn_id)
            self.completer.fence(txn_id)


def _records(txns: Sequence[TaskTxn]) -> int:
    return sum(t.records for t in txns)
