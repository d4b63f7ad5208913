"""GroupCoordinator: Kafka's classic consumer groups, for the groups this broker coordinates.

Kafka's ``GroupCoordinator`` (core; the classic-group part of the group-coordinator
module's ``GroupMetadataManager``). Each request is validated here the way Kafka does
(``validateGroupStatus``, ``validateCurrentMember``, generation and protocol checks,
with Kafka's error codes) and then drives the group's state machine
(``group_metadata``); membership changes and everything timed (join phase, initial
rebalance delay, sync phase, sessions) are the ``GroupRebalancer``'s; committed offsets
are the ``OffsetMetadataManager``'s.

Groups live in memory, loaded (claimed) from the cluster's ``ConsumerOffsets`` the
first time a request names them. A group this broker no longer coordinates
(``is_coordinator`` says so: its coordinator broker is another live one now) is
unloaded: members waiting in JoinGroup or SyncGroup get NOT_COORDINATOR and look the
coordinator up again, which then continues from the stored generation.

Thread-safety: one lock (``lock``) for every group, held by request handler threads and
by timers firing on the purgatory's reaper thread. Answers are callbacks, called with
the lock held (they only queue a response).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from kclient import errors
from kclient.broker.consumer_offsets import ConsumerOffsets, StoredGroup
from kclient.broker.coordinator_timer import CoordinatorTimer
from kclient.broker.group_metadata import (
    GroupMetadata,
    GroupState,
    GroupSummary,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
    SyncCallback,
    SyncGroupResult,
)
from kclient.broker.group_rebalance import GroupConfig, GroupRebalancer, JoinRequest
from kclient.broker.offset_metadata_manager import OffsetMetadataManager
from kclient.broker.purgatory import DelayedOperationPurgatory

__all__ = ["GroupConfig", "GroupCoordinator", "JoinRequest"]

log = logging.getLogger(__name__)

_S = GroupState
_NONE = 0
_COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code
_UNKNOWN_MEMBER_ID = errors.UnknownMemberIdError.code
_GROUP_ID_NOT_FOUND = errors.GroupIdNotFoundError.code
#: The only group type here (ListGroups v5 ``types_filter``).
CLASSIC = "classic"


class GroupCoordinator:
    """The classic group protocol for the groups broker ``node_id`` coordinates."""

    def __init__(
        self,
        node_id: int,
        config: GroupConfig,
        offsets: ConsumerOffsets,
        purgatory: DelayedOperationPurgatory,
        *,
        is_coordinator: Callable[[str], bool] = lambda group_id: True,
        time_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.offsets = offsets
        self.lock = threading.RLock()
        self.timer = CoordinatorTimer(purgatory, self.lock, monotonic_ns)
        self.groups: dict[str, GroupMetadata] = {}
        self.is_coordinator = is_coordinator
        self.time_ms = time_ms
        self.active = True
        self.rebalance = GroupRebalancer(
            node_id, config, offsets, self.timer, groups=self.groups, time_ms=time_ms
        )
        self.offset_manager = OffsetMetadataManager(self)

    # ---- group status and loading ------------------------------------------------------

    def validate_group(self, group_id: str | None, *, allow_empty: bool = False) -> int:
        """Kafka's ``validateGroupStatus``: an error code, or 0 when this broker serves
        requests for ``group_id``. Called with the lock held."""
        if group_id is None or (not group_id and not allow_empty):
            return errors.InvalidGroupIdError.code
        if not self.active:
            return _COORDINATOR_NOT_AVAILABLE
        if not self.is_coordinator(group_id):
            if group_id in self.groups:
                self.unload(group_id)
            return errors.NotCoordinatorError.code
        return _NONE

    def group(self, group_id: str, now_ms: int, *, create: bool = False) -> GroupMetadata | None:
        """The loaded group, loading it from the ConsumerOffsets (claiming it) the first
        time; a new Empty group when it does not exist and ``create``."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        stored, exists = self.offsets.claim(group_id, self.node_id)
        if not exists and not create:
            return None
        group = GroupMetadata(group_id, now_ms)
        if stored is not None:
            self._restore(group, stored)
        self.groups[group_id] = group
        return group

    def _restore(self, group: GroupMetadata, stored: StoredGroup) -> None:
        """Kafka's ``onGroupLoaded``: a stored generation with members is Stable again,
        and every member's session starts now."""
        group.generation_id = stored.generation_id
        group.protocol_type = stored.protocol_type
        group.protocol_name = stored.protocol_name
        group.state_timestamp_ms = stored.state_timestamp_ms
        if stored.protocol_name is None:
            return
        for m in stored.members:
            group.add(
                MemberMetadata(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    stored.protocol_type or "",
                    [(stored.protocol_name, m.subscription)],
                    m.assignment,
                )
            )
        if not group.members:
            return
        group.state = group.previous_state = _S.STABLE
        if stored.leader_id in group.members:
            group.leader_id = stored.leader_id
        group.refresh_subscribed_topics()
        for member in group.members.values():
            self.rebalance.schedule_heartbeat(group, member)
        log.info(
            "group %s: broker %d takes over generation %d with %d members",
            group.group_id,
            self.node_id,
            group.generation_id,
            len(group.members),
        )

    def unload(self, group_id: str) -> None:
        """Stop coordinating a group (Kafka's ``onGroupUnloaded``): waiting members get
        NOT_COORDINATOR; its timers are dropped."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        group.transition_to(_S.DEAD, self.time_ms())
        code = errors.NotCoordinatorError.code
        for member in list(group.members.values()):
            group.invoke_join_callback(member, JoinGroupResult(member.member_id, code))
            group.invoke_sync_callback(member, SyncGroupResult(code))
        self._cancel_timers(group_id)
        log.info("group %s: no longer coordinated by broker %d", group_id, self.node_id)

    def _cancel_timers(self, group_id: str) -> None:
        self.timer.cancel_if(lambda key: key[1] == group_id)

    def on_brokers_changed(self) -> None:
        """A broker stopped or started: unload the groups another broker coordinates now."""
        with self.lock:
            for group_id in [g for g in self.groups if not self.is_coordinator(g)]:
                self.unload(group_id)

    def shutdown(self) -> None:
        """The broker is stopping: unload every group, drop every timer."""
        with self.lock:
            self.active = False
            for group_id in list(self.groups):
                self.unload(group_id)
            self.timer.cancel_all()

    def validate_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> int:
        """Kafka's ``validateCurrentMember``: the member exists, and a static member's
        instance id still maps to this member id (else FENCED_INSTANCE_ID)."""
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return _UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info(
                    "group %s: member %s is fenced: group.instance.id %s is now member %s",
                    group.group_id,
                    member_id,
                    group_instance_id,
                    current,
                )
                return errors.FencedInstanceIdError.code
        return _NONE if group.has(member_id) else _UNKNOWN_MEMBER_ID

    # ---- JoinGroup ---------------------------------------------------------------------

    def join_group(self, request: JoinRequest, callback: JoinCallback) -> None:
        """Handle a JoinGroup; ``callback`` gets the answer now or when the join phase
        ends."""
        with self.lock:
            now_ms = self.time_ms()
            cfg = self.config
            error = self.validate_group(request.group_id)
            if not error and not (
                cfg.min_session_timeout_ms
                <= request.session_timeout_ms
                <= cfg.max_session_timeout_ms
            ):
                error = errors.InvalidSessionTimeoutError.code
            is_new = request.member_id == ""
            group = None if error else self.group(request.group_id, now_ms, create=is_new)
            if group is None:
                callback(JoinGroupResult(request.member_id, error or _UNKNOWN_MEMBER_ID))
            elif not self._accept_joining_member(group, request.member_id):
                group.remove(request.member_id)
                callback(JoinGroupResult("", errors.GroupMaxSizeReachedError.code))
            elif group.is_in(_S.DEAD):
                callback(JoinGroupResult(request.member_id, _COORDINATOR_NOT_AVAILABLE))
            elif not group.supports_protocols(
                request.protocol_type, (name for name, _ in request.protocols)
            ):
                code = errors.InconsistentGroupProtocolError.code
                callback(JoinGroupResult(request.member_id, code))
            elif is_new:
                self._join_new_member(group, request, callback, now_ms)
            else:
                self._join_existing_member(group, request, callback, now_ms)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_in(_S.EMPTY, _S.DEAD):
            return True
        if group.is_in(_S.PREPARING_REBALANCE):
            rejoining = group.has(member_id) and group.get(member_id).is_awaiting_join
            return rejoining or group.num_awaiting_join < max_size
        return group.has(member_id) or len(group.members) < max_size

    def _join_new_member(
        self, group: GroupMetadata, request: JoinRequest, callback: JoinCallback, now_ms: int
    ) -> None:
        member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        rebalance = self.rebalance
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is None:
                rebalance.add_member(group, member_id, request, callback, now_ms)
            else:
                log.info(
                    "group %s: static member %s rejoins as %s (was %s)",
                    group.group_id,
                    instance_id,
                    member_id,
                    old_member_id,
                )
                rebalance.replace_static_member(group, old_member_id, member_id, request, callback)
        elif request.require_known_member_id:
            # JoinGroup v4+: the client must come back with this id (KIP-394)
            group.pending_members.add(member_id)
            rebalance.schedule_heartbeat_of(group.group_id, member_id, request.session_timeout_ms)
            callback(JoinGroupResult(member_id, errors.MemberIdRequiredError.code))
        else:
            rebalance.add_member(group, member_id, request, callback, now_ms)

    def _join_existing_member(
        self, group: GroupMetadata, request: JoinRequest, callback: JoinCallback, now_ms: int
    ) -> None:
        member_id = request.member_id
        rebalance = self.rebalance
        if member_id in group.pending_members:
            if request.group_instance_id is not None:  # pending members are never static
                callback(JoinGroupResult(member_id, _UNKNOWN_MEMBER_ID))
            else:
                rebalance.add_member(group, member_id, request, callback, now_ms)
            return
        error = self.validate_member(group, member_id, request.group_instance_id)
        if error:
            callback(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        if group.is_in(_S.PREPARING_REBALANCE):
            reason = f"member {member_id} rejoins"
            rebalance.update_member(group, member, request, callback, reason)
        elif group.is_in(_S.COMPLETING_REBALANCE, _S.STABLE):
            leader_rejoins = group.is_in(_S.STABLE) and group.is_leader(member_id)
            if leader_rejoins or not member.matches(request.protocols):
                reason = (
                    f"leader {member_id} rejoins"
                    if leader_rejoins
                    else f"member {member_id} changed its subscription"
                )
                rebalance.update_member(group, member, request, callback, reason)
            else:
                # the same metadata (a lost JoinGroup answer): this generation's answer
                leader = group.is_leader(member_id)
                callback(rebalance.join_result(group, member, with_members=leader))
        else:  # Empty or Dead: let the member reset its generation and join anew
            callback(JoinGroupResult(member_id, _UNKNOWN_MEMBER_ID))

    # ---- SyncGroup ---------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        """Handle a SyncGroup; ``callback`` gets the member's assignment once the leader
        has sent it (at once in a Stable group)."""
        with self.lock:
            now_ms = self.time_ms()
            error = self.validate_group(group_id)
            group = None if error else self.group(group_id, now_ms)
            if group is None:
                callback(SyncGroupResult(error or _UNKNOWN_MEMBER_ID))
                return
            if group.is_in(_S.DEAD):
                error = _COORDINATOR_NOT_AVAILABLE
            else:
                error = self.validate_member(group, member_id, group_instance_id)
            if not error and generation_id != group.generation_id:
                error = errors.IllegalGenerationError.code
            if not error and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)
            ):
                error = errors.InconsistentGroupProtocolError.code
            if not error and group.is_in(_S.EMPTY):
                error = _UNKNOWN_MEMBER_ID
            if not error and group.is_in(_S.PREPARING_REBALANCE):
                error = errors.RebalanceInProgressError.code
            if error:
                callback(SyncGroupResult(error))
                return
            member = group.get(member_id)
            self.rebalance.remove_pending_sync_member(group, member_id)
            if group.is_in(_S.STABLE):
                result = SyncGroupResult(
                    _NONE, group.protocol_type, group.protocol_name, member.assignment
                )
                callback(result)
                self.rebalance.schedule_heartbeat(group, member)
                return
            member.awaiting_sync = callback  # CompletingRebalance: wait for the leader
            if group.is_leader(member_id):
                self.rebalance.complete_sync(group, assignments, now_ms)

    # ---- Heartbeat / LeaveGroup --------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        """Handle a Heartbeat: the error code to answer."""
        with self.lock:
            error = self.validate_group(group_id)
            group = None if error else self.group(group_id, self.time_ms())
            if group is None:
                return error or _UNKNOWN_MEMBER_ID
            if group.is_in(_S.DEAD):
                return _COORDINATOR_NOT_AVAILABLE
            error = self.validate_member(group, member_id, group_instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return errors.IllegalGenerationError.code
            if group.is_in(_S.EMPTY):
                return _UNKNOWN_MEMBER_ID
            self.rebalance.schedule_heartbeat(group, group.get(member_id))
            if group.is_in(_S.PREPARING_REBALANCE):
                return errors.RebalanceInProgressError.code
            return _NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[int, list[int]]:
        """Handle a LeaveGroup of (member id, group instance id, reason) entries: the
        top-level error and one error per entry."""
        with self.lock:
            now_ms = self.time_ms()
            error = self.validate_group(group_id)
            group = None if error else self.group(group_id, now_ms)
            if group is None:
                return (error, []) if error else (_NONE, [_UNKNOWN_MEMBER_ID] * len(members))
            if group.is_in(_S.DEAD):
                return _COORDINATOR_NOT_AVAILABLE, []
            results = []
            for member_id, instance_id, reason in members:
                why = f"it left ({reason or 'no reason given'})"
                if not member_id:  # an admin removing a static member by its instance id
                    current = group.static_member_id(instance_id) if instance_id else None
                    if current is not None:
                        self.rebalance.remove_member(group, group.get(current), why, now_ms)
                    results.append(_UNKNOWN_MEMBER_ID if current is None else _NONE)
                elif member_id in group.pending_members:
                    self.rebalance.remove_pending_member(group, member_id, now_ms)
                    results.append(_NONE)
                else:
                    error = self.validate_member(group, member_id, instance_id)
                    if not error:
                        self.rebalance.remove_member(group, group.get(member_id), why, now_ms)
                    results.append(error)
            return _NONE, results

    # ---- ListGroups / DescribeGroups / DeleteGroups ------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[int, list[GroupSummary]]:
        """The groups this broker coordinates, in the given states (any when empty) and
        of the given types (only ``classic`` exists here)."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        with self.lock:
            if not self.active:
                return _COORDINATOR_NOT_AVAILABLE, []
            if wanted_types and CLASSIC not in wanted_types:
                return _NONE, []
            now_ms = self.time_ms()
            out = []
            for group_id in sorted(set(self.groups) | set(self.offsets.group_ids())):
                if not self.is_coordinator(group_id):
                    continue
                group = self.group(group_id, now_ms)
                if group is None:
                    continue
                if not wanted_states or group.state.value.lower() in wanted_states:
                    out.append(group.summary())
            return _NONE, out

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary | None]:
        """A group's state and members; (0, None) for a group that does not exist."""
        with self.lock:
            error = self.validate_group(group_id, allow_empty=True)
            if error:
                return error, None
            group = self.group(group_id, self.time_ms())
            return _NONE, group.summary() if group is not None else None

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        """Delete Empty groups and their offsets: an error code per group
        (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND if it does not exist)."""
        results: dict[str, int] = {}
        with self.lock:
            now_ms = self.time_ms()
            for group_id in group_ids:
                error = self.validate_group(group_id, allow_empty=True)
                group = None if error else self.group(group_id, now_ms)
                if error or group is None or group.is_in(_S.DEAD):
                    results[group_id] = error or _GROUP_ID_NOT_FOUND
                elif not group.is_in(_S.EMPTY):
                    results[group_id] = errors.NonEmptyGroupError.code
                else:
                    try:
                        removed = self.offsets.delete_group(group_id, self.node_id)
                    except errors.BrokerResponseError as exc:
                        results[group_id] = exc.code
                        continue
                    group.transition_to(_S.DEAD, now_ms)
                    del self.groups[group_id]
                    self._cancel_timers(group_id)
                    log.info("group %s: deleted with its %d committed offsets", group_id, removed)
                    results[group_id] = _NONE
        return results
