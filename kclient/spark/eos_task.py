"""The exactly-once Spark sink's tasks and entry points (the protocol is in ``kclient.spark.eos``).

``ExactlyOnceSink`` is a ``KafkaSink`` whose task writes inside a Kafka transaction under
the task's own transactional id and prepares it instead of committing: the sending code
(each Arrow batch to ``send_batch``) is ``KafkaSink``'s; only ``_run`` — how one task's
writes start and end — and the task's result row differ. ``write_exactly_once``
and ``foreach_batch_exactly_once`` run the driver's side around it; ``kclient.spark``'s
``write_dataframe`` and ``foreach_batch`` call them for ``exactly_once=True``.

Threads: ``ExactlyOnceSink`` runs in a task of a Python worker process (the task's thread;
its producer has its own I/O thread); the rest on the Spark driver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from kclient import errors
from kclient.clock import SYSTEM_CLOCK, Clock
from kclient.config import ProducerConfig
from kclient.errors import ConfigError
from kclient.network import NetworkClient, NetworkClientConfig
from kclient.network.cluster import TopicPartition
from kclient.network.kafka_client import KafkaClient
from kclient.producer import KafkaProducer
from kclient.sender.coordinator_calls import CoordinatorCalls
from kclient.sender.txn_completion import PreparedTxn, fence_transactional_id
from kclient.spark.columns import validate_schema
from kclient.spark.eos import (
    MAX_ID_ATTEMPT,
    CommittedOffsets,
    CoordinatorTxnCompleter,
    ExactlyOnceDriver,
    GroupOffsetsStore,
    TaskTxn,
    check_sink_id,
    crash_point,
    pause_point,
    transactional_id,
)
from kclient.spark.sink import (
    DEFAULT_PRODUCER_IDLE_S,
    KafkaSink,
    SinkResult,
    _Task,
    collect_from_workers,
)

log = logging.getLogger(__name__)

TASK_SCHEMA = "partition int, producer_id long, epoch int, records long, attempt int"
_TXN_ID_NAMES = frozenset({"transactional.id", "transactional_id"})
_IDEMPOTENCE_NAMES = ("enable.idempotence", "enable_idempotence")
_TOPIC_POLL_MS = 100


class ExactlyOnceSink(KafkaSink):
    """Writes one partition of batch ``batch_id`` in a prepared transaction (picklable)."""

    def __init__(
        self,
        topic: str,
        *,
        sink_id: str,
        batch_id: int,
        producer_idle_s: float = DEFAULT_PRODUCER_IDLE_S,
        **producer_config: Any,
    ) -> None:
        # the transactional id is the task's (set in _run); this one only makes the
        # settings check see a transactional producer's configuration
        txn_id = transactional_id(sink_id, 0)
        config = {**producer_config, "transactional.id": txn_id}
        super().__init__(topic, producer_idle_s=producer_idle_s, **config)
        self.sink_id = sink_id
        self.batch_id = batch_id
        self.prepared: TaskTxn | None = None

    def _run(self, send_all: Callable[[_Task], None]) -> int:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        if attempt:
            self._fence_earlier_attempts(partition, attempt)
        txn_id = transactional_id(self.sink_id, partition, attempt)
        producer = KafkaProducer({**self.producer_config, "transactional.id": txn_id})
        task = _TransactionalTask(self, producer)
        prepared: PreparedTxn | None = None
        try:
            producer.init_transactions()  # fences a late copy of this attempt, if any
            producer.begin_transaction()
            send_all(task)
            task.finish()  # flushes; raises SinkDeliveryError if a record failed
            crash_point(self.sink_id, partition, attempt)
            prepared = producer.prepare_transaction()
        finally:
            # prepared: nothing is left to send, and the transaction stays open; failed: try
            # to abort it for up to request.timeout.ms (else the retry's init aborts it)
            request_timeout_s = producer.config.request_timeout_ms / 1000
            producer.close(None if prepared is not None else request_timeout_s)
        assert prepared is not None
        self.prepared = TaskTxn(
            partition, prepared.producer_id, prepared.epoch, task.sent, min(attempt, MAX_ID_ATTEMPT)
        )
        pause_point("task_prepared", self.batch_id)
        return task.sent

    def _fence_earlier_attempts(self, partition: int, attempt: int) -> None:
        """InitProducerId for the ids of this task's attempts before ``attempt``: aborts what
        a killed attempt left open (else it holds the partition's last stable offset until
        ``transaction.timeout.ms``). Each failed attempt aborted its own when it could."""
        cfg = ProducerConfig(self.producer_config)
        client, calls = _coordinator_calls(cfg)
        try:
            completer = CoordinatorTxnCompleter(calls, cfg.transaction_timeout_ms, cfg.max_block_ms)
            for earlier in range(min(attempt, MAX_ID_ATTEMPT)):
                txn_id = transactional_id(self.sink_id, partition, earlier)
                log.info("sink %s: fencing %s (an earlier attempt)", self.sink_id, txn_id)
                completer.fence(txn_id)
        finally:
            client.close()

    def write_arrow(self, batches: Iterator[Any]) -> Iterator[Any]:
        """``mapInArrow`` entry point: one row with the task's prepared transaction."""
        import pyarrow as pa

        for _ in super().write_arrow(batches):
            txn = self.prepared
            assert txn is not None
            yield pa.RecordBatch.from_pydict(
                {
                    "partition": pa.array([txn.partition], pa.int32()),
                    "producer_id": pa.array([txn.producer_id], pa.int64()),
                    "epoch": pa.array([txn.epoch], pa.int32()),
                    "records": pa.array([txn.records], pa.int64()),
                    "attempt": pa.array([txn.attempt], pa.int32()),
                }
            )


class _TransactionalTask(_Task):
    """A task whose producer is its own transactional one, not the worker's shared one."""

    def __init__(self, sink: KafkaSink, producer: KafkaProducer) -> None:
        super().__init__(sink)
        self._producer = producer

    def producer(self) -> Any:
        return self._producer

    def finish(self) -> None:
        self._producer.flush()
        super().finish()

    def release(self, failed: bool) -> None:
        pass  # the sink's _run closes the producer


# ---- driver side -----------------------------------------------------------------------------


def check_topic(topic: object) -> str:
    if not isinstance(topic, str) or not topic:
        raise ConfigError(
            "exactly_once=True needs the topic argument (a 'topic' column cannot route rows: "
            "the sink keeps its state with that topic's partition 0)"
        )
    return topic


def check_exactly_once_config(topic: object, producer_config: dict[str, Any]) -> ProducerConfig:
    """The settings an exactly-once sink cannot take, as ``ConfigError``s naming them."""
    check_topic(topic)
    given = sorted(_TXN_ID_NAMES & producer_config.keys())
    if given:
        raise ConfigError(
            f"{given[0]!r} cannot be set with exactly_once=True: the sink gives each task its "
            "own transactional id (from sink_id, the batch id and the partition)"
        )
    for name in _IDEMPOTENCE_NAMES:
        if name in producer_config and str(producer_config[name]).lower() in ("false", "0"):
            raise ConfigError(
                f"{name!r} is false, but exactly_once=True writes with transactions, which "
                "need idempotence: remove it"
            )
    return ProducerConfig({**producer_config, "transactional.id": "kclient-eos-check"})


def _coordinator_calls(cfg: ProducerConfig) -> tuple[NetworkClient, CoordinatorCalls]:
    """A client of ``cfg``'s cluster (the caller closes it) and coordinator calls over it."""
    client = NetworkClient.create(
        cfg.bootstrap_servers, NetworkClientConfig.from_config(cfg), clock=SYSTEM_CLOCK
    )
    return client, CoordinatorCalls(client, SYSTEM_CLOCK, retry_backoff_ms=cfg.retry_backoff_ms)


class _DriverSession:
    """The driver's client for one batch: the store, the completer and the preflight."""

    def __init__(self, sink_id: str, topic: str, cfg: ProducerConfig) -> None:
        self.client, calls = _coordinator_calls(cfg)
        self.calls = calls
        self.cfg = cfg
        timeout_ms = cfg.max_block_ms
        self.driver = ExactlyOnceDriver(
            sink_id,
            GroupOffsetsStore(CommittedOffsets(calls, topic, timeout_ms), sink_id),
            CoordinatorTxnCompleter(calls, cfg.transaction_timeout_ms, timeout_ms),
        )
        self.sink_id = sink_id

    def preflight(self, topic: str) -> None:
        check_target_topic(self.client, SYSTEM_CLOCK, topic, self.cfg.max_block_ms)
        check_broker(
            self.calls, self.sink_id, self.cfg.transaction_timeout_ms, self.cfg.max_block_ms
        )

    def close(self) -> None:
        self.client.close()


def check_target_topic(client: KafkaClient, clock: Clock, topic: str, timeout_ms: int) -> None:
    """Before any task runs, the sink's topic must exist with a leader for partition 0 (the
    sink keeps its state with it): asked for in a Metadata request that lets the cluster
    create it, as a producer's first send does, so a cluster that creates topics on first
    use creates it here. A cluster that answers UNKNOWN_TOPIC_OR_PARTITION does not: that
    fails at once, naming the topic (before: every OffsetCommit of the state was retried
    until ``max.block.ms`` ran out, after the tasks had run). Waits up to ``timeout_ms``
    for the topic's leader."""
    metadata = client.metadata
    start_ms = clock.monotonic_ms()
    metadata.add(topic, start_ms)
    tp = TopicPartition(topic, 0)
    now_ms = start_ms
    while True:
        if metadata.fetch().leader_for(tp) is not None:
            return
        error = metadata.topic_error(topic)
        if isinstance(error, errors.UnknownTopicOrPartitionError):
            raise errors.UnknownTopicOrPartitionError(
                f"exactly_once=True writes to topic {topic!r}, which does not exist, and the "
                "cluster does not create topics on first use (auto.create.topics.enable=false): "
                f"create it first (e.g. kafka-topics.sh --create --topic {topic}), or "
                "enable auto.create.topics.enable on the brokers"
            )
        if isinstance(error, (errors.InvalidTopicError, errors.TopicAuthorizationFailedError)):
            raise type(error)(f"exactly_once=True cannot write to topic {topic!r}: {error}")
        if now_ms - start_ms >= timeout_ms:
            raise errors.KafkaTimeoutError(
                f"exactly_once=True: partition 0 of topic {topic!r} had no leader within "
                f"{timeout_ms} ms ('max.block.ms')"
                + (f"; the cluster says: {error}" if error is not None else "")
            )
        metadata.request_update_for_topic(topic)
        client.poll(min(_TOPIC_POLL_MS, timeout_ms - (now_ms - start_ms)), now_ms)
        now_ms = clock.monotonic_ms()


def check_broker(
    calls: CoordinatorCalls, sink_id: str, transaction_timeout_ms: int, timeout_ms: int
) -> None:
    """Fail before any task runs if the broker lacks transactions or refuses the sink's
    ``transaction.timeout.ms`` (one InitProducerId for the id ``kclient-eos.<sink>.check``)."""
    try:
        fence_transactional_id(
            calls,
            f"kclient-eos.{sink_id}.check",
            transaction_timeout_ms=transaction_timeout_ms,
            timeout_ms=timeout_ms,
        )
    except errors.InvalidTransactionTimeoutError as exc:
        raise ConfigError(
            f"'transaction.timeout.ms' ({transaction_timeout_ms}) is larger than the broker's "
            "transaction.max.timeout.ms: lower it (it must still cover the time a batch takes "
            "to write and commit)"
        ) from exc
    except errors.UnsupportedVersionError as exc:
        raise errors.UnsupportedVersionError(
            f"exactly_once=True needs a broker with transactions: {exc}"
        ) from exc


def check_no_speculation(speculation: str | None) -> None:
    """Refuse ``spark.speculation=true``: the losing copy of a task would leave its
    prepared transaction open until ``transaction.timeout.ms``, holding back
    read_committed consumers."""
    if (speculation or "false").strip().lower() == "true":
        raise ConfigError(
            "exactly_once=True cannot run with spark.speculation=true: the losing copy of a "
            "task would leave its prepared transaction open, holding back read_committed "
            "consumers until transaction.timeout.ms; set spark.speculation=false for this "
            "application"
        )


def _write_batch(
    df: Any,
    topic: str,
    sink_id: str,
    *,
    batch_id: int | None,
    producer_idle_s: float,
    producer_config: dict[str, Any],
    checked: list[bool],
    refuse_older: bool = False,
) -> SinkResult:
    cfg = check_exactly_once_config(topic, producer_config)
    columns = validate_schema(df.schema, topic)
    check_no_speculation(df.sparkSession.sparkContext.getConf().get("spark.speculation"))
    session = _DriverSession(sink_id, topic, cfg)
    try:
        if not checked:
            session.preflight(topic)
            checked.append(True)
        following = session.driver.next_batch_id()
        batch = following if batch_id is None else batch_id
        if refuse_older and batch < following - 1:
            raise ConfigError(
                f"batch_id {batch} is below sink {sink_id!r}'s last load ({following - 1}): "
                "the sink keeps only its last load, so it cannot tell whether this one was "
                "written; batch ids must grow (load into another sink_id to backfill)"
            )
        data = df.select(*columns)
        tasks = data.rdd.getNumPartitions()
        sink = ExactlyOnceSink(
            topic,
            sink_id=sink_id,
            batch_id=batch,
            producer_idle_s=producer_idle_s,
            **producer_config,
        )

        def write() -> list[TaskTxn]:
            rows = collect_from_workers(data.mapInArrow(sink.write_arrow, TASK_SCHEMA))
            return [
                TaskTxn(
                    int(r["partition"]),
                    int(r["producer_id"]),
                    int(r["epoch"]),
                    int(r["records"]),
                    int(r["attempt"]),
                )
                for r in rows
            ]

        outcome = session.driver.run_batch(batch, tasks, write)
    finally:
        session.close()
    log.info(
        "sink %s: batch %d %s (%d records, %d tasks)",
        sink_id,
        batch,
        outcome.action,
        outcome.records,
        outcome.tasks,
    )
    return SinkResult(outcome.records, outcome.tasks)


def write_exactly_once(  # noqa: PLR0917 (write_dataframe's arguments, passed on)
    df: Any,
    topic: str | None,
    sink_id: str | None,
    producer_idle_s: float,
    producer_config: dict[str, Any],
    batch_id: int | None = None,
) -> SinkResult:
    """``write_dataframe(df, topic, exactly_once=True, sink_id=...)``: all rows or none.
    ``batch_id`` names this load so that running it again is a no-op (see
    ``write_dataframe``); None: the batch after the sink's last one."""
    sink_id = check_sink_id(sink_id)
    topic = check_topic(topic)
    if batch_id is not None and (
        not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < 0
    ):
        raise ConfigError(
            f"batch_id must be a non-negative integer naming this load (e.g. 20261125), "
            f"got {batch_id!r}"
        )
    if df.isStreaming:
        raise errors.IllegalStateError(
            "write_dataframe takes a batch DataFrame; write a streaming one with "
            "df.writeStream.foreachBatch(foreach_batch(..., exactly_once=True)).start()"
        )
    return _write_batch(
        df,
        topic,
        sink_id,
        batch_id=batch_id,
        producer_idle_s=producer_idle_s,
        producer_config=producer_config,
        checked=[],
        refuse_older=True,
    )


def foreach_batch_exactly_once(
    topic: str | None,
    sink_id: str | None,
    producer_idle_s: float,
    producer_config: dict[str, Any],
) -> Callable[[Any, int], None]:
    """``foreach_batch(topic, exactly_once=True, sink_id=...)``: each micro-batch once."""
    checked_id = check_sink_id(sink_id)
    checked_topic = check_topic(topic)
    check_exactly_once_config(topic, producer_config)
    # the sink's own checks (serializers, ...), now rather than at the first batch
    ExactlyOnceSink(
        checked_topic,
        sink_id=checked_id,
        batch_id=0,
        producer_idle_s=producer_idle_s,
        **producer_config,
    )
    checked: list[bool] = []

    def write(batch_df: Any, batch_id: int) -> None:
        _write_batch(
            batch_df,
            checked_topic,
            checked_id,
            batch_id=int(batch_id),
            producer_idle_s=producer_idle_s,
            producer_config=producer_config,
            checked=checked,
        )

    return write
