"""The Java transactional producer against a 3-broker embedded cluster (transaction
version 2, as Kafka 4.x finalizes it, and version 1): commits and aborts with offsets
sent to the transaction, read back by the Java consumer in read_committed and
read_uncommitted; fencing by a second producer; consume-transform-produce with the
member's group metadata; the last stable offset; the Admin's view of the transactions
and producers."""

from __future__ import annotations

import pytest

from kclient.broker.cluster import EmbeddedCluster
from kclient.testing.java_clients import run_steps

STEPS = [
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
    "ctp topic=out out=copied group=copier expect=8 transactional_id=copier",
    "consume topic=copied group=check expect=8 isolation=read_committed",
    "produce topic=open count=10",
    "lso topic=open transactional_id=open",
    "describe_features",
    "txn_timeout topic=slow transactional_id=slow timeout_ms=1000 sleep_ms=2500",
]


def values_of(consumed: dict[str, list[str]]) -> list[str]:
    return sorted(r.split(":", 2)[2] for r in consumed["records"])


@pytest.mark.parametrize("transaction_version", [2, 1])
def test_java_transactions_commit_abort_fence_and_copy(transaction_version: int) -> None:
    with EmbeddedCluster(brokers=3, transaction_version=transaction_version) as cluster:
        for topic in ("in", "out", "fenced", "copied", "open", "slow"):
            cluster.create_topic(topic, 1, replication_factor=3)
        (
            txn, committed, uncommitted, group_offsets, fence, after_fence, txns, described,
            producers, ctp, copied, produced, lso, features, timed_out,
        ) = run_steps(cluster.bootstrap_servers, STEPS, timeout_s=90)  # fmt: skip
        committed_offsets = cluster.committed_offsets("copier")

    assert features["finalized"] == {"transaction.version": transaction_version}
    assert "error" not in txn, txn
    assert txn["done"] == ["commit", "abort", "commit"]
    expected = sorted([f"t-0-{i}" for i in range(5)] + [f"t-2-{i}" for i in range(3)])
    assert values_of(committed) == expected
    assert len(uncommitted["records"]) == 12  # the aborted 4 are there, uncommitted
    # only the committed transactions moved the group's offset: the last one to 3
    assert group_offsets["offsets"] == {"in-0": 3}

    assert fence["first"] == "ProducerFencedException", fence
    assert values_of(after_fence) == ["winner"]

    assert txns["transactions"] == ["etl:CompleteCommit", "shared:CompleteCommit"]
    assert described["transactions"]["etl"]["state"] == "CompleteCommit"
    assert "error" not in producers, producers
    assert [p["txn_start_offset"] for p in producers["producers"]] == [-1]  # none open

    # consume-transform-produce with the member's group metadata (KIP-447)
    assert "error" not in ctp and ctp["copied"] == 8, ctp
    assert values_of(copied) == [v.upper() for v in expected]
    assert committed_offsets == {("out", 0): 14}  # the last copied record + 1

    # an open transaction holds read_committed back at its first offset (the LSO)
    assert "error" not in produced, produced
    assert lso["read_committed"] == {"end": 10, "read": 10}, lso
    assert lso["read_uncommitted"] == {"end": 15, "read": 15}, lso

    # a transaction the coordinator aborted past transaction.timeout.ms: as Kafka (which
    # fences the epoch before the abort), the commit and every later call are fenced
    assert timed_out["commit"].startswith("ProducerFencedException"), timed_out
    assert timed_out["recovered"].startswith("ProducerFencedException"), timed_out
