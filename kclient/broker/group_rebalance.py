"""GroupRebalancer: the timed half of the classic group protocol.

Kafka's ``prepareRebalance`` / ``onCompleteJoin`` with its delayed operations
(``DelayedJoin``, ``InitialDelayedJoin``, ``DelayedSync``, ``DelayedHeartbeat``), in the
keyed-timer form of the group-coordinator module's ``GroupMetadataManager``. The
``GroupCoordinator`` validates each request and calls in here to change a group's
membership and generation; the timers (``coordinator_timer``) are:

* ``("join", group)``: the end of the join phase, at the rebalance timeout (the largest
  ``rebalance.timeout.ms`` of the members), or after ``group.initial.rebalance.delay.ms``
  (extended while new members keep arriving, up to the rebalance timeout) when an Empty
  group starts to rebalance;
* ``("sync", group)``: members that got their JoinGroup answer must send SyncGroup within
  the rebalance timeout, or are removed and the group rebalances again;
* ``("heartbeat", group, member)``: a member is removed when ``session.timeout.ms``
  passes without a heartbeat (a new member waiting in JoinGroup: after 5 minutes; one
  that got MEMBER_ID_REQUIRED and never came back: after its session timeout). Members
  waiting in JoinGroup or SyncGroup need no heartbeat.

A group record is written to the ``ConsumerOffsets`` when a generation becomes Stable or
Empty, so a broker taking the group over continues its generation. Called with the
coordinator's lock held (timers take it themselves).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kclient import errors
from kclient.broker.consumer_offsets import ConsumerOffsets, StoredGroup, StoredMember
from kclient.broker.coordinator_timer import CoordinatorTimer
from kclient.broker.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)

log = logging.getLogger(__name__)

_S = GroupState
_NONE = 0
_COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code
_UNKNOWN_MEMBER_ID = errors.UnknownMemberIdError.code
#: Kafka's ``NewMemberJoinTimeoutMs``: a new member's JoinGroup waits at most this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    """The group coordinator's settings (``BrokerConfig.group_*`` says what each means)."""

    min_session_timeout_ms: int = 100
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 100
    max_size: int = 0x7FFFFFFF
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup, as the coordinator needs it (any version)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    #: JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED and its id
    require_known_member_id: bool = True
    #: JoinGroup v9+: a static leader rejoining a Stable group may skip the assignment
    support_skip_assignment: bool = False
    reason: str | None = None


class GroupRebalancer:
    """Membership changes, generations and the timers of the groups of one coordinator."""

    def __init__(
        self,
        node_id: int,
        config: GroupConfig,
        offsets: ConsumerOffsets,
        timer: CoordinatorTimer,
        *,
        groups: dict[str, GroupMetadata],
        time_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.offsets = offsets
        self.timer = timer
        self.groups = groups
        self.time_ms = time_ms

    def join_result(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        *,
        with_members: bool,
        leader_id: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResult:
        return JoinGroupResult(
            member.member_id,
            _NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            (leader_id if leader_id is not None else group.leader_id) or "",
            skip_assignment,
            group.current_member_metadata() if with_members else (),
        )

    def add_member(
        self,
        group: GroupMetadata,
        member_id: str,
        request: JoinRequest,
        callback: JoinCallback,
        now_ms: int,
    ) -> None:
        member = MemberMetadata(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            list(request.protocols),
            is_new=True,
        )
        if group.is_in(_S.PREPARING_REBALANCE) and group.previous_state is _S.EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, callback)
        # a new member cannot heartbeat while its JoinGroup waits: bound the wait instead
        self.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        log.info(
            "group %s: member %s joins (client.id %s from %s%s; protocols %s)",
            group.group_id,
            member_id,
            request.client_id,
            request.client_host,
            f", group.instance.id {request.group_instance_id}"
            if request.group_instance_id is not None
            else "",
            ",".join(name for name, _ in request.protocols),
        )
        self.maybe_prepare_rebalance_or_complete_join(group, f"member {member_id} joined", now_ms)

    def update_member(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        request: JoinRequest,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        """A known member rejoins (or changes its subscription)."""
        group.update_member(
            member,
            list(request.protocols),
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            callback,
        )
        self.maybe_prepare_rebalance_or_complete_join(group, reason, self.time_ms())

    def replace_static_member(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        request: JoinRequest,
        callback: JoinCallback,
    ) -> None:
        """A known static member joins with no member id: the new id replaces (fences)
        the old one; a Stable group keeps its assignment when the selected protocol does
        not change (KIP-345)."""
        assert request.group_instance_id is not None
        instance_id = request.group_instance_id
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.timer.cancel(("heartbeat", group.group_id, old_member_id))
        self.schedule_heartbeat(group, member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member,
            list(request.protocols),
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            callback,
        )
        reason = f"static member {instance_id} rejoined"
        if group.is_in(_S.STABLE):
            if group.protocol_name != group.select_protocol():
                self.maybe_prepare_rebalance_or_complete_join(group, reason, self.time_ms())
                return
            try:
                self.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
            except errors.BrokerResponseError as exc:
                # keep the old member id: undo the replacement
                group.update_member(member, old[0], old[1], old[2], None)
                group.replace_static_member(instance_id, new_member_id, old_member_id)
                self.timer.cancel(("heartbeat", group.group_id, new_member_id))
                self.schedule_heartbeat(group, member)
                callback(
                    JoinGroupResult(
                        "",
                        store_error(exc),
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        current_leader or "",
                    )
                )
                return
            if request.support_skip_assignment:
                is_leader = group.is_leader(new_member_id)
                result = self.join_result(
                    group, member, with_members=is_leader, skip_assignment=is_leader
                )
            else:
                # the old leader id: a returning static leader must not reassign in Stable
                result = self.join_result(
                    group, member, with_members=False, leader_id=current_leader or ""
                )
            group.invoke_join_callback(member, result)
        elif group.is_in(_S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, reason, self.time_ms())
        # PreparingRebalance: it waits for the join phase to end like everyone else

    def maybe_prepare_rebalance_or_complete_join(
        self, group: GroupMetadata, reason: str, now_ms: int
    ) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason, now_ms)
        elif (
            group.is_in(_S.PREPARING_REBALANCE)
            and group.previous_state is not _S.EMPTY  # the initial delay runs its course
            and group.has_all_members_joined
        ):
            self.complete_join(group, now_ms)

    def prepare_rebalance(self, group: GroupMetadata, reason: str, now_ms: int) -> None:
        if group.is_in(_S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, errors.RebalanceInProgressError.code)
        self._remove_sync_expiration(group)
        initial = group.is_in(_S.EMPTY)
        group_id = group.group_id
        if initial:
            delay_ms = self.config.initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms - delay_ms, 0)
            self.timer.schedule(
                ("join", group_id),
                delay_ms,
                lambda: self._complete_initial_rebalance(group_id, delay_ms, remaining_ms),
            )
        old_state = group.state
        group.transition_to(_S.PREPARING_REBALANCE, now_ms)
        log.info(
            "group %s: rebalancing (state %s, generation %d): %s",
            group_id,
            old_state.value,
            group.generation_id,
            reason,
        )
        if not initial:
            if group.has_all_members_joined:
                self.complete_join(group, now_ms)
            else:
                self.timer.schedule(
                    ("join", group_id),
                    group.rebalance_timeout_ms,
                    lambda: self._complete_join_of(group_id),
                )

    def _complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay_ms = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining_ms = max(remaining_ms - delay_ms, 0)
            self.timer.schedule(
                ("join", group_id),
                new_delay_ms,
                lambda: self._complete_initial_rebalance(group_id, new_delay_ms, new_remaining_ms),
            )
        else:
            self.complete_join(group, self.time_ms())

    def _complete_join_of(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_in(_S.PREPARING_REBALANCE):
            self.complete_join(group, self.time_ms())

    def complete_join(self, group: GroupMetadata, now_ms: int) -> None:
        """End the join phase: drop dynamic members that did not rejoin, form the next
        generation, answer every waiting JoinGroup (the leader gets the members)."""
        group_id = group.group_id
        self.timer.cancel(("join", group_id))
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in gone:
            group.remove(member.member_id)
            self.timer.cancel(("heartbeat", group_id, member.member_id))
        if gone:
            log.info(
                "group %s: removed members that did not rejoin in time: %s",
                group_id,
                ", ".join(m.member_id for m in gone),
            )
        if group.is_in(_S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait for the session timeouts to remove the members
            log.warning("group %s: cannot complete the rebalance: no member rejoined", group_id)
            self.timer.schedule(
                ("join", group_id),
                group.rebalance_timeout_ms,
                lambda: self._complete_join_of(group_id),
            )
            return
        group.init_next_generation(now_ms)
        if group.is_in(_S.EMPTY):
            log.info("group %s: generation %d is empty", group_id, group.generation_id)
            try:
                self.store_group(group, {})
            except errors.BrokerResponseError as exc:
                log.warning("group %s: the empty generation was not stored: %s", group_id, exc)
            return
        log.info(
            "group %s: generation %d formed with %d members (protocol %s, leader %s)",
            group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in list(group.members.values()):
            result = self.join_result(group, member, with_members=group.is_leader(member.member_id))
            group.invoke_join_callback(member, result)
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation_id = group.generation_id
        self.timer.schedule(
            ("sync", group_id),
            group.rebalance_timeout_ms,
            lambda: self._expire_pending_sync(group_id, generation_id),
        )

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation_id:
            return
        if group.is_in(_S.COMPLETING_REBALANCE, _S.STABLE) and group.pending_sync_members:
            late = sorted(group.pending_sync_members)
            for member_id in late:
                group.remove(member_id)
                self.timer.cancel(("heartbeat", group_id, member_id))
            self.prepare_rebalance(
                group, f"no SyncGroup in time from {', '.join(late)}", self.time_ms()
            )

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(("sync", group.group_id))

    def complete_sync(
        self, group: GroupMetadata, assignments: dict[str, bytes], now_ms: int
    ) -> None:
        """The leader's SyncGroup in CompletingRebalance: store the assignment, answer
        every waiting SyncGroup, and the group is Stable."""
        assignment = {m: assignments.get(m, b"") for m in group.members}
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning(
                "group %s: the leader assigned nothing to %s (generation %d)",
                group.group_id,
                ", ".join(missing),
                group.generation_id,
            )
        try:
            self.store_group(group, assignment)
        except errors.BrokerResponseError as exc:
            self.reset_and_propagate_assignment_error(group, store_error(exc))
            self.maybe_prepare_rebalance_or_complete_join(
                group, f"storing the assignment failed: {exc}", now_ms
            )
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self.propagate_assignment(group, _NONE)
        group.transition_to(_S.STABLE, now_ms)
        log.info(
            "group %s: generation %d is stable with %d members",
            group.group_id,
            group.generation_id,
            len(group.members),
        )

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.timer.cancel(("sync", group.group_id))

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        protocol_type = group.protocol_type if not error else None
        protocol_name = group.protocol_name if not error else None
        for member in list(group.members.values()):
            result = SyncGroupResult(error, protocol_type, protocol_name, member.assignment)
            if group.invoke_sync_callback(member, result):
                # its session restarts once it has its answer
                self.schedule_heartbeat(group, member)

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        """Write the group's record. Raises NotCoordinatorError / KafkaStorageError."""
        protocol = group.protocol_name
        members = tuple(
            StoredMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        record = StoredGroup(
            group.protocol_type,
            group.generation_id,
            protocol,
            group.leader_id,
            self.time_ms(),
            members,
        )
        self.offsets.store_group(group.group_id, self.node_id, record)

    def remove_member(
        self, group: GroupMetadata, member: MemberMetadata, reason: str, now_ms: int
    ) -> None:
        """Kafka's ``removeMemberAndUpdateGroup``."""
        log.info("group %s: member %s removed: %s", group.group_id, member.member_id, reason)
        group.invoke_join_callback(member, JoinGroupResult("", _UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.timer.cancel(("heartbeat", group.group_id, member.member_id))
        if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group, reason, now_ms)
        elif group.is_in(_S.PREPARING_REBALANCE) and group.has_all_members_joined:
            self.complete_join(group, now_ms)

    def remove_pending_member(self, group: GroupMetadata, member_id: str, now_ms: int) -> None:
        group.remove(member_id)
        self.timer.cancel(("heartbeat", group.group_id, member_id))
        if group.is_in(_S.PREPARING_REBALANCE) and group.has_all_members_joined:
            self.complete_join(group, now_ms)

    def schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        self.schedule_heartbeat_of(
            group.group_id,
            member.member_id,
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
        )

    def schedule_heartbeat_of(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.timer.schedule(
            ("heartbeat", group_id, member_id),
            timeout_ms,
            lambda: self._expire_heartbeat(group_id, member_id),
        )

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(_S.DEAD):
            return
        now_ms = self.time_ms()
        if member_id in group.pending_members:
            log.info(
                "group %s: %s never came back after MEMBER_ID_REQUIRED; forgotten",
                group_id,
                member_id,
            )
            self.remove_pending_member(group, member_id, now_ms)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # members waiting in JoinGroup / SyncGroup need no heartbeat, except new ones
        if member.is_new or not (member.is_awaiting_join or member.is_awaiting_sync):
            timeout_ms = (
                self.config.new_member_join_timeout_ms
                if member.is_new
                else member.session_timeout_ms
            )
            self.remove_member(
                group, member, f"no heartbeat within {timeout_ms} ms (session expired)", now_ms
            )


def store_error(exc: errors.BrokerResponseError) -> int:
    """The error a client gets when a group record could not be written (Kafka's
    ``appendGroupMetadataErrorToResponseError``)."""
    if isinstance(exc, errors.NotCoordinatorError):
        return exc.code
    return _COORDINATOR_NOT_AVAILABLE
