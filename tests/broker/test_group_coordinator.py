"""The classic group protocol as a group consumer sees it: joins, generations, leaders,
rebalances, timeouts, static members and the errors Kafka answers with."""

from __future__ import annotations

import pytest

from kclient import errors
from kclient.broker.consumer_protocol import encode_subscription
from kclient.broker.group_metadata import GroupState

from .group_harness import GroupHarness

S = GroupState
MEMBER_ID_REQUIRED = errors.MemberIdRequiredError.code
ILLEGAL_GENERATION = errors.IllegalGenerationError.code
UNKNOWN_MEMBER_ID = errors.UnknownMemberIdError.code
REBALANCE_IN_PROGRESS = errors.RebalanceInProgressError.code
FENCED_INSTANCE_ID = errors.FencedInstanceIdError.code
INCONSISTENT_GROUP_PROTOCOL = errors.InconsistentGroupProtocolError.code
NOT_COORDINATOR = errors.NotCoordinatorError.code
SUB = encode_subscription(["events"])


@pytest.fixture
def h() -> GroupHarness:
    return GroupHarness()


def test_a_new_member_first_gets_member_id_required_then_joins_with_that_id(
    h: GroupHarness,
) -> None:
    first = h.join(client_id="app").result
    assert first.error == MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    assert "g" not in h.coordinator.groups or h.state() is S.EMPTY  # nothing joined yet
    second = h.join(first.member_id, client_id="app")
    assert not second.done  # the initial rebalance delay runs
    h.advance(99)
    assert not second.done
    h.advance(1)
    r = second.result
    assert (r.error, r.member_id, r.generation_id, r.protocol_name, r.leader_id) == (
        0,
        first.member_id,
        1,
        "range",
        first.member_id,
    )
    assert r.members == ((first.member_id, None, SUB),)  # the leader learns the members
    assert h.state() is S.COMPLETING_REBALANCE


def test_join_group_before_v4_joins_at_once_without_member_id_required(h: GroupHarness) -> None:
    answer = h.join(version=3)
    h.advance(100)
    assert answer.result.error == 0
    assert answer.result.generation_id == 1


def test_a_member_id_nobody_was_given_is_unknown(h: GroupHarness) -> None:
    h.stable_group(1)
    assert h.join("made-up-id").result.error == UNKNOWN_MEMBER_ID


def test_member_id_required_and_never_back_is_forgotten_after_its_session_timeout(
    h: GroupHarness,
) -> None:
    [leader] = h.stable_group(1)
    ghost = h.join(session_timeout_ms=1000).result  # MEMBER_ID_REQUIRED, never rejoins
    assert ghost.error == MEMBER_ID_REQUIRED
    # the leader rejoins to rebalance for another reason: it must not wait for the ghost
    h.advance(1000)
    again = h.join(leader.member_id, protocols=[("range", encode_subscription(["other"]))])
    h.advance(0)
    assert again.result.error == 0
    assert again.result.generation_id == 2
    assert [m for m, _, _ in again.result.members] == [leader.member_id]


def test_the_initial_delay_grows_while_members_keep_arriving(h: GroupHarness) -> None:
    a = h.join_new()
    h.advance(80)
    b = h.join_new()
    h.advance(20)  # 100 ms after the first join; b arrived meanwhile: wait another 100
    assert not a.done and not b.done
    h.advance(99)
    assert not a.done
    h.advance(1)
    ra, rb = a.result, b.result
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader_id == rb.leader_id == ra.member_id  # the first member leads
    assert len(ra.members) == 2 and rb.members == ()  # only the leader gets the members


def test_the_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    h = GroupHarness(initial_rebalance_delay_ms=100)
    a = h.join_new(rebalance_timeout_ms=250)
    for _ in range(10):  # a newcomer every 50 ms
        h.advance(50)
        if a.done:
            break
        h.join_new(rebalance_timeout_ms=250)
    assert a.done
    assert h.clock.monotonic_ms() == 250  # not 300: the last extension is cut short
    assert a.result.error == 0


def test_the_protocol_is_the_one_all_members_support_that_most_prefer(h: GroupHarness) -> None:
    rr = ("roundrobin", SUB)
    rng = ("range", SUB)
    sticky = ("cooperative-sticky", SUB)
    answers = [
        h.join_new(protocols=[rng, rr, sticky]),
        h.join_new(protocols=[sticky, rr]),
        h.join_new(protocols=[rng, rr, sticky]),
        h.join_new(protocols=[rr, sticky, rng]),
    ]
    h.until_answered(*answers)
    # two members prefer range, but the second does not support it; among the others,
    # roundrobin has three votes (the first choice of those two among them), sticky one
    assert {a.result.protocol_name for a in answers} == {"roundrobin"}


def test_a_member_that_shares_no_protocol_with_the_group_is_refused(h: GroupHarness) -> None:
    h.stable_group(1)
    assert h.join(protocols=[("roundrobin", SUB)]).result.error == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocol_type="connect").result.error == INCONSISTENT_GROUP_PROTOCOL
    assert h.state() is S.STABLE


def test_followers_wait_in_sync_group_for_the_leaders_assignment(h: GroupHarness) -> None:
    a, b = h.join_new(), h.join_new()
    h.until_answered(a, b)
    leader, follower = a.result, b.result
    waiting = h.sync(follower.member_id, 1)
    assert not waiting.done
    led = h.sync(leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    assert (led.result.error, led.result.assignment, led.result.protocol_name) == (0, b"L", "range")
    assert (waiting.result.error, waiting.result.assignment) == (0, b"F")
    assert h.state() is S.STABLE
    # a SyncGroup in a Stable group gets the same assignment again
    assert h.sync(follower.member_id, 1).result.assignment == b"F"


def test_a_new_member_rebalances_a_stable_group(h: GroupHarness) -> None:
    [old] = h.stable_group(1)
    assert h.heartbeat(old.member_id, 1) == 0
    new = h.join_new()
    assert h.state() is S.PREPARING_REBALANCE
    assert h.heartbeat(old.member_id, 1) == REBALANCE_IN_PROGRESS
    assert h.sync(old.member_id, 1).result.error == REBALANCE_IN_PROGRESS
    rejoin = h.join(old.member_id)  # the last member to rejoin ends the join phase at once
    assert rejoin.result.generation_id == new.result.generation_id == 2
    assert rejoin.result.leader_id == old.member_id  # the leader keeps leading
    assert h.heartbeat(old.member_id, 1) == ILLEGAL_GENERATION
    assert h.sync(new.result.member_id, 1).result.error == ILLEGAL_GENERATION
    h.sync_all([rejoin.result, new.result])
    assert h.state() is S.STABLE
    assert h.heartbeat(old.member_id, 2) == 0


def test_a_leaving_member_rebalances_the_others(h: GroupHarness) -> None:
    a, b = h.stable_group(2)
    error, per_member = h.coordinator.leave_group("g", [(a.member_id, None, "shutdown")])
    assert (error, per_member) == (0, [0])
    assert h.heartbeat(b.member_id, 1) == REBALANCE_IN_PROGRESS
    assert h.heartbeat(a.member_id, 1) == UNKNOWN_MEMBER_ID
    rejoin = h.join(b.member_id).result
    assert (rejoin.generation_id, rejoin.leader_id) == (2, b.member_id)  # b leads now
    # the last member leaving empties the group; its generation moves on
    h.sync_all([rejoin])
    h.coordinator.leave_group("g", [(b.member_id, None, None)])
    assert h.state() is S.EMPTY
    assert h.coordinator.groups["g"].generation_id == 3


def test_leave_group_of_an_unknown_member_answers_per_member(h: GroupHarness) -> None:
    [a] = h.stable_group(1)
    error, per_member = h.coordinator.leave_group(
        "g", [("nobody", None, None), (a.member_id, None, None)]
    )
    assert (error, per_member) == (0, [UNKNOWN_MEMBER_ID, 0])


def test_a_member_without_heartbeats_is_removed_after_its_session_timeout(
    h: GroupHarness,
) -> None:
    a, b = h.stable_group(2, session_timeout_ms=1000)
    for _ in range(4):  # a heartbeats every 400 ms, b never
        h.advance(400)
        code = h.heartbeat(a.member_id, 1)
        if code:
            break
    assert code == REBALANCE_IN_PROGRESS
    assert h.heartbeat(b.member_id, 1) == UNKNOWN_MEMBER_ID
    again = h.join(a.member_id, session_timeout_ms=1000).result
    assert again.generation_id == 2
    assert [m for m, _, _ in again.members] == [a.member_id]


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped(
    h: GroupHarness,
) -> None:
    a, b = h.stable_group(2, rebalance_timeout_ms=5000, session_timeout_ms=60_000)
    rejoin = h.join(a.member_id, rebalance_timeout_ms=5000, session_timeout_ms=60_000)
    assert h.state() is S.PREPARING_REBALANCE  # a leader rejoining Stable rebalances
    h.advance(4999)
    assert not rejoin.done
    h.advance(1)
    assert rejoin.result.generation_id == 2
    assert [m for m, _, _ in rejoin.result.members] == [a.member_id]
    assert h.join(b.member_id).result.error == UNKNOWN_MEMBER_ID


def test_a_member_that_never_syncs_is_removed_and_the_group_rebalances(h: GroupHarness) -> None:
    a, b = h.join_new(rebalance_timeout_ms=3000), h.join_new(rebalance_timeout_ms=3000)
    h.until_answered(a, b)
    leader, follower = a.result, b.result
    h.sync(leader.member_id, 1, {leader.member_id: b"x", follower.member_id: b"y"})
    assert h.state() is S.STABLE
    h.advance(2000)
    assert h.heartbeat(leader.member_id, 1) == 0
    h.advance(1000)  # the follower never sent its SyncGroup
    assert h.state() is S.PREPARING_REBALANCE
    assert h.heartbeat(follower.member_id, 1) == UNKNOWN_MEMBER_ID


def test_a_known_member_resending_its_join_gets_the_same_generation(h: GroupHarness) -> None:
    _, b = h.stable_group(2)
    # a follower whose JoinGroup answer was lost joins again with the same metadata
    again = h.join(b.member_id).result
    assert (again.error, again.generation_id, again.members) == (0, 1, ())
    assert h.state() is S.STABLE


def test_invalid_session_timeout_is_refused() -> None:
    h = GroupHarness(min_session_timeout_ms=6000, max_session_timeout_ms=30_000)
    code = errors.InvalidSessionTimeoutError.code
    assert h.join(session_timeout_ms=5999).result.error == code
    assert h.join(session_timeout_ms=30_001).result.error == code
    assert h.join(session_timeout_ms=6000).result.error == MEMBER_ID_REQUIRED


# ---- static membership (KIP-345) -------------------------------------------------------


def test_a_static_member_restarting_keeps_its_assignment_without_a_rebalance(
    h: GroupHarness,
) -> None:
    a, b = h.join(instance_id="i-a"), h.join(instance_id="i-b")  # no MEMBER_ID_REQUIRED
    h.until_answered(a, b)
    ra, rb = a.result, b.result
    assert ra.member_id.startswith("i-a-")
    syncs = h.sync_all([ra, rb])
    assert [s.error for s in syncs] == [0, 0]
    # b restarts: same group.instance.id, no member id
    back = h.join(instance_id="i-b").result
    assert back.error == 0 and back.member_id != rb.member_id
    assert back.generation_id == 1  # no new generation
    assert h.state() is S.STABLE
    assert h.sync(back.member_id, 1, instance_id="i-b").result.assignment == (
        f"a:{rb.member_id}".encode()
    )
    # the old process is fenced
    assert h.heartbeat(rb.member_id, 1, instance_id="i-b") == FENCED_INSTANCE_ID
    assert h.heartbeat(back.member_id, 1, instance_id="i-b") == 0
    assert h.heartbeat(ra.member_id, 1, instance_id="i-a") == 0


def test_the_leader_keeps_leading_when_it_rejoins(h: GroupHarness) -> None:
    a, b = h.join(instance_id="i-a"), h.join(instance_id="i-b")
    h.until_answered(a, b)
    h.sync_all([a.result, b.result])
    restarted = h.join(instance_id="i-a").result  # the leader restarts under a new id
    assert restarted.error == 0
    other = [("range", encode_subscription(["events", "more"]))]
    rb = h.join(b.result.member_id, instance_id="i-b", protocols=other)
    ra = h.join(restarted.member_id, instance_id="i-a")
    assert ra.result.generation_id == rb.result.generation_id == 2
    assert rb.result.leader_id == restarted.member_id
    assert len(ra.result.members) == 2


def test_a_static_leader_returning_with_join_group_v9_skips_the_assignment(
    h: GroupHarness,
) -> None:
    a = h.join(instance_id="i-a")
    h.advance(100)
    h.sync_all([a.result])
    back = h.join(instance_id="i-a", version=9).result
    assert (back.skip_assignment, back.leader_id, back.generation_id) == (True, back.member_id, 1)
    assert len(back.members) == 1
    old = h.join(instance_id="i-a", version=8).result
    assert old.skip_assignment is False and old.members == ()  # must not reassign


def test_a_static_member_is_not_dropped_from_a_rebalance_it_misses(h: GroupHarness) -> None:
    a = h.join(instance_id="i-a", rebalance_timeout_ms=1000)
    b = h.join(instance_id="i-b", rebalance_timeout_ms=1000)
    h.until_answered(a, b)
    h.sync_all([a.result, b.result])
    rejoin = h.join(a.result.member_id, instance_id="i-a", rebalance_timeout_ms=1000)
    h.advance(1000)  # b does not rejoin in time: it stays a member (its session decides)
    assert rejoin.result.generation_id == 2
    assert {m for m, _, _ in rejoin.result.members} == {a.result.member_id, b.result.member_id}


def test_a_static_member_without_heartbeats_is_removed_after_its_session_timeout(
    h: GroupHarness,
) -> None:
    a = h.join(instance_id="i-a", session_timeout_ms=500)
    h.advance(100)
    h.sync_all([a.result])
    h.advance(500)
    assert h.state() is S.PREPARING_REBALANCE or h.state() is S.EMPTY
    assert h.heartbeat(a.result.member_id, 1, instance_id="i-a") == UNKNOWN_MEMBER_ID


def test_leave_group_by_instance_id_removes_a_static_member(h: GroupHarness) -> None:
    a = h.join(instance_id="i-a")
    h.advance(100)
    h.sync_all([a.result])
    assert h.coordinator.leave_group("g", [("", "i-a", "admin")]) == (0, [0])
    assert h.state() is S.EMPTY
    assert h.coordinator.leave_group("g", [("", "i-a", None)]) == (0, [UNKNOWN_MEMBER_ID])


# ---- coordination moving -----------------------------------------------------------------


def test_waiting_members_get_not_coordinator_when_the_group_moves(h: GroupHarness) -> None:
    waiting = h.join_new()
    h.coordinating = False
    h.coordinator.on_brokers_changed()
    assert waiting.result.error == NOT_COORDINATOR
    assert h.join().result.error == NOT_COORDINATOR
    assert h.heartbeat("x", 1) == NOT_COORDINATOR


def test_the_next_coordinator_continues_the_stored_generation() -> None:
    first = GroupHarness(0)
    a, b = first.stable_group(2)
    second = GroupHarness(1, offsets=first.offsets, clock=first.clock)  # takes the group over
    assert second.heartbeat(a.member_id, 1) == 0
    assert second.state() is S.STABLE
    assert second.sync(b.member_id, 1).result.assignment == f"a:{b.member_id}".encode()
    # the old coordinator's writes are fenced
    assert first.commit({("events", 0): 5}, member_id=a.member_id, generation_id=1) == {
        ("events", 0): NOT_COORDINATOR
    }
    # members that stop heartbeating to the new coordinator expire there
    second.advance(10_000)
    assert second.heartbeat(b.member_id, 1) == UNKNOWN_MEMBER_ID
