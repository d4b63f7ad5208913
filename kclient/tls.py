"""TLS for kclient's sockets: the client's ``KSelector`` and the embedded broker's Processors.

Contexts are built from PEM files (Kafka's ``ssl.*`` settings with type PEM), and every
problem with them is a ``ConfigError`` naming the setting and the file. The I/O helpers
run TLS over non-blocking sockets (``ssl.SSLSocket`` created with
``do_handshake_on_connect=False``):

- ``handshake_step`` advances the handshake and says which readiness it waits for;
- ``recv_into`` returns ``None`` instead of raising when no whole TLS record is there;
- ``send_some`` writes one chunk; after it returned 0 (socket full) the same bytes must be
  passed again, as OpenSSL requires; ``tls_chunks`` cuts a request into such chunks.

Decrypted bytes can wait inside the TLS object where ``select`` does not see them:
callers check ``has_pending`` after reading.
"""

from __future__ import annotations

import os
import selectors
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kclient.errors import ConfigError

#: Kafka's ``security.protocol`` values, for clients and listeners alike: TLS or not,
#: SASL or not.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

__all__ = [
    "SECURITY_PROTOCOLS",
    "WRITE_CHUNK_BYTES",
    "client_context",
    "describe_tls_error",
    "handshake_step",
    "has_pending",
    "recv_into",
    "send_some",
    "server_context",
    "tls_chunks",
]

#: Largest piece handed to one TLS write (four full TLS records).
WRITE_CHUNK_BYTES = 64 * 1024

Buffer = bytes | bytearray | memoryview


# ---- contexts ------------------------------------------------------------------------------


def client_context(
    *,
    truststore_location: str | None = None,
    truststore_certificates: str | None = None,
    keystore_location: str | None = None,
    keystore_certificate_chain: str | None = None,
    keystore_key: str | None = None,
    key_password: str | None = None,
    check_hostname: bool = True,
    certificate_location: str | None = None,
    key_location: str | None = None,
) -> ssl.SSLContext:
    """A client context: trust the given CAs (else the system's), present a client
    certificate when a keystore is given, verify the broker's name when ``check_hostname``
    (Kafka's ``ssl.endpoint.identification.algorithm=https``, the default)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if truststore_location is None and truststore_certificates is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if truststore_location is not None:
        _load_verify(context, "ssl.truststore.location", truststore_location)
    if truststore_certificates is not None:
        try:
            context.load_verify_locations(cadata=truststore_certificates)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"'ssl.truststore.certificates' holds no usable PEM certificate: {exc}"
            ) from exc
    if certificate_location is not None or key_location is not None:
        _load_certificate_and_key(
            context,
            certificate_location,
            key_location,
            key_password,
            other=keystore_location or keystore_certificate_chain or keystore_key,
        )
        return context
    _load_keystore(
        context, keystore_location, keystore_certificate_chain, keystore_key, key_password
    )
    return context


def _load_certificate_and_key(
    context: ssl.SSLContext,
    certificate: str | None,
    key: str | None,
    password: str | None,
    other: str | None,
) -> None:
    """librdkafka's form: the client certificate and its private key in two PEM files."""
    if certificate is None or key is None:
        raise ConfigError("'ssl.certificate.location' and 'ssl.key.location' go together: set both")
    if other is not None:
        raise ConfigError(
            "set 'ssl.certificate.location' and 'ssl.key.location' or a keystore "
            "('ssl.keystore.*'), not both"
        )
    cert_path = _readable_file("ssl.certificate.location", certificate)
    key_path = _readable_file("ssl.key.location", key)
    try:
        context.load_cert_chain(cert_path, key_path, password=_password(password))
    except ssl.SSLError as exc:
        encrypted = b"ENCRYPTED" in Path(key_path).read_bytes()
        what = f"'ssl.certificate.location' {certificate!r} / 'ssl.key.location' {key!r}"
        raise ConfigError(_keystore_message(what, exc, encrypted)) from exc


def server_context(
    *,
    keystore_location: str,
    key_password: str | None = None,
    truststore_location: str | None = None,
    client_auth: str = "none",
) -> ssl.SSLContext:
    """A broker listener's context. ``client_auth`` is Kafka's ``ssl.client.auth``:
    ``none``, ``requested`` (a client certificate is checked if sent) or ``required``."""
    if client_auth not in ("none", "requested", "required"):
        raise ConfigError(
            f"'ssl.client.auth' must be none, requested or required, got {client_auth!r}"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(context, keystore_location, None, None, key_password)
    if client_auth != "none":
        if truststore_location is None:
            raise ConfigError(
                f"'ssl.client.auth={client_auth}' needs 'ssl.truststore.location' "
                "(the CA certificates that signed the client certificates)"
            )
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    if truststore_location is not None:
        _load_verify(context, "ssl.truststore.location", truststore_location)
    return context


def _readable_file(setting: str, location: str) -> str:
    path = Path(location)
    if path.is_dir():
        raise ConfigError(f"'{setting}' is {location!r}: a directory; give a PEM file")
    if not path.is_file():
        raise ConfigError(f"'{setting}' is {location!r}: no such file")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"'{setting}' is {location!r}: cannot read it ({exc.strerror})") from exc
    return str(path)


def _load_verify(context: ssl.SSLContext, setting: str, location: str) -> None:
    try:
        context.load_verify_locations(cafile=_readable_file(setting, location))
    except ssl.SSLError as exc:
        raise ConfigError(
            f"'{setting}' {location!r} holds no usable PEM certificate ({exc.reason or exc})"
        ) from exc


def _load_keystore(
    context: ssl.SSLContext,
    location: str | None,
    chain: str | None,
    key: str | None,
    password: str | None,
) -> None:
    if (chain is None) != (key is None):
        raise ConfigError(
            "'ssl.keystore.certificate.chain' and 'ssl.keystore.key' go together: set both"
        )
    if location is not None and chain is not None:
        raise ConfigError(
            "set 'ssl.keystore.location' or 'ssl.keystore.certificate.chain' and "
            "'ssl.keystore.key', not both"
        )
    if chain is not None and key is not None:
        _load_inline_keystore(context, chain, key, password)
        return
    if location is None:
        if password is not None:
            raise ConfigError("'ssl.key.password' is set but there is no keystore to unlock")
        return
    path = _readable_file("ssl.keystore.location", location)
    try:
        context.load_cert_chain(path, password=_password(password))
    except ssl.SSLError as exc:
        encrypted = b"ENCRYPTED" in Path(path).read_bytes()
        what = f"'ssl.keystore.location' {location!r}"
        raise ConfigError(_keystore_message(what, exc, encrypted)) from exc


def _load_inline_keystore(
    context: ssl.SSLContext, chain: str, key: str, password: str | None
) -> None:
    # The ssl module loads certificates and keys from files only: a private temporary one.
    descriptor, path = tempfile.mkstemp(prefix="kclient-keystore-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=_password(password))
    except ssl.SSLError as exc:
        what = "'ssl.keystore.certificate.chain' / 'ssl.keystore.key'"
        raise ConfigError(_keystore_message(what, exc, "ENCRYPTED" in key)) from exc
    finally:
        os.unlink(path)


def _password(password: str | None) -> str:
    # A callable-less empty password makes OpenSSL fail instead of prompting on a terminal.
    return password if password is not None else ""


def _keystore_message(what: str, exc: ssl.SSLError, encrypted: bool) -> str:
    if encrypted:
        return f"{what}: the private key is encrypted and 'ssl.key.password' does not open it"
    return (
        f"{what}: needs a PEM private key and its certificate chain ({exc.reason or exc}); "
        "JKS and PKCS12 keystores must be converted to PEM first"
    )


# ---- non-blocking I/O ----------------------------------------------------------------------


def handshake_step(sock: ssl.SSLSocket) -> int:
    """Advance the handshake: 0 once complete, else the ``selectors`` event it waits for.
    Raises ``ssl.SSLError`` (an ``OSError``) when it fails."""
    try:
        sock.do_handshake()
    except ssl.SSLWantReadError:
        return selectors.EVENT_READ
    except ssl.SSLWantWriteError:
        return selectors.EVENT_WRITE
    except ConnectionResetError as exc:  # a plaintext listener resets on our ClientHello
        raise ssl.SSLEOFError(exc.errno, "connection reset during the TLS handshake") from exc
    return 0


def recv_into(sock: ssl.SSLSocket, view: memoryview) -> int | None:
    """Decrypted bytes read into ``view``: 0 when the peer closed, None when no whole TLS
    record has arrived yet."""
    try:
        return sock.recv_into(view)
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return None


def send_some(sock: ssl.SSLSocket, chunk: Buffer) -> int:
    """Write ``chunk`` (at most ``WRITE_CHUNK_BYTES``): the bytes taken, 0 when the socket
    is full, in which case the next call must pass the same chunk again."""
    try:
        return sock.send(chunk)
    except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
        return 0


def has_pending(sock: object) -> bool:
    """Whether decrypted bytes wait inside the TLS object (``select`` cannot see them)."""
    return isinstance(sock, ssl.SSLSocket) and sock.pending() > 0


def tls_chunks(buffers: Sequence[Buffer]) -> list[Buffer]:
    """The buffers regrouped into chunks of at most ``WRITE_CHUNK_BYTES`` (small ones
    joined, so that a request is not cut into many tiny TLS records)."""
    chunks: list[Buffer] = []
    pending: list[Buffer] = []
    pending_size = 0
    for buffer in buffers:
        view = memoryview(buffer).cast("B")
        offset = 0
        while offset < len(view):
            take = min(len(view) - offset, WRITE_CHUNK_BYTES - pending_size)
            pending.append(view[offset : offset + take])
            pending_size += take
            offset += take
            if pending_size == WRITE_CHUNK_BYTES:
                chunks.append(b"".join(pending))
                pending, pending_size = [], 0
    if pending:
        chunks.append(b"".join(pending))
    return chunks


def describe_tls_error(exc: ssl.SSLError) -> str:
    """A short reason for a failed TLS exchange, with the setting that usually fixes it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or exc.reason or str(exc)
        if "hostname" in detail.lower() or "ip address mismatch" in detail.lower():
            return (
                f"TLS handshake failed: the broker's certificate does not match its address "
                f"({detail}); fix the certificate, or set "
                "'ssl.endpoint.identification.algorithm' to '' to skip the name check"
            )
        return (
            f"TLS handshake failed: certificate verify failed ({detail}); "
            "check 'ssl.truststore.location' (the CA that signed the broker's certificate)"
        )
    reason = getattr(exc, "reason", None) or str(exc)
    if "CERTIFICATE_REQUIRED" in reason:
        return (
            f"the broker requires a client certificate ({reason}): set "
            "'ssl.keystore.location' (or 'ssl.keystore.certificate.chain' and 'ssl.keystore.key')"
        )
    if "ALERT_BAD_CERTIFICATE" in reason or "ALERT_UNKNOWN_CA" in reason:
        return (
            f"the broker refused our client certificate ({reason}): check "
            "'ssl.keystore.location' (a certificate signed by a CA the broker trusts)"
        )
    if isinstance(exc, ssl.SSLEOFError) or reason == "UNEXPECTED_EOF_WHILE_READING":
        return (
            "the broker closed the connection in the middle of TLS: is it a PLAINTEXT "
            "listener (check 'security.protocol'), or does it require a client certificate "
            "(check 'ssl.keystore.location')?"
        )
    if reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
        return (
            f"TLS handshake failed ({reason}): is this a PLAINTEXT listener? "
            "check 'security.protocol'"
        )
    return f"TLS failed ({reason})"
