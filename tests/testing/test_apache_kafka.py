"""The Apache Kafka harness without a JVM: the nodes' settings, the storage format
arguments, the client settings per listener, and the parsing of the Java reader's lines.
(Starting real brokers is integration/apache_kafka.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient.testing.apache_kafka import SASL_PASSWORD, SASL_USER, ApacheKafka, artifacts
from kclient.testing.apache_kafka_java import parse_output
from kclient.testing.apache_kafka_node import NodePorts


def _properties(kafka: ApacheKafka, node_id: int = 1) -> dict[str, str]:
    ports = NodePorts(controller=9093, plaintext=9092, listeners={"SSL": 9094})
    return kafka._server_properties(node_id, ports, "1@127.0.0.1:9093", Path("/nowhere"))


def test_unknown_listener_or_no_broker_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="SASL_SSL.*PLAINTEXT"):
        ApacheKafka(listeners=["SASL_SSL"])
    with pytest.raises(ValueError, match="brokers must be 1 or more"):
        ApacheKafka(brokers=0)


def test_three_nodes_replicate_three_times_and_need_two_in_sync() -> None:
    props = _properties(ApacheKafka(brokers=3), node_id=2)
    assert props["node.id"] == "2"
    assert props["process.roles"] == "broker,controller"
    assert props["default.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["transaction.state.log.min.isr"] == "2"
    assert "CONTROLLER" not in props["advertised.listeners"]


def test_one_node_replicates_once() -> None:
    props = _properties(ApacheKafka())
    assert props["default.replication.factor"] == "1"
    assert props["min.insync.replicas"] == "1"
    assert props["offsets.topic.replication.factor"] == "1"


def test_sasl_listener_has_every_mechanism_and_scram_users_at_format() -> None:
    kafka = ApacheKafka(listeners=["SASL_PLAINTEXT"])
    props = _properties(kafka)
    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    plain = props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert f'user_{SASL_USER}="{SASL_PASSWORD}"' in plain
    assert kafka._format_args() == [
        "--add-scram",
        f"SCRAM-SHA-256=[name={SASL_USER},password={SASL_PASSWORD}]",
        "--add-scram",
        f"SCRAM-SHA-512=[name={SASL_USER},password={SASL_PASSWORD}]",
    ]


def test_features_and_extra_properties_reach_the_format_and_the_nodes() -> None:
    kafka = ApacheKafka(features={"transaction.version": 1}, properties={"num.partitions": 4})
    assert kafka._format_args() == ["--feature", "transaction.version=1"]
    assert _properties(kafka)["num.partitions"] == "4"


def test_kafka_4_gets_a_log4j2_binding_and_kafka_3_does_not() -> None:
    assert any("log4j-slf4j-impl" in a for a in artifacts("4.4.0"))
    assert not any("log4j" in a for a in artifacts("3.9.2"))
    assert "org.apache.kafka:kafka-tools:3.9.2" in artifacts("3.9.2")


def test_java_reader_lines_are_parsed_with_nulls_and_headers() -> None:
    text = (
        "R\tt\t1\t7\t1700000000000\tCREATE_TIME\tazE=\t-\taA==:eA==,bg==:-\n"
        "R\tt\t0\t0\t5\tLOG_APPEND_TIME\t-\tdg==\t\n"
        "E\tt\t0\t1\n"
        "E\tt\t1\t8\n"
        "C\tt\t1\t8\n"
    )
    read = parse_output(text)
    first, second = read.records
    assert (first.partition, first.offset, first.key, first.value) == (1, 7, b"k1", None)
    assert first.headers == (("h", b"x"), ("n", None))
    assert (second.key, second.value, second.headers) == (None, b"v", ())
    assert second.timestamp_type == "LOG_APPEND_TIME"
    assert read.end_offsets == {("t", 0): 1, ("t", 1): 8}
    assert read.committed == {("t", 1): 8}
    assert read.of("t", 0) == [second]
