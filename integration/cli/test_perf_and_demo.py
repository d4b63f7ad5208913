"""kclient-producer-perf and `kclient demo` run as a user runs them."""

from __future__ import annotations

import re
import subprocess
import sys

from integration.broker.clients import confluent_consume
from kclient.broker import EmbeddedBroker

TOTAL = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$"
)


def run(*argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=timeout_s, check=False
    )


def test_perf_tool_output_parses_like_kafkas(kafka_broker: EmbeddedBroker) -> None:
    kafka_broker.create_topic("perf", 1)
    result = run(
        "-m",
        "kclient.cli.producer_perf",
        "--topic",
        "perf",
        "--num-records",
        "5000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={kafka_broker.bootstrap_servers}",
        "acks=1",
        "--print-metrics",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    totals = [m for m in map(TOTAL.match, lines) if m]
    assert len(totals) == 1
    assert totals[0].group(1) == "5000"
    assert float(totals[0].group(2)) > 0
    assert any(line.startswith("record-send-rate") for line in lines)
    assert sum(1 for _ in kafka_broker.read_records("perf", 0)) == 5000


def test_perf_tool_paces_with_throughput(kafka_broker: EmbeddedBroker) -> None:
    kafka_broker.create_topic("perf-paced", 1)
    result = run(
        "-m",
        "kclient.cli.producer_perf",
        "--topic",
        "perf-paced",
        "--num-records",
        "300",
        "--record-size",
        "10",
        "--throughput",
        "200",
        "--producer-props",
        f"bootstrap.servers={kafka_broker.bootstrap_servers}",
    )
    assert result.returncode == 0, result.stderr
    m = TOTAL.match(result.stdout.splitlines()[-1])
    assert m is not None
    assert float(m.group(2)) < 260  # paced near 200/s, not flat out


def test_readme_quickstart_demo_runs_and_verifies() -> None:
    """Quickstart command 1 (with fewer records) so that it cannot rot."""
    result = run("-m", "kclient", "demo", "--records", "20000", timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    table = dict(
        (cells[0], cells[1])
        for cells in (
            [c.strip() for c in line.strip("|").split("|")]
            for line in result.stdout.splitlines()
            if line.startswith("| ")
        )
    )
    assert table["records read back"] == "20,000"
    assert table["checksum"] == "match"
    assert table["partitions used"] == "6 of 6"
    assert table["result"] == "OK"


def test_demo_against_an_existing_cluster(kafka_broker: EmbeddedBroker) -> None:
    result = run(
        "-m",
        "kclient",
        "demo",
        "--records",
        "3000",
        "--bootstrap-server",
        kafka_broker.bootstrap_servers,
        "--topic",
        "demo-external",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    stored = sum(sum(1 for _ in kafka_broker.read_records("demo-external", p)) for p in range(6))
    assert stored == 3000
    assert confluent_consume(kafka_broker.bootstrap_servers, "demo-external", 1)
