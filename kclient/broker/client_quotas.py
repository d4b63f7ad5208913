"""The client quota configuration of a cluster: which (user, client-id) entities have which
quotas (Kafka's ``ClientQuotaControlManager`` + ``ClientQuotasImage`` + the lookup of its
``DefaultQuotaCallback``; KIP-546 for AlterClientQuotas / DescribeClientQuotas).

An entity is a set of (entity type, name) pairs, a name of None being the default
(``<default>``): ``{user: alice}``, ``{user: alice, client-id: app}``, ``{client-id: None}``
... Each holds some of the quota keys ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage`` and ``controller_mutation_rate``. A client (its user principal,
``ANONYMOUS`` without SASL, and its client id) is governed, for each key separately, by the
first entity holding that key in Kafka's order:

1. ``/users/<user>/clients/<client-id>``  2. ``/users/<user>/clients/<default>``
3. ``/users/<user>``  4. ``/users/<default>/clients/<client-id>``
5. ``/users/<default>/clients/<default>``  6. ``/users/<default>``
7. ``/clients/<client-id>``  8. ``/clients/<default>``

and then by the broker's own defaults (``quota.producer.byte.rate`` ... of BrokerConfig,
per client id), else it is unlimited. Clients governed by a user-level entity (3, 6) share
one quota: their usage is measured together (``QuotaKey`` with an empty client id).

One ``ClientQuotas`` per cluster, shared by its brokers (each measures usage itself, as
each Kafka broker does). Any thread: changes swap an immutable mapping under a lock, reads
take no lock. With a log dir the entities are kept in ``<log_dir>/client_quotas.json``,
written atomically, and read back on start-up.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from kclient import errors
from kclient.broker.durable_file import DamagedFileError, read_json, write_json

log = logging.getLogger(__name__)

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: key -> whether its value must be a whole number (Kafka's LONG keys)
QUOTA_KEYS: Mapping[str, bool] = MappingProxyType(
    {
        PRODUCER_BYTE_RATE: True,
        CONSUMER_BYTE_RATE: True,
        REQUEST_PERCENTAGE: False,
        CONTROLLER_MUTATION_RATE: False,
    }
)
#: The user of a connection that did not authenticate (Kafka's ``ANONYMOUS`` principal).
ANONYMOUS = "ANONYMOUS"

QUOTAS_FILE = "client_quotas.json"

#: DescribeClientQuotas match types
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

#: An entity: sorted (entity type, name or None for the default) pairs.
Entity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class QuotaKey:
    """Whose usage is measured together (Kafka's quota metric tags): "" means any."""

    user: str
    client_id: str


def entity(
    user: str | Literal[False] | None = False, client_id: str | Literal[False] | None = False
) -> Entity:
    """An entity from its parts: a name, None for the default, False (the default
    argument) to leave the type out. ``entity(user="alice")``, ``entity(client_id=None)``."""
    parts: list[tuple[str, str | None]] = []
    if client_id is not False:
        parts.append((CLIENT_ID, client_id))
    if user is not False:
        parts.append((USER, user))
    return tuple(parts)


def describe_entity(value: Entity) -> str:
    """``user=alice, client-id=<default>`` (for messages and logs)."""
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in value) or "(empty)"


class QuotaAlterError(Exception):
    """An alteration refused: its Kafka error class and the reason."""

    def __init__(self, error: type[errors.BrokerResponseError], message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
class QuotaOp:
    """One change of an AlterClientQuotas entry: set ``key`` to ``value``, or remove it."""

    key: str
    value: float
    remove: bool = False


class ClientQuotas:
    """The quota entities of a cluster and the broker-wide defaults (see the module doc)."""

    def __init__(
        self,
        defaults: Mapping[str, float] | None = None,
        log_dir: str | None = None,
    ) -> None:
        """``defaults``: per-client quotas from the broker's settings (key -> value),
        applied when no entity holds the key."""
        self.defaults: Mapping[str, float] = MappingProxyType(dict(defaults or {}))
        self._lock = threading.Lock()
        self._path = Path(log_dir) / QUOTAS_FILE if log_dir is not None else None
        self._entities: Mapping[Entity, Mapping[str, float]] = MappingProxyType({})
        self._enabled_keys: frozenset[str] = frozenset(self.defaults)
        #: bumped on every change, so that caches of lookups know to drop what they hold
        self.version = 0
        if self._path is not None:
            self._entities = MappingProxyType(self._load(self._path))
            self._enabled_keys = self._keys_in_use()

    # ---- reading ---------------------------------------------------------------------

    def entities(self) -> Mapping[Entity, Mapping[str, float]]:
        """Every entity with quotas (an immutable snapshot)."""
        return self._entities

    def enabled(self, key: str) -> bool:
        """Whether any client may have a quota for ``key``."""
        return key in self._enabled_keys

    def _keys_in_use(self) -> frozenset[str]:
        keys = set(self.defaults)
        for values in self._entities.values():
            keys.update(values)
        return frozenset(keys)

    def lookup(self, key: str, user: str, client_id: str) -> tuple[QuotaKey, float] | None:
        """The quota of ``key`` for a client and whose usage it is measured with, or None
        (unlimited). Kafka's lookup order (module doc)."""
        found = self._entities
        order: tuple[tuple[str | Literal[False] | None, str | Literal[False] | None, QuotaKey], ...]
        order = (
            (user, client_id, QuotaKey(user, client_id)),
            (user, None, QuotaKey(user, client_id)),
            (user, False, QuotaKey(user, "")),
            (None, client_id, QuotaKey(user, client_id)),
            (None, None, QuotaKey(user, client_id)),
            (None, False, QuotaKey(user, "")),
            (False, client_id, QuotaKey("", client_id)),
            (False, None, QuotaKey("", client_id)),
        )
        for user_part, client_part, measured in order:
            values = found.get(entity(user_part, client_part))
            if values is not None:
                value = values.get(key)
                if value is not None:
                    return measured, value
        default = self.defaults.get(key)
        if default is not None:
            return QuotaKey("", client_id), default
        return None

    def describe(self, components: Sequence[Mapping[str, Any]], strict: bool) -> list[Any]:
        """The entities matching a DescribeClientQuotas filter, with their values.

        Raises QuotaAlterError (INVALID_REQUEST / UNSUPPORTED_VERSION) for a bad filter."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for component in components:
            kind, match_type, match = (
                component["entity_type"],
                component["match_type"],
                component["match"],
            )
            if not kind:
                raise QuotaAlterError(errors.InvalidRequestError, "Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise QuotaAlterError(
                    errors.InvalidRequestError,
                    f"Entity type {kind} cannot appear more than once in the filter.",
                )
            if kind not in (USER, CLIENT_ID, IP):
                raise QuotaAlterError(
                    errors.UnsupportedVersionError, f"Unsupported entity type {kind}"
                )
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaAlterError(
                        errors.InvalidRequestError,
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    )
                exact[kind] = match
            elif match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
                if match is not None:
                    name = "DEFAULT" if match_type == MATCH_DEFAULT else "SPECIFIED"
                    raise QuotaAlterError(
                        errors.InvalidRequestError,
                        f"Request specified MATCH_TYPE_{name}, but also specified a match string.",
                    )
                if match_type == MATCH_DEFAULT:
                    exact[kind] = None
                else:
                    specified.add(kind)
            else:
                raise QuotaAlterError(
                    errors.InvalidRequestError, f"Unknown match type {match_type}"
                )
        kinds = set(exact) | specified
        if IP in kinds and kinds & {USER, CLIENT_ID}:
            raise QuotaAlterError(
                errors.InvalidRequestError,
                "Invalid entity filter component combination. IP filter component should "
                "not be used with user or clientId filter component.",
            )
        out = []
        for ent, values in sorted(self._entities.items(), key=lambda kv: _sort_key(kv[0])):
            parts = dict(ent)
            if strict and len(parts) != len(kinds):
                continue
            if any(k not in parts or parts[k] != name for k, name in exact.items()):
                continue
            if any(k not in parts for k in specified):
                continue
            out.append((ent, dict(values)))
        return out

    # ---- changing --------------------------------------------------------------------

    def alter(
        self, changes: Sequence[tuple[Entity, Sequence[QuotaOp]]], *, validate_only: bool = False
    ) -> list[QuotaAlterError | None]:
        """Apply AlterClientQuotas entries; one result per entry (None: done).

        An entry is applied whole or not at all; a bad entry does not stop the others."""
        results: list[QuotaAlterError | None] = []
        with self._lock:
            updated = {k: dict(v) for k, v in self._entities.items()}
            changed = False
            for ent, ops in changes:
                try:
                    new_values = _altered(ent, ops, updated.get(ent, {}))
                except QuotaAlterError as exc:
                    results.append(exc)
                    continue
                results.append(None)
                if validate_only or new_values == updated.get(ent, {}):
                    continue
                changed = True
                if new_values:
                    updated[ent] = new_values
                else:
                    updated.pop(ent, None)
                log.info("client quotas of %s are now %s", describe_entity(ent), new_values)
            if changed:
                if self._path is not None:
                    self._save(self._path, updated)
                self._entities = MappingProxyType(
                    {k: MappingProxyType(v) for k, v in updated.items()}
                )
                self._enabled_keys = self._keys_in_use()
                self.version += 1
        return results

    def set(
        self,
        ent: Entity,
        values: Mapping[str, float | None],
    ) -> None:
        """Set (a number) or remove (None) quotas of one entity; raises ConfigError for a
        bad entity, key or value (``EmbeddedCluster.set_client_quotas``)."""
        ops = [
            QuotaOp(key, 0.0, remove=True) if value is None else QuotaOp(key, float(value))
            for key, value in values.items()
        ]
        (result,) = self.alter([(ent, ops)])
        if result is not None:
            raise errors.ConfigError(result.message)

    # ---- the file --------------------------------------------------------------------

    @staticmethod
    def _load(path: Path) -> dict[Entity, Mapping[str, float]]:
        if not path.exists():
            return {}
        try:
            stored = read_json(path)
            out: dict[Entity, Mapping[str, float]] = {}
            for item in stored["entities"]:
                ent = tuple(
                    sorted((str(t), None if n is None else str(n)) for t, n in item["entity"])
                )
                out[ent] = MappingProxyType(
                    {str(k): float(v) for k, v in item["quotas"].items() if k in QUOTA_KEYS}
                )
            return out
        except (DamagedFileError, KeyError, TypeError, ValueError) as exc:
            raise errors.ConfigError(
                f"cannot read the client quotas in {path} ({exc}); remove the file to start "
                "without quotas, then set them again (AlterClientQuotas)"
            ) from None

    @staticmethod
    def _save(path: Path, entities: Mapping[Entity, Mapping[str, float]]) -> None:
        write_json(
            path,
            {
                "entities": [
                    {"entity": [list(p) for p in ent], "quotas": dict(values)}
                    for ent, values in sorted(entities.items(), key=lambda kv: _sort_key(kv[0]))
                ]
            },
        )


def _sort_key(ent: Entity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((t, n is not None, n or "") for t, n in ent)


def _altered(ent: Entity, ops: Sequence[QuotaOp], current: Mapping[str, float]) -> dict[str, float]:
    """The values of ``ent`` after ``ops`` (Kafka's checks and messages)."""
    if not ent:
        raise QuotaAlterError(errors.InvalidRequestError, "Invalid empty client quota entity")
    kinds: set[str] = set()
    for kind, name in ent:
        if kind in kinds:
            raise QuotaAlterError(
                errors.InvalidRequestError,
                f"Invalid client quota entity, duplicate entity entry {kind}",
            )
        kinds.add(kind)
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaAlterError(
                errors.InvalidRequestError, f"Unhandled client quota entity type: {kind}"
            )
        if name is not None and not name:
            raise QuotaAlterError(errors.InvalidRequestError, f"Empty {kind} not supported")
    if IP in kinds:
        raise QuotaAlterError(
            errors.InvalidRequestError,
            "ip quotas (connection_creation_rate) are not supported by the embedded broker; "
            "set quotas for users and client ids",
        )
    values = dict(current)
    for op in ops:
        if op.remove:
            values.pop(op.key, None)
            continue
        whole = QUOTA_KEYS.get(op.key)
        if whole is None:
            raise QuotaAlterError(
                errors.InvalidRequestError,
                f"Invalid configuration key {op.key} (known: {', '.join(QUOTA_KEYS)})",
            )
        value = op.value
        if not math.isfinite(value) or value <= 0.0:
            raise QuotaAlterError(
                errors.InvalidRequestError, f"Quota {op.key} must be greater than 0"
            )
        if whole and value != math.floor(value):
            raise QuotaAlterError(errors.InvalidRequestError, f"{op.key} must be an integer")
        if whole and value > 2**63 - 1:
            raise QuotaAlterError(
                errors.InvalidRequestError, f"Proposed value for {op.key} is too large for a LONG."
            )
        values[op.key] = value
    return values
