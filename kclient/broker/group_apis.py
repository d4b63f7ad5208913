"""GroupApis: the consumer group requests of ``KafkaApis``, every version clients send.

FindCoordinator (v0-v6; one key, or a batch of keys from v4), JoinGroup (v0-v9),
SyncGroup (v0-v5), Heartbeat (v0-v4), LeaveGroup (v0-v5; one member, or a batch from
v3), OffsetCommit (v0-v9), OffsetFetch (v0-v9; several groups from v8), ListGroups
(v0-v5), DescribeGroups (v0-v6), DeleteGroups (v0-v2) and OffsetDelete (v0). Each
handler turns the request body into a call of the broker's ``GroupCoordinator`` and its
result into the response body of the request's version; no group logic lives here.
JoinGroup and SyncGroup answer later, from whichever thread completes the rebalance.

The coordinator of a group is the broker ``consumer_offsets.coordinator_for`` names
among the live brokers; that of a transactional id (key type 1) is chosen by the same
hash (``txn_state``). Called on request handler threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.consumer_offsets import TopicPartition, coordinator_for
from kclient.broker.controller import Controller
from kclient.broker.group_coordinator import GroupConfig, GroupCoordinator, JoinRequest
from kclient.broker.group_metadata import JoinGroupResult, SyncGroupResult
from kclient.broker.offset_metadata_manager import offsets_to_commit, partition_errors
from kclient.broker.request_channel import Request
from kclient.protocol import ApiKey
from kclient.protocol.messages import find_coordinator

_UNKNOWN_TOPIC = errors.UnknownTopicOrPartitionError.code
_UNSTABLE = errors.UnstableOffsetCommitError.code
#: DescribeGroups v3+ ``authorized_operations`` with no authorizer: READ, DELETE, DESCRIBE.
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        max_size=config.group_max_size,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
    )


def coordinator_node(controller: Controller, group_id: str) -> int:
    """The live broker coordinating ``group_id`` (-1 when none is live)."""
    with controller.lock:
        return coordinator_for(group_id, controller.broker_ids, controller.live)


class GroupApis:
    """Handlers of the group APIs of one broker."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        controller: Controller,
        send: Callable[[Request, dict[str, Any]], None],
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.coordinator = coordinator
        self.controller = controller
        self._send = send
        self._monotonic_ns = monotonic_ns
        #: (group, partitions) -> those an open transaction has offsets of (``txn_offsets``)
        self.unstable_offsets: Callable[[str, list[TopicPartition]], set[TopicPartition]] = (
            lambda group_id, partitions: set()
        )

    def handlers(self) -> dict[int, Callable[[Request], None]]:
        return {
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.JOIN_GROUP: self.handle_join_group,
            ApiKey.SYNC_GROUP: self.handle_sync_group,
            ApiKey.HEARTBEAT: self.handle_heartbeat,
            ApiKey.LEAVE_GROUP: self.handle_leave_group,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
            ApiKey.LIST_GROUPS: self.handle_list_groups,
            ApiKey.DESCRIBE_GROUPS: self.handle_describe_groups,
            ApiKey.DELETE_GROUPS: self.handle_delete_groups,
            ApiKey.OFFSET_DELETE: self.handle_offset_delete,
        }

    def _reply(self, request: Request, body: dict[str, Any], errors_in_it: int = 0) -> None:
        request.error_count += errors_in_it
        if request.api_local_complete_time_ns >= 0:  # answered later than handled
            request.api_remote_complete_time_ns = self._monotonic_ns()
        self._send(request, body)

    # ---- FindCoordinator ---------------------------------------------------------------

    def handle_find_coordinator(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        key_type = body.get("key_type", find_coordinator.GROUP)
        keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
        found = [self._coordinator(key, key_type) for key in keys]
        failed = sum(1 for f in found if f["error_code"])
        if version >= 4:
            self._reply(request, {"coordinators": found}, failed)
        else:
            answer = found[0]
            del answer["key"]
            self._reply(request, answer, failed)

    def _coordinator(self, key: str, key_type: int) -> dict[str, Any]:
        out: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1}
        if key_type not in (find_coordinator.GROUP, find_coordinator.TRANSACTION):
            return out | {
                "error_code": errors.InvalidRequestError.code,
                "error_message": f"coordinator key type {key_type} is not supported "
                "(0: consumer groups, 1: transactions; share groups are not)",
            }
        node = coordinator_node(self.controller, key)
        endpoint = self.controller.endpoints.get(node) if node >= 0 else None
        if endpoint is None:
            return out | {
                "error_code": errors.CoordinatorNotAvailableError.code,
                "error_message": "no broker is live",
            }
        return out | {
            "error_code": 0,
            "error_message": None,
            "node_id": endpoint.node_id,
            "host": endpoint.host,
            "port": endpoint.port,
        }

    # ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup --------------------------------

    def handle_join_group(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        session_timeout_ms = body["session_timeout_ms"]
        join = JoinRequest(
            group_id=body["group_id"],
            member_id=body["member_id"],
            group_instance_id=body.get("group_instance_id"),
            client_id=request.header.client_id or "",
            client_host="/" + request.client_address.rpartition(":")[0],
            session_timeout_ms=session_timeout_ms,
            # v0 has no rebalance timeout: the session timeout stands for it
            rebalance_timeout_ms=body["rebalance_timeout_ms"]
            if version >= 1
            else session_timeout_ms,
            protocol_type=body["protocol_type"],
            protocols=[(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
            require_known_member_id=version >= 4,
            support_skip_assignment=version >= 9,
            reason=body.get("reason"),
        )

        def answer(result: JoinGroupResult) -> None:
            protocol_name = result.protocol_name
            if version < 7 and protocol_name is None:
                protocol_name = ""  # nullable from v7 only
            self._reply(
                request,
                {
                    "error_code": result.error,
                    "generation_id": result.generation_id,
                    "protocol_type": result.protocol_type,
                    "protocol_name": protocol_name,
                    "leader": result.leader_id,
                    "skip_assignment": result.skip_assignment,
                    "member_id": result.member_id,
                    "members": [
                        {"member_id": m, "group_instance_id": i, "metadata": data}
                        for m, i, data in result.members
                    ],
                },
                1 if result.error else 0,
            )

        self.coordinator.join_group(join, answer)

    def handle_sync_group(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version

        def answer(result: SyncGroupResult) -> None:
            self._reply(
                request,
                {
                    "error_code": result.error,
                    "protocol_type": result.protocol_type,
                    "protocol_name": result.protocol_name,
                    "assignment": result.assignment,
                },
                1 if result.error else 0,
            )

        protocol_type = body.get("protocol_type")
        protocol_name = body.get("protocol_name")
        if version >= 5 and (protocol_type is None or protocol_name is None):
            # both are required from v5 (KIP-559)
            answer(SyncGroupResult(errors.InconsistentGroupProtocolError.code))
            return
        self.coordinator.sync_group(
            body["group_id"],
            body["generation_id"],
            body["member_id"],
            group_instance_id=body.get("group_instance_id"),
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments={a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]},
            callback=answer,
        )

    def handle_heartbeat(self, request: Request) -> None:
        body = request.parsed_body()
        error = self.coordinator.heartbeat(
            body["group_id"],
            body["generation_id"],
            body["member_id"],
            body.get("group_instance_id"),
        )
        self._reply(request, {"error_code": error}, 1 if error else 0)

    def handle_leave_group(self, request: Request) -> None:
        body = request.parsed_body()
        if request.header.api_version < 3:
            error, results = self.coordinator.leave_group(
                body["group_id"], [(body["member_id"], None, None)]
            )
            error = error or (results[0] if results else 0)
            self._reply(request, {"error_code": error}, 1 if error else 0)
            return
        leaving = [
            (m["member_id"], m.get("group_instance_id"), m.get("reason")) for m in body["members"]
        ]
        error, results = self.coordinator.leave_group(body["group_id"], leaving)
        members = [
            {"member_id": m, "group_instance_id": i, "error_code": code}
            for (m, i, _), code in zip(leaving, results, strict=False)
        ]
        failed = (1 if error else 0) + sum(1 for code in results if code)
        self._reply(request, {"error_code": error, "members": members}, failed)

    # ---- OffsetCommit / OffsetFetch / OffsetDelete -------------------------------------

    def _partition_error(self, topic: str, index: int) -> int:
        t = self.controller.topic(topic)
        return 0 if t is not None and 0 <= index < len(t.partitions) else _UNKNOWN_TOPIC

    def handle_offset_commit(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        now_ms = self.coordinator.time_ms()

        def commit_time_ms(partition: Mapping[str, Any]) -> int:
            stamp = partition.get("commit_timestamp", -1) if version == 1 else -1
            return int(stamp) if stamp >= 0 else now_ms

        codes, valid = offsets_to_commit(
            body["topics"],
            self._partition_error,
            self.coordinator.config.offset_metadata_max_bytes,
            commit_time_ms,
        )
        if valid:
            codes.update(
                self.coordinator.offset_manager.commit(
                    body["group_id"],
                    body.get("generation_id_or_member_epoch", -1),
                    body.get("member_id", ""),
                    body.get("group_instance_id"),
                    valid,
                )
            )
        topics = partition_errors(body["topics"], codes)
        self._reply(request, {"topics": topics}, sum(1 for c in codes.values() if c))

    def handle_offset_fetch(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        if version >= 8:
            groups = []
            for g in body["groups"]:
                error, topics = self._fetch_group(
                    g["group_id"], g["topics"], False, body.get("require_stable", False)
                )
                groups.append({"group_id": g["group_id"], "topics": topics, "error_code": error})
            self._reply(request, {"groups": groups}, sum(1 for g in groups if g["error_code"]))
            return
        # before v2 a group-level error can only be told per partition
        error, topics = self._fetch_group(
            body["group_id"], body["topics"], version < 2, body.get("require_stable", False)
        )
        self._reply(request, {"error_code": error, "topics": topics}, 1 if error else 0)

    def _fetch_group(
        self,
        group_id: str,
        wanted: list[dict[str, Any]] | None,
        error_in_rows: bool,
        require_stable: bool = False,
    ) -> tuple[int, list[dict[str, Any]]]:
        partitions = (
            None
            if wanted is None
            else [(t["name"], index) for t in wanted for index in t["partition_indexes"]]
        )
        error, offsets = self.coordinator.offset_manager.fetch(group_id, partitions)
        if error and not (error_in_rows and partitions):
            return error, []
        # KIP-447: a partition an open transaction has offsets of is not stable yet
        unstable = self.unstable_offsets(group_id, list(offsets)) if require_stable else set()
        rows: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), committed in (
            sorted(offsets.items())
            if partitions is None
            else [(tp, offsets.get(tp)) for tp in partitions]
        ):
            if (topic, index) in unstable:
                committed = None
            rows.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "committed_offset": committed.offset if committed else -1,
                    "committed_leader_epoch": committed.leader_epoch if committed else -1,
                    "metadata": committed.metadata if committed else "",
                    "error_code": _UNSTABLE if (topic, index) in unstable else error,
                }
            )
        return error, [{"name": topic, "partitions": parts} for topic, parts in rows.items()]

    def handle_offset_delete(self, request: Request) -> None:
        body = request.parsed_body()
        codes: dict[TopicPartition, int] = {}
        for t in body["topics"]:
            for p in t["partitions"]:
                tp = (t["name"], p["partition_index"])
                codes[tp] = self._partition_error(*tp)
        error, results = self.coordinator.offset_manager.delete(
            body["group_id"], [tp for tp, code in codes.items() if not code]
        )
        if error:
            self._reply(request, {"error_code": error, "topics": []}, 1)
            return
        codes.update(results)
        topics = [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": codes[t["name"], p["partition_index"]],
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
        self._reply(
            request, {"error_code": 0, "topics": topics}, sum(1 for c in codes.values() if c)
        )

    # ---- ListGroups / DescribeGroups / DeleteGroups ------------------------------------

    def handle_list_groups(self, request: Request) -> None:
        body = request.parsed_body()
        error, groups = self.coordinator.list_groups(
            body.get("states_filter") or (), body.get("types_filter") or ()
        )
        listed = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": "classic",
            }
            for g in groups
        ]
        self._reply(request, {"error_code": error, "groups": listed}, 1 if error else 0)

    def handle_describe_groups(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        include_operations = body.get("include_authorized_operations", False)
        described = []
        for group_id in body["groups"]:
            error, summary = self.coordinator.describe_group(group_id)
            out: dict[str, Any] = {"group_id": group_id, "error_code": error}
            if summary is not None:
                out |= {
                    "group_state": summary.state,
                    "protocol_type": summary.protocol_type,
                    "protocol_data": summary.protocol,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.metadata,
                            "member_assignment": m.assignment,
                        }
                        for m in summary.members
                    ],
                }
                if include_operations:
                    out["authorized_operations"] = _GROUP_OPERATIONS
            elif not error and version >= 6:
                out["error_code"] = errors.GroupIdNotFoundError.code
                out["error_message"] = f"group {group_id!r} does not exist"
            elif not error:
                out["group_state"] = "Dead"  # what versions before 6 say of a missing group
            described.append(out)
        failed = sum(1 for g in described if g["error_code"])
        self._reply(request, {"groups": described}, failed)

    def handle_delete_groups(self, request: Request) -> None:
        body = request.parsed_body()
        results = self.coordinator.delete_groups(body["groups_names"])
        out = [{"group_id": g, "error_code": code} for g, code in results.items()]
        self._reply(request, {"results": out}, sum(1 for code in results.values() if code))
