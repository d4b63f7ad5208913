"""Brokers for the network client's integration tests (used by ``conftest.py``).

``RestartableTansu`` is a tansu broker that can be killed and started again on the same
port. Everything listens on 127.0.0.1; processes are stopped through their handles.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Protocol

from integration.peers import LOOPBACK, tansu_binary, wait_for_port


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
        url = f"tcp://{LOOPBACK}:{self.port}"
        self.proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None
