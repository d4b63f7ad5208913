"""A classic consumer group's state: members, generation, protocol, leader.

Kafka's ``GroupMetadata`` / ``MemberMetadata`` (the ``ClassicGroup`` /
``ClassicGroupMember`` of the group-coordinator module). The states and their allowed
transitions, as a table (``VALID_PREVIOUS_STATES``):

* **Empty**: no members (a new group, or one whose members all left); offsets may be
  committed by anyone with generation -1. A JoinGroup starts a rebalance.
* **PreparingRebalance**: waiting for every known member to (re)join, until the
  rebalance timeout, or for more new members during ``group.initial.rebalance.delay.ms``
  after a first join into an Empty group.
* **CompletingRebalance**: the generation is formed and the members have their JoinGroup
  answer; waiting for the leader's SyncGroup with the assignment.
* **Stable**: everyone has an assignment; heartbeats keep members alive.
* **Dead**: deleted (DeleteGroups), or no longer coordinated by this broker.

Join and sync answers are callbacks held by the waiting member (``awaiting_join``,
``awaiting_sync``) and called exactly once. Not thread-safe: the ``GroupCoordinator``'s
lock guards every group.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kclient import errors
from kclient.broker import consumer_protocol


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
#: state -> the states it may be entered from (Kafka's ``validPreviousStates``).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True)
class JoinGroupResult:
    """What a JoinGroup is answered with (Kafka's ``JoinGroupResult``)."""

    member_id: str
    error: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    #: (member id, group instance id, metadata) of every member: the leader's answer only
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True)
class SyncGroupResult:
    """What a SyncGroup is answered with."""

    error: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # for the selected protocol; empty unless the group is Stable
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """What DescribeGroups tells (Kafka's ``GroupSummary``)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str  # empty unless Stable
    generation_id: int
    leader_id: str | None
    members: tuple[MemberSummary, ...]


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


@dataclass(eq=False)
class MemberMetadata:
    """One member of a classic group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (protocol name, metadata), in the member's order of preference
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = field(default=None, repr=False)
    awaiting_sync: SyncCallback | None = field(default=None, repr=False)
    #: joined but not yet answered: its session timer is the new-member join timeout
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise errors.IllegalStateError(f"member {self.member_id} does not support {protocol!r}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order."""
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise errors.IllegalStateError(f"member {self.member_id} supports none of {candidates}")


class GroupMetadata:
    """A classic group: its state machine and members."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: set[str] = set()  # got MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self._supported_protocols: Counter[str] = Counter()
        #: a member joined during the initial rebalance delay: extend it
        self.new_member_added = False
        #: topics the members subscribe to (consumer protocol); None when unknown
        self.subscribed_topics: frozenset[str] | None = None

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, "
            f"generation={self.generation_id}, members={len(self.members)})"
        )

    # ---- state -------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise errors.IllegalStateError(
                f"group {self.group_id!r} cannot go from {self.state.value} to {state.value}"
            )
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # ---- members -----------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise errors.IllegalStateError(
                    f"static member {member.group_instance_id!r} is already in {self.group_id!r}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported_protocols.update(name for name, _ in member.supported_protocols)
        member.awaiting_join = callback
        if callback is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported_protocols.subtract(name for name, _ in member.supported_protocols)
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        self._supported_protocols.subtract(name for name, _ in member.supported_protocols)
        member.supported_protocols = protocols
        self._supported_protocols.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = callback

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """A static member came back with a new member id: the old id is fenced
        (its waiting JoinGroup / SyncGroup get FENCED_INSTANCE_ID)."""
        member = self.members.pop(old_member_id)
        self.invoke_join_callback(
            member, JoinGroupResult(old_member_id, errors.FencedInstanceIdError.code)
        )
        self.invoke_sync_callback(member, SyncGroupResult(errors.FencedInstanceIdError.code))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else make a rejoined member leader; False when
        the group has no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols ---------------------------------------------------------------------

    def _candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self._supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(
            self._supported_protocols[name] == len(self.members) for name in names
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (ties: the one
        voted for first)."""
        candidates = self._candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def refresh_subscribed_topics(self) -> None:
        """Read the members' subscriptions (consumer protocol) after a new generation."""
        self.subscribed_topics = self._compute_subscribed_topics()

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != consumer_protocol.PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(
                    consumer_protocol.subscribed_topics(member.metadata(self.protocol_name))
                )
        except (ValueError, UnicodeDecodeError):
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether the members consume ``topic`` (True when that is not known)."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.refresh_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.refresh_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader's JoinGroup answer lists: every member with its metadata for
        the selected protocol."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise errors.IllegalStateError(f"no member metadata in state {self.state.value}")
        assert self.protocol_name is not None
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def summary(self) -> GroupSummary:
        stable = self.state is GroupState.STABLE and self.protocol_name is not None
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable and self.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return GroupSummary(
            self.group_id,
            self.state.value,
            self.protocol_type or "",
            (self.protocol_name or "") if stable else "",
            self.generation_id,
            self.leader_id,
            members,
        )

    # ---- callbacks ---------------------------------------------------------------------

    def invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        callback = member.awaiting_join
        if callback is None:
            return
        member.awaiting_join = None
        self.num_awaiting_join -= 1
        callback(result)

    def invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Answer the member's waiting SyncGroup; whether there was one."""
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True
