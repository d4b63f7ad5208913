"""TLS listener settings (BrokerConfig, the CLI) and the TLS channel pieces, without sockets.

Config errors must name the setting to fix. The TLS receive/send classes are driven by a
scripted stand-in for ``ssl.SSLSocket``: whole-record reads, "want read" gaps, a full
socket (after which the very same chunk must be offered again, as OpenSSL requires).
"""

from __future__ import annotations

import ssl
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from kclient.broker import EmbeddedBroker
from kclient.broker.__main__ import main
from kclient.broker.config import BrokerConfig
from kclient.broker.network_receive import InvalidReceiveError, TlsNetworkReceive
from kclient.broker.server_channel import TlsNetworkSend, handshake_failure
from kclient.errors import ConfigError
from kclient.testing.tls import TestCertificates, write_test_certificates
from kclient.tls import WRITE_CHUNK_BYTES


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("tls"))


# ---- BrokerConfig ----------------------------------------------------------------------


def test_plaintext_is_the_default_and_builds_no_context() -> None:
    config = BrokerConfig()
    assert config.security_protocol == "PLAINTEXT" and not config.tls
    assert config.ssl_context() is None


def test_ssl_without_a_keystore_names_ssl_keystore_location() -> None:
    with pytest.raises(ConfigError, match=r"'ssl\.keystore\.location'"):
        BrokerConfig(security_protocol="SSL")


@pytest.mark.parametrize("protocol", ["SASL_SSL", "sasl_ssl"])
def test_sasl_ssl_needs_a_keystore_like_ssl(protocol: str) -> None:
    with pytest.raises(ConfigError, match=r"SASL_SSL needs 'ssl\.keystore\.location'"):
        BrokerConfig(security_protocol=protocol, sasl_users={"alice": "secret"})


@pytest.mark.parametrize("protocol", ["TLS", "", "HTTPS", "SASL"])
def test_an_unknown_protocol_names_security_protocol(protocol: str) -> None:
    with pytest.raises(
        ConfigError,
        match=r"'security\.protocol' must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    ):
        BrokerConfig(security_protocol=protocol)


def test_the_protocol_is_case_insensitive(certs: TestCertificates) -> None:
    config = BrokerConfig(security_protocol="ssl", ssl_keystore_location=certs.server_keystore)
    assert config.security_protocol == "SSL" and config.tls


@pytest.mark.parametrize("mode", ["yes", "REQUIRED", "want"])
def test_a_bad_client_auth_names_ssl_client_auth(mode: str) -> None:
    with pytest.raises(ConfigError, match=r"'ssl\.client\.auth' must be none, requested or"):
        BrokerConfig(security_protocol="SSL", ssl_keystore_location="k.pem", ssl_client_auth=mode)


@pytest.mark.parametrize(
    ("setting", "name"),
    [
        ({"ssl_keystore_location": "k.pem"}, "ssl.keystore.location"),
        ({"ssl_truststore_location": "ca.pem"}, "ssl.truststore.location"),
        ({"ssl_key_password": "secret"}, "ssl.key.password"),
        ({"ssl_client_auth": "required"}, "ssl.client.auth"),
    ],
)
def test_ssl_settings_on_a_plaintext_listener_are_refused(
    setting: dict[str, str], name: str
) -> None:
    with pytest.raises(
        ConfigError, match=rf"'{name}' is set but 'security\.protocol' is PLAINTEXT"
    ):
        BrokerConfig(**setting)  # type: ignore[arg-type]


def test_the_key_password_is_not_in_the_repr(certs: TestCertificates) -> None:
    config = BrokerConfig(
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        ssl_key_password="hunter2",
    )
    assert "hunter2" not in repr(config)


def test_a_missing_keystore_file_names_the_setting_before_any_socket(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    config = BrokerConfig(security_protocol="SSL", ssl_keystore_location=missing)
    with pytest.raises(ConfigError, match=r"'ssl\.keystore\.location' .*no such file"):
        config.ssl_context()
    # the embedded broker reads the files when it is built, not on the first connection
    with pytest.raises(ConfigError, match=r"'ssl\.keystore\.location'"):
        EmbeddedBroker(config=config)


def test_a_keystore_that_is_not_pem_names_the_setting(tmp_path: Path) -> None:
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    config = BrokerConfig(security_protocol="SSL", ssl_keystore_location=str(jks))
    with pytest.raises(ConfigError, match=r"'ssl\.keystore\.location' .*PEM"):
        config.ssl_context()


def test_a_missing_truststore_file_names_the_setting(
    certs: TestCertificates, tmp_path: Path
) -> None:
    config = BrokerConfig(
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        ssl_truststore_location=str(tmp_path / "ca.pem"),
        ssl_client_auth="required",
    )
    with pytest.raises(ConfigError, match=r"'ssl\.truststore\.location' .*no such file"):
        config.ssl_context()


def test_required_client_auth_without_a_truststore_names_it(certs: TestCertificates) -> None:
    config = BrokerConfig(
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        ssl_client_auth="required",
    )
    with pytest.raises(ConfigError, match=r"'ssl\.truststore\.location'"):
        config.ssl_context()


def test_an_encrypted_key_needs_the_right_password(tmp_path: Path) -> None:
    locked = write_test_certificates(tmp_path, key_password="s3cret")
    config = BrokerConfig(security_protocol="SSL", ssl_keystore_location=locked.server_keystore)
    with pytest.raises(ConfigError, match=r"'ssl\.key\.password'"):
        config.ssl_context()
    with pytest.raises(ConfigError, match=r"'ssl\.key\.password'"):
        config.replace(ssl_key_password="wrong").ssl_context()
    assert isinstance(config.replace(ssl_key_password="s3cret").ssl_context(), ssl.SSLContext)


@pytest.mark.parametrize(
    ("mode", "verify"),
    [("none", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL), ("required", ssl.CERT_REQUIRED)],
)
def test_client_auth_sets_the_verify_mode(
    certs: TestCertificates, mode: str, verify: ssl.VerifyMode
) -> None:
    context = BrokerConfig(
        security_protocol="SSL",
        ssl_keystore_location=certs.server_keystore,
        ssl_truststore_location=certs.ca_cert,
        ssl_client_auth=mode,
    ).ssl_context()
    assert context is not None and context.verify_mode == verify
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


# ---- the command line (refused before any socket is opened) -----------------------------


def test_cli_reports_a_bad_ssl_setting_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.pem")
    assert main(["--security-protocol", "SSL", "--ssl-keystore-location", missing]) == 2
    assert "'ssl.keystore.location'" in capsys.readouterr().err
    assert main(["--security-protocol", "SSL"]) == 2
    assert "needs 'ssl.keystore.location'" in capsys.readouterr().err
    assert main(["--security-protocol", "SASL_SSL", "--sasl-user", "alice:secret"]) == 2
    assert "SASL_SSL needs 'ssl.keystore.location'" in capsys.readouterr().err
    assert main(["--ssl-client-auth", "required"]) == 2
    assert "'ssl.client.auth' is set but 'security.protocol' is PLAINTEXT" in (
        capsys.readouterr().err
    )


# ---- TLS receive / send over a scripted SSL socket ---------------------------------------


class ScriptedTlsSocket:
    """Stands in for a non-blocking ``ssl.SSLSocket``.

    ``records`` are what successive ``recv_into`` calls may return (None: "want read");
    a record longer than the caller's buffer is split, the rest stays buffered as in
    OpenSSL. ``capacity`` lists how many bytes successive ``send`` calls accept (0: the
    socket is full, "want write"; past the list: everything).
    """

    def __init__(self, records: Sequence[bytes | None] = (), capacity: Sequence[int] = ()) -> None:
        self.records = list(records)
        self.capacity = list(capacity)
        self.sent: list[bytes] = []
        self.offered: list[bytes] = []

    def recv_into(self, view: memoryview) -> int:
        if not self.records:
            raise ssl.SSLWantReadError()
        record = self.records[0]
        if record is None:
            self.records.pop(0)
            raise ssl.SSLWantReadError()
        n = min(len(view), len(record))
        view[:n] = record[:n]
        if n == len(record):
            self.records.pop(0)
        else:
            self.records[0] = record[n:]
        return n

    def send(self, data: Any) -> int:
        chunk = bytes(data)
        self.offered.append(chunk)
        if self.capacity:
            take = self.capacity.pop(0)
            if take == 0:
                raise ssl.SSLWantWriteError()
            chunk = chunk[:take]
        self.sent.append(chunk)
        return len(chunk)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def read(receive: TlsNetworkReceive, sock: ScriptedTlsSocket) -> tuple[bool, int]:
    return receive.read_from(cast(Any, sock))


def test_tls_receive_waits_for_whole_records_and_stops_at_the_end_of_the_frame() -> None:
    first, second = frame(b"a" * 50), frame(b"second")
    # the first frame in three records with "want read" gaps; the second one shares the
    # last record and must stay buffered (it is the next request)
    sock = ScriptedTlsSocket([first[:2], None, first[2:30], None, first[30:] + second])
    receive = TlsNetworkReceive(1024)
    assert read(receive, sock) == (False, 2)
    assert read(receive, sock) == (False, 28)
    assert read(receive, sock) == (True, len(first) - 30)
    assert bytes(receive.payload) == b"a" * 50
    assert sock.records == [second]  # nothing read past the frame
    receive = TlsNetworkReceive(1024)
    assert read(receive, sock) == (True, len(second))
    assert bytes(receive.payload) == b"second"


def test_tls_receive_reports_eof_and_bad_sizes() -> None:
    receive = TlsNetworkReceive(1024)
    sock = ScriptedTlsSocket([frame(b"x" * 10)[:8], b""])
    with pytest.raises(EOFError, match="middle of a request"):
        read(receive, sock)
    with pytest.raises(InvalidReceiveError, match=r"socket\.request\.max\.bytes"):
        read(TlsNetworkReceive(1024), ScriptedTlsSocket([frame(b"x" * 2000)]))
    with pytest.raises(InvalidReceiveError):
        read(TlsNetworkReceive(1024), ScriptedTlsSocket([struct.pack(">i", -1)]))
    empty = TlsNetworkReceive(1024)
    assert read(empty, ScriptedTlsSocket([frame(b"")])) == (True, 4)


def test_tls_send_offers_the_same_chunk_again_after_a_full_socket() -> None:
    buffers = [b"h" * 10, b"a" * (WRITE_CHUNK_BYTES + 100), b"t" * 7]
    expected = b"".join(buffers)
    # full at once, then the first chunk goes, full twice, then the rest
    sock = ScriptedTlsSocket(capacity=[0, WRITE_CHUNK_BYTES, 0, 0])
    send = TlsNetworkSend("conn", buffers)
    assert send.size == len(expected)
    assert send.write_to(cast(Any, sock)) == (False, 0)
    assert send.write_to(cast(Any, sock)) == (False, WRITE_CHUNK_BYTES)
    assert send.write_to(cast(Any, sock)) == (False, 0)
    assert send.write_to(cast(Any, sock)) == (True, len(expected) - WRITE_CHUNK_BYTES)
    assert b"".join(sock.sent) == expected and send.remaining == 0
    # every retry offered exactly the bytes refused before
    assert sock.offered[0] == sock.offered[1] and len(sock.offered[0]) == WRITE_CHUNK_BYTES
    assert sock.offered[2] == sock.offered[3] == sock.offered[4]
    assert all(len(chunk) <= WRITE_CHUNK_BYTES for chunk in sock.offered)


def test_tls_send_continues_after_a_partial_write() -> None:
    buffers = [bytes(range(256)) * 10]
    sock = ScriptedTlsSocket(capacity=[1000, 0])
    send = TlsNetworkSend("conn", buffers)
    assert send.write_to(cast(Any, sock)) == (False, 1000)
    assert send.write_to(cast(Any, sock)) == (True, 1560)
    assert b"".join(sock.sent) == buffers[0]


# ---- handshake failure reasons ---------------------------------------------------------


def ssl_error(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, f"[SSL: {reason}] ({reason.lower()})")
    exc.reason = reason
    return exc


def test_handshake_failures_say_what_to_fix() -> None:
    assert "PLAINTEXT client" in handshake_failure(ssl_error("WRONG_VERSION_NUMBER"))
    assert "security.protocol=SSL" in handshake_failure(ssl_error("HTTP_REQUEST"))
    no_cert = handshake_failure(ssl_error("PEER_DID_NOT_RETURN_A_CERTIFICATE"))
    assert "no certificate" in no_cert and "'ssl.client.auth'" in no_cert
    alert = handshake_failure(ssl_error("TLSV1_ALERT_UNKNOWN_CA"))
    assert "alert: unknown ca" in alert and "'ssl.keystore.location'" in alert
    untrusted = ssl.SSLCertVerificationError(1, "certificate verify failed")
    untrusted.verify_message = "unable to get local issuer certificate"
    assert "'ssl.truststore.location'" in handshake_failure(untrusted)
    gone = "closed the connection during the handshake"
    assert gone in handshake_failure(ssl.SSLEOFError(8, "EOF occurred"))
    assert gone in handshake_failure(ConnectionResetError(104, "reset"))
