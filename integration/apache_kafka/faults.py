"""Seeded faults on a 3-node Apache Kafka (:class:`~kclient.testing.apache_kafka.ApacheKafka`):
a partition leader killed (``kill -9``) and restarted, a broker restarted cleanly (SIGTERM:
a controlled shutdown), a broker paused (SIGSTOP) past the producers' ``request.timeout.ms``
and resumed, and a preferred-leader election (Kafka's own ``LeaderElectionCommand``) after
leadership moved.

Not part of the producer: the fault side of ``test_chaos.py``. Every choice (which fault
when, which partition's leader, how long a broker stays down or paused) comes from the
``random.Random`` it is given, so a failing run is replayed from its seed (the timing of the
producers still varies). After each fault it waits (bounded) until every partition of the
watched topics has its full replica set in sync again, so the next fault never takes a
partition below ``min.insync.replicas``. It records the leaders it saw between the steps,
so a test can report how many leader changes the producers went through.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kclient import errors
from kclient.cli.admin import ClusterReader
from kclient.testing.apache_kafka import ApacheKafka, ApacheKafkaError

__all__ = ["Faults", "elect_preferred_leaders", "move_leader", "wait_for"]

#: Kafka's coordinators' internal topic of transactions (one partition in the harness).
TXN_STATE_TOPIC = "__transaction_state"
_SETTLE_TIMEOUT_S = 90.0
"""How long a fault's aftermath may take: leaders moved, a node back in every ISR."""


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every 100 ms; raise ``ApacheKafkaError`` naming ``what`` after
    ``timeout_s``. Kafka errors and refused connections count as "not yet"."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        try:
            if predicate():
                return
        except (OSError, errors.KafkaError) as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise ApacheKafkaError(f"{what}: not within {timeout_s:g} s (last error: {last})")
        time.sleep(0.1)


def elect_preferred_leaders(kafka: ApacheKafka, timeout_s: float = 60.0) -> str:
    """Kafka's ``LeaderElectionCommand --election-type PREFERRED --all-topic-partitions``
    (the Admin API's ``electLeaders``) from the cluster's own jars; what it printed."""
    return kafka.run_tool(
        "org.apache.kafka.tools.LeaderElectionCommand",
        "--election-type",
        "PREFERRED",
        "--all-topic-partitions",
        what="preferred leader election",
        timeout_s=timeout_s,
    )


def move_leader(kafka: ApacheKafka, topic: str, partition: int, timeout_s: float = 60.0) -> int:
    """Move the partition's leadership to another in-sync replica while every node stays
    up: Kafka's ``ReassignPartitionsCommand`` puts that replica first (the same replica
    set, so no data moves), then ``LeaderElectionCommand --election-type PREFERRED``
    elects it. The old leader keeps answering, with NOT_LEADER_OR_FOLLOWER. Returns the
    new leader's id."""
    faults = Faults(kafka, [topic], random.Random(0))
    faults.wait_in_sync()
    current = faults.partitions(topic)[partition]
    new = next(r for r in current.replicas if r != current.leader)
    order = [new, *(r for r in current.replicas if r != new)]
    assert kafka.folder is not None, "the cluster is not started"
    plan = kafka.folder / f"move-{topic}-{partition}.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic, "partition": partition, "replicas": order}],
            }
        )
    )
    for tool, *args in (
        (
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--reassignment-json-file",
            str(plan),
            "--execute",
        ),
        (
            "org.apache.kafka.tools.LeaderElectionCommand",
            "--election-type",
            "PREFERRED",
            "--topic",
            topic,
            "--partition",
            str(partition),
        ),
    ):
        if tool.endswith("LeaderElectionCommand"):
            wait_for(
                lambda: list(faults.partitions(topic)[partition].replicas) == order,
                timeout_s,
                f"{topic}-{partition}'s replicas reordered to {order}",
            )
        kafka.run_tool(tool, *args, what=tool.rsplit(".", 1)[1], timeout_s=timeout_s)
    wait_for(
        lambda: faults.partitions(topic)[partition].leader == new,
        timeout_s,
        f"node {new} leading {topic}-{partition}",
    )
    return new


@dataclass
class Partition:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class Faults:
    """The faults of one seeded run on ``kafka``, watching ``topics`` (see the module
    docstring). ``log`` holds one line per step, for the test's report."""

    kafka: ApacheKafka
    topics: Sequence[str]
    rng: random.Random
    pause_s: tuple[float, float] = (4.0, 5.5)
    """How long a paused broker stays stopped: past ``request.timeout.ms`` (3 s) and
    ``broker.session.timeout.ms`` (3 s), so the controller moves its leaderships."""
    down_s: tuple[float, float] = (0.5, 2.5)
    """How long a killed broker stays dead once its leaderships have moved."""
    log: list[str] = field(default_factory=list)
    snapshots: list[dict[tuple[str, int], int]] = field(default_factory=list)
    """Leader of every watched partition, taken between the steps of each fault."""
    steps: list[tuple[str, int]] = field(default_factory=list)
    """Each fault ``run`` made, with the index of its first snapshot."""
    started_s: float = field(default_factory=time.monotonic)
    paused: int | None = None
    """The node stopped by SIGSTOP right now: nothing is asked of it."""

    # --- the cluster as the brokers see it

    def partitions(self, topic: str) -> dict[int, Partition]:
        node_id = next(
            i for i, node in self.kafka.nodes.items() if node.running and i != self.paused
        )
        reader = ClusterReader(self.kafka.broker_address(node_id), timeout_s=10.0)
        try:
            entry = reader.metadata(topic)
        finally:
            reader.close()
        if entry["error_code"]:
            raise errors.for_code(entry["error_code"])(f"metadata of {topic!r}")
        return {
            p["partition_index"]: Partition(
                p["leader_id"], tuple(p["replica_nodes"]), tuple(p["isr_nodes"])
            )
            for p in entry["partitions"]
        }

    def leaders(self) -> dict[tuple[str, int], int]:
        return {
            (topic, index): p.leader
            for topic in self.topics
            for index, p in self.partitions(topic).items()
        }

    def snapshot(self) -> None:
        self.snapshots.append(self.leaders())

    def leader_changes(self, topic: str | None = None, step: int | None = None) -> int:
        """How many times a watched partition's leader (of ``topic``, or of any) differed
        between two snapshots (of the ``step``-th fault of ``run``, or of the whole run)."""
        snapshots = self.snapshots
        if step is not None:
            start = self.steps[step][1]
            end = self.steps[step + 1][1] if step + 1 < len(self.steps) else len(snapshots)
            snapshots = snapshots[start:end]
        return sum(
            1
            for before, after in itertools.pairwise(snapshots)
            for where, leader in after.items()
            if before.get(where) != leader and topic in (None, where[0])
        )

    def wait_in_sync(self) -> None:
        """Until every watched partition has a leader and all its replicas in sync."""

        def in_sync() -> bool:
            for topic in self.topics:
                for p in self.partitions(topic).values():
                    if p.leader < 0 or set(p.isr) != set(p.replicas):
                        return False
            return True

        wait_for(in_sync, _SETTLE_TIMEOUT_S, f"every replica of {list(self.topics)} in sync")

    def wait_leaders_off(self, node_id: int) -> None:
        """Until no watched partition is led by ``node_id`` (the controller fenced it)."""

        def moved() -> bool:
            return all(leader not in (node_id, -1) for leader in self.leaders().values())

        wait_for(moved, _SETTLE_TIMEOUT_S, f"leaderships moved off node {node_id}")

    def _note(self, text: str) -> None:
        self.log.append(f"{time.monotonic() - self.started_s:6.1f} s {text}")

    def _victim(self) -> tuple[str, int, int]:
        """A seeded watched partition and its leader."""
        leaders = sorted(self.leaders().items())
        (topic, partition), leader = leaders[self.rng.randrange(len(leaders))]
        return topic, partition, leader

    # --- the faults

    def kill_leader(self, node_id: int | None = None) -> None:
        """``kill -9`` a seeded partition's leader (or ``node_id``), wait until the
        controller has moved its leaderships, leave it dead a little, restart it."""
        if node_id is None:
            topic, partition, node_id = self._victim()
            self._note(f"kill -9 node {node_id} (leader of {topic}-{partition})")
        else:
            self._note(f"kill -9 node {node_id}")
        self.snapshot()
        self.kafka.kill_broker(node_id)
        self.wait_leaders_off(node_id)
        self.snapshot()
        self._note(f"leaderships moved off node {node_id}")
        time.sleep(self.rng.uniform(*self.down_s))
        self.kafka.start_broker(node_id)
        self._note(f"node {node_id} started")
        self.wait_in_sync()
        self.snapshot()
        self._note(f"node {node_id} back and in sync")

    def kill_coordinator(self) -> None:
        """``kill -9`` the transaction coordinator's node (the leader of
        ``__transaction_state``'s one partition), then restart it as ``kill_leader``."""
        node_id = self.partitions(TXN_STATE_TOPIC)[0].leader
        led = sorted(f"{t}-{i}" for (t, i), n in self.leaders().items() if n == node_id)
        self._note(f"the transaction coordinator is node {node_id}, leading {led}")
        self.kill_leader(node_id)

    def restart_broker(self) -> None:
        """A clean restart of a seeded partition's leader (SIGTERM: a controlled shutdown
        moves its leaderships first)."""
        topic, partition, node_id = self._victim()
        self._note(f"restart node {node_id} (leader of {topic}-{partition}; SIGTERM)")
        self.snapshot()
        self.kafka.stop_broker(node_id)
        self.snapshot()
        self._note(f"node {node_id} stopped")
        self.kafka.start_broker(node_id)
        self._note(f"node {node_id} started")
        self.wait_in_sync()
        self.snapshot()
        self._note(f"node {node_id} back and in sync")

    def pause_leader(self) -> None:
        """SIGSTOP a seeded partition's leader for ``pause_s``, then SIGCONT."""
        topic, partition, node_id = self._victim()
        stopped_s = self.rng.uniform(*self.pause_s)
        self._note(f"SIGSTOP node {node_id} (leader of {topic}-{partition}) for {stopped_s:.1f} s")
        self.snapshot()
        self.paused = node_id
        self.kafka.pause_broker(node_id)
        try:
            time.sleep(stopped_s)
            self.snapshot()
        finally:
            self.kafka.resume_broker(node_id)
            self.paused = None
        self.wait_in_sync()
        self.snapshot()
        self._note(f"node {node_id} resumed and in sync")

    def elect_preferred(self) -> None:
        """Move every leadership back to its preferred replica (the first of its
        replicas) with Kafka's own tool; leadership must have moved before."""
        self.wait_in_sync()
        moved = {
            (topic, index)
            for topic in self.topics
            for index, p in self.partitions(topic).items()
            if p.leader != p.replicas[0]
        }
        self._note(f"preferred leader election ({len(moved)} partitions off their preferred)")
        self.snapshot()
        elect_preferred_leaders(self.kafka)

        def preferred() -> bool:
            return all(
                p.leader == p.replicas[0]
                for topic in self.topics
                for p in self.partitions(topic).values()
            )

        wait_for(preferred, _SETTLE_TIMEOUT_S, "every leader on its preferred replica")
        self.snapshot()

    def run(
        self,
        names: Sequence[str],
        pause_between_s: tuple[float, float],
        on_step: Callable[[str], object] = lambda name: None,
    ) -> None:
        """The faults ``names`` in that order, a seeded pause before each;
        ``on_step(name)`` as each begins, ``on_step("end")`` after the last."""
        steps = {
            "kill": self.kill_leader,
            "kill-coordinator": self.kill_coordinator,
            "restart": self.restart_broker,
            "pause": self.pause_leader,
            "elect": self.elect_preferred,
        }
        for name in names:
            time.sleep(self.rng.uniform(*pause_between_s))
            on_step(name)
            self.steps.append((name, len(self.snapshots)))
            steps[name]()
        on_step("end")
