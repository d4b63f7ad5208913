"""The Java AdminClient against ``kclient-broker --brokers 3`` (the CLI, as users run it):
topics created, described, configured and deleted, with Kafka's exceptions for bad
requests; the cluster, groups and their offsets listed and described."""

from __future__ import annotations

from kclient.testing.broker_process import broker_process
from kclient.testing.java_clients import run_steps


def test_java_admin_client_topics_configs_groups() -> None:
    with broker_process("--brokers", "3") as broker:
        steps = [
            "describe_cluster",
            "create_topics names=a,b partitions=3 rf=3",
            "create_topics names=c partitions=1 rf=2 config=retention.ms:60000",
            "create_topics names=a partitions=1 rf=1",
            "create_topics names=d partitions=1 rf=5",
            "create_topics names=e partitions=1 rf=1 config=cleanup.policy:nonsense",
            "list_topics",
            "describe_topics names=a,c",
            "describe_topics names=missing",
            "describe_configs name=c",
            "alter_config name=c key=retention.ms value=1000",
            "describe_configs name=c",
            "describe_configs type=BROKER name=1",
            "produce topic=a count=30",
            "consume topic=a group=readers expect=30",
            "list_groups",
            "describe_groups ids=readers",
            "list_offsets group=readers",
            "list_partition_offsets topic=c",
            "alter_group_offsets group=readers topic=c offset=0",
            "delete_groups ids=readers",
            "list_groups",
            "delete_topics names=b,c",
            "delete_topics names=b",
            "list_topics",
        ]
        results = run_steps(broker.bootstrap_servers, steps)
    (
        cluster, created, with_config, exists, too_many, bad_config, listed, described,
        missing, configs, altered, configs_after, broker_configs, produced, consumed,
        groups, group, offsets, partition_offsets, altered_offsets, deleted_group, groups_after,
        deleted, deleted_again, listed_after,
    ) = results  # fmt: skip
    assert cluster["nodes"] == 3
    assert "error" not in created and "error" not in with_config, (created, with_config)
    assert exists["error"].startswith("TopicExistsException")
    assert too_many["error"].startswith("InvalidReplicationFactorException")
    assert bad_config["error"].startswith("InvalidConfigurationException")
    assert "cleanup.policy" in bad_config["error"]
    assert listed["topics"] == ["a", "b", "c"]

    topics = described["topics"]
    assert [p["partition"] for p in topics["a"]["partitions"]] == [0, 1, 2]
    assert sorted(p["leader"] for p in topics["a"]["partitions"]) == [0, 1, 2]
    assert all(p["replicas"] == 3 and p["isr"] == 3 for p in topics["a"]["partitions"])
    assert topics["c"]["partitions"][0]["replicas"] == 2
    assert missing["error"].startswith("UnknownTopicOrPartitionException")

    assert configs["configs"]["retention.ms"] == "60000 (DYNAMIC_TOPIC_CONFIG)"
    assert "error" not in altered, altered
    assert configs_after["configs"]["retention.ms"] == "1000 (DYNAMIC_TOPIC_CONFIG)"
    assert broker_configs["configs"]["log.segment.bytes"].endswith("(STATIC_BROKER_CONFIG)")

    assert "error" not in produced and len(consumed["records"]) == 30, (produced, consumed)
    assert "readers:Classic:Empty" in groups["groups"]
    assert group["groups"]["readers"]["state"] == "Empty"
    assert group["groups"]["readers"]["coordinator"] in (0, 1, 2)
    assert sum(offsets["offsets"].values()) == 30
    assert partition_offsets["offsets"] == {"earliest": 0, "latest": 0, "max_timestamp": -1}
    assert "error" not in altered_offsets and "error" not in deleted_group
    assert groups_after["groups"] == []

    assert "error" not in deleted, deleted
    assert deleted_again["error"].startswith("UnknownTopicOrPartitionException")
    assert listed_after["topics"] == ["a"]
