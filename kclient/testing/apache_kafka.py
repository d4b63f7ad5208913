"""Apache Kafka itself for tests: a real KRaft cluster of 1..N nodes on 127.0.0.1, no Docker.

Corresponds to an Apache Kafka cluster in combined mode (every node a broker and a
controller). The jars come from Maven Central through :mod:`kclient.testing.maven`
(``python -m kclient.testing.apache_kafka fetch`` downloads them ahead of time); each node
is a ``kafka.Kafka`` JVM in a folder of a temporary directory, started and stopped by this
object (SIGTERM, then SIGKILL after a bound), and the directory is deleted on ``close``::

    with ApacheKafka("4.4.0", brokers=3, listeners=("PLAINTEXT", "SSL")) as kafka:
        kafka.create_topic("orders", partitions=3, replication_factor=3)
        producer = KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers})
        ...
        kafka.kill_broker(2)   # kill -9; start_broker(2) brings it back

Every node has an inter-broker PLAINTEXT listener (``bootstrap_servers``); ``listeners``
adds ``SSL`` (certificates from :mod:`kclient.testing.tls`) and ``SASL_PLAINTEXT`` (PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 for :data:`SASL_USER`) and ``OAUTHBEARER`` (a
SASL_PLAINTEXT listener of that name taking OAUTHBEARER tokens: unsigned ones, Kafka's
unsecured validator; or, with ``properties`` naming ``sasl.oauthbearer.jwks.endpoint.url``,
signed ones checked against that JWKS, whose URL the harness then allows with the JVM
property ``org.apache.kafka.sasl.oauthbearer.allowed.urls``), whose client settings
:meth:`ApacheKafka.client_config` gives. With 3+ nodes topics default to replication
factor 3 and ``min.insync.replicas=2``. Driven by the thread that made it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kclient import errors
from kclient.cli.admin import ClusterReader
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.testing.apache_kafka_java import JavaReadBack, java_read
from kclient.testing.apache_kafka_node import (
    JVM_OPTIONS,
    LOOPBACK,
    ApacheKafkaError,
    KafkaNode,
    NodePorts,
    cluster_id,
    free_ports,
    wait_until,
)
from kclient.testing.maven import JavaToolMissing, classpath, require_java

if TYPE_CHECKING:
    from kclient.testing.kdc import KerberosSetup

__all__ = [
    "LISTENERS",
    "SASL_PASSWORD",
    "SASL_USER",
    "VERSIONS",
    "ApacheKafka",
    "ApacheKafkaError",
    "JavaToolMissing",
    "kafka_jars",
]

#: The Apache Kafka versions the tests run against: the newest release and the newest 3.x.
VERSIONS: tuple[str, ...] = ("4.4.0", "3.9.2")
#: ``GSSAPI``: a SASL_PLAINTEXT listener of its own serving Kerberos (``kerberos=``).
LISTENERS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "OAUTHBEARER", "GSSAPI")
#: The principal of the OAUTHBEARER listener's unsigned tokens (``client_config``).
OAUTH_PRINCIPAL = "alice"
_JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
SASL_MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: The one user of the SASL listener, for every mechanism.
SASL_USER = "alice"
SASL_PASSWORD = "alice-secret"
#: log4j 2's slf4j binding: Kafka 4 ships log4j 2 but no binding, so it would log nothing.
_CLOSE_TIMEOUT_S = 2.0
"""How long ``close`` lets the nodes shut down before SIGKILL: their data goes anyway."""
_PORT_ATTEMPTS = 3
"""Starts of a cluster whose nodes lost a port to another process before binding it."""
_LOG4J2_SLF4J = "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5"


def artifacts(version: str) -> list[str]:
    """The Maven coordinates of a broker of ``version`` and its tools."""
    coords = [f"org.apache.kafka:kafka_2.13:{version}", f"org.apache.kafka:kafka-tools:{version}"]
    if int(version.split(".", maxsplit=1)[0]) >= 4:
        coords.append(_LOG4J2_SLF4J)
    return coords


def kafka_jars(version: str) -> Path:
    """The folder of jars of Apache Kafka ``version`` (downloaded on first use)."""
    return classpath(artifacts(version))


def api_versions(address: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """One ApiVersions v3 round trip to ``host:port`` (PLAINTEXT): the decoded response."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        body = {"client_software_name": "kclient-testing", "client_software_version": "1"}
        sock.sendall(b"".join(encode_request(ApiKey.API_VERSIONS, 3, 1, "kclient-testing", body)))
        size = int.from_bytes(_read(sock, 4), "big")
        _, response = decode_response(ApiKey.API_VERSIONS, 3, _read(sock, size))
    if response["error_code"]:
        raise errors.for_code(response["error_code"])(f"ApiVersions v3 to {address}")
    return response


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise errors.KafkaConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


class ApacheKafka:
    """A cluster of ``brokers`` Apache Kafka ``version`` nodes (ids 1..N), started by
    ``start()`` or ``with``; see the module docstring."""

    def __init__(
        self,
        version: str = VERSIONS[0],
        brokers: int = 1,
        listeners: Sequence[str] = ("PLAINTEXT",),
        *,
        properties: Mapping[str, object] | None = None,
        features: Mapping[str, int] | None = None,
        start_timeout_s: float = 90.0,
        stop_timeout_s: float = 30.0,
        kerberos: KerberosSetup | None = None,
        classpath: Sequence[Path | str] = (),
        advertised_host: str = LOOPBACK,
        certificate_ips: Sequence[str] = (LOOPBACK,),
    ) -> None:
        """``classpath``: more folders or jars for the brokers' class path, after Kafka's
        jars (a plugin of ``properties``, e.g. a ``metric.reporters`` class).
        ``advertised_host``: the name the client listeners advertise (they listen on
        127.0.0.1 whatever it is), e.g. ``localhost``; ``certificate_ips``: the addresses
        the SSL listener's certificate names besides ``localhost`` (``()``: only the
        name, so a client must connect by name for the host name check to pass)."""
        unknown = [name for name in listeners if name not in LISTENERS]
        if unknown:
            raise ValueError(f"listeners {unknown} unknown: choose from {list(LISTENERS)}")
        if ("GSSAPI" in listeners) != (kerberos is not None):
            raise ValueError(
                "the GSSAPI listener needs kerberos= (kclient.testing.kdc), and only it"
            )
        self.kerberos = kerberos
        self.advertised_host = advertised_host
        self.certificate_ips = tuple(certificate_ips)
        if brokers < 1:
            raise ValueError(f"brokers must be 1 or more, not {brokers}")
        self.version = version
        self.brokers = brokers
        self.listeners = tuple(dict.fromkeys(("PLAINTEXT", *listeners)))
        self.properties = {k: str(v) for k, v in (properties or {}).items()}
        self.features = dict(features or {})
        self.classpath = tuple(str(entry) for entry in classpath)
        self.jvm_options: tuple[str, ...] = JVM_OPTIONS + (
            (f"-Djava.security.krb5.conf={kerberos.kdc.krb5_conf}",) if kerberos else ()
        )
        """The brokers' JVM flags (not the storage format's): the harness's quick-start
        ones by default; replace them to run a broker as ``kafka-server-start.sh`` does."""
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.folder: Path | None = None
        self.nodes: dict[int, KafkaNode] = {}
        self.certificates: Any = None
        """:class:`~kclient.testing.tls.TestCertificates` of the SSL listener, if any."""

    # --- lifecycle

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> ApacheKafka:
        """Format every node's storage, start the nodes and wait until all serve metadata.
        Nodes that could not bind a port (taken by another process after ``free_ports``
        chose it) are started again on new ports, at most ``_PORT_ATTEMPTS`` times."""
        for _ in range(_PORT_ATTEMPTS - 1):
            if self._start_once(retry_lost_ports=True):
                return self
        self._start_once(retry_lost_ports=False)
        return self

    def _start_once(self, *, retry_lost_ports: bool) -> bool:
        """One start; False (all stopped) when a node lost a port and ``retry_lost_ports``."""
        java = require_java()
        libs = kafka_jars(self.version)
        self.nodes = {}
        self.folder = Path(tempfile.mkdtemp(prefix=f"apache-kafka-{self.version}-"))
        try:
            self._make_nodes(java, libs)
            new_id = cluster_id()
            formats = [
                (node, node.start_format(new_id, self._format_args()))
                for node in self.nodes.values()
            ]
            for node, proc in formats:
                node.check_formatted(proc, self.start_timeout_s)
            for node in self.nodes.values():
                node.start()
            self._wait_ready(list(self.nodes))
        except ApacheKafkaError:
            lost = any(node.lost_a_port() for node in self.nodes.values())
            self.close()
            if retry_lost_ports and lost:
                return False
            raise
        except BaseException:
            self.close()
            raise
        return True

    def close(self) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``stop_timeout_s``), delete the folder."""
        nodes = list(self.nodes.values())
        for node in nodes:  # all at once: one by one, the last waits for a lost quorum
            node.resume()
            node.terminate()
        for node in nodes:
            node.stop(_CLOSE_TIMEOUT_S)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _make_nodes(self, java: str, libs: Path) -> None:
        assert self.folder is not None
        client = [name for name in self.listeners if name != "PLAINTEXT"]
        ports = free_ports(self.brokers * (2 + len(client)))
        per_node = {
            node_id: NodePorts(
                controller=ports.pop(),
                plaintext=ports.pop(),
                listeners={name: ports.pop() for name in client},
            )
            for node_id in range(1, self.brokers + 1)
        }
        voters = ",".join(f"{i}@{LOOPBACK}:{p.controller}" for i, p in per_node.items())
        if _JWKS_URL in self.properties:  # Kafka 4 reads only the URLs it is told to allow
            allowed = "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
            self.jvm_options = (
                *(o for o in self.jvm_options if not o.startswith(allowed)),
                allowed + self.properties[_JWKS_URL],
            )
        if "SSL" in self.listeners:
            from kclient.testing.tls import write_test_certificates

            self.certificates = write_test_certificates(
                self.folder / "certs", ips=self.certificate_ips
            )
        for node_id, node_ports in per_node.items():
            folder = self.folder / f"node-{node_id}"
            self.nodes[node_id] = KafkaNode(
                java=java,
                libs=libs,
                version=self.version,
                node_id=node_id,
                folder=folder,
                ports=node_ports,
                properties=self._server_properties(node_id, node_ports, voters, folder),
                jvm_options=self.jvm_options,
                classpath=self.classpath,
            )

    def _server_properties(
        self, node_id: int, ports: NodePorts, voters: str, folder: Path
    ) -> dict[str, str]:
        replicas = min(3, self.brokers)
        addresses = {"PLAINTEXT": ports.plaintext, **ports.listeners}
        bound = ",".join(f"{n}://{LOOPBACK}:{p}" for n, p in addresses.items())
        host = self.advertised_host
        advertised = ",".join(f"{n}://{host}:{p}" for n, p in addresses.items())
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": f"{bound},CONTROLLER://{LOOPBACK}:{ports.controller}",
            "advertised.listeners": advertised,
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,OAUTHBEARER:SASL_PLAINTEXT,GSSAPI:SASL_PLAINTEXT",
            "log.dirs": str(folder / "data"),
            "num.partitions": "1",
            "default.replication.factor": str(replicas),
            "min.insync.replicas": "2" if replicas >= 3 else "1",
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": "2" if replicas >= 3 else "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            # a transaction past its transaction.timeout.ms is aborted within 0.5 s
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
            # a killed node loses its leaderships after 3 s, not 9
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "auto.create.topics.enable": "false",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "log.cleaner.enable": "false",
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": "2" if replicas >= 3 else "1",
        }
        if "SSL" in self.listeners:
            certs = self.certificates
            props.update(
                {
                    "listener.name.ssl.ssl.keystore.type": "PEM",
                    "listener.name.ssl.ssl.keystore.location": certs.server_keystore,
                    "listener.name.ssl.ssl.truststore.type": "PEM",
                    "listener.name.ssl.ssl.truststore.location": certs.ca_cert,
                    "listener.name.ssl.ssl.client.auth": "none",
                }
            )
        if "SASL_PLAINTEXT" in self.listeners:
            prefix = "listener.name.sasl_plaintext"
            props["sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
            props[f"{prefix}.plain.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{SASL_USER}="{SASL_PASSWORD}";'
            )
            for mechanism in SASL_MECHANISMS[1:]:
                props[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        if "OAUTHBEARER" in self.listeners:
            props.update(self._oauthbearer_properties())
        if self.kerberos is not None:
            props.update(self.kerberos.kafka_listener_properties("gssapi"))
        props.update(self.properties)
        return props

    def _oauthbearer_properties(self) -> dict[str, str]:
        prefix = "listener.name.oauthbearer"
        props = {
            f"{prefix}.sasl.enabled.mechanisms": "OAUTHBEARER",
            f"{prefix}.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{OAUTH_PRINCIPAL}";'
            ),
        }
        if _JWKS_URL in self.properties:
            props[f"{prefix}.oauthbearer.sasl.server.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            )
        return props

    def _format_args(self) -> list[str]:
        args = []
        if "SASL_PLAINTEXT" in self.listeners:
            for mechanism in SASL_MECHANISMS[1:]:
                args += ["--add-scram", f"{mechanism}=[name={SASL_USER},password={SASL_PASSWORD}]"]
        for name, level in self.features.items():
            args += ["--feature", f"{name}={level}"]
        return args

    def _wait_ready(self, node_ids: Sequence[int]) -> None:
        """Until each node in ``node_ids`` answers Metadata listing every running node."""
        running = {i for i, node in self.nodes.items() if node.running}

        def ready() -> bool:
            for node_id in node_ids:
                reader = ClusterReader(self.broker_address(node_id))
                try:
                    reader.metadata("__kclient_probe__")
                except errors.UnknownTopicOrPartitionError:
                    pass
                finally:
                    reader.close()
                if set(reader.brokers) != running:
                    return False
            return True

        nodes = [self.nodes[i] for i in node_ids]
        wait_until(ready, self.start_timeout_s, f"Apache Kafka {self.version} ready", nodes)

    # --- addresses and client settings

    def broker_address(self, node_id: int, listener: str = "PLAINTEXT") -> str:
        ports = self.nodes[node_id].ports
        port = ports.plaintext if listener == "PLAINTEXT" else ports.listeners[listener]
        return f"{LOOPBACK}:{port}"

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        """``bootstrap.servers`` of ``listener`` on every node."""
        if listener not in self.listeners:
            raise ValueError(f"no {listener} listener: this cluster has {list(self.listeners)}")
        return ",".join(self.broker_address(i, listener) for i in self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        """``bootstrap.servers`` of the PLAINTEXT listener."""
        return self.bootstrap("PLAINTEXT")

    def client_config(
        self, listener: str = "PLAINTEXT", mechanism: str | None = None
    ) -> dict[str, Any]:
        """Settings for kclient and confluent-kafka (librdkafka's names, which kclient also
        takes) to reach ``listener``; ``mechanism`` picks the SASL mechanism."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap(listener),
            "security.protocol": listener,
        }
        if listener == "GSSAPI" and self.kerberos is not None:
            config.update(self.kerberos.client_config())
        if listener == "SSL":
            config["ssl.ca.location"] = self.certificates.ca_cert
        if listener == "SASL_PLAINTEXT":
            config["sasl.mechanisms"] = mechanism or "PLAIN"
            config["sasl.username"] = SASL_USER
            config["sasl.password"] = SASL_PASSWORD
        if listener == "OAUTHBEARER":  # unsigned tokens; for a JWKS listener bring your own
            config["security.protocol"] = "SASL_PLAINTEXT"
            config["sasl.mechanisms"] = "OAUTHBEARER"
            config["enable.sasl.oauthbearer.unsecure.jwt"] = True
            config["sasl.oauthbearer.config"] = f"principal={OAUTH_PRINCIPAL}"
        return config

    def java_client_config(
        self, listener: str = "PLAINTEXT", mechanism: str | None = None
    ) -> dict[str, str]:
        """The same as :meth:`client_config` with the Java clients' names."""
        config = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if listener == "SSL":
            config["ssl.truststore.type"] = "PEM"
            config["ssl.truststore.location"] = self.certificates.ca_cert
        if listener == "OAUTHBEARER":
            config["security.protocol"] = "SASL_PLAINTEXT"
            config["sasl.mechanism"] = "OAUTHBEARER"
            config["sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{OAUTH_PRINCIPAL}";'
            )
        if listener == "SASL_PLAINTEXT":
            mechanism = mechanism or "PLAIN"
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            config["sasl.mechanism"] = mechanism
            config["sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.{module} required "
                f'username="{SASL_USER}" password="{SASL_PASSWORD}";'
            )
        return config

    # --- topics and features

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int | None = None
    ) -> None:
        """Create ``name`` (replication factor: min(3, brokers) unless given) and wait until
        every running node knows a leader for each partition and each leader answers
        ListOffsets for it."""
        rf = replication_factor if replication_factor is not None else min(3, self.brokers)
        reader = ClusterReader(self.bootstrap_servers)
        try:
            reader.create_topic(name, partitions, rf)
        finally:
            reader.close()
        running = [i for i, node in self.nodes.items() if node.running]

        def known() -> bool:
            for node_id in running:
                reader = ClusterReader(self.broker_address(node_id))
                try:
                    leaders = reader.leaders(name)
                except errors.KafkaError:
                    return False
                finally:
                    reader.close()
                if len(leaders) != partitions or min(leaders.values()) < 0:
                    return False
            reader = ClusterReader(self.broker_address(running[0]))
            try:  # each leader's log exists (a Produce before would be refused)
                return len(reader.end_offsets(name)) == partitions
            except errors.KafkaError:
                return False
            finally:
                reader.close()

        wait_until(known, 30.0, f"topic {name!r}", [self.nodes[i] for i in running])

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition → leader node id, from the first running node."""
        node_id = next(i for i, node in self.nodes.items() if node.running)
        reader = ClusterReader(self.broker_address(node_id))
        try:
            return reader.leaders(topic)
        finally:
            reader.close()

    def api_versions(self, node_id: int = 1) -> dict[int, tuple[int, int]]:
        """Api key → (min, max) version the node serves."""
        body = api_versions(self.broker_address(node_id))
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}

    def finalized_features(self, node_id: int = 1) -> dict[str, int]:
        """Feature name → finalized level (``transaction.version``, ``metadata.version``…)."""
        body = api_versions(self.broker_address(node_id))
        return {f["name"]: f["max_version_level"] for f in body.get("finalized_features") or ()}

    def java_read(
        self,
        topics: Sequence[str],
        *,
        isolation_level: str = "read_committed",
        group: str | None = None,
        listener: str = "PLAINTEXT",
        mechanism: str | None = None,
        timeout_s: float = 30.0,
    ) -> JavaReadBack:
        """Read ``topics`` whole with Kafka's own Java consumer of this version (see
        :mod:`kclient.testing.apache_kafka_java`)."""
        return java_read(
            kafka_jars(self.version),
            self.java_client_config(listener, mechanism),
            topics,
            isolation_level=isolation_level,
            group=group,
            timeout_s=timeout_s,
        )

    def upgrade_feature(self, name: str, level: int, timeout_s: float = 60.0) -> None:
        """Finalize feature ``name`` at ``level`` (Kafka's ``FeatureCommand upgrade``), e.g.
        ``transaction.version`` 2 on a cluster formatted with 1."""
        self.run_tool(
            "org.apache.kafka.tools.FeatureCommand",
            "upgrade",
            "--feature",
            f"{name}={level}",
            what=f"upgrading {name} to {level}",
            timeout_s=timeout_s,
        )

    def run_tool(self, main_class: str, *args: str, what: str, timeout_s: float = 60.0) -> str:
        """Run one of Kafka's command-line tools (``main_class``, e.g.
        ``org.apache.kafka.tools.ConfigCommand``) from a running node's jars with
        ``--bootstrap-server`` and ``args``; what it printed. ``ApacheKafkaError`` naming
        ``what`` when it fails."""
        node = next(n for n in self.nodes.values() if n.running)
        command = node.java_command(main_class, "--bootstrap-server", self.bootstrap_servers, *args)
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if done.returncode != 0:
            raise ApacheKafkaError(
                f"{what} failed (exit {done.returncode}):\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        return done.stdout

    # --- faults

    def stop_broker(self, node_id: int) -> None:
        """Controlled shutdown (SIGTERM), SIGKILL after ``stop_timeout_s``."""
        self.nodes[node_id].resume()
        self.nodes[node_id].stop(self.stop_timeout_s)

    def kill_broker(self, node_id: int) -> None:
        """``kill -9``: no controlled shutdown."""
        self.nodes[node_id].kill()

    def start_broker(self, node_id: int) -> None:
        """Start a stopped or killed node again and wait until the cluster lists it."""
        self.nodes[node_id].start()
        self._wait_ready([i for i, node in self.nodes.items() if node.running])

    def pause_broker(self, node_id: int) -> None:
        """SIGSTOP: the node keeps its sockets but answers nothing (``resume_broker``)."""
        self.nodes[node_id].pause()

    def resume_broker(self, node_id: int) -> None:
        self.nodes[node_id].resume()

    def is_running(self, node_id: int) -> bool:
        return self.nodes[node_id].running

    def log_tail(self, lines: int = 60) -> str:
        """The end of every node's log: show it when a test fails."""
        return "\n".join(node.log_tail(lines) for node in self.nodes.values())


if __name__ == "__main__":
    from kclient.testing.apache_kafka_tools import main

    sys.exit(main())
