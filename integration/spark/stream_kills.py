"""Structured Streaming into Kafka exactly once while the driver is SIGKILLed: the helpers of
``integration/apache_kafka/test_spark_exactly_once.py``. A driver process
(``eos_stream_driver``, its own session) is killed with its whole process group (JVM and
Python workers) at each of the sink's pause points — a task has prepared its transaction
while others still write, the batch is recorded, the commits are half done — in a seeded
random order, and restarted from its checkpoint each time; a read_committed consumer then
sees every source row exactly once, in order per key. (Apache Kafka judges it: tansu's last
stable offset is wrong when transactions on a partition commit in another order than they
started, which confluent-kafka's producers alone show too; see the README's limits.)"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from integration.producer.verify import consume_all
from kclient.spark.eos import PAUSE_AT_ENV, PAUSE_FILE_ENV

FILES = 6
ROWS_PER_FILE = 300
KEYS = 7
PARTITIONS = 3
POINTS = ("task_prepared", "recorded", "completing")
ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 120.0


def write_input(directory: Path) -> None:
    """One CSV file per micro-batch, with increasing modification times (the file source
    takes the oldest first); row ``seq`` has key ``k{seq % KEYS}``."""
    directory.mkdir()
    base = time.time() - 3600
    for f in range(FILES):
        path = directory / f"part-{f:03d}.csv"
        seqs = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        path.write_text("".join(f"k{s % KEYS},{s}\n" for s in seqs))
        os.utime(path, (base + f, base + f))


def run_driver(args: list[str], log: Path, pause_at: str | None, pause_file: Path) -> bool:
    """Run the driver until it exits (True) or reaches ``pause_at`` and is killed (False)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop(PAUSE_AT_ENV, None)
    if pause_at is not None:
        env[PAUSE_AT_ENV] = pause_at
        env[PAUSE_FILE_ENV] = str(pause_file)
    pause_file.unlink(missing_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "integration.spark.eos_stream_driver", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    deadline = time.monotonic() + RUN_TIMEOUT_S
    paused_pid = None
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                assert proc.returncode == 0, f"driver failed ({proc.returncode}); see {log}"
                return True
            if pause_file.exists() and pause_file.read_text():
                paused_pid = int(pause_file.read_text())
                return False
            time.sleep(0.1)
        raise TimeoutError(f"driver neither finished nor paused at {pause_at}; see {log}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM
            proc.wait(timeout=30)
        if paused_pid is not None and paused_pid != proc.pid:
            # a paused Python worker: PySpark's daemon keeps its workers in a process group
            # of their own (they die of SIGHUP once the JVM is gone; this one now)
            with contextlib.suppress(ProcessLookupError):
                os.kill(paused_pid, signal.SIGKILL)


def kill_and_restart(
    bootstrap: str, topic: str, tmp_path: Path, points: list[str], rng: random.Random
) -> list[str]:
    """Kill the driver once at each point, in a seeded order, at successive batches (the
    restart finishes the killed batch, then pauses at the next one); then run it to the
    end. Returns where it was killed."""
    input_dir = tmp_path / "input"
    write_input(input_dir)
    args = [bootstrap, topic, str(input_dir), str(tmp_path / "checkpoint"), "stream-kill-test"]
    rng.shuffle(points)
    first = rng.randint(0, FILES - len(points))
    killed = []
    for batch, point in enumerate(points, first):
        pause_at = f"{point}:{batch}"
        # a file per run: a worker of a killed run that pauses late cannot stop the next
        paused = tmp_path / f"paused-{batch}"
        finished = run_driver(args, tmp_path / "driver.log", pause_at, paused)
        assert not finished, f"the driver finished without reaching {pause_at}"
        killed.append(pause_at)
    assert run_driver(args, tmp_path / "driver.log", None, tmp_path / "never-paused")
    return killed


def check_each_row_once_in_order(bootstrap: str, topic: str, killed: list[str]) -> None:
    total = FILES * ROWS_PER_FILE
    records = consume_all(
        bootstrap, topic, PARTITIONS, total, 60, settings={"isolation.level": "read_committed"}
    )
    seqs = [int(r.value or b"") for r in records]
    assert sorted(seqs) == list(range(total)), f"killed at {killed}"  # each row once
    by_key: dict[bytes | None, list[int]] = defaultdict(list)
    for r in records:  # in (partition, offset) order
        by_key[r.key].append(int(r.value or b""))
    for key, values in by_key.items():
        assert values == sorted(values), f"key {key!r} out of order (killed at {killed})"
