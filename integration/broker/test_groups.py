"""Consumer groups on the embedded broker with real group consumers: confluent-kafka
(eager and cooperative rebalancing), kafka-python, aiokafka and kcat -G; committed
offsets across a group restart, a broker restart after kill -9, and a coordinator
broker stopped and started in a 3-broker cluster."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import confluent_kafka
import pytest

from integration.broker.clients import cli_broker, kcat
from integration.broker.groups import (
    FAST_GROUP,
    GroupMember,
    consume_until,
    produce,
    stable_with,
    wait_for,
)
from kclient.broker import EmbeddedBroker, EmbeddedCluster

Seen = dict[tuple[int, int], list[bytes]]


def exactly_once(seen: Seen, n: int) -> None:
    duplicates = {k: v for k, v in seen.items() if len(v) > 1}
    assert not duplicates, f"consumed twice: {list(duplicates.items())[:5]}"
    values = sorted(int(v[0][2:]) for v in seen.values())
    assert values == list(range(n))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_consumers_share_six_partitions_through_leave_join_and_restart(
    strategy: str,
) -> None:
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("orders", partitions=6)
        conf = {"partition.assignment.strategy": strategy}
        members = [GroupMember(bootstrap, "shop", "orders", **conf) for _ in range(3)]
        seen: Seen = {}
        try:
            produce(bootstrap, "orders", 0, 120, 6)
            consume_until(members, seen, lambda: len(seen) >= 120)
            consume_until(members, seen, lambda: stable_with(broker, "shop", 3))
            assert sorted(p for m in members for p in m.assignment()) == list(range(6))
            generation = broker.describe_group("shop").generation_id  # type: ignore[union-attr]

            members[1].close()  # leaves: its partitions move to the other two
            live = [members[0], members[2]]
            consume_until(
                live,
                seen,
                lambda: (
                    stable_with(broker, "shop", 2)
                    and sorted(p for m in live for p in m.assignment()) == list(range(6))
                ),
            )
            produce(bootstrap, "orders", 120, 120, 6)
            consume_until(live, seen, lambda: len(seen) >= 240)

            members.append(GroupMember(bootstrap, "shop", "orders", **conf))  # joins
            live = [members[0], members[2], members[3]]
            consume_until(
                live,
                seen,
                lambda: (
                    stable_with(broker, "shop", 3) and all(len(m.assignment()) == 2 for m in live)
                ),
            )
            described = broker.describe_group("shop")
            assert described is not None and described.generation_id > generation
            assert described.protocol == strategy
            produce(bootstrap, "orders", 240, 120, 6)
            consume_until(live, seen, lambda: len(seen) >= 360)
            for m in live:
                m.poll_into(seen)  # nothing more comes
        finally:
            for m in members:
                m.close()
        exactly_once(seen, 360)
        assert broker.committed_offsets("shop") == {("orders", p): 60 for p in range(6)}
        wait_for(lambda: broker.groups() == {"shop": "Empty"}, what="the group to empty")

        # the whole group restarts: it resumes after what it committed
        produce(bootstrap, "orders", 360, 30, 6)
        again = [GroupMember(bootstrap, "shop", "orders", **conf) for _ in range(2)]
        resumed: Seen = {}
        try:
            consume_until(again, resumed, lambda: len(resumed) >= 30)
            for m in again:
                m.poll_into(resumed)
        finally:
            for m in again:
                m.close()
        assert sorted(int(v[0][2:]) for v in resumed.values()) == list(range(360, 390))


def test_committed_offsets_survive_kill_9_of_the_broker(tmp_path: Path) -> None:
    log_dir = str(tmp_path / "logs")
    with cli_broker("--log-dir", log_dir, "--num-partitions", "2") as (proc, bootstrap):
        produce(bootstrap, "jobs", 0, 40, 2)
        member = GroupMember(bootstrap, "workers", "jobs")
        seen: Seen = {}
        try:
            consume_until([member], seen, lambda: len(seen) >= 40)
        finally:
            member.close()
        proc.send_signal(signal.SIGKILL)  # no clean close: the commits must be on disk
        proc.wait(5)
    with cli_broker("--log-dir", log_dir) as (_, bootstrap):
        produce(bootstrap, "jobs", 40, 10, 2)
        member = GroupMember(bootstrap, "workers", "jobs")
        resumed: Seen = {}
        try:
            consume_until([member], resumed, lambda: len(resumed) >= 10)
            member.poll_into(resumed)
        finally:
            member.close()
    assert sorted(int(v[0][2:]) for v in resumed.values()) == list(range(40, 50))


def test_the_group_moves_when_its_coordinator_broker_stops_and_comes_back() -> None:
    with EmbeddedCluster(3) as cluster:
        bootstrap = cluster.bootstrap_servers
        cluster.create_topic("events", partitions=3)
        members = [GroupMember(bootstrap, "failover", "events") for _ in range(2)]
        seen: Seen = {}
        try:
            produce(bootstrap, "events", 0, 30, 3)
            consume_until(members, seen, lambda: len(seen) >= 30)
            first = cluster.describe_group("failover")
            assert first is not None
            cluster.stop_broker(first.coordinator)
            moved = cluster.describe_group("failover")
            assert moved is not None and moved.coordinator != first.coordinator
            produce(bootstrap, "events", 30, 30, 3)
            consume_until(members, seen, lambda: len(seen) >= 60, timeout_s=30)
            cluster.start_broker(first.coordinator)  # coordination goes back to it
            produce(bootstrap, "events", 60, 30, 3)
            consume_until(members, seen, lambda: len(seen) >= 90, timeout_s=30)
            consume_until(members, seen, lambda: stable_with(cluster, "failover", 2))
            back = cluster.describe_group("failover")
            assert back is not None and back.coordinator == first.coordinator
        finally:
            for m in members:
                m.close()
        exactly_once(seen, 90)
        assert cluster.committed_offsets("failover") == {("events", p): 30 for p in range(3)}


@pytest.mark.filterwarnings("ignore:(read_text|open_text) is deprecated:DeprecationWarning")
def test_kafka_python_group_consumer_subscribes_and_commits() -> None:
    from kafka import KafkaConsumer

    with EmbeddedBroker() as broker:
        broker.create_topic("kp", partitions=2)
        produce(broker.bootstrap_servers, "kp", 0, 20, 2)
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            group_id="kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=3000,
            heartbeat_interval_ms=100,
            consumer_timeout_ms=10_000,
        )
        consumer.subscribe(["kp"])
        try:
            values = []
            for msg in consumer:
                values.append(msg.value)
                if len(values) == 20:
                    break
            consumer.commit()
            described = broker.describe_group("kp-group")
            assert described is not None and described.state == "Stable"
            assert [m.assignment for m in described.members] == [{"kp": [0, 1]}]
        finally:
            consumer.close()
        assert sorted(values) == sorted(f"v-{i}".encode() for i in range(20))
        assert broker.committed_offsets("kp-group") == {("kp", 0): 10, ("kp", 1): 10}


def test_aiokafka_group_consumer_subscribes_and_commits() -> None:
    from aiokafka import AIOKafkaConsumer

    with EmbeddedBroker() as broker:
        broker.create_topic("aio", partitions=2)
        produce(broker.bootstrap_servers, "aio", 0, 20, 2)

        async def consume() -> list[bytes]:
            consumer = AIOKafkaConsumer(
                "aio",
                bootstrap_servers=broker.bootstrap_servers,
                group_id="aio-group",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=3000,
                heartbeat_interval_ms=100,
            )
            await consumer.start()
            values: list[bytes] = []
            try:
                while len(values) < 20:
                    batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 10)
                    values += [m.value for msgs in batches.values() for m in msgs]
                await consumer.commit()
            finally:
                await consumer.stop()
            return values

        values = asyncio.run(consume())
        assert sorted(values) == sorted(f"v-{i}".encode() for i in range(20))
        assert broker.committed_offsets("aio-group") == {("aio", 0): 10, ("aio", 1): 10}


@pytest.mark.parametrize("new_librdkafka", [False, True], ids=["debian", "wheel"])
def test_kcat_balanced_consumer_reads_and_commits(new_librdkafka: bool) -> None:
    with EmbeddedBroker() as broker:
        broker.create_topic("kc", partitions=2)
        produce(broker.bootstrap_servers, "kc", 0, 10, 2)
        out = kcat(
            [
                "-b",
                broker.bootstrap_servers,
                "-G",
                "kc-group",
                "-o",
                "beginning",
                "-c",
                "10",
                "-X",
                "session.timeout.ms=3000",
                "-X",
                "heartbeat.interval.ms=100",
                "-X",
                "auto.commit.interval.ms=100",
                "kc",
            ],
            new_librdkafka,
        )
        assert sorted(out.split()) == sorted(f"v-{i}".encode() for i in range(10))
        assert broker.committed_offsets("kc-group") == {("kc", 0): 5, ("kc", 1): 5}


def test_a_consumer_without_group_management_commits_into_an_empty_group() -> None:
    """A consumer using ``assign`` (no group management) commits into an Empty group."""
    with EmbeddedBroker() as broker:
        broker.create_topic("plain", partitions=1)
        produce(broker.bootstrap_servers, "plain", 0, 3, 1)
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": "manual", **FAST_GROUP}
        )
        try:
            consumer.assign([confluent_kafka.TopicPartition("plain", 0, 0)])
            got = []
            wait_for(lambda: got.extend(consumer.consume(10, 0.1)) or len(got) >= 3)
            consumer.commit(message=got[-1], asynchronous=False)
        finally:
            consumer.close()
        assert broker.committed_offsets("manual") == {("plain", 0): 3}
        assert broker.groups() == {"manual": "Empty"}
        assert broker.describe_group("nobody") is None
        assert broker.committed_offsets("nobody") == {}
