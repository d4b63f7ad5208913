"""DescribeConfigs and IncrementalAlterConfigs against the embedded broker over 127.0.0.1:
confluent-kafka's and kafka-python's admin clients read a topic's configs (those it was
created with, and the broker-applied defaults) and a broker's settings, and change a
topic's configs key by key."""

from __future__ import annotations

import warnings

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from kclient.broker import EmbeddedCluster

with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient


def test_confluent_and_kafka_python_admins_describe_topic_and_broker_configs() -> None:
    with EmbeddedCluster(brokers=2, num_partitions=2) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic("orders", 1, 1, config={"cleanup.policy": "compact"})
        admin.create_topics([topic])["orders"].result(10)
        futures = admin.describe_configs(
            [ConfigResource("topic", "orders"), ConfigResource("broker", "1")]
        )
        topic_configs, broker_configs = (f.result(10) for f in futures.values())
        assert topic_configs["cleanup.policy"].value == "compact"
        assert not topic_configs["cleanup.policy"].is_default
        assert topic_configs["message.timestamp.type"].value == "CreateTime"
        assert broker_configs["num.partitions"].value == "2"
        assert broker_configs["num.partitions"].is_read_only

        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            described = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "orders")])
            entry = described["topic"]["orders"]["cleanup.policy"]
            assert (entry["value"], entry["config_source"]) == ("compact", "DYNAMIC_TOPIC_CONFIG")
            assert entry["config_type"] == "LIST"
        finally:
            kp.close()


def test_confluent_and_kafka_python_admins_alter_topic_configs() -> None:
    with EmbeddedCluster(brokers=1) as cluster:
        cluster.create_topic("orders", 1, configs={"cleanup.policy": "delete"})
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        change = ConfigResource(
            "topic",
            "orders",
            incremental_configs=[
                ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry(
                    "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
                ),
            ],
        )
        (done,) = admin.incremental_alter_configs([change]).values()
        done.result(10)
        bad = ConfigResource(
            "topic",
            "orders",
            incremental_configs=[
                ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        (refused,) = admin.incremental_alter_configs([bad]).values()
        with pytest.raises(KafkaException, match="INVALID_CONFIG"):
            refused.result(10)
        (described,) = admin.describe_configs([ConfigResource("topic", "orders")]).values()
        configs = described.result(10)
        assert configs["cleanup.policy"].value == "delete,compact"
        assert configs["retention.ms"].value == "5000"

        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            kp.alter_configs(
                [
                    KpConfigResource(
                        ConfigResourceType.TOPIC,
                        "orders",
                        configs={"message.timestamp.type": "LogAppendTime"},
                    )
                ]
            )
        finally:
            kp.close()
        assert cluster.controller.topic("orders").configs == {
            "cleanup.policy": "delete,compact",
            "retention.ms": "5000",
            "message.timestamp.type": "LogAppendTime",
        }
