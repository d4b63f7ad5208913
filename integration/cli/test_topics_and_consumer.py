"""``kclient topics`` and ``kclient-console-consumer`` as a user runs them from a shell,
against the embedded broker: create, list, describe and delete a topic, and read back what
a producer wrote, with its keys, headers and offsets."""

from __future__ import annotations

import subprocess
import sys

from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker


def cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kclient", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def consumer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kclient.cli.console_consumer", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_create_list_describe_and_delete_a_topic(kafka_broker: EmbeddedBroker) -> None:
    bs = ("--bootstrap-server", kafka_broker.bootstrap_servers)
    created = cli("topics", "create", *bs, "--topic", "payments", "--partitions", "3")
    assert (created.returncode, created.stdout) == (0, "Created topic payments.\n")
    assert kafka_broker.topics()["payments"] == 3

    again = cli("topics", "create", *bs, "--topic", "payments", "--partitions", "3")
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS" in again.stderr and "--if-not-exists" in again.stderr
    assert cli("topics", "create", *bs, "--topic", "payments", "--if-not-exists").returncode == 0

    listed = cli("topics", "list", *bs)
    assert "payments" in listed.stdout.split()

    described = cli("topics", "describe", *bs, "--topic", "payments")
    assert described.returncode == 0
    assert "PartitionCount: 3\tReplicationFactor: 1" in described.stdout
    assert described.stdout.count("\tPartition: ") == 3

    deleted = cli("topics", "delete", *bs, "--topic", "payments")
    assert (deleted.returncode, deleted.stdout) == (0, "Deleted topic payments.\n")
    assert "payments" not in kafka_broker.topics()
    missing = cli("topics", "delete", *bs, "--topic", "payments")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    assert cli("topics", "delete", *bs, "--topic", "payments", "--if-exists").returncode == 0


def test_an_unreachable_cluster_is_one_error_line() -> None:
    result = cli("topics", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout-ms", "2000")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "no broker reachable in 127.0.0.1:1" in result.stderr


def test_the_console_consumer_reads_back_keys_headers_and_offsets(
    kafka_broker: EmbeddedBroker,
) -> None:
    kafka_broker.create_topic("orders", partitions=2)
    with KafkaProducer({"bootstrap.servers": kafka_broker.bootstrap_servers}) as producer:
        producer.send("orders", value=b"first", partition=0)
        for i in range(3):
            producer.send("orders", value=f"v{i}".encode(), key=b"k", headers=[("h", b"x")],
                          partition=1)  # fmt: skip
        producer.send("orders", value=None, key=b"gone", partition=1)
        producer.flush()
    bs = ("--bootstrap-server", kafka_broker.bootstrap_servers)

    everything = consumer(*bs, "--topic", "orders", "--from-beginning", "--max-messages", "5")
    assert everything.returncode == 0, everything.stderr
    assert sorted(everything.stdout.splitlines()) == ["first", "null", "v0", "v1", "v2"]
    assert "Processed a total of 5 messages" in everything.stderr

    keyed = consumer(
        *bs, "--topic", "orders", "--partition", "1", "--offset", "2", "--timeout-ms", "500",
        "--property", "print.key=true", "--property", "print.headers=true",
        "--property", "print.offset=true",
    )  # fmt: skip
    assert keyed.returncode == 0, keyed.stderr
    assert keyed.stdout.splitlines() == ["Offset:2\th:x\tk\tv2", "Offset:3\tNO_HEADERS\tgone\tnull"]

    # from the end: nothing new arrives, so --timeout-ms ends it with no record
    waiting = consumer(*bs, "--topic", "orders", "--timeout-ms", "300")
    assert (waiting.returncode, waiting.stdout) == (0, "")
    assert "Processed a total of 0 messages" in waiting.stderr


def test_the_console_consumer_names_what_to_fix(kafka_broker: EmbeddedBroker) -> None:
    kafka_broker.create_topic("two", partitions=2)
    bs = ("--bootstrap-server", kafka_broker.bootstrap_servers)
    bad_partition = consumer(*bs, "--topic", "two", "--partition", "5", "--timeout-ms", "100")
    assert bad_partition.returncode == 2
    assert "--partition 5: topic 'two' has partitions 0 to 1" in bad_partition.stderr
    bad_property = consumer(*bs, "--topic", "two", "--property", "print.keys=true")
    assert bad_property.returncode == 2 and "unknown --property 'print.keys'" in bad_property.stderr
    no_topic = consumer(*bs, "--topic", "nope", "--timeout-ms", "100")
    assert no_topic.returncode == 1 and "'nope'" in no_topic.stderr
