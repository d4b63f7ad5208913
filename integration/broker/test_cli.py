"""``python -m kclient.broker``: flags, the ready line, metrics output, clean shutdown."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import time

import confluent_kafka
from confluent_kafka.admin import AdminClient

from integration.broker.clients import cli_broker, kcat, read_line


def test_cluster_with_auto_created_topics_and_periodic_metrics() -> None:
    args = (
        "--brokers",
        "3",
        "--num-partitions",
        "4",
        "--metrics-interval",
        "0.2",
        "--num-network-threads",
        "2",
        "--num-io-threads",
        "2",
    )
    with cli_broker(*args) as (proc, bootstrap):
        listing = kcat(["-L", "-b", bootstrap], new_librdkafka=False).decode()
        assert " 3 brokers:" in listing
        kcat(["-P", "-b", bootstrap, "-t", "auto"], False, stdin=b"one\ntwo\n")
        meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics("auto", timeout=10)
        assert len(meta.topics["auto"].partitions) == 4
        assert {p.leader for p in meta.topics["auto"].partitions.values()} == {0, 1, 2}
        lines = [read_line(proc) for _ in range(30)]
        assert any("request queue" in line for line in lines)
        assert any(line.strip().startswith("Produce") for line in lines), lines
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0


def test_no_auto_create_topics_and_message_max_bytes() -> None:
    with cli_broker("--no-auto-create-topics", "--message-max-bytes", "2000") as (_, bootstrap):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        meta = admin.list_topics("nope", timeout=10)
        assert meta.topics["nope"].error is not None
        assert meta.topics["nope"].error.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
        for future in admin.create_topics([confluent_kafka.admin.NewTopic("small", 1, 1)]).values():
            future.result(timeout=10)
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "message.max.bytes": 100_000}
        )
        results: list[object] = []
        producer.produce("small", b"x" * 5000, on_delivery=lambda err, _m: results.append(err))
        producer.flush(10)  # its own batch: a batch over message.max.bytes fails as a whole
        producer.produce("small", b"ok", on_delivery=lambda err, _m: results.append(err))
        producer.flush(10)
        codes = sorted(e.code() if e is not None else 0 for e in results)  # type: ignore[attr-defined]
        assert codes == [0, confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE]


def test_a_port_in_use_is_reported_and_bad_flags_are_refused() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "kclient.broker", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    assert result.returncode == 1
    assert b"--listen" in result.stderr and str(port).encode() in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "kclient.broker", "--num-io-threads", "0"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2 and b"num.io.threads" in result.stderr


def test_sigint_while_clients_are_connected_stops_within_five_seconds() -> None:
    with cli_broker() as (proc, bootstrap):
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        producer.produce("busy", b"x")
        assert producer.flush(10) == 0
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
        assert time.monotonic() - started < 5
        assert proc.stdout is not None
        assert b"stopped" in proc.stdout.read()


def test_group_joins_and_rebalances_are_logged_one_line_each() -> None:
    from integration.broker.groups import GroupMember, consume_until, produce

    with cli_broker("--group-initial-rebalance-delay-ms", "50") as (proc, bootstrap):
        produce(bootstrap, "logged", 0, 1, 1)
        member = GroupMember(bootstrap, "watched", "logged", **{"client.id": "watcher"})
        seen: dict[tuple[int, int], list[bytes]] = {}
        try:
            consume_until([member], seen, lambda: len(seen) >= 1)
        finally:
            member.close()
        assert proc.stderr is not None
        text = b""
        deadline = time.monotonic() + 10
        sel = selectors.DefaultSelector()
        sel.register(proc.stderr, selectors.EVENT_READ)
        while b"it left" not in text and time.monotonic() < deadline:
            if sel.select(0.2):
                text += os.read(proc.stderr.fileno(), 65536)
        sel.close()
        lines = text.decode().splitlines()
    joins = [line for line in lines if "group watched: member watcher-" in line and "joins" in line]
    assert len(joins) == 1 and " INFO " in joins[0], lines
    assert "client.id watcher from /127.0.0.1" in joins[0]
    assert any("generation 1 formed with 1 members (protocol range" in line for line in lines)
    assert any("generation 1 is stable" in line for line in lines)
    assert any("removed: it left" in line for line in lines), "".join(lines)
