"""SASL GSSAPI (Kerberos V5, RFC 4752), client side: what Kafka's ``SaslClientAuthenticator``
does with Java's GSSAPI ``SaslClient`` (``sasl.mechanism=GSSAPI``).

Sans-I/O like the other mechanisms in ``kclient.sasl``, over a ``GssContext`` (the
GSS-API calls; ``KerberosContext`` is the real one, from the optional ``gssapi`` package:
``pip install 'kclient-kafka[gssapi]'``). The exchange, each token one SaslAuthenticate:

1. client: the context's first token (a Kerberos AP-REQ for ``SERVICE/HOST@REALM``, with
   mutual authentication requested); the broker answers with its AP-REP;
2. client: the context is complete; an empty token (RFC 4752 section 3.1);
3. broker: a wrapped 4-byte offer: octet 1 the security layers it supports (bit 1: none,
   2: integrity, 4: confidentiality), octets 2-4 its largest message size;
4. client: a wrapped 4-byte answer choosing no security layer (``01 00 00 00``: with no
   layer the size must be 0), plus the authorization id (empty: the authenticated
   principal itself, which is what Kafka's Java client sends); the broker's empty answer
   ends it.

Credentials (``GssapiCredentials.from_settings``): ``sasl.kerberos.keytab`` and
``sasl.kerberos.principal`` get a ticket from the keytab with MIT krb5's client keytab
(``gss_acquire_cred_from``), into a ticket cache in memory that belongs to this producer
(no ``kinit`` subprocess, the user's own ticket cache untouched); without a keytab, the
default ticket cache (``kinit``) is used. The service is ``sasl.kerberos.service.name``
(default ``kafka``) on the host name the connection was made to, as librdkafka and Java do.
The calls that may talk to the KDC run in a worker thread, which the producer's I/O thread
waits for up to ``socket.connection.setup.timeout.ms`` (``KdcBound``)."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, TypeVar

from kclient.errors import ConfigError, SaslAuthenticationError
from kclient.sasl import parse_jaas_config

__all__ = [
    "SECURITY_LAYER_NONE",
    "GssContext",
    "GssapiCredentials",
    "GssapiMechanism",
    "KerberosContext",
    "security_layer_answer",
    "security_layer_offer",
]

#: RFC 4752: the bit of "no security layer" in the security-layer octet.
SECURITY_LAYER_NONE = 0x01
#: The settings to check when Kerberos fails, for the error messages.
SETTINGS_HINT = (
    "check 'sasl.kerberos.principal', 'sasl.kerberos.keytab' and 'sasl.kerberos.service.name'"
)
_NOT_INSTALLED = (
    "'sasl.mechanism' GSSAPI needs the optional 'gssapi' package (MIT Kerberos's GSS-API): "
    "pip install 'kclient-kafka[gssapi]' (building it needs Debian's libkrb5-dev)"
)
_cache_ids = itertools.count(1)
_T = TypeVar("_T")


def security_layer_offer(message: bytes) -> int:
    """The broker's unwrapped offer (step 3): its largest message size. Raises
    ``SaslAuthenticationError`` unless it is 4 octets offering no security layer."""
    if len(message) != 4:
        raise SaslAuthenticationError(
            f"GSSAPI: the broker's security-layer offer is {len(message)} bytes, not 4"
        )
    if not message[0] & SECURITY_LAYER_NONE:
        raise SaslAuthenticationError(
            f"GSSAPI: the broker requires a security layer (offer 0x{message[0]:02x}); kclient "
            "supports none (Kafka's brokers offer none: run TLS for privacy)"
        )
    return int.from_bytes(message[1:4], "big")


def security_layer_answer(authorization_id: str = "") -> bytes:
    """The client's answer (step 4), before wrapping: no security layer, size 0, the
    authorization id (empty: the authenticated principal)."""
    return bytes((SECURITY_LAYER_NONE, 0, 0, 0)) + authorization_id.encode()


class GssContext(Protocol):
    """The GSS-API calls of one initiating security context."""

    @property
    def complete(self) -> bool: ...

    def step(self, token: bytes | None) -> bytes | None:
        """``gss_init_sec_context``: the next output token (None: nothing to send)."""
        ...

    def wrap(self, message: bytes) -> bytes:
        """``gss_wrap`` without confidentiality."""
        ...

    def unwrap(self, message: bytes) -> bytes:
        """``gss_unwrap``."""
        ...


class GssapiMechanism:
    """One GSSAPI exchange (one connection attempt or re-authentication)."""

    name = "GSSAPI"

    def __init__(self, context: GssContext, describe: str = "") -> None:
        self._context = context
        self._describe = describe or "the broker"
        self._answered = False  # step 4 sent
        #: The broker's largest message size, from its offer.
        self.server_max_size: int | None = None

    def __repr__(self) -> str:
        return f"GssapiMechanism({self._describe})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a SASL GSSAPI exchange holds Kerberos credentials and is not pickled")

    def initial_response(self) -> bytes:
        return self._context.step(None) or b""

    def respond(self, challenge: bytes) -> bytes | None:
        if self._answered:
            if challenge:
                raise SaslAuthenticationError(
                    f"GSSAPI: {len(challenge)} unexpected bytes from the broker after the "
                    "security-layer answer"
                )
            return None
        context = self._context
        if not context.complete:
            token = context.step(challenge)
            return token if token is not None else b""  # complete: step 2's empty token
        self.server_max_size = security_layer_offer(context.unwrap(challenge))
        self._answered = True
        return context.wrap(security_layer_answer())


# ---- the real GSS-API ---------------------------------------------------------------------


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise ConfigError(_NOT_INSTALLED) from None
    return gssapi


def gssapi_installed() -> bool:
    try:
        _gssapi()
    except ConfigError:
        return False
    return True


def explain(error: Exception, target: str, who: str) -> str:
    """A GSS-API failure in words, with the setting to change."""
    text = str(error)
    # MIT's text is "Major (N): ..., Minor (M): what happened": the minor part says it
    _, sep, detail = text.rpartition("Minor (")
    if sep:
        text = detail.partition("): ")[2] or text
    minor = text.lower()
    if "cannot contact any kdc" in minor or "cannot find kdc" in minor:
        return (
            f"GSSAPI: the Kerberos KDC cannot be reached ({text.strip()}); check the KDC in "
            "krb5.conf (KRB5_CONFIG) and that it is running"
        )
    if minor.startswith("server ") and "not found in kerberos database" in minor:
        return (
            f"GSSAPI: the KDC does not know the service {target}; check "
            "'sasl.kerberos.service.name' (the broker's) and that 'bootstrap.servers' names the "
            "broker by the host name in its principal"
        )
    if minor.startswith("client ") and "not found in kerberos database" in minor:
        return (
            f"GSSAPI: the KDC does not know the principal {who} ({text.strip()}); check "
            "'sasl.kerberos.principal' and 'sasl.kerberos.keytab'"
        )
    if (
        "no key table entry" in minor
        or "no credentials" in minor
        or "keytab" in minor
        or "credentials cache" in minor
        or "preauthentication failed" in minor
        or "decrypt integrity check failed" in minor
    ):
        return (
            f"GSSAPI: no Kerberos credentials for {who} ({text.strip()}); {SETTINGS_HINT} "
            "(or run kinit)"
        )
    return f"GSSAPI with {target} as {who} failed: {text.strip()}; {SETTINGS_HINT}"


class KdcBound:
    """Bounds the GSS-API calls that may talk to the KDC (the first token of a context: a
    ticket-granting ticket from the keytab, then the service ticket). libkrb5 1.20 waits
    up to about 50 s for a KDC that accepts connections and never answers; the call runs
    in a worker thread and the producer's I/O thread waits ``timeout_ms`` at most
    (``socket.connection.setup.timeout.ms``: getting the ticket is part of setting the
    connection up). While a worker is still waiting for the KDC, another attempt fails at
    once instead of starting a second one. Any thread."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._started_s = 0.0

    def run(self, call: Callable[[], _T]) -> _T:
        outcome: list[tuple[bool, Any]] = []

        def work() -> None:
            try:
                outcome.append((True, call()))
            except BaseException as exc:  # handed to the waiting thread
                outcome.append((False, exc))

        with self._lock:
            if self._worker is not None and self._worker.is_alive():
                waited_s = time.monotonic() - self._started_s
                raise SaslAuthenticationError(  # an earlier attempt's call still waits
                    f"GSSAPI: the Kerberos KDC did not answer within {self.timeout_ms} ms "
                    f"('socket.connection.setup.timeout.ms') and is still silent after "
                    f"{waited_s:.0f} s; check the KDC in krb5.conf (KRB5_CONFIG) and that it "
                    "is running"
                )
            worker = threading.Thread(target=work, name="kclient-kerberos", daemon=True)
            self._worker, self._started_s = worker, time.monotonic()
        worker.start()
        worker.join(self.timeout_ms / 1000)
        if not outcome:
            raise SaslAuthenticationError(
                f"GSSAPI: the Kerberos KDC did not answer within {self.timeout_ms} ms "
                "('socket.connection.setup.timeout.ms'); check the KDC in krb5.conf "
                "(KRB5_CONFIG) and that it is running"
            )
        ok, value = outcome[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value


class KerberosContext:
    """A ``GssContext`` over the ``gssapi`` package (MIT krb5's GSS-API)."""

    def __init__(
        self,
        credentials: Callable[[], Any],
        service: str,
        host: str,
        who: str,
        kdc: KdcBound | None = None,
    ) -> None:
        gssapi = _gssapi()
        self._credentials = credentials
        self._target = f"{service}/{host}"
        self._name = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        self._who = who
        self._kdc = kdc
        self._context: Any = None
        self._error = gssapi.exceptions.GSSError

    def _first_token(self) -> Any:
        """Credentials (from the keytab: the KDC), the context, its first token (the
        service ticket: the KDC again)."""
        gssapi = _gssapi()
        flags = gssapi.RequirementFlag
        self._context = gssapi.SecurityContext(
            name=self._name,
            creds=self._credentials(),
            usage="initiate",
            flags=flags.mutual_authentication | flags.out_of_sequence_detection,
        )
        return self._context.step(None)

    @property
    def complete(self) -> bool:
        return self._context is not None and bool(self._context.complete)

    def _fail(self, error: Exception) -> NoReturn:
        raise SaslAuthenticationError(explain(error, self._target, self._who)) from None

    def step(self, token: bytes | None) -> bytes | None:
        try:
            if token is None:  # the tickets come from the KDC
                out = self._first_token() if self._kdc is None else self._kdc.run(self._first_token)
            else:
                out = self._context.step(token)
        except self._error as error:
            self._fail(error)
        return bytes(out) if out is not None else None

    def wrap(self, message: bytes) -> bytes:
        try:
            return bytes(self._context.wrap(message, False).message)
        except self._error as error:
            self._fail(error)

    def unwrap(self, message: bytes) -> bytes:
        try:
            return bytes(self._context.unwrap(message).message)
        except self._error as error:
            self._fail(error)


@dataclass(frozen=True)
class GssapiCredentials:
    """``sasl.mechanism=GSSAPI`` and its settings; the Kerberos credentials themselves are
    acquired at the first exchange and kept (their ticket cache is this object's), so
    every connection and re-authentication of a producer shares one TGT."""

    service_name: str = "kafka"
    principal: str | None = None
    keytab: str | None = None
    #: The longest the producer's I/O thread waits for the KDC (``KdcBound``).
    kdc_timeout_ms: int = 10_000
    mechanism: str = field(default="GSSAPI", init=False)
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )
    _acquired: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)
    _kdc: list[KdcBound] = field(default_factory=list, init=False, repr=False, compare=False)
    _kdc_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    @property
    def username(self) -> str:
        """Who authenticates, for messages."""
        return self.principal or "the default Kerberos principal"

    settings_hint = SETTINGS_HINT

    def __reduce__(self) -> NoReturn:
        raise TypeError("GssapiCredentials are not pickled; pass the settings instead")

    def __copy__(self) -> GssapiCredentials:
        return self

    def __deepcopy__(self, memo: object) -> GssapiCredentials:
        return self

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> GssapiCredentials:
        """From the producer's settings: ``sasl.kerberos.*``, or Java's
        ``sasl.jaas.config`` with ``Krb5LoginModule`` (``keyTab``, ``principal``,
        ``serviceName``)."""
        given = [n for n in ("sasl.username", "sasl.password") if values[n] is not None]
        if given:
            raise ConfigError(
                f"{' and '.join(repr(n) for n in given)} given, but 'sasl.mechanism' is GSSAPI, "
                "which authenticates with 'sasl.kerberos.principal' and 'sasl.kerberos.keytab': "
                "leave them out (or set 'sasl.mechanism' to PLAIN or SCRAM-SHA-256/512)"
            )
        service = values["sasl.kerberos.service.name"]
        principal = values["sasl.kerberos.principal"]
        keytab = values["sasl.kerberos.keytab"]
        jaas = values["sasl.jaas.config"]
        if jaas is not None:
            module, options = parse_jaas_config(jaas)
            if not module.endswith("Krb5LoginModule"):
                shown = module if module.endswith("LoginModule") else "an unknown login module"
                raise ConfigError(
                    f"'sasl.jaas.config' uses {shown}, which does not go with 'sasl.mechanism' "
                    "GSSAPI (GSSAPI is Java's default; set 'sasl.mechanism')"
                )
            if options.get("useKeyTab", "false").lower() == "true":
                keytab = keytab or options.get("keyTab")
            principal = principal or options.get("principal")
            service = options.get("serviceName", service)
        return cls.from_settings(
            service, principal, keytab, kdc_timeout_ms=values["socket.connection.setup.timeout.ms"]
        )

    @classmethod
    def from_settings(
        cls,
        service_name: str,
        principal: str | None,
        keytab: str | None,
        *,
        kdc_timeout_ms: int = 10_000,
    ) -> GssapiCredentials:
        if not service_name.strip() or "/" in service_name or "@" in service_name:
            raise ConfigError(
                f"'sasl.kerberos.service.name' must be a plain name such as 'kafka' (the "
                f"first part of the broker's principal kafka/host@REALM), got {service_name!r}"
            )
        if keytab is not None and not os.access(keytab, os.R_OK):
            raise ConfigError(
                f"'sasl.kerberos.keytab' {keytab!r} is not a readable file"
                if os.path.exists(keytab)
                else f"'sasl.kerberos.keytab' {keytab!r} does not exist"
            )
        _gssapi()  # the extra is installed, or a ConfigError saying how
        return cls(service_name.strip(), principal or None, keytab, kdc_timeout_ms)

    def _credentials(self) -> Any:
        with self._lock:
            if self._acquired:
                return self._acquired[0]
            gssapi = _gssapi()
            name = (
                gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
                if self.principal
                else None
            )
            try:
                if self.keytab is not None:
                    store = {
                        "client_keytab": self.keytab,
                        "ccache": f"MEMORY:kclient-{os.getpid()}-{next(_cache_ids)}",
                    }
                    creds = gssapi.Credentials(name=name, usage="initiate", store=store)
                else:
                    creds = gssapi.Credentials(name=name, usage="initiate")
            except gssapi.exceptions.GSSError as error:
                raise SaslAuthenticationError(
                    explain(error, f"{self.service_name}/<broker host>", self.username)
                ) from None
            self._acquired.append(creds)
            return creds

    def new_exchange(self, host: str = "") -> GssapiMechanism:
        """A fresh exchange with the broker at ``host`` (the connection's host name).
        Raises ``SaslAuthenticationError`` when there are no credentials."""
        if not host:
            raise SaslAuthenticationError("GSSAPI: the broker's host name is not known")
        with self._kdc_lock:  # not _lock: a worker may hold that, waiting for the KDC
            if not self._kdc:
                self._kdc.append(KdcBound(self.kdc_timeout_ms))
        context = KerberosContext(
            self._credentials, self.service_name, host, self.username, self._kdc[0]
        )
        return GssapiMechanism(context, f"{self.service_name}/{host}")
