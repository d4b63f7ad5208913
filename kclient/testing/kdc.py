"""A local MIT Kerberos KDC for tests of GSSAPI (Kerberos) clients and brokers.

Not a Kafka component: the key distribution center a Kafka cluster with
``sasl.mechanism=GSSAPI`` authenticates against, run from Debian's ``krb5-kdc`` and
``krb5-admin-server`` packages. ``local_kdc()`` makes a realm in a temporary directory (its
own ``krb5.conf`` and ``kdc.conf``, a database made by ``kdb5_util create -s``), starts
``krb5kdc -n`` on a free 127.0.0.1 port (UDP and TCP; clients are told to use TCP), and
stops it by its handle when the ``with`` block ends (or when the thread that started it
dies: it runs under ``die_with_parent``). Principals and keytabs come from
``kadmin.local``, which works on the database directly (no ``kadmind``)::

    with local_kdc() as kdc:
        broker_keytab = kdc.add_principal("kafka/localhost")
        client_keytab = kdc.add_principal("alice")
        os.environ.update(kdc.env)          # KRB5_CONFIG for this process's libkrb5

The pytest fixture ``kerberos_kdc`` (session-scoped) yields one such KDC, or skips the test
with the Debian packages to install when they are missing.

Name resolution is off in the realm's ``krb5.conf`` (``dns_canonicalize_hostname = false``,
``rdns = false``): a service on ``localhost`` is ``SERVICE/localhost@REALM`` as written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kclient.testing._die_with_parent import die_with_parent, stop_process

__all__ = [
    "DEFAULT_REALM",
    "KdcUnavailable",
    "KerberosSetup",
    "LocalKdc",
    "kerberos_setup",
    "local_kdc",
    "missing_programs",
]

DEFAULT_REALM = "KCLIENT.TEST"
#: The programs the KDC needs, and the Debian package that has each.
PROGRAMS = {
    "krb5kdc": "krb5-kdc",
    "kdb5_util": "krb5-kdc",
    "kadmin.local": "krb5-admin-server",
}
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


class KdcUnavailable(RuntimeError):
    """The KDC cannot run here (programs missing) or did not start."""


def _which(program: str) -> str | None:
    found = shutil.which(program)
    if found is None:
        for directory in _SBIN:
            candidate = Path(directory, program)
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return found


def missing_programs() -> str | None:
    """None when the KDC can run; else one line naming the Debian packages to install."""
    missing = sorted({pkg for program, pkg in PROGRAMS.items() if _which(program) is None})
    if not missing:
        return None
    return (
        f"a local Kerberos KDC needs MIT Kerberos: apt-get install {' '.join(missing)} "
        "(Debian/Ubuntu)"
    )


def _free_port() -> int:
    """A port free on 127.0.0.1 for both TCP and UDP (the KDC listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise KdcUnavailable("no free port on 127.0.0.1 for the KDC")


@dataclass
class LocalKdc:
    """A running KDC: its realm, its port and files, and how to add principals."""

    realm: str
    port: int
    directory: Path
    krb5_conf: Path
    kdc_conf: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def env(self) -> dict[str, str]:
        """The environment for a process using this realm (libkrb5 and kadmin.local)."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def principal(self, name: str) -> str:
        """``name`` with the realm (``alice`` -> ``alice@KCLIENT.TEST``)."""
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, keytab: Path | str | None = None) -> Path:
        """Add ``name`` (a random key) and export its key to ``keytab`` (default: a file
        named after it in the KDC's directory); returns the keytab's path. A keytab that
        already exists gets the key appended."""
        path = (
            Path(keytab)
            if keytab is not None
            else self.directory / (name.replace("/", "_") + ".keytab")
        )
        principal = self.principal(name)
        self.kadmin(f"addprinc -randkey {principal}")
        self.kadmin(f"ktadd -k {path} -norandkey {principal}")
        return path

    def kadmin(self, query: str) -> str:
        """Run one ``kadmin.local`` query; its output. Raises ``KdcUnavailable``."""
        kadmin = _which("kadmin.local")
        if kadmin is None:
            raise KdcUnavailable(missing_programs() or "kadmin.local not found")
        result = subprocess.run(
            [kadmin, "-r", self.realm, "-q", query],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0 or "error" in result.stderr.lower():
            raise KdcUnavailable(
                f"kadmin.local -q {query!r} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result.stdout

    def stop(self) -> None:
        """Stop the KDC (its handle); idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stop_process(proc)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _write_configs(directory: Path, realm: str, port: int) -> tuple[Path, Path]:
    krb5_conf = directory / "krb5.conf"
    kdc_conf = directory / "kdc.conf"
    krb5_conf.write_text(
        f"""[libdefaults]
    default_realm = {realm}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 24h
    forwardable = true

[realms]
    {realm} = {{
        kdc = 127.0.0.1:{port}
    }}

[domain_realm]
    localhost = {realm}
    127.0.0.1 = {realm}
"""
    )
    kdc_conf.write_text(
        f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}

[realms]
    {realm} = {{
        database_name = {directory / "principal"}
        key_stash_file = {directory / "stash"}
        acl_file = {directory / "kadm5.acl"}
        max_life = 24h
        max_renewable_life = 7d
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{directory / "kdc.log"}
"""
    )
    (directory / "kadm5.acl").write_text("")
    return krb5_conf, kdc_conf


def _wait_listening(kdc: LocalKdc, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not kdc.running:
            log = kdc.directory / "kdc.log"
            text = log.read_text()[-1000:] if log.exists() else ""
            raise KdcUnavailable(f"krb5kdc exited at start: {text.strip()}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", kdc.port)) == 0:
                return
        time.sleep(0.05)
    raise KdcUnavailable(f"krb5kdc did not listen on 127.0.0.1:{kdc.port} in time")


@contextlib.contextmanager
def local_kdc(realm: str = DEFAULT_REALM, start_timeout_s: float = 20.0) -> Iterator[LocalKdc]:
    """A KDC for ``realm`` on a free 127.0.0.1 port, stopped when the block ends.
    Raises ``KdcUnavailable`` (naming the Debian packages when they are missing)."""
    problem = missing_programs()
    if problem is not None:
        raise KdcUnavailable(problem)
    with tempfile.TemporaryDirectory(prefix="kclient-kdc-") as tmp:
        directory = Path(tmp)
        port = _free_port()
        krb5_conf, kdc_conf = _write_configs(directory, realm, port)
        kdc = LocalKdc(realm, port, directory, krb5_conf, kdc_conf)
        env = {**os.environ, **kdc.env}
        kdb5_util = _which("kdb5_util")
        krb5kdc = _which("krb5kdc")
        assert kdb5_util is not None and krb5kdc is not None
        created = subprocess.run(
            [kdb5_util, "-r", realm, "create", "-s", "-P", "kclient-test-master-key"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if created.returncode != 0:
            raise KdcUnavailable(f"kdb5_util create failed: {created.stderr.strip()}")
        kdc.proc = subprocess.Popen(
            die_with_parent([krb5kdc, "-n", "-r", realm]),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_listening(kdc, time.monotonic() + start_timeout_s)
            yield kdc
        finally:
            kdc.stop()


@dataclass(frozen=True)
class KerberosSetup:
    """What the ``kerberos_kdc`` fixture yields: the KDC, a broker keytab with
    ``kafka/127.0.0.1`` and ``kafka/localhost``, and a client keytab with ``alice``."""

    kdc: LocalKdc
    broker_keytab: Path
    client_keytab: Path
    client_principal: str

    def broker_principal(self, host: str = "127.0.0.1") -> str:
        return self.kdc.principal(f"kafka/{host}")

    def client_config(self) -> dict[str, str]:
        """kclient's (and librdkafka's) settings to authenticate as the client."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.kerberos.principal": self.client_principal,
            "sasl.kerberos.keytab": str(self.client_keytab),
        }

    def kafka_listener_properties(self, listener: str) -> dict[str, str]:
        """An Apache Kafka broker's properties serving GSSAPI on ``listener`` (lower case)
        as ``kafka/127.0.0.1`` from the broker keytab; the JVM also needs
        ``-Djava.security.krb5.conf`` (the KDC's ``krb5_conf``)."""
        prefix = f"listener.name.{listener}"
        return {
            f"{prefix}.sasl.enabled.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            f"{prefix}.gssapi.sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                f'storeKey=true keyTab="{self.broker_keytab}" '
                f'principal="{self.broker_principal()}";'
            ),
        }


@contextlib.contextmanager
def kerberos_setup() -> Iterator[KerberosSetup]:
    """A KDC with a broker and a client principal, its ``krb5.conf`` set in this process's
    environment (``KRB5_CONFIG``) while the block runs."""
    with local_kdc() as kdc:
        broker_keytab = kdc.directory / "broker.keytab"
        for host in ("127.0.0.1", "localhost"):
            kdc.add_principal(f"kafka/{host}", broker_keytab)
        client_keytab = kdc.add_principal("alice")
        saved = {name: os.environ.get(name) for name in kdc.env}
        os.environ.update(kdc.env)
        try:
            yield KerberosSetup(kdc, broker_keytab, client_keytab, kdc.principal("alice"))
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
