"""A Produce answer through the Sender: scripts of sends, answers (error codes mixed in),
expiries, send callbacks (some raising), watchers (``kclient.aio``'s ``_BatchWatch``, done
callbacks) and waiters for buffer memory, in the order a caller sees them, and the locks
an answer takes left free."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import pytest

from kclient import errors
from kclient.aio.completions import _BatchWatch
from kclient.network.cluster import TopicPartition
from kclient.protocol import ApiKey
from kclient.sender import future
from kclient.sender.batch import ProducerBatch
from kclient.sender.future import FutureRecordMetadata, ProduceResult, RecordMetadata
from kclient.sender.idempotence import TransactionManager
from kclient.sender.sender import Sender
from kclient.testing import MockClock
from kclient.testing.client import MockClient, metadata_update_with
from tests.sender.helpers import accumulator
from tests.sender.sender_helpers import init_pid_response, partitions_in

TOPICS = {"a": 2, "b": 3}
TPS = [TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n)]
DELIVERY_TIMEOUT_MS = 5_000
OK = 0
DUPLICATE = errors.DuplicateSequenceNumberError.code
ERRORS = [
    errors.NotLeaderOrFollowerError.code,  # retriable, refreshes metadata
    errors.RequestTimedOutError.code,  # retriable
    errors.InvalidRecordError.code,  # fails, with record errors
    errors.MessageTooLargeError.code,  # split (or fails, one record)
    errors.OutOfOrderSequenceNumberError.code,
    errors.UnknownProducerIdError.code,
    errors.TopicAuthorizationFailedError.code,  # fails
]


# ---- the script ---------------------------------------------------------------------------


@dataclass
class Send:
    tp: int
    records: int
    callback: str  # "none", "record", "raise"
    run: bool = True  # the Sender runs after it (else the next send joins its request)


@dataclass
class Answer:
    pick: int  # which in-flight request (modulo their number)
    codes: list[int | None]  # per partition of the request, None: left out of the answer
    base_offset: int
    log_append_time_ms: int
    unknown_partition: bool  # the answer names a partition the request did not have
    disconnect: bool


@dataclass
class Expire:
    """Past the delivery timeout: in-flight batches fail, their answers come later."""


@dataclass
class Watch:
    pick: int  # which incomplete batch (modulo)
    kind: str  # "aio": a _BatchWatch; "done": a done callback on one of its futures;
    # "wait": a wait on one of its futures that timed out (the batch's gate, held)


@dataclass
class Waiter:
    """Someone waits for buffer memory (the pool wakes the first waiter on deallocate)."""


Step = Send | Answer | Expire | Watch | Waiter


@dataclass
class Scenario:
    idempotent: bool
    ordered: bool  # max.in.flight 1 (guarantee_message_order), without idempotence
    steps: list[Step]


# ---- running a script -------------------------------------------------------------------


class _Capture(logging.Handler):
    def __init__(self, events: list[Any]) -> None:
        super().__init__(logging.DEBUG)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append(("log", record.name, record.levelname, record.getMessage()))


class FakeWaiter:
    """A waiter for buffer memory: notified under the pool's lock, sees what was returned."""

    def __init__(self, pool: Any, events: list[Any]) -> None:
        self.pool = pool
        self.events = events

    def notify(self) -> None:
        self.events.append(("notify", self.pool._available, self.pool._lock.locked()))
        self.pool._waiters.remove(self)  # it took its memory and left


def outcome(future: FutureRecordMetadata) -> Any:
    if not future.done():
        return "pending"
    error = future.exception(0)
    if error is not None:
        return (type(error).__name__, str(error))
    return tuple(future.result(0))


def run(scenario: Scenario, sender_class: type[Sender]) -> list[Any]:
    events: list[Any] = []
    clock = MockClock()
    client = MockClient(clock, metadata_update_with(1, TOPICS), request_timeout_ms=60_000)
    tm = TransactionManager() if scenario.idempotent else None
    acc = accumulator(
        clock, tm=tm, linger_ms=0, batch_size=200, delivery_timeout_ms=DELIVERY_TIMEOUT_MS
    )
    sender = sender_class(
        client,
        acc,
        clock=clock,
        acks=-1,
        max_request_size=1 << 20,
        request_timeout_ms=60_000,
        retries=3,
        retry_backoff_ms=100,
        guarantee_message_order=scenario.ordered,
        transaction_manager=tm,
    )
    if tm is not None:
        client.prepare_response(init_pid_response(1000, 0), api_key=ApiKey.INIT_PRODUCER_ID)
        sender.run_once()
        sender.run_once()
    futures: list[FutureRecordMetadata] = []
    batches: list[ProducerBatch] = []
    rng = random.Random(3)

    def callback(kind: str, n: int) -> Any:
        def call(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            events.append(("callback", n, metadata, None if error is None else str(error)))
            if kind == "raise":
                raise ValueError(f"callback {n} raised")

        return call

    def settle(result: ProduceResult) -> None:
        events.append(
            (
                "settle",
                result.tp,
                result.done,
                result.superseded,
                result.base_offset,
                repr(result.error),
            )
        )

    handler = _Capture(events)
    logger = logging.getLogger("kclient")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        for step in scenario.steps:
            events.append(("step", repr(step)))
            if isinstance(step, Send):
                tp = TPS[step.tp]
                queues = acc.topic_queues(tp.topic)
                if not queues.num_partitions:
                    acc.update_topic(queues, client.metadata.fetch())
                for i in range(step.records):
                    cb = None if step.callback == "none" else callback(step.callback, len(futures))
                    try:
                        future = acc.append(
                            queues, tp.partition, 1_000, None, b"v" * (20 + i), None, cb, 0, 102
                        )
                    except errors.BufferExhaustedError as e:  # someone waits for memory
                        events.append(("send failed", str(e)))
                    else:
                        futures.append(future)
                new = [b for b in acc.incomplete_batches() if b not in batches]
                batches.extend(sorted(new, key=lambda b: (b.tp, b.order)))  # (a set's order)
            elif isinstance(step, Answer):
                requests = [r for r in client.requests if r.api_key == ApiKey.PRODUCE]
                if requests:
                    request = requests[step.pick % len(requests)]
                    if step.disconnect:
                        client.respond_to(request, None, disconnected=True)
                    else:
                        client.respond_to(request, answer_body(request, step))
            elif isinstance(step, Expire):
                clock.advance(DELIVERY_TIMEOUT_MS)
            elif isinstance(step, Watch):
                pending = [b for b in batches if not b.result.done and not b.result.superseded]
                if pending:
                    batch = pending[step.pick % len(pending)]
                    mine = [f for f in futures if f.produce_result is batch.result]
                    if step.kind == "aio":
                        batch.result.watch(_BatchWatch(settle, batch.result))
                    elif step.kind == "wait":
                        with pytest.raises(errors.KafkaTimeoutError):
                            mine[-1].result(0)
                    else:
                        n = futures.index(mine[0])
                        mine[0].add_done_callback(
                            lambda f, n=n: events.append(("done", n, outcome(f)))
                        )
            elif isinstance(step, Waiter):
                acc.pool._waiters.append(FakeWaiter(acc.pool, events))  # type: ignore[arg-type]
            if isinstance(step, Send) and not step.run:
                continue
            sender.run_once()
            sender.run_once()
            clock.advance(rng.choice([0, 1, 50, 150]))
            events.append(state(sender, acc, tm, batches, futures))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return events


def answer_body(request: Any, answer: Answer) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in zip(partitions_in(request), answer.codes, strict=False):
        parts = by_topic.setdefault(topic, [])
        if code is None:
            continue
        part: dict[str, Any] = {
            "index": partition,
            "error_code": code,
            "base_offset": answer.base_offset if code in {OK, DUPLICATE} else -1,
            "log_append_time_ms": answer.log_append_time_ms,
            "log_start_offset": 0,
            "record_errors": [],
            "error_message": None if code == OK else f"broker says {code}",
        }
        if code == errors.InvalidRecordError.code:
            part["record_errors"] = [{"batch_index": 0, "batch_index_error_message": "bad one"}]
        parts.append(part)
    if answer.unknown_partition:
        by_topic.setdefault("a", []).append({"index": 9, "error_code": 0, "base_offset": 5})
    return {
        "responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()],
        "throttle_time_ms": 0,
    }


def state(
    sender: Sender,
    acc: Any,
    tm: TransactionManager | None,
    batches: list[ProducerBatch],
    futures: list[FutureRecordMetadata],
) -> Any:
    metrics = sender.metrics
    sequences = None
    if tm is not None:
        sequences = {
            tp: (s.next_sequence, s.last_acked_sequence, len(s.in_flight), s.needs_reset)
            for tp in TPS
            if (s := tm.partition_state(tp)) is not None
        }
    return (
        "state",
        acc.pool.available_bytes,
        len(acc.pool._waiters),
        sorted(map(tuple, (b.tp for b in acc.incomplete_batches()))),
        {tp: len(v) for tp, v in sender._in_flight_batches.items()},
        sorted(acc._drainer.muted),
        metrics.records_sent_total,
        metrics.record_errors_total,
        metrics.batch_splits,
        metrics.snapshot(),
        len(sender._wakeups),
        [
            (
                b.final_state,
                b.reserved_bytes,
                b.attempts,
                b.result.done,
                b.result._finished,
                None if b.result._gate is None else b.result._gate.locked(),
            )
            for b in batches
        ],
        [outcome(f) for f in futures],
        sequences,
    )


def test_a_successful_answer_completes_everything_before_the_caller_resumes() -> None:
    """One answer for two partitions: each batch's callbacks, watchers, memory and memory
    waiter, in order."""
    scenario = Scenario(
        idempotent=True,
        ordered=False,
        steps=[
            Send(0, 2, "raise", run=False),
            Send(1, 1, "none", run=False),
            Send(3, 1, "record"),
            Watch(0, "aio"),
            Watch(2, "done"),
            Watch(2, "wait"),
            Watch(1, "wait"),
            Waiter(),
            Answer(0, [OK, OK, DUPLICATE], 40, -1, False, False),
        ],
    )
    events = run(scenario, Sender)
    answered = events[events.index(("step", repr(scenario.steps[-1]))) :]
    kinds = [e[0] for e in answered if e[0] != "log"]
    assert kinds == [
        "step",
        "callback",
        "callback",
        "settle",
        "notify",
        "callback",
        "done",
        "state",
    ]
    final = answered[-1]
    assert final[1] == 1 << 20  # all memory back
    assert final[6] == 4  # records sent
    assert [o[2] for o in final[12]] == [40, 41, 40, 40]  # offsets
    # the waiters on a-1 and b-1 were let through (a-1's gate by the Sender's wakeups)
    assert [b[4:] for b in final[11]] == [(True, None), (True, False), (True, False)]
    logs = [e for e in answered if e[0] == "log"]
    assert [e[3] for e in logs if e[2] == "ERROR"] == [
        "exception in a send callback for a-0 (ignored)",
        "exception in a send callback for a-0 (ignored)",
    ]


def test_an_answer_for_a_batch_that_expired_meanwhile_changes_nothing() -> None:
    scenario = Scenario(
        idempotent=False,
        ordered=False,
        steps=[Send(1, 1, "record"), Expire(), Answer(0, [OK], 7, -1, False, False)],
    )
    events = run(scenario, Sender)
    final = events[-1]
    assert final[12] == [("KafkaTimeoutError", final[12][0][1])]
    assert final[1] == 1 << 20
    assert final[6] == 0 and final[7] == 1


def test_the_locks_an_answer_takes_are_free_again() -> None:
    """A delivered batch: its result's, the incomplete batches' and the buffer pool's locks
    are free."""
    from tests.sender.sender_helpers import make, ok

    h = make(topics={"t": 1})
    (sent,) = h.send("t", 0)
    h.run()
    batch = h.acc.incomplete_batches()[0]
    h.client.respond(ok(h.produce_requests()[0], base_offset=7))
    h.run()
    assert sent.result(timeout=0).offset == 7
    lock_type = type(future.new_lock())
    for lock in (batch.result._lock, h.acc.incomplete._lock, h.acc.pool._lock):
        assert not lock.locked()
    for lock in (batch.result._lock, h.acc.incomplete._lock, h.acc.pool._lock):
        assert type(lock) is lock_type
        assert lock.acquire(timeout=1)  # free for the Python (one left held would block)
        lock.release()
