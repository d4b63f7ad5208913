"""The console producer against broker refusals: an invalid topic name ends the run with
one ``error:`` line naming the broker's error (it was a traceback), and a line too large
for ``max.request.size`` is counted as a failed record while the lines after it are sent
(it ended the run with a traceback), as Java's console producer reports it and goes on."""

from __future__ import annotations

from integration.broker.clients import confluent_consume
from integration.cli.test_console_producer import console
from integration.peers import free_port
from kclient.broker import EmbeddedBroker


def test_an_invalid_topic_name_is_one_error_line_and_exit_1(kafka_broker: EmbeddedBroker) -> None:
    result = console(kafka_broker.bootstrap_servers, "bad topic!", stdin="a\nb\n")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert (
        "error: InvalidTopicException: [Error 17] INVALID_TOPIC_EXCEPTION: topic 'bad topic!'"
        in result.stderr
    )
    assert "0 records sent, 1 failed, 0 lines skipped" in result.stderr


def test_an_unreachable_broker_counts_the_line_it_could_not_send() -> None:
    # the line whose send() gave up is a failed record, not counted nowhere
    address = f"127.0.0.1:{free_port()}"
    result = console(address, "orders", "--max-block-ms", "300", stdin="a\nb\n")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"(--bootstrap-server {address})" in result.stderr
    assert "0 records sent, 1 failed, 0 lines skipped" in result.stderr


def test_a_line_too_large_fails_alone_and_the_rest_are_sent(kafka_broker: EmbeddedBroker) -> None:
    kafka_broker.create_topic("console-large", 1)
    huge = "x" * 1_100_000
    result = console(
        kafka_broker.bootstrap_servers, "console-large", stdin=f"before\n{huge}\nafter\n"
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "error: record not delivered: the record is 1100082 bytes" in result.stderr
    assert "2 records sent, 1 failed, 0 lines skipped" in result.stderr
    values = [
        v for _, v, _ in confluent_consume(kafka_broker.bootstrap_servers, "console-large", 2)
    ]
    assert values == [b"before", b"after"]
