"""One Apache Kafka node of :class:`~kclient.testing.apache_kafka.ApacheKafka`: its files and
its process.

Corresponds to a ``kafka.Kafka server.properties`` JVM in KRaft combined mode
(``process.roles=broker,controller``): this module writes the node's
``server.properties`` and logging configuration into its folder, formats its storage with
``kafka.tools.StorageTool`` and starts, signals and stops the JVM through the
``subprocess.Popen`` handle that started it (never by name). Owned by the thread that
drives the cluster (a test's thread); nothing here runs in the background.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kclient.errors import KafkaError
from kclient.testing._die_with_parent import die_with_parent

__all__ = [
    "JVM_OPTIONS",
    "ApacheKafkaError",
    "KafkaNode",
    "NodePorts",
    "class_archive",
    "class_data_sharing",
    "cluster_id",
    "free_ports",
    "wait_until",
]

#: JVM flags of every node and tool: a small heap and the JIT's first tier, which start a
#: broker in about three seconds on two cores.
JVM_OPTIONS: tuple[str, ...] = (
    "-Xms64m",
    "-Xmx448m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)

LOOPBACK = "127.0.0.1"


def class_archive(libs: Path) -> Path:
    """Where the class-data-sharing archive of the JVMs on ``libs`` lives (made by
    ``python -m kclient.testing.apache_kafka fetch`` from one broker run)."""
    return libs.parent / "classes.jsa"


def class_data_sharing(libs: Path) -> tuple[str, ...]:
    """The JVM flag that maps the archive of ``libs``'s classes, when there is one: a JVM
    then starts in about 60% of the time."""
    archive = class_archive(libs)
    return (f"-XX:SharedArchiveFile={archive}",) if archive.exists() else ()


class ApacheKafkaError(RuntimeError):
    """An Apache Kafka node did not format, start or stop; the message ends with its log."""


@dataclass(frozen=True)
class NodePorts:
    """The 127.0.0.1 ports of one node: controller, inter-broker PLAINTEXT and one per
    client listener (``{"SSL": 40123, ...}``)."""

    controller: int
    plaintext: int
    listeners: Mapping[str, int]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (all held open at once, so none repeats)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def cluster_id() -> str:
    while True:  # Kafka's own ids never start with '-' (it reads as a command-line flag)
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _log_config(folder: Path, version: str) -> tuple[Path, str]:
    """The logging configuration file and the JVM property that names it. Kafka 4 logs
    through log4j 2, Kafka 3 through reload4j (log4j 1)."""
    log_file = folder / "broker.log"
    if int(version.split(".", maxsplit=1)[0]) >= 4:
        path = folder / "log4j2.properties"
        path.write_text(
            "status = error\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {log_file}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
            "logger.state.name = state.change.logger\n"
            "logger.state.level = WARN\n"
        )
        return path, f"-Dlog4j2.configurationFile={path}"
    path = folder / "log4j.properties"
    path.write_text(
        "log4j.rootLogger=INFO, file\n"
        "log4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={log_file}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.state.change.logger=WARN\n"
    )
    return path, f"-Dlog4j.configuration=file:{path}"


class KafkaNode:
    """Files and process of one node (``node_id`` 1..N) in ``folder``."""

    def __init__(
        self,
        *,
        java: str,
        libs: Path,
        version: str,
        node_id: int,
        folder: Path,
        ports: NodePorts,
        properties: Mapping[str, str],
        jvm_options: Sequence[str] = JVM_OPTIONS,
        classpath: Sequence[str] = (),
    ) -> None:
        self.java = java
        self.classpath = ":".join((f"{libs}/*", *classpath))
        """Kafka's jars, then ``classpath`` (plugins)."""
        self.libs = libs
        self.version = version
        self.node_id = node_id
        self.folder = folder
        self.ports = ports
        self.jvm_options = tuple(jvm_options)
        self.process: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)
        self.config_file = folder / "server.properties"
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        _, self._log_property = _log_config(folder, version)
        self.log_file = folder / "broker.log"
        self.output_file = folder / "stdout.log"

    def java_command(
        self, main_class: str, *args: str, jvm_options: Sequence[str] = JVM_OPTIONS
    ) -> list[str]:
        """``java`` running ``main_class`` with ``jvm_options`` (the harness's by default)."""
        return [
            self.java,
            *jvm_options,
            *class_data_sharing(self.libs),
            self._log_property,
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]

    def start_format(self, cluster_id: str, extra: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start formatting the node's storage (``StorageTool format``); the caller waits,
        so that the nodes of a cluster format side by side."""
        command = self.java_command(
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(self.config_file),
            *extra,
        )
        with (self.folder / "format.log").open("wb") as out:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def check_formatted(self, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            code = -1
        if code != 0:
            text = (self.folder / "format.log").read_text(errors="replace")
            raise ApacheKafkaError(
                f"formatting node {self.node_id} failed (exit {code}):\n{text[-3000:]}"
            )

    def start(self) -> None:
        """Start the node's JVM (returns at once; see :meth:`check_alive`)."""
        if self.running:
            return
        command = self.java_command(
            "kafka.Kafka", str(self.config_file), jvm_options=self.jvm_options
        )
        with self.output_file.open("ab") as out:
            self.process = subprocess.Popen(
                die_with_parent(command),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def check_alive(self) -> None:
        """Raise :class:`ApacheKafkaError` with the log's tail if the JVM exited."""
        proc = self.process
        if proc is not None and proc.poll() is not None:
            raise ApacheKafkaError(
                f"Apache Kafka {self.version} node {self.node_id} exited with "
                f"{proc.returncode}:\n{self.log_tail()}"
            )

    def terminate(self) -> None:
        """SIGTERM without waiting (``stop`` waits)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL after ``timeout_s``."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        """SIGKILL: the node dies without a controlled shutdown."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        self.process = None

    def pause(self) -> None:
        """SIGSTOP: the node stops answering but keeps its connections."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def lost_a_port(self) -> bool:
        """Whether the node failed to bind one of its ports: another process (a client's
        outgoing connection among them) took it between :func:`free_ports` and the JVM's
        bind."""
        for path in (self.log_file, self.output_file):
            if path.exists() and "BindException" in path.read_text(errors="replace"):
                return True
        return False

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of the node's log and console output, for a failure message."""
        parts = []
        for path in (self.log_file, self.output_file):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(parts) or f"(no log in {self.folder})"


def wait_until(
    predicate: Callable[[], bool], timeout_s: float, what: str, nodes: Sequence[KafkaNode]
) -> None:
    """Call ``predicate()`` every 100 ms until it is true; on timeout raise
    :class:`ApacheKafkaError` naming ``what`` with the nodes' logs."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        for node in nodes:
            node.check_alive()
        try:
            if predicate():
                return
        except (OSError, KafkaError) as exc:
            last = exc
        if time.monotonic() >= deadline:
            logs = "\n".join(node.log_tail(30) for node in nodes)
            raise ApacheKafkaError(f"{what} not within {timeout_s} s (last: {last}):\n{logs}")
        time.sleep(0.1)
