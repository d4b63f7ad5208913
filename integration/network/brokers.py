"""Brokers for the network client's integration tests (used by ``conftest.py``).

``RestartableTansu`` is a tansu broker that can be killed and started again on the same
port. Everything listens on 127.0.0.1; processes are stopped through their handles.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Protocol

from integration.peers import LOOPBACK, start_tansu_process


class Broker(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...

    def create_topic(self, name: str, partitions: int = 1) -> None: ...


@dataclass
class RestartableTansu:
    """A tansu broker (memory storage) that can be stopped and restarted on its port."""

    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self.proc = start_tansu_process(self.port)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None
