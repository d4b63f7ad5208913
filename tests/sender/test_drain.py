"""The accumulator's ready check and drain (``BatchDrainer``): the edges of readiness, the
start index that moves from drain to drain, requests cut at their size, the lock left free
when the transaction manager fails."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.network.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kclient.record import CompressionType, RecordBatch
from kclient.record.builder import PyRecordBatchBuilder, RecordBatchBuilder
from kclient.sender import drain
from kclient.sender.batch import ProducerBatch, _refuse
from kclient.sender.topic_queues import TopicQueues

IMPLS = ["kclient"]
NODES = [Node(i, "127.0.0.1", 9092 + i) for i in range(3)]
BATCH_SIZE = 300


def new_drainer(impl: str, tm: object) -> Any:
    return drain.BatchDrainer(tm)  # type: ignore[arg-type]


@dataclass
class BatchSpec:
    values: list[int]  # value sizes of its records
    age_ms: int
    retry_in_ms: int | None  # None: not in retry (a retry is built: it was sent once)
    python_builder: bool


@dataclass
class Scenario:
    nodes: int
    topics: dict[str, list[int | None]]  # partition → leader's index (None: no leader)
    in_cluster: dict[str, bool]
    threading_lock: dict[str, bool]
    batches: dict[tuple[str, int], list[BatchSpec]]  # in the deques' insertion order
    muted: set[tuple[str, int]]
    refused: set[tuple[str, int]] | None  # None: no transaction manager
    linger_ms: int
    delivery_timeout_ms: int
    compression: CompressionType = CompressionType.NONE
    rounds: list[tuple[int, bool, bool, int]] = field(default_factory=list)
    # (clock advance ms, all_ready, drain the ready nodes only (else every node), max size)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = draw(st.integers(1, 3))
    leader = st.one_of(st.integers(0, nodes - 1), st.integers(0, nodes - 1), st.none())
    topics: dict[str, list[int | None]] = {}
    for t in range(draw(st.integers(1, 3))):
        topics[f"t{t}"] = draw(st.lists(leader, min_size=1, max_size=12))
    batch = st.builds(
        BatchSpec,
        # 260: a first record past batch.size, a full batch at once
        st.lists(st.one_of(st.integers(0, 120), st.just(260)), min_size=1, max_size=5),
        st.one_of(st.sampled_from([0, 5, 20, 60]), st.integers(0, 60)),
        st.one_of(st.none(), st.sampled_from([-10, 0, 5, 10, 30])),
        st.booleans(),
    )
    tps = [
        (topic, p)
        for topic, leaders in topics.items()
        for p in range(len(leaders) + draw(st.integers(0, 1)))  # one past the cluster's
    ]
    held = draw(st.lists(st.sampled_from(tps), unique=True, max_size=len(tps)))
    batches = {tp: draw(st.lists(batch, max_size=3)) for tp in held}
    return Scenario(
        nodes=nodes,
        topics=topics,
        in_cluster={topic: draw(st.integers(0, 5)) > 0 for topic in topics},
        threading_lock={topic: draw(st.booleans()) for topic in topics},
        batches=batches,
        muted=set(draw(st.lists(st.sampled_from(tps), max_size=3))),
        refused=draw(st.one_of(st.none(), st.sets(st.sampled_from(tps), max_size=3))),
        linger_ms=draw(st.sampled_from([0, 5, 20, 100])),
        delivery_timeout_ms=draw(st.sampled_from([10, 50, 120_000])),
        compression=draw(st.sampled_from([CompressionType.NONE] * 3 + [CompressionType.GZIP])),
        rounds=draw(
            st.lists(
                st.tuples(
                    st.sampled_from([0, 5, 10, 20, 40]),
                    st.booleans(),
                    st.booleans(),
                    st.sampled_from([1, 150, 400, 900, 1 << 20]),
                ),
                min_size=1,
                max_size=4,
            )
        ),
    )


class FakeTransactionManager:
    """Refuses the batches of some partitions; assigns sequences in drain order."""

    def __init__(self, refused: set[tuple[str, int]]) -> None:
        self.refused = refused
        self.calls: list[tuple[str, object, int]] = []
        self.sequence = 0

    def can_send(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
        self.calls.append(("can_send", tp, batch.flush_id))
        return (tp.topic, tp.partition) not in self.refused

    def assign_sequence(self, batch: ProducerBatch) -> None:
        self.calls.append(("assign_sequence", batch.tp, batch.flush_id))
        batch.set_producer_state(7, 0, self.sequence)
        self.sequence += batch.record_count


NOW_MS = 1_000


def build(
    s: Scenario,
) -> tuple[dict[str, TopicQueues], Cluster, list[Node], FakeTransactionManager | None]:
    """The accumulator's state the scenario describes (a new copy each call)."""
    nodes = NODES[: s.nodes]
    infos = [
        PartitionInfo(topic, p, None if i is None else nodes[i])
        for topic, leaders in s.topics.items()
        if s.in_cluster[topic]
        for p, i in enumerate(leaders)
    ]
    topics: dict[str, TopicQueues] = {}
    for topic in s.topics:
        queues = topics[topic] = TopicQueues(topic, BATCH_SIZE, None)
        if s.threading_lock[topic]:
            queues.lock = threading.Lock()
    serial = 0
    for (topic, p), specs in s.batches.items():
        queues = topics[topic]
        dq = queues.deques[p]  # made even when it stays empty
        for spec in specs:
            serial += 1
            builder_type: Any = PyRecordBatchBuilder if spec.python_builder else RecordBatchBuilder
            # with a transaction manager, transactional batches (a producer id assigned when
            # drained, or before their first send for those in retry)
            builder = builder_type(
                s.compression, BATCH_SIZE, is_transactional=s.refused is not None
            )
            batch = ProducerBatch(queues.tps[p], builder, NOW_MS - spec.age_ms, 0, serial)
            for size in spec.values:
                batch.try_append(NOW_MS + size, None, bytes(size), (), None)
            if spec.retry_in_ms is not None:
                if s.refused is not None:
                    batch.set_producer_state(7, 0, 1000 + serial)
                batch.close()
                batch.reenqueued(NOW_MS, spec.retry_in_ms)
            dq.append(batch)
            queues.queued += 1
    tm = None if s.refused is None else FakeTransactionManager(s.refused)
    return topics, Cluster(nodes, infos), nodes, tm


def batch_state(batch: ProducerBatch) -> tuple[object, ...]:
    if batch.records is not None:  # a valid batch (CRC checked) of its records
        decoded = RecordBatch(batch.records)
        decoded.validate()
        assert decoded.record_count == batch.record_count
    return (
        batch.flush_id,
        batch.records,
        batch.uncompressed_bytes,
        batch.drained_ms,
        batch.base_sequence,
        batch._append is _refuse,
        batch.in_retry,
        batch.retry_at_ms,
    )


def state(topics: dict[str, TopicQueues], drainer: Any, tm: FakeTransactionManager | None) -> Any:
    for queues in topics.values():
        assert not queues.lock.locked()
    return (
        {
            topic: (
                queues.queued,
                {p: [batch_state(b) for b in dq] for p, dq in queues.deques.items()},
            )
            for topic, queues in topics.items()
        },
        drainer.next_expiry_ms,
        drainer.more_ready,
        dict(drainer._drain_index),
        None if tm is None else tm.calls,
    )


def run(impl: str, s: Scenario) -> list[Any]:
    """What the drainer answers and leaves behind, round after round."""
    topics, cluster, nodes, tm = build(s)
    drainer = new_drainer(impl, tm)
    drainer.muted.update(TopicPartition(*tp) for tp in s.muted)
    seen: list[Any] = []
    now_ms = NOW_MS
    for advance_ms, all_ready, ready_only, max_size in s.rounds:
        now_ms += advance_ms
        result = drainer.ready(
            topics, cluster, now_ms, s.linger_ms, s.delivery_timeout_ms, all_ready
        )
        assert type(result) is drain.ReadyCheckResult
        assert type(result.ready_nodes) is set
        assert type(result.unknown_leader_topics) is set
        ready = sorted(result.ready_nodes, key=lambda n: n.id)
        seen.append(
            (
                [n.id for n in ready],
                result.next_ready_check_delay_ms,
                sorted(result.unknown_leader_topics),
                state(topics, drainer, tm),
            )
        )
        drained = drainer.drain(topics, cluster, ready if ready_only else nodes, max_size, now_ms)
        seen.append(
            (
                {node_id: [batch_state(b) for b in bs] for node_id, bs in drained.items()},
                state(topics, drainer, tm),
            )
        )
    return seen


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_random_states_drain_whole_batches_and_leave_every_lock_free(s: Scenario) -> None:
    # run() decodes every built batch (its CRC checked) and checks each topic's lock is free
    # after every call
    seen = run("kclient", s)
    assert len(seen) == 2 * len(s.rounds)


def test_rotation_and_request_cuts_over_many_drains() -> None:
    """One node leading 20 partitions of two topics, refilled between drains: the start
    index moves on each drain and a small request size cuts the walk."""
    s = Scenario(
        nodes=1,
        topics={"a": [0] * 12, "b": [0] * 8},
        in_cluster={"a": True, "b": True},
        threading_lock={"a": False, "b": False},
        batches={},
        muted={("a", 3)},
        refused=None,
        linger_ms=0,
        delivery_timeout_ms=120_000,
    )
    results = {}
    for impl in IMPLS:
        topics, cluster, nodes, _ = build(s)
        drainer = new_drainer(impl, None)
        drainer.muted.add(TopicPartition("a", 3))
        seen = []
        for round_ in range(30):
            for p in range(round_ % 7, 20, 3):
                topic, partition = ("a", p) if p < 12 else ("b", p - 12)
                queues = topics[topic]
                batch = ProducerBatch(
                    queues.tps[partition], RecordBatchBuilder(batch_size=BATCH_SIZE), 0, 0, round_
                )
                batch.try_append(0, None, bytes(round_ * 5), (), None)
                queues.deques[partition].append(batch)
                queues.queued += 1
            drained = drainer.drain(topics, cluster, nodes, 100 + 40 * (round_ % 5), round_)
            seen.append(
                (
                    {n: [(b.tp, b.flush_id) for b in bs] for n, bs in drained.items()},
                    state(topics, drainer, None),
                )
            )
        results[impl] = seen
    assert len({s[1][3][0] for s in results["kclient"]}) > 5  # the start index moved around


EDGES = {
    # name: (batch, linger_ms, ready node ids, drained flush ids)
    "full before linger": (BatchSpec([260], 0, None, False), 100, [0], [1]),
    "full before linger, Python builder": (BatchSpec([260], 0, None, True), 100, [0], [1]),
    "lingering": (BatchSpec([10], 99, None, False), 100, [], [1]),
    "linger just over": (BatchSpec([10], 100, None, False), 100, [0], [1]),
    "retry due now": (BatchSpec([10], 0, 0, False), 100, [0], [1]),
    "retry due in 1 ms": (BatchSpec([10], 0, 1, False), 0, [], []),
}


@pytest.mark.parametrize("edge", EDGES)
def test_edges_of_readiness(edge: str) -> None:
    spec, linger_ms, ready_ids, drained_ids = EDGES[edge]
    s = Scenario(
        nodes=1,
        topics={"a": [0]},
        in_cluster={"a": True},
        threading_lock={"a": False},
        batches={("a", 0): [spec]},
        muted=set(),
        refused=None,
        linger_ms=linger_ms,
        delivery_timeout_ms=120_000,
        rounds=[(0, False, False, 1 << 20)],
    )
    c = run("kclient", s)
    assert c[0][0] == ready_ids
    assert [b[0] for b in c[1][0].get(0, [])] == drained_ids


@pytest.mark.parametrize("batches", [2, 3, 5])
def test_one_drain_takes_every_queued_batch_when_the_request_has_room(batches: int) -> None:
    s = Scenario(
        nodes=1,
        topics={"a": [0] * 10},
        in_cluster={"a": True},
        threading_lock={"a": False},
        batches={("a", p): [BatchSpec([10], 0, None, False)] for p in range(0, 2 * batches, 2)},
        muted=set(),
        refused=None,
        linger_ms=0,
        delivery_timeout_ms=120_000,
    )
    answers = []
    for impl in IMPLS:
        topics, cluster, nodes, _ = build(s)
        drainer = new_drainer(impl, None)
        drained = drainer.drain(topics, cluster, nodes, 1 << 20, NOW_MS)
        answers.append(([b.flush_id for b in drained[0]], state(topics, drainer, None)))
    assert answers[0][0] == list(range(1, batches + 1))


@pytest.mark.parametrize("impl", IMPLS)
def test_an_error_from_the_transaction_manager_leaves_the_lock_free(impl: str) -> None:
    class Failing(FakeTransactionManager):
        def can_send(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
            raise RuntimeError("no")

    s = Scenario(
        nodes=1,
        topics={"a": [0]},
        in_cluster={"a": True},
        threading_lock={"a": False},
        batches={("a", 0): [BatchSpec([10], 0, None, False)]},
        muted=set(),
        refused=set(),
        linger_ms=0,
        delivery_timeout_ms=120_000,
    )
    topics, cluster, nodes, _ = build(s)
    drainer = new_drainer(impl, Failing(set()))
    with pytest.raises(RuntimeError, match="no"):
        drainer.drain(topics, cluster, nodes, 1 << 20, NOW_MS)
    assert not topics["a"].lock.locked()
    assert topics["a"].queued == 1


def test_keyword_calls() -> None:
    s = Scenario(
        nodes=2,
        topics={"a": [0, 1, None]},
        in_cluster={"a": True},
        threading_lock={"a": False},
        batches={("a", p): [BatchSpec([10], 30, None, False)] for p in range(3)},
        muted=set(),
        refused=None,
        linger_ms=20,
        delivery_timeout_ms=120_000,
    )
    answers = []
    for impl in IMPLS:
        topics, cluster, nodes, _ = build(s)
        drainer = new_drainer(impl, None)
        result = drainer.ready(
            topics=topics,
            cluster=cluster,
            now_ms=NOW_MS,
            linger_ms=20,
            delivery_timeout_ms=120_000,
            all_ready=False,
        )
        drained = drainer.drain(
            topics, cluster, nodes=nodes, max_request_size=1 << 20, now_ms=NOW_MS
        )
        answers.append(
            (
                sorted(n.id for n in result.ready_nodes),
                result.unknown_leader_topics,
                {n: [b.flush_id for b in bs] for n, bs in drained.items()},
                state(topics, drainer, None),
            )
        )
    assert answers[0][0] == [0, 1]
