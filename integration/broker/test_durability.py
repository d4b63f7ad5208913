"""Nothing acknowledged is lost: across a restart with --log-dir (clean and after SIGKILL),
and while brokers of an EmbeddedCluster stop and start under a running producer."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import confluent_kafka

from integration.broker.clients import cli_broker
from integration.peers import QUICK_READ, from_start
from kclient import errors
from kclient.broker import EmbeddedCluster
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.record import RecordBatchBuilder

Acked = dict[tuple[int, int], bytes]  # (partition, offset) -> value


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark as the broker answers it (ListOffsets, bounded)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        return {
            p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=30)[
                1
            ]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> Acked:
    """Every record of ``topic`` up to the high watermarks the broker answers at the start
    (at most 90 s, however loaded the machine); then nothing beyond ``expected`` shows up."""
    ends = high_watermarks(bootstrap, topic, partitions)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify",
            "enable.auto.commit": False,
            **QUICK_READ,
        }
    )
    consumer.assign(from_start(topic, partitions))
    out: Acked = {}
    read_to = dict.fromkeys(range(partitions), 0)
    deadline = time.monotonic() + 90
    try:
        while any(read_to[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                assert msg.error() is None, msg.error()
                out[(msg.partition(), msg.offset())] = msg.value()
                read_to[msg.partition()] = msg.offset() + 1
        unread = {p: (read_to[p], ends[p]) for p in ends if read_to[p] < ends[p]}
        assert not unread, f"not read within 90 s: (read up to, high watermark) {unread}"
        if len(out) < expected:  # the broker's log ends before what was acknowledged
            return out
        for msg in consumer.consume(1000, 0.3):  # nothing beyond what was expected shows up
            out[(msg.partition(), msg.offset())] = msg.value()
    finally:
        consumer.close()
    return out


class BackgroundProducer:
    """A confluent-kafka producer thread recording every acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, **conf: object) -> None:
        self.topic = topic
        self.acked: Acked = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 2,
                "enable.idempotence": True,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 500,
                **conf,
            }
        )
        self._thread = threading.Thread(target=self._run, name="test-producer", daemon=True)

    def _delivered(self, err: object, msg: confluent_kafka.Message) -> None:
        if err is None:
            self.acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < 200_000:
            value = f"record-{self.sent}".encode()
            try:
                self._producer.produce(
                    self.topic, value=value, key=value, on_delivery=self._delivered
                )
                self.sent += 1
            except BufferError:
                pass
            self._producer.poll(0.001 if self.sent % 50 == 0 else 0)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def wait_for_acks(self, n: int, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        target = len(self.acked) + n
        while len(self.acked) < target and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.acked) >= target, f"only {len(self.acked)} acks (wanted {target})"

    def stop(self, flush_timeout_s: float = 30.0) -> int:
        self._stop.set()
        self._thread.join(10)
        return int(self._producer.flush(flush_timeout_s))

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            self.stop(5)


def test_clean_restart_with_log_dir_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    log_dir = str(tmp_path / "logs")
    with cli_broker("--log-dir", log_dir, "--num-partitions", "3") as (proc, bootstrap):
        with BackgroundProducer(bootstrap, "durable") as producer:
            producer.wait_for_acks(3000)
            assert producer.stop() == 0
        acked = producer.acked
        assert not producer.failed
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
    with cli_broker("--log-dir", log_dir) as (_, bootstrap):
        assert consume_all(bootstrap, "durable", 3, len(acked)) == acked


def test_restart_after_sigkill_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    log_dir = str(tmp_path / "logs")
    with cli_broker("--log-dir", log_dir, "--num-partitions", "2") as (proc, bootstrap):
        with BackgroundProducer(bootstrap, "crash", **{"message.timeout.ms": 2000}) as producer:
            producer.wait_for_acks(2000)
            proc.send_signal(signal.SIGKILL)  # mid-stream: no flush, no clean close
            proc.wait(5)
            producer.stop(flush_timeout_s=5)
        acked = dict(producer.acked)
    assert acked
    with cli_broker("--log-dir", log_dir) as (_, bootstrap):
        consumed = consume_all(bootstrap, "crash", 2, len(acked))
    missing = {k: v for k, v in acked.items() if consumed.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {list(missing)[:5]}"


def test_cluster_stop_and_start_under_a_running_producer_loses_nothing() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("failover", partitions=6)
        with BackgroundProducer(cluster.bootstrap_servers, "failover") as producer:
            producer.wait_for_acks(1000)
            for node in (1, 2, 0):
                cluster.stop_broker(node)
                assert node not in {cluster.leader("failover", p) for p in range(6)}
                producer.wait_for_acks(2000)
                cluster.start_broker(node)
                producer.wait_for_acks(2000)
            assert producer.stop() == 0
        assert not producer.failed, producer.failed[:3]
        acked = producer.acked
        stored: Acked = {}
        for p in range(6):
            for r in cluster.read_records("failover", p):
                assert r.value is not None
                stored[(p, r.offset)] = r.value
        assert stored == acked  # everything acknowledged, nothing twice, nothing else
        assert sorted({cluster.leader("failover", p) for p in range(6)}) == [0, 1, 2]


def test_a_former_leader_answers_not_leader_or_follower() -> None:
    import socket
    import struct

    with EmbeddedCluster(2) as cluster:
        cluster.create_topic("moved", partitions=1)
        leader = cluster.leader("moved")
        follower = 1 - leader
        cluster.stop_broker(leader)
        cluster.start_broker(leader)  # takes its preferred leadership back
        cluster.stop_broker(leader)
        assert cluster.leader("moved") == follower
        cluster.start_broker(leader)
        # now ask the broker that led while `leader` was down
        builder = RecordBatchBuilder("none", batch_size=1 << 20)
        builder.append(0, None, b"x")
        body = {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "moved", "partition_data": [{"index": 0, "records": builder.build()}]}
            ],
        }
        host, port = cluster.broker_address(follower).rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"".join(encode_request(ApiKey.PRODUCE, 9, 1, "t", body)))
            (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
            frame = sock.recv(size, socket.MSG_WAITALL)
        _, reply = decode_response(ApiKey.PRODUCE, 9, frame)
        part = reply["responses"][0]["partition_responses"][0]
        assert part["error_code"] == errors.NotLeaderOrFollowerError.code


def test_cli_sigterm_shuts_down_within_five_seconds() -> None:
    with cli_broker("--brokers", "2") as (proc, bootstrap):
        assert len(bootstrap.split(",")) == 2
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
        assert time.monotonic() - started < 5
