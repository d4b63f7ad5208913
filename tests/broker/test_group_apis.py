"""The group APIs on the wire: a consumer group joined over JoinGroup/SyncGroup, offsets
committed and fetched (every field a consumer reads back), and the admin APIs."""

from __future__ import annotations

from typing import Any

from kclient import errors
from kclient.broker.consumer_protocol import encode_assignment, encode_subscription
from kclient.broker.request_channel import SendResponse
from kclient.protocol import ApiKey

from .conftest import ApiHarness

NONE = 0


def join_group(h: ApiHarness, group: str, topics: list[str]) -> dict[str, Any]:
    """One consumer joins ``group`` (two JoinGroups, v9) and syncs an assignment of every
    partition of ``topics``: the JoinGroup answer."""
    body = {
        "group_id": group,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": encode_subscription(topics)}],
        "reason": None,
    }
    first = h.call(ApiKey.JOIN_GROUP, 9, body)
    assert first["error_code"] == errors.MemberIdRequiredError.code
    pending = h.handle(h.request(ApiKey.JOIN_GROUP, 9, body | {"member_id": first["member_id"]}))
    assert pending is None  # waits for the initial rebalance delay
    h.clock.advance(h.config.group_initial_rebalance_delay_ms)
    h.purgatory.expire_due()
    response = h.channel.receive_response(0)
    assert isinstance(response, SendResponse)
    joined = h.decode(response)
    assert joined["error_code"] == NONE
    assignment = {t: list(range(len(h.controller.topics[t].partitions))) for t in topics}
    synced = h.call(
        ApiKey.SYNC_GROUP,
        5,
        {
            "group_id": group,
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [
                {"member_id": joined["member_id"], "assignment": encode_assignment(assignment)}
            ],
        },
    )
    assert synced["error_code"] == NONE
    return joined


def commit(
    h: ApiHarness,
    group: str,
    offsets: dict[tuple[str, int], tuple[int, int, str | None]],
    *,
    generation_id: int = -1,
    member_id: str = "",
    version: int = 9,
) -> dict[tuple[str, int], int]:
    """OffsetCommit of (offset, leader epoch, metadata) per partition: the error codes."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (offset, epoch, metadata) in offsets.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": epoch,
                "committed_metadata": metadata,
            }
        )
    body = h.call(
        ApiKey.OFFSET_COMMIT,
        version,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation_id,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        },
    )
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in body["topics"]
        for p in t["partitions"]
    }


def fetch(h: ApiHarness, group: str, topics: list[str] | None, version: int = 7) -> Any:
    wanted = (
        None
        if topics is None
        else [
            {"name": t, "partition_indexes": list(range(len(h.controller.topics[t].partitions)))}
            for t in topics
        ]
    )
    body = h.call(ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": wanted})
    rows = {
        (t["name"], p["partition_index"]): (
            p["committed_offset"],
            p["committed_leader_epoch"],
            p["metadata"],
            p["error_code"],
        )
        for t in body["topics"]
        for p in t["partitions"]
    }
    return body["error_code"], rows


def test_committed_offsets_come_back_with_metadata_and_leader_epoch(harness: ApiHarness) -> None:
    harness.controller.create_topic("events", 2)
    assert commit(harness, "g", {("events", 0): (42, 3, "checkpoint-7")}) == {("events", 0): NONE}
    assert fetch(harness, "g", ["events"]) == (
        NONE,
        {("events", 0): (42, 3, "checkpoint-7", NONE), ("events", 1): (-1, -1, "", NONE)},
    )
    # a later commit replaces the earlier one; null metadata reads back as ""
    commit(harness, "g", {("events", 0): (50, 4, None)})
    assert fetch(harness, "g", None)[1] == {("events", 0): (50, 4, "", NONE)}
    # other groups see nothing
    assert fetch(harness, "other", ["events"])[1][("events", 0)][0] == -1


def test_offset_commit_refuses_what_it_cannot_store(make_harness: Any) -> None:
    h = make_harness(auto_create_topics=False, offset_metadata_max_bytes=10)
    h.controller.create_topic("events", 1)
    assert commit(
        h,
        "g",
        {
            ("events", 0): (1, -1, "x" * 11),
            ("events", 5): (1, -1, ""),
            ("nope", 0): (1, -1, ""),
        },
    ) == {
        ("events", 0): errors.OffsetMetadataTooLargeError.code,
        ("events", 5): errors.UnknownTopicOrPartitionError.code,
        ("nope", 0): errors.UnknownTopicOrPartitionError.code,
    }
    assert fetch(h, "g", None)[1] == {}


def test_members_commit_with_their_generation_and_nobody_else_may(harness: ApiHarness) -> None:
    harness.controller.create_topic("events", 1)
    joined = join_group(harness, "g", ["events"])
    member, generation = joined["member_id"], joined["generation_id"]
    tp = ("events", 0)
    ok = commit(harness, "g", {tp: (5, -1, "")}, generation_id=generation, member_id=member)
    assert ok == {tp: NONE}
    stale = commit(harness, "g", {tp: (6, -1, "")}, generation_id=generation - 1, member_id=member)
    assert stale == {tp: errors.IllegalGenerationError.code}
    stranger = commit(harness, "g", {tp: (7, -1, "")}, generation_id=generation, member_id="x")
    assert stranger == {tp: errors.UnknownMemberIdError.code}
    # a consumer without group management cannot commit into a live group
    assert commit(harness, "g", {tp: (8, -1, "")}) == {tp: errors.UnknownMemberIdError.code}
    assert fetch(harness, "g", ["events"])[1][tp][0] == 5


def test_offset_fetch_v8_reads_several_groups_at_once(harness: ApiHarness) -> None:
    harness.controller.create_topic("events", 1)
    commit(harness, "a", {("events", 0): (10, 1, "m-a")})
    commit(harness, "b", {("events", 0): (20, 2, "m-b")})
    body = harness.call(
        ApiKey.OFFSET_FETCH,
        8,
        {
            "groups": [
                {"group_id": "a", "topics": [{"name": "events", "partition_indexes": [0]}]},
                {"group_id": "b", "topics": None},
                {"group_id": "", "topics": None},
            ],
            "require_stable": False,
        },
    )
    got = {
        g["group_id"]: (
            g["error_code"],
            [
                (p["partition_index"], p["committed_offset"], p["metadata"])
                for t in g["topics"]
                for p in t["partitions"]
            ],
        )
        for g in body["groups"]
    }
    assert got == {"a": (NONE, [(0, 10, "m-a")]), "b": (NONE, [(0, 20, "m-b")]), "": (NONE, [])}


def test_offsets_of_a_deleted_topic_are_dropped(harness: ApiHarness) -> None:
    harness.controller.create_topic("gone", 1)
    harness.controller.create_topic("kept", 1)
    commit(harness, "g", {("gone", 0): (3, -1, ""), ("kept", 0): (4, -1, "")})
    body = harness.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["gone"], "timeout_ms": 1000})
    assert body["responses"][0]["error_code"] == NONE
    harness.controller.create_topic("gone", 1)  # a new topic of the same name starts afresh
    assert fetch(harness, "g", None)[1] == {("kept", 0): (4, -1, "", NONE)}


def test_delete_groups_deletes_only_empty_groups_with_their_offsets(harness: ApiHarness) -> None:
    harness.controller.create_topic("events", 1)
    commit(harness, "idle", {("events", 0): (9, -1, "")})
    join_group(harness, "busy", ["events"])
    body = harness.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["idle", "busy", "never"]})
    assert {r["group_id"]: r["error_code"] for r in body["results"]} == {
        "idle": NONE,
        "busy": errors.NonEmptyGroupError.code,
        "never": errors.GroupIdNotFoundError.code,
    }
    assert fetch(harness, "idle", ["events"])[1][("events", 0)][0] == -1
    listed = harness.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert [g["group_id"] for g in listed["groups"]] == ["busy"]


def offset_delete(h: ApiHarness, group: str, tps: list[tuple[str, int]]) -> Any:
    topics: dict[str, list[dict[str, int]]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append({"partition_index": p})
    body = h.call(
        ApiKey.OFFSET_DELETE,
        0,
        {"group_id": group, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
    )
    return body["error_code"], {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in body["topics"]
        for p in t["partitions"]
    }


def test_offset_delete_keeps_offsets_of_topics_the_group_consumes(harness: ApiHarness) -> None:
    harness.controller.create_topic("events", 1)
    harness.controller.create_topic("old", 1)
    joined = join_group(harness, "g", ["events"])
    commit(
        harness,
        "g",
        {("events", 0): (1, -1, ""), ("old", 0): (2, -1, "")},
        generation_id=joined["generation_id"],
        member_id=joined["member_id"],
    )
    assert offset_delete(harness, "g", [("events", 0), ("old", 0)]) == (
        NONE,
        {("events", 0): errors.GroupSubscribedToTopicError.code, ("old", 0): NONE},
    )
    assert fetch(harness, "g", None)[1] == {("events", 0): (1, -1, "", NONE)}
    assert offset_delete(harness, "nobody", [("events", 0)])[0] == errors.GroupIdNotFoundError.code


def test_list_and_describe_groups_tell_state_protocol_and_members(harness: ApiHarness) -> None:
    harness.controller.create_topic("events", 3)
    joined = join_group(harness, "g", ["events"])
    commit(harness, "simple", {("events", 0): (1, -1, "")})
    listed = harness.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert {(g["group_id"], g["group_state"], g["protocol_type"]) for g in listed["groups"]} == {
        ("g", "Stable", "consumer"),
        ("simple", "Empty", ""),
    }
    stable = harness.call(ApiKey.LIST_GROUPS, 4, {"states_filter": ["Stable"]})
    assert [g["group_id"] for g in stable["groups"]] == ["g"]
    body = harness.call(
        ApiKey.DESCRIBE_GROUPS,
        5,
        {"groups": ["g", "missing"], "include_authorized_operations": False},
    )
    g, missing = body["groups"]
    assert (g["error_code"], g["group_state"], g["protocol_type"], g["protocol_data"]) == (
        NONE,
        "Stable",
        "consumer",
        "range",
    )
    [member] = g["members"]
    assert member["member_id"] == joined["member_id"]
    assert member["client_id"] == "unit-test"
    assert member["member_assignment"] == encode_assignment({"events": [0, 1, 2]})
    assert member["member_metadata"] == encode_subscription(["events"])
    assert (missing["error_code"], missing["group_state"]) == (NONE, "Dead")
    v6 = harness.call(
        ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["missing"], "include_authorized_operations": False}
    )
    assert v6["groups"][0]["error_code"] == errors.GroupIdNotFoundError.code


def test_group_requests_to_a_broker_that_is_not_the_coordinator(make_harness: Any) -> None:
    h = make_harness(brokers=3)
    h.controller.create_topic("events", 1)
    # "g1" hashes to broker 0; broker 1 must send the consumer back to FindCoordinator
    body = h.call(
        ApiKey.HEARTBEAT,
        4,
        {"group_id": "g1", "generation_id": 1, "member_id": "m", "group_instance_id": None},
        node=1,
    )
    assert body["error_code"] == errors.NotCoordinatorError.code
    fetched = h.call(ApiKey.OFFSET_FETCH, 7, {"group_id": "g1", "topics": None}, node=1)
    assert fetched["error_code"] == errors.NotCoordinatorError.code


def test_bad_group_requests_get_kafkas_errors(harness: ApiHarness) -> None:
    join = {
        "group_id": "",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\xff\xff not a subscription"}],
        "reason": None,
    }
    assert harness.call(ApiKey.JOIN_GROUP, 9, join)["error_code"] == (
        errors.InvalidGroupIdError.code
    )
    no_protocols = join | {"group_id": "g", "protocols": []}
    assert harness.call(ApiKey.JOIN_GROUP, 9, no_protocols)["error_code"] == (
        errors.InconsistentGroupProtocolError.code
    )
    # metadata that is not the consumer protocol is the client's business: it still joins
    first = harness.call(ApiKey.JOIN_GROUP, 9, join | {"group_id": "g"})
    assert first["error_code"] == errors.MemberIdRequiredError.code
    sync = {
        "group_id": "g",
        "generation_id": 1,
        "member_id": first["member_id"],
        "group_instance_id": None,
        "protocol_type": None,
        "protocol_name": None,
        "assignments": [],
    }
    assert harness.call(ApiKey.SYNC_GROUP, 5, sync)["error_code"] == (
        errors.InconsistentGroupProtocolError.code
    )
