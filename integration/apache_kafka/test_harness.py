"""The harness itself: ``python -m kclient.testing.apache_kafka fetch`` on a machine
without Java says what to install in one line and fails (it never skips); a node whose
port was taken before it bound it is started again on new ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kclient.testing import apache_kafka, apache_kafka_node
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka


def test_fetch_without_java_says_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no java, no mvn
    done = subprocess.run(
        [sys.executable, "-m", "kclient.testing.apache_kafka", "fetch"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "'java' is not on PATH" in line and "install" in line


def test_a_port_taken_before_kafka_binds_it_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process listening on a port ``free_ports`` chose (a client's outgoing
    connection can take one in the same range) fails the node's bind; the harness starts
    the node again on new ports instead of failing the tests that wanted a Kafka."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))  # bound, not listening: as an outgoing connection's port
    port = taken.getsockname()[1]
    chosen: list[list[int]] = []

    def first_one_taken(count: int) -> list[int]:
        ports = apache_kafka_node.free_ports(count)
        if not chosen:
            ports[0] = port  # popped last: the PLAINTEXT listener
        chosen.append(ports)
        return ports

    monkeypatch.setattr(apache_kafka, "free_ports", first_one_taken)
    try:
        with ApacheKafka(VERSIONS[0]) as kafka:
            assert len(chosen) == 2, chosen
            assert kafka.bootstrap_servers != f"127.0.0.1:{port}"
            kafka.create_topic("after-a-taken-port", 1)  # raises unless it serves
    finally:
        taken.close()
