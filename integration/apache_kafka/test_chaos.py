"""Seeded faults on a 3-node Apache Kafka 4.4 (replication factor 3, min.insync.replicas=2)
under kclient producers with acks=all: one run for the module, judged by the tests below.

The run's faults come from a seed that is printed (``KCLIENT_CHAOS_SEED=N`` replays the same
faults in the same order on the same partitions; the producers' timing still varies), in
:mod:`integration.apache_kafka.faults`: a broker restarted cleanly and a broker paused
(SIGSTOP) past ``request.timeout.ms``, in a seeded order, with a preferred-leader election
after the first of them (leadership has moved) and then the transaction coordinator's node,
leader of partitions too, killed (``kill -9``) and restarted. Meanwhile
(:mod:`integration.apache_kafka.chaos`):

* two synchronous idempotent ``KafkaProducer`` threads and a ``kclient.aio`` producer write
  numbered records to every partition of one topic;
* a transactional ``KafkaProducer`` commits and aborts small transactions on another.

Then Kafka's own Java consumer reads both topics (``read_committed``). The Metadata requests
each producer sent during the faults and the leader changes seen are printed (``-s``):
what is left after following KIP-951's leader hints in Produce answers (a killed or paused
leader answers nothing). The cluster is this module's own
(the session's ``apache_kafka_cluster`` is shadowed, so the brokers' logs still join a
failure's report).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from integration.apache_kafka.chaos import (
    Outcome,
    Txn,
    TxnWriter,
    Writer,
    chaos_seed,
    check_txns,
    check_writers,
    failures,
    metadata_requests,
    slowest_s,
    wait_acked,
)
from integration.apache_kafka.faults import TXN_STATE_TOPIC, Faults, wait_for
from integration.apache_kafka.readback import unique
from kclient import errors
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka
from kclient.testing.apache_kafka_java import JavaReadBack, JavaRecord

# the cluster's start, the run (two broker restarts), the read-back: longer than the default
pytestmark = pytest.mark.timeout(400)

PARTITIONS = 4
REQUEST_TIMEOUT_MS = 3000
DELIVERY_TIMEOUT_MS = 30000
ROUNDS_PER_S = 25.0
"""Each idempotent writer sends this many records a second to each partition."""
JOIN_S = DELIVERY_TIMEOUT_MS / 1000 + 20
"""How long a writer may take to finish once told to stop: its flush, or its commit or
abort, is bounded by ``delivery.timeout.ms``, its close by 10 s."""


@pytest.fixture(scope="module")
def apache_kafka_cluster() -> Iterator[ApacheKafka]:
    """Three Apache Kafka 4.4 nodes for this module alone: its faults stay here."""
    with ApacheKafka(VERSIONS[0], brokers=3) as kafka:
        yield kafka


@dataclass
class ChaosRun:
    seed: int
    writers: list[Writer]
    txn: TxnWriter
    faults: Faults
    read: JavaReadBack
    stuck: list[str]
    """Names of the writers' threads still running after ``JOIN_S``."""


def _settings(kafka: ApacheKafka) -> dict[str, object]:
    return {
        "bootstrap.servers": kafka.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        "max.block.ms": DELIVERY_TIMEOUT_MS,
    }


def _fault_order(rng: random.Random) -> list[str]:
    """A clean restart and a pause in a seeded order; the election after the first (which
    moved leaderships), then the coordinator's node killed: every node leads partitions of
    both topics again by then, so the kill hits the coordinator and partition leaders."""
    first, last = rng.sample(["restart", "pause"], 2)
    return [first, "elect", "kill-coordinator", last]


def _requests(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: n - before.get(name, 0) for name, n in sorted(after.items())}


@pytest.fixture(scope="module")
def chaos_run(apache_kafka_cluster: ApacheKafka) -> ChaosRun:
    kafka = apache_kafka_cluster
    seed = chaos_seed()
    rng = random.Random(seed)
    topic, txn_topic = unique("chaos"), unique("chaos-txn")
    for name in (topic, txn_topic):
        kafka.create_topic(name, PARTITIONS, replication_factor=3)
    settings = _settings(kafka)
    writers = [Writer(n, settings, topic, PARTITIONS, ROUNDS_PER_S) for n in ("sync-1", "sync-2")]
    writers.append(Writer("aio", settings, topic, PARTITIONS, ROUNDS_PER_S))
    txn_settings = {
        **settings,
        "transactional.id": unique("chaos"),
        "transaction.timeout.ms": 60000,
    }
    txn_rng = random.Random(rng.randrange(1 << 30))
    txn = TxnWriter(txn_settings, txn_topic, PARTITIONS, txn_rng, DELIVERY_TIMEOUT_MS / 1000)
    faults = Faults(kafka, [topic, txn_topic, TXN_STATE_TOPIC], rng)
    order = _fault_order(rng)

    def committed() -> int:
        return sum(t.outcome == "committed" for t in txn.txns)

    stop = threading.Event()
    started = time.monotonic()
    marks: list[dict[str, int]] = []
    """Metadata requests sent so far, per producer, as each fault began and at the end."""
    with metadata_requests() as sent:
        threads = [w.start(stop, JOIN_S - 15, aio=w.name == "aio") for w in writers]
        threads.append(txn.start(stop))
        try:
            wait_acked(writers, 20, 60)
            wait_for(lambda: committed() >= 3, 60, "3 transactions committed")
            faults.snapshot()
            faults.run(order, (0.5, 1.5), on_step=lambda _: marks.append(dict(sent)))
            # every producer gets through after the last fault
            wait_acked(writers, 20, 60)
            done = committed()
            wait_for(lambda: committed() >= done + 3, 60, "3 more transactions committed")
        finally:
            stop.set()
            for thread in threads:
                thread.join(JOIN_S)
    seconds = time.monotonic() - started
    read = kafka.java_read([topic, txn_topic], timeout_s=60)
    print(
        f"\nchaos seed {seed}: faults {order} in {seconds:.0f} s; "
        f"{sum(w.acked() for w in writers)} records acknowledged, "
        f"{len(failures(writers))} failed, the slowest in {slowest_s(writers):.1f} s; "
        f"{len(txn.txns)} transactions "
        f"({committed()} committed), {txn.producers} transactional producer(s); leader "
        f"changes seen: {faults.leader_changes(topic)} ({topic}), "
        f"{faults.leader_changes(txn_topic)} ({txn_topic}), "
        f"{faults.leader_changes(TXN_STATE_TOPIC)} (coordinator); Metadata requests "
        f"during the faults: {_requests(marks[0], marks[-1])}\n" + "\n".join(faults.log)
    )
    for i, (name, _) in enumerate(faults.steps):  # what each fault cost in refreshes
        changes = "/".join(
            str(faults.leader_changes(t, i)) for t in (topic, txn_topic, TXN_STATE_TOPIC)
        )
        print(
            f"{name:>16}: leader changes {changes} (topic/txn topic/coordinator), "
            f"Metadata requests {_requests(marks[i], marks[i + 1])}"
        )
    for t in txn.txns:
        if t.errors:
            print(f"transaction {t.number} ({t.wanted}, {t.outcome}): {t.errors}")
    stuck = [t.name for t in threads if t.is_alive()]
    return ChaosRun(seed, writers, txn, faults, read, stuck)


def test_idempotent_producers_keep_every_acknowledgement(chaos_run: ChaosRun) -> None:
    """Each acknowledged record read exactly once, at its offset, in its writer's order; no
    future pending; a failed one failed within delivery.timeout.ms with a KafkaError."""
    run = chaos_run
    assert not [w for w in run.stuck if w != "txn-writer"], f"seed {run.seed}: writers stuck"
    problems = check_writers(run.writers, run.read, DELIVERY_TIMEOUT_MS / 1000)
    assert not problems, f"seed {run.seed}: {len(problems)} problems: {problems[:20]}"
    for w in run.writers:
        assert w.acked() >= PARTITIONS * 60, f"seed {run.seed}: {w.name} acked {w.acked()}"
    assert run.faults.leader_changes(run.writers[0].topic) >= 1, run.faults.log


def test_transactions_are_all_or_nothing(chaos_run: ChaosRun) -> None:
    """Each committed transaction wholly visible to read_committed, each aborted one not at
    all, one ended by a fatal error either; nothing twice."""
    run = chaos_run
    assert "txn-writer" not in run.stuck, f"seed {run.seed}: the transactional writer is stuck"
    problems = check_txns(run.txn, run.read)
    assert not problems, f"seed {run.seed}: {len(problems)} problems: {problems[:20]}"
    outcomes = {t.outcome for t in run.txn.txns}
    assert {"committed", "aborted"} <= outcomes, f"seed {run.seed}: {outcomes}"
    assert run.faults.leader_changes(TXN_STATE_TOPIC) >= 1, run.faults.log


# --- the checks themselves, on made-up read-backs (no cluster)


def _read(topic: str, values: list[bytes]) -> JavaReadBack:
    return JavaReadBack(
        [
            JavaRecord(topic, 0, offset, 0, "CreateTime", None, v, ())
            for offset, v in enumerate(values)
        ]
    )


def test_the_writer_checks_name_lost_duplicated_reordered_pending_and_late_records() -> None:
    writer = Writer("w", {}, "t", 1, 1.0)
    writer.outcomes = [Outcome(0, seq, 0.0, 1.0, offset=seq) for seq in range(3)]
    values = [b"w|0|0", b"w|0|1", b"w|0|2"]
    assert check_writers([writer], _read("t", values), 30.0) == []
    lost = check_writers([writer], _read("t", [b"w|0|0", b"w|0|2"]), 30.0)
    assert any("#1: acknowledged at offset 1, read at None" in p for p in lost), lost
    twice = check_writers([writer], _read("t", [*values, b"w|0|2"]), 30.0)
    assert any("read 2 times" in p for p in twice), twice
    swapped = check_writers([writer], _read("t", [b"w|0|1", b"w|0|0", b"w|0|2"]), 30.0)
    assert any("out of order" in p for p in swapped), swapped
    writer.outcomes += [
        Outcome(0, 3, 0.0),  # never completed
        Outcome(0, 4, 0.0, 40.0, error=errors.KafkaTimeoutError("late")),
        Outcome(0, 5, 0.0, 1.0, error=ValueError("untyped")),
        Outcome(0, 6, 0.0, 40.0, offset=3),  # acknowledged, but late
    ]
    other = check_writers([writer], _read("t", values), 30.0)
    assert [p.split(":")[0] for p in other] == [
        "w partition 0 #3",
        "w partition 0 #4",
        "w partition 0 #5",
        "w partition 0 #6",
    ]


def test_the_transaction_checks_name_partial_and_visible_aborted_transactions() -> None:
    writer = TxnWriter({}, "t", 1, random.Random(0), 1.0)
    writer.txns = [Txn(0, 2, "commit", "committed"), Txn(1, 1, "abort", "aborted")]
    writer.txns.append(Txn(2, 2, "commit", "unknown"))
    assert check_txns(writer, _read("t", [b"txn|0|0", b"txn|0|1", b"txn|2|0", b"txn|2|1"])) == []
    assert check_txns(writer, _read("t", [b"txn|0|0", b"txn|0|1"])) == []
    partial = check_txns(writer, _read("t", [b"txn|0|0", b"txn|2|1"]))
    assert [p.split(" (")[0] for p in partial] == ["transaction 0", "transaction 2"]
    aborted = check_txns(writer, _read("t", [b"txn|0|0", b"txn|0|1", b"txn|1|0"]))
    assert [p.split(" (")[0] for p in aborted] == ["transaction 1"]
    twice = check_txns(writer, _read("t", [b"txn|0|0", b"txn|0|1", b"txn|0|1"]))
    assert any("read twice" in p for p in twice), twice
