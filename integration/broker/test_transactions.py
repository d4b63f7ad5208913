"""Transactions on the embedded broker, driven by real transactional producers (kclient,
confluent-kafka, aiokafka, kafka-python) and read back by confluent-kafka consumers: read_committed
sees every committed record exactly once and never an aborted one; read_uncommitted
sees both. A second producer with the same transactional.id fences the first; a broker
SIGKILLed while transactions commit leaves each one wholly visible or wholly absent."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiokafka
import confluent_kafka
import pytest

from integration.broker.clients import cli_broker
from integration.peers import stop_process
from integration.producer.verify import consume_all
from kclient import KafkaProducer, errors
from kclient.broker import EmbeddedCluster

COMMITTED = {"isolation.level": "read_committed"}
UNCOMMITTED = {"isolation.level": "read_uncommitted"}


def _values(
    bootstrap: str, topic: str, partitions: int, expected: int, settings: dict[str, object]
) -> list[bytes]:
    return sorted(
        c.value or b""
        for c in consume_all(bootstrap, topic, partitions, expected, 30, settings=settings)
    )


def _check_views(bootstrap: str, topic: str, committed: list[bytes], aborted: list[bytes]) -> None:
    """read_committed: exactly the committed values; read_uncommitted: both."""
    assert _values(bootstrap, topic, 3, len(committed), COMMITTED) == sorted(committed)
    everything = sorted(committed + aborted)
    assert _values(bootstrap, topic, 3, len(everything), UNCOMMITTED) == everything


@pytest.fixture(scope="module")
def cluster() -> EmbeddedCluster:
    with EmbeddedCluster(3) as c:
        yield c  # type: ignore[misc]


def _topic(cluster: EmbeddedCluster) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, 3)
    return name


def commit_and_abort(cluster: EmbeddedCluster, topic: str, transactional_id: str) -> None:
    """Four transactions of 12 records over 3 partitions, the 2nd and 4th aborted after
    being written; read_committed sees the others', read_uncommitted all of them."""
    committed, aborted = [], []
    with KafkaProducer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id}
    ) as producer:
        producer.init_transactions(timeout=30)
        for n in range(4):
            producer.begin_transaction()
            batch = [b"txn%d-%d" % (n, i) for i in range(12)]
            for i, value in enumerate(batch):
                producer.send(topic, value, partition=i % 3)
            if n % 2:
                producer.flush()  # written, then aborted: stays in the log behind its marker
                producer.abort_transaction(timeout=30)
                aborted += batch
            else:
                producer.commit_transaction(timeout=30)
                committed += batch
    _check_views(cluster.bootstrap_servers, topic, committed, aborted)


def test_kclient_transactions_commit_and_abort_across_partitions(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster)
    commit_and_abort(cluster, topic, f"k-{topic}")


def test_confluent_kafka_transactions_on_the_embedded_broker(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"c-{topic}"}
    )
    producer.init_transactions(30)
    committed, aborted = [], []
    for n in range(4):
        producer.begin_transaction()
        batch = [b"c%d-%d" % (n, i) for i in range(12)]
        for i, value in enumerate(batch):
            producer.produce(topic, value, partition=i % 3)
        if n % 2:
            producer.flush(30)
            producer.abort_transaction(30)
            aborted += batch
        else:
            producer.commit_transaction(30)
            committed += batch
    producer.flush(5)
    _check_views(cluster.bootstrap_servers, topic, committed, aborted)


def test_aiokafka_transactions_on_the_embedded_broker(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster)
    committed: list[bytes] = []
    aborted: list[bytes] = []

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, transactional_id=f"a-{topic}"
        )
        await producer.start()
        try:
            for n in range(4):
                batch = [b"a%d-%d" % (n, i) for i in range(12)]
                await producer.begin_transaction()
                for i, value in enumerate(batch):
                    await producer.send_and_wait(topic, value, partition=i % 3)
                if n % 2:
                    await producer.abort_transaction()
                    aborted.extend(batch)
                else:
                    await producer.commit_transaction()
                    committed.extend(batch)
        finally:
            await asyncio.wait_for(producer.stop(), 30)

    asyncio.run(asyncio.wait_for(run(), 60))
    _check_views(cluster.bootstrap_servers, topic, committed, aborted)


# kafka-python 3.0 loads its schemas with the deprecated importlib.resources.read_text
@pytest.mark.filterwarnings("ignore:(read_text|open_text) is deprecated:DeprecationWarning")
def test_kafka_python_transactions_on_the_embedded_broker(cluster: EmbeddedCluster) -> None:
    import kafka

    topic = _topic(cluster)
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, transactional_id=f"kp-{topic}"
    )
    committed, aborted = [], []
    try:
        producer.init_transactions()
        for n in range(4):
            producer.begin_transaction()
            batch = [b"kp%d-%d" % (n, i) for i in range(12)]
            for i, value in enumerate(batch):
                producer.send(topic, value, partition=i % 3)
            if n % 2:
                producer.flush()
                producer.abort_transaction()
                aborted += batch
            else:
                producer.commit_transaction()
                committed += batch
    finally:
        producer.close(timeout=5)
    _check_views(cluster.bootstrap_servers, topic, committed, aborted)


def test_a_second_producer_with_the_same_id_fences_the_first(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster)
    settings = {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"z-{topic}"}
    zombie = KafkaProducer(settings)
    successor = KafkaProducer(settings)
    try:
        zombie.init_transactions(timeout=30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie-open", partition=0)
        zombie.flush()
        successor.init_transactions(timeout=30)  # aborts the zombie's transaction
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=1)
        successor.commit_transaction(timeout=30)
        # transaction version 1: its AddPartitionsToTxn is fenced at once; version 2: the
        # late batch's implicit add is refused (INVALID_PRODUCER_EPOCH: abortable, as in
        # Java), and the abort that must follow is fenced
        with pytest.raises((errors.ProducerFencedError, errors.TransactionRequiresAbortError)):
            zombie.send(topic, b"zombie-late", partition=2)
            zombie.commit_transaction(timeout=30)
        with pytest.raises(errors.ProducerFencedError):
            zombie.abort_transaction(timeout=30)
    finally:
        zombie.close(timeout=5)
        successor.close(timeout=5)
    assert _values(cluster.bootstrap_servers, topic, 3, 1, COMMITTED) == [b"successor"]
    assert b"zombie-late" not in _values(cluster.bootstrap_servers, topic, 3, 2, UNCOMMITTED)


def test_confluent_kafka_zombie_is_fenced(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster)
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"cz-{topic}"}
    zombie = confluent_kafka.Producer(conf)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(30)
    successor = confluent_kafka.Producer(conf)
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        zombie.commit_transaction(30)
    assert caught.value.args[0].fatal()
    assert _values(cluster.bootstrap_servers, topic, 3, 1, COMMITTED) == [b"successor"]


# ---- a broker killed during commits -----------------------------------------------------

TXN_RECORDS = 30


def _commit_until_stopped(
    bootstrap: str, transactional_id: str, done: list[int], stop: threading.Event
) -> None:
    """Commit transactions of TXN_RECORDS records (tagged with the transaction's number)
    over 3 partitions until the broker goes away; ``done``: those whose commit returned."""
    producer = KafkaProducer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "max.block.ms": 3000,
            "delivery.timeout.ms": 3000,
            "request.timeout.ms": 2000,
        }
    )
    try:
        producer.init_transactions()
        n = 0
        while not stop.is_set():
            producer.begin_transaction()
            for i in range(TXN_RECORDS):
                producer.send("crash", b"%d:%d" % (n, i), partition=i % 3)
            producer.commit_transaction()
            done.append(n)
            n += 1
    except errors.KafkaError:
        pass  # the broker was killed
    finally:
        producer.close(timeout=1)


def test_a_broker_killed_during_commits_keeps_each_transaction_whole(tmp_path: Path) -> None:
    log_dir = str(tmp_path / "logs")
    done: list[int] = []
    stop = threading.Event()
    with cli_broker("--log-dir", log_dir, "--num-partitions", "3") as (proc, bootstrap):
        worker = threading.Thread(
            target=_commit_until_stopped, args=(bootstrap, "crash-writer", done, stop), daemon=True
        )
        worker.start()
        deadline = time.monotonic() + 30
        while len(done) < 15 and time.monotonic() < deadline and worker.is_alive():
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)  # whatever it was doing: no flush, no clean close
        proc.wait(5)
        stop.set()  # its commit in flight fails after max.block.ms, meanwhile the restart
    assert len(done) >= 15
    with cli_broker("--log-dir", log_dir) as (_, bootstrap):
        # the next producer with the id aborts what the crash left open (as in Kafka)
        with KafkaProducer(
            {"bootstrap.servers": bootstrap, "transactional.id": "crash-writer"}
        ) as again:
            again.init_transactions(timeout=30)
        seen = consume_all(bootstrap, "crash", 3, len(done) * TXN_RECORDS, 30, settings=COMMITTED)
    worker.join(20)  # no commit returns once the broker is gone: done was complete already
    assert not worker.is_alive()
    per_txn = collections.Counter(int((c.value or b"").split(b":")[0]) for c in seen)
    assert all(count == TXN_RECORDS for count in per_txn.values()), per_txn
    assert set(done) <= set(per_txn)  # every commit that returned is there
    assert len(seen) == sum(per_txn.values())  # and nothing twice


# ---- read-process-write ----------------------------------------------------------------


@contextlib.contextmanager
def _worker(bootstrap: str, stderr_path: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A read-process-write worker process; stopped by its handle, its pipes closed."""
    with stderr_path.open("ab") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "integration.broker.rpw_worker",
                bootstrap,
                "rpw",
                "rpw-1",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=Path(__file__).resolve().parents[2],
        )
    try:
        yield proc
    finally:
        stop_process(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def test_read_process_write_killed_midway_outputs_each_input_exactly_once(tmp_path: Path) -> None:
    inputs = [b"in-%d" % i for i in range(600)]
    stderr = tmp_path / "worker.err"
    with EmbeddedCluster(1) as cluster:
        bootstrap = cluster.bootstrap_servers
        cluster.create_topic("rpw-in", 3)
        cluster.create_topic("rpw-out", 3)
        with KafkaProducer({"bootstrap.servers": bootstrap}) as plain:
            for i, value in enumerate(inputs):
                plain.send("rpw-in", value, partition=i % 3)
        with _worker(bootstrap, stderr, "100") as first:
            assert first.stdout is not None
            line = b"-"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and line.strip() not in (b"open", b""):
                line = first.stdout.readline()  # it commits a few transactions first
            assert line.strip() == b"open", stderr.read_text()
            # killed in a transaction with records and offsets sent, not committed
            first.send_signal(signal.SIGKILL)
            first.wait(5)
        with _worker(bootstrap, stderr) as second:
            assert second.wait(90) == 0, stderr.read_text()
        out = consume_all(bootstrap, "rpw-out", 3, len(inputs), 30, settings=COMMITTED)
        assert sorted(c.value or b"" for c in out) == sorted(b"out:" + v for v in inputs)
        assert cluster.committed_offsets("rpw") == {("rpw-in", p): 200 for p in range(3)}


def test_a_transaction_left_open_is_aborted_after_its_timeout(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster)
    settings = {"bootstrap.servers": cluster.bootstrap_servers}
    with (
        KafkaProducer(
            {**settings, "transactional.id": f"slow-{topic}", "transaction.timeout.ms": 1000}
        ) as slow,
        KafkaProducer({**settings, "transactional.id": f"fast-{topic}"}) as fast,
    ):
        slow.init_transactions(timeout=30)
        slow.begin_transaction()
        slow.send(topic, b"forgotten", partition=0)
        slow.flush()
        fast.init_transactions(timeout=30)
        fast.begin_transaction()
        fast.send(topic, b"after", partition=0)
        fast.commit_transaction(timeout=30)
        # read_committed waits behind the open transaction until the coordinator aborts it
        assert _values(cluster.bootstrap_servers, topic, 3, 1, COMMITTED) == [b"after"]
        with pytest.raises(errors.ProducerFencedError):
            slow.commit_transaction(timeout=30)


def test_transactions_go_on_when_their_coordinator_stops() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("moving", 3)
        with KafkaProducer(
            {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "mover"}
        ) as producer:
            producer.init_transactions(timeout=30)
            producer.begin_transaction()
            producer.send("moving", b"before", partition=0)
            producer.flush()
            coordinator = cluster.transaction_coordinator("mover")
            cluster.stop_broker(coordinator)
            assert cluster.transaction_coordinator("mover") != coordinator
            producer.send("moving", b"during", partition=1)
            producer.commit_transaction(timeout=30)
            cluster.start_broker(coordinator)
            producer.begin_transaction()
            producer.send("moving", b"after", partition=2)
            producer.commit_transaction(timeout=30)
        got = _values(cluster.bootstrap_servers, "moving", 3, 3, COMMITTED)
        assert got == [b"after", b"before", b"during"]
