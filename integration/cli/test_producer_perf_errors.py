"""kclient-producer-perf with no broker listening ends with one ``error:`` line and exit
1 (it ended with a KafkaTimeoutError traceback)."""

from __future__ import annotations

import pytest

from integration.peers import free_port
from kclient.cli import producer_perf


def test_no_broker_is_one_error_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    servers = f"bootstrap.servers=127.0.0.1:{free_port()}"
    argv = ["--topic", "t", "--num-records", "5", "--record-size", "10", "--throughput", "-1"]
    code = producer_perf.main([*argv, "--producer-props", servers, "max.block.ms=300"])
    err = capsys.readouterr().err
    assert code == 1
    assert "error: KafkaTimeoutError: no broker reachable after" in err
    assert "Traceback" not in err
