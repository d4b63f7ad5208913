"""The broker's side of SASL: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677);
GSSAPI is in ``kclient.broker.sasl_gssapi``.

Sans-I/O, written from the RFCs (independently of the client in ``kclient.sasl``, so
that the two must agree with each other and with librdkafka):

* ``SaslServer``: the listener's enabled mechanisms and users. Built once per cluster
  (``BrokerConfig.sasl_server()``), where the SCRAM credentials are derived (PBKDF2 with
  4096 iterations and a random salt per user and mechanism: the expensive part, never
  repeated per connection). Immutable afterwards, so every Processor thread shares it.
* ``PlainExchange`` / ``ScramExchange``: one authentication attempt; ``evaluate`` turns a
  client token into the server's answer or raises ``SaslFailure``.

One connection's state (SaslHandshake, SaslAuthenticate rounds, and with
``connections.max.reauth.ms`` its session's expiry and re-authentication) is a
``SaslSession``, in ``kclient.broker.sasl_session``.

Passwords are compared as UTF-8 bytes without SASLprep, as Kafka's Java code does.
Unknown SCRAM users get a made-up (but stable) salt and fail at the proof, like a wrong
password, so that the exchange does not tell which user names exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from kclient.broker.sasl_gssapi import GssapiAcceptor
    from kclient.broker.sasl_oauth import TokenValidator

__all__ = [
    "ALL_MECHANISMS",
    "DEFAULT_FAILED_AUTHENTICATION_DELAY_MS",
    "MECHANISMS",
    "SCRAM_ITERATIONS",
    "PlainExchange",
    "SaslExchange",
    "SaslFailure",
    "SaslServer",
    "ScramCredential",
    "ScramExchange",
    "loggable_name",
    "scram_credential",
]

#: The mechanisms the embedded broker serves by default, by their ``sasl.mechanism`` names.
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: And with a keytab (``kclient.broker.sasl_gssapi``, the optional ``gssapi`` package).
ALL_MECHANISMS: Final = (*MECHANISMS, "GSSAPI")
#: Iterations of the SCRAM credentials (Kafka's minimum for SCRAM-SHA-256/512).
SCRAM_ITERATIONS: Final = 4096
#: Kafka's ``sasl.server.max.receive.size``: largest frame accepted before authentication.
DEFAULT_MAX_RECEIVE_SIZE: Final = 524288
#: Kafka's ``connection.failed.authentication.delay.ms``: how long the answer to a failed
#: authentication is held back (the connection closes once it is out).
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS: Final = 100

_SCRAM_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_SALT_BYTES = 32
#: RFC 5802 ``printable``: the characters of a nonce (%x21-2B / %x2D-7E).
_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
#: RFC 5802 ``saslname``: "=" only as "=2C" (",") or "=3D" ("=").
_BAD_ESCAPE = re.compile(r"=(?!2C|3D)")
_ESCAPE = re.compile(r"=(2C|3D)")
_LOGGED_NAME_CHARS = 64

PLAIN_REFUSED: Final = "Authentication failed: Invalid username or password"


class SaslFailure(Exception):
    """An authentication attempt failed.

    ``reason`` is for the broker's log (may say "unknown user"); ``client_message`` goes
    to the client in SaslAuthenticate's ``error_message`` (never more specific about
    credentials than "invalid").
    """

    def __init__(self, reason: str, client_message: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.client_message = client_message


class SaslExchange(Protocol):
    """One authentication attempt, server side."""

    mechanism: str
    #: The user the client claims to be, once it said so (for the log lines).
    username: str | None
    #: True once the client has proven who it is.
    complete: bool

    def evaluate(self, token: bytes) -> bytes:
        """The answer to a client token; raises ``SaslFailure``."""
        ...


# ---- PLAIN -------------------------------------------------------------------------------


class PlainExchange:
    """PLAIN: one token ``authzid NUL authcid NUL password``; the answer is empty."""

    mechanism = "PLAIN"

    def __init__(self, passwords: Mapping[str, bytes]) -> None:
        self._passwords = passwords
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("a token after PLAIN completed", PLAIN_REFUSED)
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure(
                f"malformed PLAIN token ({len(parts)} NUL-separated fields, expected 3: "
                "authzid, username, password)",
                "Authentication failed: malformed PLAIN token",
            )
        try:
            authzid, username = parts[0].decode(), parts[1].decode()
        except UnicodeDecodeError:
            raise SaslFailure(
                "the PLAIN username is not UTF-8", "Authentication failed: malformed PLAIN token"
            ) from None
        self.username = username
        if not username:
            raise SaslFailure("empty PLAIN username", PLAIN_REFUSED)
        if authzid and authzid != username:
            raise SaslFailure(
                "the authorization id differs from the username (impersonation is not supported)",
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        expected = self._passwords.get(username)
        # compare even for an unknown user, so that the time taken does not tell
        matches = hmac.compare_digest(parts[2], expected if expected is not None else b"\x00")
        if expected is None:
            raise SaslFailure("unknown user", PLAIN_REFUSED)
        if not matches:
            raise SaslFailure("wrong password", PLAIN_REFUSED)
        self.complete = True
        return b""


# ---- SCRAM -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (RFC 5802 section 3): the salt, the
    iteration count, StoredKey = H(ClientKey) and ServerKey."""

    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def scram_credential(
    mechanism: str, password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> ScramCredential:
    """Derive a SCRAM credential: SaltedPassword = Hi(password, salt, i) (PBKDF2-HMAC),
    ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
    ServerKey = HMAC(SaltedPassword, "Server Key")."""
    hash_name = _SCRAM_HASHES[mechanism]
    if salt is None:
        salt = secrets.token_bytes(_SALT_BYTES)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", hash_name),
    )


def _default_server_nonce() -> str:
    return secrets.token_urlsafe(24)  # URL-safe base64: printable, no ","


class ScramExchange:
    """SCRAM-SHA-256 / SCRAM-SHA-512 without channel binding, server side.

    client-first ``gs2-header n=user,r=cnonce`` -> server-first ``r=cnonce+snonce,s=salt,
    i=iterations`` -> client-final ``c=base64(gs2-header),r=nonce,p=proof`` -> the proof is
    checked against StoredKey -> server-final ``v=ServerSignature``.
    """

    def __init__(
        self,
        mechanism: str,
        credentials: Callable[[str], ScramCredential | None],
        *,
        unknown_user: Callable[[str], ScramCredential],
        server_nonce: Callable[[], str] = _default_server_nonce,
    ) -> None:
        self.mechanism = mechanism
        self._hash = _SCRAM_HASHES[mechanism]
        self._digest_size = hashlib.new(self._hash).digest_size
        self._credentials = credentials
        self._unknown_user = unknown_user
        self._server_nonce = server_nonce
        self.username: str | None = None
        self.complete = False
        self._failed = False
        self._known_user = False
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_nonce = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    @property
    def _refused(self) -> str:
        return (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )

    def _malformed(self, what: str) -> SaslFailure:
        return SaslFailure(f"malformed {what}", f"Authentication failed: malformed {what}")

    def evaluate(self, token: bytes) -> bytes:
        if self._failed or self.complete:
            raise SaslFailure(
                f"a token after the {self.mechanism} exchange ended (a replayed client-final?)",
                self._refused,
            )
        try:
            if self._credential is None:
                return self._client_first(token)
            return self._client_final(token)
        except SaslFailure:
            self._failed = True
            raise

    def _client_first(self, token: bytes) -> bytes:
        what = f"{self.mechanism} client-first message"
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise self._malformed(f"{what} (not UTF-8)") from None
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise self._malformed(f"{what} (no GS2 header)")
        flag, authzid, bare = parts
        if flag.startswith("p="):
            raise SaslFailure(
                f"the client requires channel binding ({flag}), which is not supported",
                f"Authentication failed: channel binding is not supported by {self.mechanism}",
            )
        if flag not in ("n", "y"):
            raise self._malformed(f"{what} (bad GS2 channel binding flag)")
        attributes = bare.split(",")
        if attributes[0].startswith("m="):
            raise self._malformed(f"{what} (mandatory extension m= is not supported)")
        if len(attributes) < 2 or not attributes[0].startswith("n="):
            raise self._malformed(f"{what} (no n=username)")
        if not attributes[1].startswith("r="):
            raise self._malformed(f"{what} (no r=nonce)")
        username = _sasl_name(attributes[0][2:])
        if not username:
            raise self._malformed(f"{what} (bad username)")
        self.username = username
        if authzid and (not authzid.startswith("a=") or _sasl_name(authzid[2:]) != username):
            raise SaslFailure(
                "the authorization id differs from the username",
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        client_nonce = attributes[1][2:]
        if not _NONCE.fullmatch(client_nonce):
            raise self._malformed(f"{what} (bad nonce)")
        credential = self._credentials(username)
        self._known_user = credential is not None
        if credential is None:
            credential = self._unknown_user(username)  # fails at the proof
        server_nonce = self._server_nonce()
        if not _NONCE.fullmatch(server_nonce):
            raise ValueError(f"server nonce {server_nonce!r} has characters RFC 5802 forbids")
        self._credential = credential
        self._gs2_header = f"{flag},{authzid},"
        self._client_nonce = client_nonce
        self._nonce = client_nonce + server_nonce
        self._client_first_bare = bare
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        what = f"{self.mechanism} client-final message"
        credential = self._credential
        assert credential is not None
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise self._malformed(f"{what} (not UTF-8)") from None
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise self._malformed(f"{what} (no p=proof at the end)")
        attributes = without_proof.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("c="):
            raise self._malformed(f"{what} (no c=channel-binding)")
        if not attributes[1].startswith("r="):
            raise self._malformed(f"{what} (no r=nonce)")
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attributes[0][2:] != expected_binding:
            raise SaslFailure(
                "the channel binding (c=) does not match the client-first GS2 header",
                self._refused,
            )
        nonce = attributes[1][2:]
        # librdkafka before 2.6.1 sends its client nonce twice (client nonce + the whole
        # nonce; confluentinc/librdkafka#4895, Debian's kcat has it): that exact form is
        # accepted too (Kafka 3.8.1 and 3.9 accept any suffix match); it still carries
        # this exchange's server nonce, so a replay from another exchange fails
        if nonce != self._nonce and nonce != self._client_nonce + self._nonce:
            raise SaslFailure(
                "the nonce does not match this exchange (a replayed client-final?)",
                self._refused,
            )
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except (binascii.Error, ValueError):
            raise self._malformed(f"{what} (proof is not base64)") from None
        if len(proof) != self._digest_size:
            raise self._malformed(f"{what} (proof of {len(proof)} bytes)")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        proven = hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        )
        if not self._known_user:
            raise SaslFailure("unknown user", self._refused)
        if not proven:
            raise SaslFailure("wrong password (the client proof does not verify)", self._refused)
        self.complete = True
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return b"v=" + base64.b64encode(server_signature)


def _sasl_name(text: str) -> str | None:
    """Decode an RFC 5802 ``saslname`` ("=2C" is ",", "=3D" is "="); None if malformed."""
    if _BAD_ESCAPE.search(text) or "," in text:
        return None
    return _ESCAPE.sub(lambda m: "," if m.group(1) == "2C" else "=", text)


def loggable_name(name: str) -> str:
    """A name from the client as it may appear in a log line: bounded, printable."""
    if len(name) > _LOGGED_NAME_CHARS:
        name = name[:_LOGGED_NAME_CHARS] + f"...({len(name)} chars)"
    return name if name.isprintable() else name.encode("unicode_escape").decode("ascii")


# ---- the listener's users ---------------------------------------------------------------


class SaslServer:
    """Enabled mechanisms and users of one SASL listener, with the SCRAM credentials
    derived once, here. Shared, read-only, by every Processor of a cluster.

    ``connections_max_reauth_ms`` (Kafka's ``connections.max.reauth.ms``): the lifetime
    of an authenticated session, after which the client must re-authenticate (KIP-368);
    0, the default, means sessions never expire. ``failed_authentication_delay_ms``
    (Kafka's ``connection.failed.authentication.delay.ms``): how long the Processors hold
    back the answer to a failed authentication. ``salt`` and ``server_nonce`` are
    injectable for tests (RFC test vectors).
    """

    def __init__(
        self,
        mechanisms: Iterable[str],
        users: Mapping[str, str],
        *,
        max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
        connections_max_reauth_ms: int = 0,
        failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
        iterations: int = SCRAM_ITERATIONS,
        salt: Callable[[str, str], bytes] | None = None,
        server_nonce: Callable[[], str] = _default_server_nonce,
        oauth_validator: TokenValidator | None = None,
        gssapi: GssapiAcceptor | None = None,
    ) -> None:
        self.mechanisms = tuple(mechanisms)
        unknown = [m for m in self.mechanisms if m not in ALL_MECHANISMS]
        if unknown:
            raise ValueError(f"unknown SASL mechanisms {unknown}")
        if ("GSSAPI" in self.mechanisms) != (gssapi is not None):
            raise ValueError("GSSAPI is served with a GssapiAcceptor (its keytab), and only then")
        self._gssapi = gssapi
        if connections_max_reauth_ms < 0:
            raise ValueError(
                f"connections_max_reauth_ms must be >= 0, got {connections_max_reauth_ms}"
            )
        if failed_authentication_delay_ms < 0:
            raise ValueError(
                f"failed_authentication_delay_ms must be >= 0, got {failed_authentication_delay_ms}"
            )
        self.max_receive_size = max_receive_size
        self.connections_max_reauth_ms = connections_max_reauth_ms
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self._server_nonce = server_nonce
        self._iterations = iterations
        self._passwords = {name: password.encode() for name, password in users.items()}
        self._scram: dict[str, dict[str, ScramCredential]] = {
            mechanism: {
                name: scram_credential(
                    mechanism,
                    password,
                    salt=salt(mechanism, name) if salt is not None else None,
                    iterations=iterations,
                )
                for name, password in users.items()
            }
            for mechanism in self.mechanisms
            if mechanism in _SCRAM_HASHES
        }
        #: keys the made-up salts of unknown users (stable while the broker runs)
        self._secret = secrets.token_bytes(32)
        if oauth_validator is None and "OAUTHBEARER" in self.mechanisms:
            from kclient.broker.sasl_oauth import UnsecuredValidator

            oauth_validator = UnsecuredValidator()
        #: OAUTHBEARER's token validator (``kclient.broker.sasl_oauth``)
        self.oauth_validator = oauth_validator

    @property
    def users(self) -> list[str]:
        return sorted(self._passwords)

    def new_exchange(self, mechanism: str) -> SaslExchange:
        """A fresh exchange for one connection (``mechanism`` must be enabled)."""
        if mechanism not in self.mechanisms:
            raise ValueError(f"SASL mechanism {mechanism!r} is not enabled")
        if mechanism == "PLAIN":
            return PlainExchange(self._passwords)
        if mechanism == "OAUTHBEARER":
            from kclient.broker.sasl_oauth import OAuthBearerExchange

            assert self.oauth_validator is not None
            return OAuthBearerExchange(
                self.oauth_validator, max_reauth_ms=self.connections_max_reauth_ms
            )
        if mechanism == "GSSAPI":
            assert self._gssapi is not None
            return self._gssapi.new_exchange(self.max_receive_size)
        credentials = self._scram[mechanism]
        return ScramExchange(
            mechanism,
            credentials.get,
            unknown_user=lambda name: self._unknown_user(mechanism, name),
            server_nonce=self._server_nonce,
        )

    def _unknown_user(self, mechanism: str, name: str) -> ScramCredential:
        """A credential nobody can match, with a salt that is the same every time for
        this name (a random one would tell that the user does not exist)."""
        salt = hmac.digest(self._secret, f"{mechanism}\0{name}".encode(), "sha256")
        return ScramCredential(salt, self._iterations, secrets.token_bytes(64), b"")

    def __repr__(self) -> str:
        return (
            f"SaslServer(mechanisms={self.mechanisms}, users={self.users}, "
            f"oauth_validator={self.oauth_validator!r}, "
            f"connections_max_reauth_ms={self.connections_max_reauth_ms}, "
            f"failed_authentication_delay_ms={self.failed_authentication_delay_ms})"
        )
