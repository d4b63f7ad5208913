"""A restarted broker of an EmbeddedCluster serves its first request only once it leads
its preferred partitions again: no NOT_LEADER_OR_FOLLOWER answer whose leader hint its
own election makes stale a moment later (clients such as @platformatic/kafka were sent
back and forth, and one that cannot decode the hint failed)."""

from __future__ import annotations

import pytest

from kclient.broker import EmbeddedCluster
from kclient.broker.socket_server import SocketServer


def test_a_restarted_broker_leads_its_partitions_before_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with EmbeddedCluster(brokers=3) as cluster:
        cluster.create_topic("t", 3, replication_factor=3)
        mine = [p for p in range(3) if cluster.controller.partition("t", p).replicas[0] == 1]
        assert mine
        cluster.stop_broker(1)
        assert all(cluster.leader("t", p) != 1 for p in mine)

        leaders_when_serving: list[list[int]] = []
        start = SocketServer.start

        def recording_start(self: SocketServer) -> None:
            leaders_when_serving.append([cluster.leader("t", p) for p in mine])
            start(self)

        monkeypatch.setattr(SocketServer, "start", recording_start)
        cluster.start_broker(1)
        assert leaders_when_serving == [[1] * len(mine)]
