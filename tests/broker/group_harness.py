"""A GroupCoordinator on a MockClock, for the group unit tests: no sockets, no threads.

The purgatory runs no reaper thread; ``advance(ms)`` moves the clock and fires the
coordinator's timers that are due (join, sync and heartbeat deadlines), in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kclient.broker.consumer_offsets import ConsumerOffsets, OffsetAndMetadata
from kclient.broker.consumer_protocol import encode_subscription
from kclient.broker.group_coordinator import GroupConfig, GroupCoordinator, JoinRequest
from kclient.broker.group_metadata import GroupState, JoinGroupResult, SyncGroupResult
from kclient.broker.purgatory import DelayedOperationPurgatory
from kclient.testing import MockClock

SUBSCRIPTION = encode_subscription(["events"])
RANGE = [("range", SUBSCRIPTION)]


@dataclass
class Answer:
    """A JoinGroup or SyncGroup answer that may come later."""

    results: list[Any] = field(default_factory=list)

    def __call__(self, result: Any) -> None:
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def result(self) -> Any:
        assert len(self.results) == 1, f"expected one answer, got {self.results}"
        return self.results[0]


class GroupHarness:
    def __init__(
        self,
        node_id: int = 0,
        *,
        offsets: ConsumerOffsets | None = None,
        clock: MockClock | None = None,
        purgatory: DelayedOperationPurgatory | None = None,
        **config: Any,
    ) -> None:
        self.clock = clock or MockClock()
        if purgatory is None:
            purgatory = DelayedOperationPurgatory("test-groups", self.clock.monotonic_ns)
            purgatory.start(reaper_thread=False)
        self.purgatory = purgatory
        self.offsets = offsets if offsets is not None else ConsumerOffsets()
        self.coordinating = True
        config.setdefault("initial_rebalance_delay_ms", 100)
        self.coordinator = GroupCoordinator(
            node_id,
            GroupConfig(**config),
            self.offsets,
            self.purgatory,
            is_coordinator=lambda group_id: self.coordinating,
            time_ms=self.clock.time_ms,
            monotonic_ns=self.clock.monotonic_ns,
        )

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward, stopping at each timer's deadline on the way to
        fire it then (a timer that reschedules itself counts from its own deadline)."""
        target_ns = self.clock.monotonic_ns() + ms * 1_000_000
        while True:
            deadline_ns = self.purgatory.next_deadline_ns()
            if deadline_ns is None or deadline_ns > target_ns:
                break
            self.clock.advance(max(0, deadline_ns - self.clock.monotonic_ns()) // 1_000_000)
            self.purgatory.expire_due()
        self.clock.advance((target_ns - self.clock.monotonic_ns()) // 1_000_000)
        self.purgatory.expire_due()

    def state(self, group_id: str = "g") -> GroupState:
        return self.coordinator.groups[group_id].state

    # ---- requests ----------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group_id: str = "g",
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        version: int = 9,
        client_id: str = "client",
    ) -> Answer:
        answer = Answer()
        self.coordinator.join_group(
            JoinRequest(
                group_id=group_id,
                member_id=member_id,
                group_instance_id=instance_id,
                client_id=client_id,
                client_host="/127.0.0.1",
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                protocol_type=protocol_type,
                protocols=RANGE if protocols is None else protocols,
                require_known_member_id=version >= 4,
                support_skip_assignment=version >= 9,
            ),
            answer,
        )
        return answer

    def join_new(self, **kwargs: Any) -> Answer:
        """The two JoinGroups of a new dynamic member (MEMBER_ID_REQUIRED, then with its
        id); the second one's answer."""
        first = self.join(**kwargs).result
        assert first.error == 79, first  # MEMBER_ID_REQUIRED
        return self.join(first.member_id, **kwargs)

    def sync(
        self,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group_id: str = "g",
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Answer:
        answer = Answer()
        self.coordinator.sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments or {},
            callback=answer,
        )
        return answer

    def heartbeat(
        self,
        member_id: str,
        generation_id: int,
        *,
        group_id: str = "g",
        instance_id: str | None = None,
    ) -> int:
        return self.coordinator.heartbeat(group_id, generation_id, member_id, instance_id)

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group_id: str = "g",
        generation_id: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
    ) -> dict[tuple[str, int], int]:
        return self.coordinator.offset_manager.commit(
            group_id,
            generation_id,
            member_id,
            instance_id,
            {tp: OffsetAndMetadata(o, -1, "", 0) for tp, o in offsets.items()},
        )

    def until_answered(self, *answers: Answer) -> None:
        """Advance in steps of the initial rebalance delay until every answer came (each
        member joining during the delay extends it once)."""
        step_ms = max(1, self.coordinator.config.initial_rebalance_delay_ms)
        for _ in range(1000):
            if all(a.done for a in answers):
                return
            self.advance(step_ms)
        raise AssertionError(f"no answer after {1000 * step_ms} ms: {answers}")

    # ---- whole rebalances --------------------------------------------------------------

    def stable_group(self, members: int = 1, **kwargs: Any) -> list[JoinGroupResult]:
        """``members`` dynamic members joined and synced: generation 1, Stable."""
        answers = [self.join_new(**kwargs) for _ in range(members)]
        self.until_answered(*answers)
        results: list[JoinGroupResult] = [a.result for a in answers]
        self.sync_all(results)
        return results

    def sync_all(self, results: list[JoinGroupResult]) -> list[SyncGroupResult]:
        """Every member of a generation sends SyncGroup; the leader assigns b'a:<id>'."""
        leader = next(r for r in results if r.member_id == r.leader_id)
        syncs = {
            r.member_id: self.sync(r.member_id, r.generation_id) for r in results if r is not leader
        }
        assignments = {m: f"a:{m}".encode() for m, _, _ in leader.members}
        syncs[leader.member_id] = self.sync(leader.member_id, leader.generation_id, assignments)
        return [syncs[r.member_id].result for r in results]
