"""The speed anchors' quick modes run against Apache Kafka 4.4 and print a sane table:
``benchmarks/kafka_anchors.py --quick`` and ``benchmarks/spark_kafka_sink.py --quick``
(each checks every record it wrote; here, that every producer has its row and that the
ratios are computed from the rates shown)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.kafka_anchors import BATCHES, CLIENTS, JAVA, parse_summary  # noqa: E402

# 2026-11-28, load average 8-9 on the 2-core machine: the anchors' quick mode took 39 s,
# the Spark one 128 s (Spark's start, three writers each warmed up, read back)
ANCHORS_TIMEOUT_S = 150
SPARK_TIMEOUT_S = 300
SPARK_QUICK_ROWS = 20_000  # spark_kafka_sink.py --quick


def run_quick(script: str, timeout_s: float) -> str:
    """Run ``benchmarks/<script> --quick``; on a timeout SIGTERM it (it stops its broker
    and Spark), then kill it. Its stdout, after checking it succeeded."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate(timeout=10)
        pytest.fail(f"{script} --quick ran past {timeout_s} s:\n{out}\n{err[-3000:]}")
    assert proc.returncode == 0, f"{script} --quick failed:\n{out}\n{err[-3000:]}"
    return out


def table_rows(output: str) -> list[list[str]]:
    """The cells of the Markdown table's body rows."""
    lines = [line for line in output.splitlines() if line.startswith("| ")]
    assert len(lines) >= 2, output
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def within_rounding(ratio: float, top: float, bottom: float) -> bool:
    """Whether ``ratio`` (shown to 0.01) can be the ratio of two times shown as ``top`` and
    ``bottom`` (each rounded to 0.01 s): the quick runs' times are a fraction of a second."""
    low = (top - 0.005) / (bottom + 0.005) - 0.005
    high = (top + 0.005) / max(bottom - 0.005, 0.001) + 0.005
    return low <= ratio <= high


def test_producer_performance_summary_line_is_read() -> None:
    output = (
        "296584 records sent, 59127.6 records/sec (5.64 MB/sec), 6729.1 ms avg latency, "
        "7724.0 ms max latency.\n"
        "1000000 records sent, 43516.100957 records/sec (4.15 MB/sec), 4318.46 ms avg "
        "latency, 7724.00 ms max latency, 4047 ms 50th, 7331 ms 95th, 7574 ms 99th, "
        "7685 ms 99.9th.\n"
    )
    assert parse_summary(output, 1_000_000) == (43516.100957, 4.15)
    assert parse_summary(output, 500_000) is None  # an interim line is not the result


@pytest.mark.timeout(ANCHORS_TIMEOUT_S + 60)
def test_kafka_anchors_quick_prints_every_producer() -> None:
    rows = table_rows(run_quick("kafka_anchors.py", ANCHORS_TIMEOUT_S))
    shown = {(row[0], row[1], row[2]) for row in rows}
    assert shown == {(client, "6", batch) for client in CLIENTS for batch in BATCHES}
    rates = {(row[0], row[2]): number(row[3]) for row in rows}
    for producer, _, batch, rate, mb_s, x_java, x_confluent in rows:
        assert number(rate) > 0, producer
        assert number(mb_s) == pytest.approx(number(rate) * 100 / 1e6, abs=0.051)
        java = rates[JAVA, batch]
        assert number(x_java) == pytest.approx(number(rate) / java, rel=0.01, abs=0.006)
        if producer.startswith("kclient"):  # against confluent-kafka's row of its kind
            theirs = "confluent-kafka produce()" + (" + callback" if "callback" in producer else "")
            expected = number(rate) / rates[theirs, batch]
            assert number(x_confluent) == pytest.approx(expected, rel=0.01, abs=0.006)
        else:
            assert x_confluent == ""


@pytest.mark.slow
@pytest.mark.timeout(SPARK_TIMEOUT_S + 60)
def test_spark_kafka_sink_quick_prints_every_writer() -> None:
    output = run_quick("spark_kafka_sink.py", SPARK_TIMEOUT_S)
    assert "spark-sql-kafka-0-10 4." in output
    rows = {row[0]: row[1:] for row in table_rows(output)}
    spark = "Spark's Kafka sink (spark-sql-kafka-0-10)"
    alo, eos = "kclient write_dataframe", "kclient write_dataframe exactly_once"
    assert set(rows) == {spark, alo, eos}
    seconds = {writer: number(cells[0]) for writer, cells in rows.items()}  # 2 decimals
    for writer, (_, rate, _, x_spark, _) in rows.items():
        # the seconds shown are rounded to 0.01 s: the rate lies within what that allows
        low, high = seconds[writer] - 0.005, seconds[writer] + 0.005
        assert SPARK_QUICK_ROWS / high - 1 <= number(rate) <= SPARK_QUICK_ROWS / low + 1
        assert within_rounding(number(x_spark), seconds[spark], seconds[writer])
    assert within_rounding(number(rows[eos][4]), seconds[eos], seconds[alo])
    assert rows[spark][4] == rows[alo][4] == ""
