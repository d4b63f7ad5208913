"""A broker started by the test harness does not outlive a test run killed without teardown
(a CI time limit, a second Ctrl-C): ``kclient.testing``'s peers die with their parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

SCRIPT = """
import time
from kclient.testing.broker_process import broker_process
with broker_process() as broker:
    print(broker.pid, flush=True)
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_broker_dies_with_the_test_run_that_started_it() -> None:
    with subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True) as run:
        try:
            assert run.stdout is not None
            broker_pid = int(run.stdout.readline())
            assert _alive(broker_pid)
            run.send_signal(signal.SIGKILL)  # no teardown runs
            run.wait(timeout=10)
            deadline = time.monotonic() + 10
            while _alive(broker_pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            gone = not _alive(broker_pid)
            if not gone:
                os.kill(broker_pid, signal.SIGKILL)
            assert gone, "the broker outlived the killed test run"
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
