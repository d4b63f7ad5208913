"""The Java producer (idempotent) and the Java consumer in a classic group against a
3-broker embedded cluster: every record read back once, offsets committed, the group
described; a leader restarted while the Java producer writes; ``group.protocol=consumer``
refused as a Kafka cluster without KIP-848 refuses it."""

from __future__ import annotations

import threading
import time
from collections import Counter

from kclient.broker.cluster import EmbeddedCluster
from kclient.testing.java_clients import run_steps


def parse(records: list[str]) -> list[tuple[int, int, str]]:
    """'partition:offset:value' lines of the consume step."""
    out = []
    for line in records:
        partition, offset, value = line.split(":", 2)
        out.append((int(partition), int(offset), value))
    return out


def test_java_idempotent_producer_and_a_two_member_group_read_every_record_once(
    cluster: EmbeddedCluster,
) -> None:
    cluster.create_topic("orders", 3, replication_factor=3)
    produced, consumed, described, offsets, refused = run_steps(
        cluster.bootstrap_servers,
        [
            "produce topic=orders count=300 idempotent=true acks=all compression=lz4",
            "consume topic=orders group=billing expect=300 members=2",
            "describe_groups ids=billing",
            "list_offsets group=billing",
            "consume topic=orders group=next-gen expect=1 protocol=consumer timeout_ms=5000",
        ],
    )
    assert "error" not in produced, produced
    # each partition's offsets are 0..n-1: no duplicate, no gap
    counts = {int(p): len(o) for p, o in produced["offsets"].items()}
    for p, o in produced["offsets"].items():
        assert o == list(range(len(o))), p
    assert sum(counts.values()) == 300

    assert "error" not in consumed, consumed
    records = parse(consumed["records"])
    assert sorted(v for _, _, v in records) == sorted(f"v-{i}" for i in range(300))
    # the two members split the three partitions between them, in one generation
    members = consumed["members"]
    assert len(members) == 2
    assert sorted(p for m in members for p in m["partitions"]) == [0, 1, 2]
    assert len({m["generation"] for m in members}) == 1

    assert described["groups"]["billing"]["state"] == "Empty"  # both members left
    assert offsets["offsets"] == {f"orders-{p}": n for p, n in counts.items()}
    assert cluster.committed_offsets("billing") == {("orders", p): n for p, n in counts.items()}

    # a cluster without ConsumerGroupHeartbeat: the Java client refuses before any request
    assert refused["error"].startswith("UnsupportedVersionException"), refused
    assert "group.protocol=classic" in refused["error"]


def test_java_idempotent_producer_keeps_every_record_once_across_a_leader_restart(
    cluster: EmbeddedCluster,
) -> None:
    cluster.create_topic("events", 1, replication_factor=3)
    leader = cluster.leader("events")
    epoch = cluster.controller.partition("events", 0).leader_epoch

    def restart() -> None:
        time.sleep(2.0)  # the JVM has started and is writing
        cluster.stop_broker(leader)
        time.sleep(1.5)
        cluster.start_broker(leader)

    chaos = threading.Thread(target=restart)
    chaos.start()
    try:
        (produced,) = run_steps(
            cluster.bootstrap_servers,
            ["produce topic=events count=3000 idempotent=true acks=all delay_ms=15"],
        )
    finally:
        chaos.join(timeout=30)
    assert "error" not in produced, produced
    assert produced["ms"] > 3500  # the restart (2.0 to 3.5 s after the start) fell inside
    assert cluster.controller.partition("events", 0).leader_epoch == epoch + 2  # moved, back
    assert produced["offsets"]["0"] == list(range(3000))
    values = [r.value for r in cluster.read_records("events")]
    assert Counter(values) == Counter(f"v-{i}".encode() for i in range(3000))
