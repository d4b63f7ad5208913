"""The Java transactional producer against a 3-broker embedded cluster (transaction
version 2, as Kafka 4.x finalizes it, and version 1): commits and aborts with offsets
sent to the transaction, read back by the Java consumer in read_committed and
read_uncommitted; fencing by a second producer; the Admin's view of the transactions
and producers."""

from __future__ import annotations

import pytest

from kclient.broker.cluster import EmbeddedCluster
from kclient.testing.java_clients import run_steps


@pytest.mark.parametrize("transaction_version", [2, 1])
def test_java_transactions_commit_abort_and_fence(transaction_version: int) -> None:
    with EmbeddedCluster(brokers=3, transaction_version=transaction_version) as cluster:
        cluster.create_topic("in", 1, replication_factor=3)
        cluster.create_topic("out", 1, replication_factor=3)
        cluster.create_topic("fenced", 1, replication_factor=3)
        (
            txn,
            committed,
            uncommitted,
            group_offsets,
            fence,
            after_fence,
            txns,
            described,
            producers,
        ) = run_steps(
            cluster.bootstrap_servers,
            [
                "txn topic=out transactional_id=etl plan=commit:5,abort:4,commit:3 "
                "offsets_group=etl-group offsets_topic=in",
                "consume topic=out group=committed expect=8 isolation=read_committed",
                "consume topic=out group=all expect=12 isolation=read_uncommitted",
                "list_offsets group=etl-group",
                "fence topic=fenced transactional_id=shared",
                "consume topic=fenced group=f expect=1 isolation=read_committed",
                "list_transactions",
                "describe_transactions ids=etl,shared",
                "describe_producers topic=out partitions=1",
            ],
            timeout_s=90,
        )
        assert "error" not in txn, txn
        assert txn["done"] == ["commit", "abort", "commit"]
        values = sorted(r.split(":", 2)[2] for r in committed["records"])
        assert values == sorted([f"t-0-{i}" for i in range(5)] + [f"t-2-{i}" for i in range(3)])
        assert len(uncommitted["records"]) == 12  # the aborted 4 are there, uncommitted
        # only the committed transactions moved the group's offset: the last one to 3
        assert group_offsets["offsets"] == {"in-0": 3}
        assert cluster.committed_offsets("etl-group") == {("in", 0): 3}

        assert fence["first"] == "ProducerFencedException", fence
        assert [r.split(":", 2)[2] for r in after_fence["records"]] == ["winner"]

        assert txns["transactions"] == ["etl:CompleteCommit", "shared:CompleteCommit"]
        assert described["transactions"]["etl"]["state"] == "CompleteCommit"
        assert "error" not in producers, producers
        assert [p["txn_start_offset"] for p in producers["producers"]] == [-1]  # none open
