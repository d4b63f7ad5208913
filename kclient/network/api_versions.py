"""Which version of each API to speak to each broker: Kafka's ``ApiVersions`` and
``NodeApiVersions``.

Owned by the thread that owns the ``NetworkClient`` (the producer's Sender thread).

Every new connection first sends an ApiVersionsRequest (``connected``); the answer gives
the broker's range for every API, and a request then uses the highest version kclient,
the broker and the request itself all allow (``latest_usable_version``). A broker that
does not know our ApiVersions version answers UNSUPPORTED_VERSION (as a v0 body) naming
the highest it knows, and the request is sent again at that version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kclient import errors
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey

CLIENT_SOFTWARE_NAME = "kclient"
CLIENT_SOFTWARE_VERSION = "0.1.0"
API_VERSIONS_MAX = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
# First version of each response whose throttle_time_ms the client must honour (KIP-219).
_CLIENT_THROTTLE_SINCE: dict[int, int] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
}


def client_throttle_ms(api_key: int, api_version: int, body: Mapping[str, Any]) -> int:
    """How long the broker asks the client to hold back (0 if this version says nothing)."""
    since = _CLIENT_THROTTLE_SINCE.get(api_key)
    throttle_ms = body.get("throttle_time_ms") or 0
    if since is None or api_version < since or throttle_ms <= 0:
        return 0
    return int(throttle_ms)


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


class NodeApiVersions:
    """The api versions one broker supports (from its ApiVersionsResponse)."""

    def __init__(
        self,
        versions: Mapping[int, tuple[int, int]],
        node_id: int = -1,
        finalized_features: Mapping[str, int] | None = None,
        finalized_features_epoch: int = -1,
    ) -> None:
        self.versions = dict(versions)
        self.node_id = node_id
        #: feature name -> finalized (max) level, from ApiVersions v3+ (KIP-584), e.g.
        #: ``transaction.version``; empty from older brokers
        self.finalized_features = dict(finalized_features or {})
        self.finalized_features_epoch = finalized_features_epoch
        self._usable: dict[tuple[int, int | None, int | None], int] = {}

    @classmethod
    def from_response(cls, body: Mapping[str, Any], node_id: int = -1) -> NodeApiVersions:
        return cls(
            {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]},
            node_id,
            {f["name"]: f["max_version_level"] for f in body.get("finalized_features") or ()},
            body.get("finalized_features_epoch", -1),
        )

    def max_version(self, api_key: int) -> int | None:
        """The broker's highest version of ``api_key`` (None: it does not serve it)."""
        theirs = self.versions.get(api_key)
        return theirs[1] if theirs is not None else None

    def latest_usable_version(
        self, api_key: int, min_allowed: int | None = None, max_allowed: int | None = None
    ) -> int:
        """The highest version kclient, the broker and the request all allow.

        Raises ``UnsupportedVersionError`` naming all three ranges when there is none.
        """
        key = (api_key, min_allowed, max_allowed)
        cached = self._usable.get(key)
        if cached is not None:
            return cached
        ours = _OURS.get(api_key)
        theirs = self.versions.get(api_key)
        if ours is not None and theirs is not None:
            low = max(ours[0], theirs[0], min_allowed if min_allowed is not None else 0)
            high = min(ours[1], theirs[1], max_allowed if max_allowed is not None else ours[1])
            if low <= high:
                self._usable[key] = high
                return high
        raise errors.UnsupportedVersionError(
            self._mismatch(api_key, ours, theirs, min_allowed, max_allowed)
        )

    def _mismatch(
        self,
        api_key: int,
        ours: tuple[int, int] | None,
        theirs: tuple[int, int] | None,
        min_allowed: int | None,
        max_allowed: int | None,
    ) -> str:
        name = api_name(api_key)
        node = f"node {self.node_id}" if self.node_id != -1 else "the broker"
        broker = f"v{theirs[0]}-v{theirs[1]}" if theirs else "no version at all"
        client = f"v{ours[0]}-v{ours[1]}" if ours else "no version at all"
        text = f"{name}: {node} supports {broker}, kclient supports {client}"
        if min_allowed is not None or max_allowed is not None:
            text += f", this request needs v{min_allowed or 0}-v{max_allowed or 'latest'}"
        return text + "; upgrade the broker (or kclient)"

    def __repr__(self) -> str:
        known = sorted(k for k in self.versions if k in _OURS)
        parts = ", ".join(
            f"{api_name(k)}({self.versions[k][0]}-{self.versions[k][1]})" for k in known
        )
        others = len(self.versions) - len(known)
        return f"NodeApiVersions(node {self.node_id}: {parts}, +{others} other apis)"


_OURS: dict[int, tuple[int, int]] = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}


def client_version_range(
    api_key: int, min_allowed: int | None = None, max_allowed: int | None = None
) -> tuple[int, int]:
    """kclient's own version range for an api, narrowed by the request's limits."""
    low, high = SUPPORTED_VERSIONS[ApiKey(api_key)]
    if min_allowed is not None:
        low = max(low, min_allowed)
    if max_allowed is not None:
        high = min(high, max_allowed)
    return low, high


class ApiVersions:
    """Per node: the versions it supports, and the ApiVersions requests still to send."""

    # slots: NetworkClient's C paths read ``to_send`` and ``usable`` in place
    __slots__ = ("_cluster_max", "_named", "_no_check", "_nodes", "to_send", "usable")

    def __init__(self) -> None:
        self._nodes: dict[int, NodeApiVersions] = {}
        self.to_send: dict[int, int] = {}  # node → ApiVersions version to send next
        self._named: set[int] = set()  # nodes whose pending ApiVersions named the cluster
        self._cluster_max = API_VERSIONS_MAX
        """The ApiVersions version new connections start at: ours, or lower once a broker
        said it serves less (a v5 request to a Kafka 3.9 node costs a refusal and a second
        round trip; tansu 0.6 closes the connection instead of refusing)."""
        self._no_check: set[int] = set()  # nodes that dropped such a request: never again
        self.usable: dict[tuple[int, int, int | None, int | None], int] = {}
        """(node, api key, min, max) → what ``latest_usable_version`` answered (read-only
        outside this class; emptied whenever what a node supports changes): the client's
        per-request lookup."""

    def get(self, node_id: int) -> NodeApiVersions | None:
        return self._nodes.get(node_id)

    def remove(self, node_id: int) -> None:
        """The node disconnected: forget what it said."""
        self._nodes.pop(node_id, None)
        self.to_send.pop(node_id, None)
        self.usable.clear()

    def connected(self, node_id: int) -> None:
        """A new connection: ask it for its versions, at our highest ApiVersions version or
        the highest the cluster's last answer served, whichever is lower."""
        self._nodes.pop(node_id, None)
        self.to_send[node_id] = self._cluster_max
        self.usable.clear()

    def pending(self) -> list[tuple[int, int]]:
        """(node, ApiVersions version) for every connection still waiting to ask."""
        return list(self.to_send.items()) if self.to_send else []

    def sent(self, node_id: int) -> None:
        self.to_send.pop(node_id, None)

    def named(self, node_id: int, named: bool) -> None:
        """Whether the ApiVersions request just sent to the node named the cluster."""
        if named:
            self._named.add(node_id)
        else:
            self._named.discard(node_id)

    def named_cluster(self, node_id: int) -> bool:
        """Whether the node's pending ApiVersions request named the cluster."""
        return node_id in self._named

    def skip_cluster_check(self, node_id: int) -> None:
        """The node dropped a connection whose ApiVersions named the cluster: name it no
        more to this node."""
        self._no_check.add(node_id)
        self._named.discard(node_id)

    def request_body(self, cluster_id: str | None = None, node_id: int = -1) -> dict[str, Any]:
        """The ApiVersions request; from v5, the cluster and node the connection is meant
        for (KIP-1242), when both are known and the node has not dropped such a request
        before: a broker of another cluster, or another node of it, answers
        REBOOTSTRAP_REQUIRED."""
        known = cluster_id is not None and node_id >= 0 and node_id not in self._no_check
        return {
            "client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": CLIENT_SOFTWARE_VERSION,
            "cluster_id": cluster_id if known else None,
            "node_id": node_id if known else -1,
        }

    def handle_response(
        self, node_id: int, sent_version: int, body: Mapping[str, Any]
    ) -> NodeApiVersions | None:
        """Record the node's versions and return them; None if we must ask again lower.

        Raises the broker's error (a ``BrokerResponseError``) when the node refuses.
        """
        code = body.get("error_code", 0)
        if code == errors.UnsupportedVersionError.code and sent_version > 0:
            broker_max = 0
            for key in body.get("api_keys") or ():
                if key["api_key"] == ApiKey.API_VERSIONS:
                    broker_max = key["max_version"]
            self.to_send[node_id] = max(0, min(broker_max, sent_version - 1))
            return None
        if code != 0:
            raise errors.for_code(code)(f"ApiVersions v{sent_version} to node {node_id}")
        for key in body.get("api_keys") or ():
            if key["api_key"] == ApiKey.API_VERSIONS:
                self._cluster_max = max(0, min(API_VERSIONS_MAX, key["max_version"]))
        versions = NodeApiVersions.from_response(body, node_id)
        self._nodes[node_id] = versions
        self.usable.clear()
        return versions

    def latest_usable_version(
        self,
        node_id: int,
        api_key: int,
        min_allowed: int | None = None,
        max_allowed: int | None = None,
    ) -> int:
        """The version to use for a request to the node (raises UnsupportedVersionError);
        remembered in ``usable`` until what the node supports changes."""
        versions = self._nodes.get(node_id)
        if versions is not None:
            version = versions.latest_usable_version(api_key, min_allowed, max_allowed)
        else:
            low, version = client_version_range(api_key, min_allowed, max_allowed)
            if low > version:
                raise errors.UnsupportedVersionError(
                    f"{api_name(api_key)}: kclient supports no version in "
                    f"v{min_allowed}-v{max_allowed}"
                )
        self.usable[node_id, api_key, min_allowed, max_allowed] = version
        return version
