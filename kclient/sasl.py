"""SASL client mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).

Sans-I/O: a mechanism turns the server's challenges into the client's responses; the
``NetworkClient`` carries them in SaslAuthenticate requests after a SaslHandshake. One
mechanism object per connection attempt (it keeps the nonce and the expected server
signature). Passwords are sent as UTF-8 without SASLprep, as Kafka's Java client does.

``SaslCredentials`` comes from the producer settings: ``sasl.mechanism`` plus either
``sasl.username``/``sasl.password`` (librdkafka's names) or Java's ``sasl.jaas.config``
(``...PlainLoginModule required username="u" password="p";``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

from kclient.errors import ConfigError, SaslAuthenticationError

__all__ = [
    "MECHANISMS",
    "Credentials",
    "PlainMechanism",
    "SaslCredentials",
    "SaslMechanism",
    "ScramMechanism",
    "parse_jaas_config",
    "shorten",
]

#: The mechanisms kclient speaks, by Kafka's ``sasl.mechanism`` name (GSSAPI: in
#: ``kclient.sasl_gssapi``, with the optional ``gssapi`` package).
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


class SaslMechanism(Protocol):
    """One SASL exchange, client side."""

    name: str

    def initial_response(self) -> bytes:
        """The client's first message."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The answer to a server message; None once the exchange is complete.
        Raises ``SaslAuthenticationError`` if the server's message is wrong."""
        ...


class Credentials(Protocol):
    """What a connection authenticates with: ``SaslCredentials`` (PLAIN, SCRAM),
    ``kclient.oauth.OAuthBearerCredentials`` (OAUTHBEARER) or
    ``kclient.sasl_gssapi.GssapiCredentials`` (GSSAPI)."""

    @property
    def mechanism(self) -> str: ...

    @property
    def username(self) -> str:
        """Who authenticates, for log lines and errors."""
        ...

    @property
    def settings_hint(self) -> str:
        """What to check when the broker refuses ("check 'sasl.username' ...")."""
        ...

    def new_exchange(self, host: str = "") -> SaslMechanism:
        """A fresh exchange for one connection attempt to the broker at ``host``; raises
        ``SaslAuthenticationError`` if none can start."""
        ...


def _not_pickled(what: str) -> NoReturn:
    raise TypeError(f"{what} holds a password and is not pickled; pass the settings instead")


class PlainMechanism:
    """PLAIN: ``authzid NUL authcid NUL password``, one message, nothing to check after."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\x00" + username.encode() + b"\x00" + password.encode()

    def __repr__(self) -> str:
        return "PlainMechanism()"

    def __reduce__(self) -> NoReturn:
        _not_pickled("a SASL PLAIN exchange")

    def initial_response(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        return None  # the broker's empty answer ends it


_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramMechanism:
    """SCRAM-SHA-256 / SCRAM-SHA-512 without channel binding (``n,,``).

    client-first ``n,,n=<user>,r=<nonce>``; server-first ``r=<nonce+server>,s=<salt>,
    i=<iterations>``; client-final ``c=biws,r=<nonce>,p=<proof>``; server-final
    ``v=<signature>``, which must match, or the server does not know the password.
    """

    #: Fewer iterations make the password cheap to brute-force from a captured exchange.
    MIN_ITERATIONS = 4096
    #: More would let a broker make the client hash for as long as it likes (PBKDF2 runs
    #: on the producer's I/O thread). Kafka stores SCRAM credentials with 4096 to 16384.
    MAX_ITERATIONS = 16384

    def __init__(
        self, name: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        if name not in _HASHES:
            raise ConfigError(f"unknown SCRAM mechanism {name!r}")
        self.name = name
        self._hash = _HASHES[name]
        self._password = password.encode()
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        escaped = username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={escaped},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._done = False

    def __repr__(self) -> str:
        return f"ScramMechanism({self.name})"

    def __reduce__(self) -> NoReturn:
        _not_pickled(f"a SASL {self.name} exchange")

    def initial_response(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._done:
            return None
        if self._server_signature is None:
            return self._client_final(challenge)
        self._verify_server_final(challenge)
        return None

    def _client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attributes = _attributes(text)
        if "e" in attributes:
            raise SaslAuthenticationError(
                f"{self.name}: the broker refused: {shorten(attributes['e'])}"
            )
        nonce, salt, iterations = attributes.get("r"), attributes.get("s"), attributes.get("i")
        if (
            nonce is None
            or salt is None
            or iterations is None
            or not (iterations.isascii() and iterations.isdigit())
        ):
            raise SaslAuthenticationError(
                f"{self.name}: malformed server-first message {shorten(text)!r}"
            )
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise SaslAuthenticationError(
                f"{self.name}: the broker's nonce does not extend ours (a replayed exchange?)"
            )
        count = int(iterations) if len(iterations) <= 9 else self.MAX_ITERATIONS + 1
        if count < self.MIN_ITERATIONS:
            raise SaslAuthenticationError(
                f"{self.name}: the broker asks for {count} iterations, fewer than "
                f"{self.MIN_ITERATIONS}"
            )
        if count > self.MAX_ITERATIONS:
            raise SaslAuthenticationError(
                f"{self.name}: the broker asks for {shorten(iterations)} iterations, more than "
                f"{self.MAX_ITERATIONS} (Kafka's most): refused, as hashing them would stall "
                "the producer"
            )
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
        except binascii.Error:
            raise SaslAuthenticationError(
                f"{self.name}: malformed server-first message (the salt is not base64)"
            ) from None
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt_bytes, count)
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: bytes) -> None:
        attributes = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in attributes:
            raise SaslAuthenticationError(
                f"{self.name}: the broker refused: {shorten(attributes['e'])}"
            )
        expected = self._server_signature
        signature = attributes.get("v")
        try:
            received = base64.b64decode(signature, validate=True) if signature else None
        except binascii.Error:
            received = None
        if expected is None or received is None or not hmac.compare_digest(received, expected):
            raise SaslAuthenticationError(
                f"{self.name}: the broker's signature is wrong: it does not know the password "
                "(is this the broker you meant to reach?)"
            )
        self._done = True


def shorten(text: str, limit: int = 200) -> str:
    """A broker's text as it may appear in an error: bounded (it comes from the wire)."""
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


_JAAS_MODULE = re.compile(
    r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?);?\s*$", re.S
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": ("OAUTHBEARER",),
    "com.sun.security.auth.module.Krb5LoginModule": ("GSSAPI",),
}


def parse_jaas_config(text: str) -> tuple[str, dict[str, str]]:
    """Java's ``sasl.jaas.config``: (login module, options)."""
    match = _JAAS_MODULE.match(text)
    if match is None:
        raise ConfigError(
            "'sasl.jaas.config' must look like "
            '\'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
            'password="p";\''
        )
    options = {
        m.group(1): (
            m.group(2).replace('\\"', '"').replace("\\\\", "\\")
            if m.group(2) is not None
            else m.group(3)
        )
        for m in _JAAS_OPTION.finditer(match.group(3))
    }
    return match.group(1), options


@dataclass(frozen=True)
class SaslCredentials:
    """The mechanism and the user to authenticate as (the password never shows in repr,
    and the object is not pickled)."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def __reduce__(self) -> NoReturn:
        _not_pickled("SaslCredentials")

    def __copy__(self) -> SaslCredentials:
        return self  # immutable

    def __deepcopy__(self, memo: object) -> SaslCredentials:
        return self

    @classmethod
    def from_settings(
        cls,
        mechanism: str,
        username: str | None,
        password: str | None,
        jaas_config: str | None,
    ) -> SaslCredentials:
        if mechanism == "GSSAPI":
            raise ConfigError(
                "a user and password were given, but 'sasl.mechanism' is GSSAPI (GSSAPI is "
                "Java's default; set 'sasl.mechanism' to PLAIN or SCRAM-SHA-256/512, or use "
                "'sasl.kerberos.principal' and 'sasl.kerberos.keytab' for Kerberos)"
            )
        if mechanism not in MECHANISMS:
            raise ConfigError(
                f"'sasl.mechanism' {mechanism!r} is not supported; use one of "
                f"{', '.join(MECHANISMS)}"
            )
        if mechanism == "OAUTHBEARER":
            raise ConfigError("OAUTHBEARER takes a token: see kclient.oauth")
        if jaas_config is not None:
            if username is not None or password is not None:
                raise ConfigError(
                    "set 'sasl.jaas.config' or 'sasl.username' and 'sasl.password', not both"
                )
            module, options = parse_jaas_config(jaas_config)
            wanted = _LOGIN_MODULES.get(module)
            if wanted is None or mechanism not in wanted:
                # the module's name is shown only if it looks like one (not, say, a password)
                shown = module if module.endswith("LoginModule") else "an unknown login module"
                raise ConfigError(
                    f"'sasl.jaas.config' uses {shown}, which does not go with "
                    f"'sasl.mechanism' {mechanism}"
                )
            username, password = options.get("username"), options.get("password")
            if username is None or password is None:
                raise ConfigError(
                    '\'sasl.jaas.config\' needs both username="..." and password="..."'
                )
        if not username or password is None:
            raise ConfigError(
                f"SASL {mechanism} needs 'sasl.username' and 'sasl.password' "
                "(or Java's 'sasl.jaas.config')"
            )
        return cls(mechanism, username, password)

    settings_hint = "check 'sasl.username' and 'sasl.password' (or 'sasl.jaas.config')"

    def new_exchange(self, host: str = "") -> SaslMechanism:
        """A fresh mechanism object for one connection attempt (any ``host``)."""
        if self.mechanism == "PLAIN":
            return PlainMechanism(self.username, self.password)
        return ScramMechanism(self.mechanism, self.username, self.password)
