"""kclient-console-producer as a user runs it: a subprocess fed lines, read back with
confluent-kafka (an independent consumer)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from integration.broker.clients import CODECS, confluent_consume
from integration.peers import free_port
from kclient.broker import EmbeddedBroker


def console(
    bootstrap: str, topic: str, *args: str, stdin: str = "", timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kclient.cli.console_producer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--timeout",
            "5",
            *args,
        ],
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_keys_headers_and_null_marker(kafka_broker: EmbeddedBroker) -> None:
    kafka_broker.create_topic("console-kh", 1)
    lines = "h1:v1,h2:v2\tk1\tfirst\n\tNULL\tsecond\ntrace:NULL\tk3\tNULL\n"
    result = console(
        kafka_broker.bootstrap_servers,
        "console-kh",
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
        "--property",
        "null.marker=NULL",
        stdin=lines,
    )
    assert result.returncode == 0, result.stderr
    assert "3 records sent, 0 failed" in result.stderr
    got = confluent_consume(kafka_broker.bootstrap_servers, "console-kh", 3)
    assert got == [
        (b"k1", b"first", [("h1", b"v1"), ("h2", b"v2")]),
        (None, b"second", []),
        (b"k3", None, [("trace", None)]),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_reads_back_identically(kafka_broker: EmbeddedBroker, codec: str) -> None:
    topic = f"console-{codec}"
    kafka_broker.create_topic(topic, 1)
    values = [f"{codec} line {i} " * 5 for i in range(200)]
    result = console(
        kafka_broker.bootstrap_servers,
        topic,
        "--compression-codec",
        codec,
        stdin="".join(v + "\n" for v in values),
    )
    assert result.returncode == 0, result.stderr
    got = confluent_consume(kafka_broker.bootstrap_servers, topic, len(values))
    assert [v for _, v, _ in got] == [v.encode() for v in values]
    batches = list(kafka_broker.read_batches(topic, 0))
    assert {b.compression.name.lower() for b in batches} == {codec}


def test_malformed_line_stops_with_its_line_number(kafka_broker: EmbeddedBroker) -> None:
    kafka_broker.create_topic("console-bad", 1)
    result = console(
        kafka_broker.bootstrap_servers,
        "console-bad",
        "--property",
        "parse.key=true",
        stdin="a\t1\nno key here\nc\t3\n",
    )
    assert result.returncode == 1
    assert "line 2: no key separator" in result.stderr
    assert "1 records sent, 1 failed, 0 lines skipped" in result.stderr  # line 2 failed
    assert [
        k for k, _, _ in confluent_consume(kafka_broker.bootstrap_servers, "console-bad", 1)
    ] == [b"a"]


def test_ignore_error_skips_malformed_lines_with_a_warning(
    kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    kafka_broker.create_topic("console-skip", 1)
    source = tmp_path / "in.txt"
    source.write_text("a\t1\nno key here\nc\t3\n")
    result = console(
        kafka_broker.bootstrap_servers,
        "console-skip",
        "--file",
        str(source),
        "--property",
        "parse.key=true",
        "--property",
        "ignore.error=true",
    )
    assert result.returncode == 0, result.stderr
    assert "warning: skipped line 2" in result.stderr
    assert "2 records sent, 0 failed, 1 lines skipped" in result.stderr
    got = confluent_consume(kafka_broker.bootstrap_servers, "console-skip", 2)
    assert [(k, v) for k, v, _ in got] == [(b"a", b"1"), (b"c", b"3")]


def test_sync_mode_waits_for_each_ack(kafka_broker: EmbeddedBroker) -> None:
    kafka_broker.create_topic("console-sync", 1)
    result = console(kafka_broker.bootstrap_servers, "console-sync", "--sync", stdin="one\ntwo\n")
    assert result.returncode == 0, result.stderr
    assert [
        v for _, v, _ in confluent_consume(kafka_broker.bootstrap_servers, "console-sync", 2)
    ] == [
        b"one",
        b"two",
    ]


def test_unreachable_broker_fails_within_max_block() -> None:
    port = free_port()
    started = time.monotonic()
    result = console(
        f"127.0.0.1:{port}",
        "nowhere",
        "--max-block-ms",
        "2000",
        stdin="lost\n",
        timeout_s=60,
    )
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert f"127.0.0.1:{port}" in result.stderr
    assert "0 records sent" in result.stderr
    assert elapsed < 2 + 15  # max.block.ms plus interpreter start and a margin


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_bytes_that_are_not_utf8_are_sent_exactly_as_read(
    kafka_broker: EmbeddedBroker, locale: str, tmp_path: Path
) -> None:
    topic = f"console-binary-{locale.replace('.', '-')}"
    kafka_broker.create_topic(topic, 1)
    rng = random.Random(7)
    allowed = bytes(b for b in range(256) if b not in b"\r\n")
    values = [bytes(rng.choice(allowed) for _ in range(rng.randint(1, 60))) for _ in range(50)]
    values.append("plain utf-8 é".encode())
    env = {**os.environ, "LC_ALL": locale, "LANG": locale}
    args = [sys.executable, "-m", "kclient.cli.console_producer", "--bootstrap-server"]
    args += [kafka_broker.bootstrap_servers, "--topic", topic, "--timeout", "5"]
    stdin = b"".join(v + b"\n" for v in values)
    result = subprocess.run(
        args, input=stdin, capture_output=True, timeout=60, env=env, check=False
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    from_file = tmp_path / "lines.bin"
    from_file.write_bytes(stdin)
    result = subprocess.run(
        [*args, "--file", str(from_file)], capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    got = confluent_consume(kafka_broker.bootstrap_servers, topic, 2 * len(values))
    assert [v for _, v, _ in got] == values + values
