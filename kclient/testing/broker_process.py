"""An embedded broker (or cluster) in a child process, for demos and benchmarks.

``python -m kclient.broker`` runs in its own interpreter, so a producer measured in this
process does not share its interpreter lock with the brokers. The child is stopped through
its handle when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from kclient.errors import KafkaError

_MARKER = "bootstrap.servers="


@dataclass(frozen=True)
class BrokerProcess:
    """A running ``kclient-broker`` child process."""

    bootstrap_servers: str
    proc: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextlib.contextmanager
def broker_process(*args: str, start_timeout_s: float = 30.0) -> Iterator[BrokerProcess]:
    """Start ``kclient-broker --listen 127.0.0.1:0 ARGS...``; yield once it is ready.

    ``args`` are extra broker flags (``"--brokers", "3"``). Raises ``KafkaError`` when the
    broker does not print its bootstrap servers within ``start_timeout_s``.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "kclient.broker", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = select.select([proc.stdout], [], [], start_timeout_s)[0]
        line = proc.stdout.readline() if ready else ""
        if _MARKER not in line:
            raise KafkaError(
                f"the embedded broker did not start within {start_timeout_s:.0f} s "
                f"(exit code {proc.poll()}, printed {line.strip()!r})"
            )
        yield BrokerProcess(line.split(_MARKER, 1)[1].strip(), proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
