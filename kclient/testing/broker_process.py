"""An embedded broker (or cluster) in a child process, for demos and benchmarks.

``python -m kclient.broker`` runs in its own interpreter, so a producer measured in this
process does not share its interpreter lock with the brokers. The child is stopped through
its handle when the ``with`` block ends. Any ``kclient-broker`` flag can be passed, e.g.
a TLS listener::

    with broker_process("--security-protocol", "SSL",
                        "--ssl-keystore-location", certs.server_keystore) as broker:
        Producer({"bootstrap.servers": broker.bootstrap_servers,
                  "security.protocol": broker.security_protocol, "ssl.ca.location": ...})

or a SASL listener (``--sasl-user`` repeats; ``--sasl-enabled-mechanisms`` narrows)::

    with broker_process("--security-protocol", "SASL_PLAINTEXT",
                        "--sasl-user", "alice:secret") as broker:
        Producer({..., "security.protocol": broker.security_protocol,
                  "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", ...})
"""

from __future__ import annotations

import contextlib
import re
import select
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from kclient.errors import KafkaError
from kclient.testing._die_with_parent import die_with_parent, stop_process

_MARKER = "bootstrap.servers="
_PROTOCOL = re.compile(r"security\.protocol=(\S+)")
_MECHANISMS = re.compile(r"sasl\.enabled\.mechanisms=(\S+)")


@dataclass(frozen=True)
class BrokerProcess:
    """A running ``kclient-broker`` child process."""

    bootstrap_servers: str
    proc: subprocess.Popen[str]
    #: What clients set as ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
    security_protocol: str = "PLAINTEXT"
    #: A SASL listener's ``sasl.enabled.mechanisms`` (empty without SASL).
    sasl_mechanisms: tuple[str, ...] = ()

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextlib.contextmanager
def broker_process(*args: str, start_timeout_s: float = 30.0) -> Iterator[BrokerProcess]:
    """Start ``kclient-broker --listen 127.0.0.1:0 ARGS...``; yield once it is ready.

    ``args`` are extra broker flags (``"--brokers", "3"``). Raises ``KafkaError`` when the
    broker does not print its bootstrap servers within ``start_timeout_s`` (with what it
    wrote to stderr, e.g. a ``ConfigError`` naming a bad ``--ssl-*`` file).
    """
    # stderr goes to a file, not a pipe nobody drains (the broker logs warnings there)
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            die_with_parent(
                [sys.executable, "-m", "kclient.broker", "--listen", "127.0.0.1:0", *args]
            ),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            assert proc.stdout is not None
            ready = select.select([proc.stdout], [], [], start_timeout_s)[0]
            line = proc.stdout.readline() if ready else ""
            if _MARKER not in line:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1)
                stderr.seek(0)
                errors = stderr.read()[-2000:].strip()
                raise KafkaError(
                    f"the embedded broker did not start within {start_timeout_s:.0f} s "
                    f"(exit code {proc.poll()}, printed {line.strip()!r}, stderr {errors!r})"
                )
            protocol = _PROTOCOL.search(line)
            mechanisms = _MECHANISMS.search(line)
            yield BrokerProcess(
                line.split(_MARKER, 1)[1].strip(),
                proc,
                protocol.group(1) if protocol else "PLAINTEXT",
                tuple(mechanisms.group(1).split(",")) if mechanisms else (),
            )
        finally:
            stop_process(proc)
            if proc.stdout is not None:
                proc.stdout.close()
