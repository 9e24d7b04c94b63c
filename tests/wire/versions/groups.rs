//! Cases of the classic consumer-group APIs, each on a group of its own brought to the
//! state the call is made in by the others at fixed versions, in a client's order:
//! FindCoordinator, JoinGroup (v4+: MEMBER_ID_REQUIRED first), SyncGroup, Heartbeat,
//! OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, LeaveGroup, OffsetDelete,
//! DeleteGroups.

use ringbroker::auth::acl::ResourceType;
use ringbroker::protocol::messages::leave_group_request::MemberIdentity;
use ringbroker::protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use ringbroker::protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use ringbroker::protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use ringbroker::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use ringbroker::protocol::messages::{
    ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use ringbroker::protocol::ErrorCode;

use super::fixture::{
    self, all_operations, assignment, commit, committed, join, join_request, sbs, stable_member, subscription, Ctx,
    AUTH_OPS_OMITTED, PROTOCOL, PROTOCOL_TYPE,
};
use super::wire::{expect_code, Check, CLIENT_ID};

// ---- FindCoordinator ---------------------------------------------------------------------

/// This broker coordinates every group: one key before v4, a batch of keys from v4.
pub(crate) fn find_coordinator(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let keys = [ctx.name("coordinated", v), ctx.name("coordinated", v)];
    let mut req = FindCoordinatorRequest::default();
    req.key_type = 0;
    if v >= 4 {
        req.coordinator_keys = keys.iter().map(|k| sbs(k)).collect();
    } else {
        req.key = sbs(&keys[0]);
    }
    let r: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, v, &req)?;
    let answers: Vec<(String, i16, i32, String, i32)> = if v >= 4 {
        r.coordinators
            .iter()
            .map(|c| (c.key.to_string(), c.error_code, c.node_id.0, c.host.to_string(), c.port))
            .collect()
    } else {
        vec![(keys[0].clone(), r.error_code, r.node_id.0, r.host.to_string(), r.port)]
    };
    let asked = if v >= 4 { 2 } else { 1 };
    ensure!(answers.len() == asked, "{} coordinators for {asked} keys", answers.len());
    let mut answered: Vec<&String> = answers.iter().map(|a| &a.0).collect();
    let mut wanted: Vec<&String> = keys[..asked].iter().collect();
    answered.sort();
    wanted.sort();
    ensure!(answered == wanted, "answered keys {answered:?}, asked {:?}", &keys[..asked]);
    for (key, code, node, host, port) in answers {
        expect_code(&format!("the coordinator of {key}"), code, 0)?;
        ensure!(
            node == ctx.node_id && host == ctx.host && port == ctx.port,
            "coordinator {node} at {host}:{port}, the broker is {} at {}:{}",
            ctx.node_id,
            ctx.host,
            ctx.port
        );
    }
    Ok(())
}

// ---- JoinGroup ---------------------------------------------------------------------------

/// A new member joins (v4+: after MEMBER_ID_REQUIRED hands it its id) and leads the group.
pub(crate) fn join_group(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("join", v);
    let mut w = ctx.plain()?;
    fixture::find_coordinator(&mut w, ctx, &group)?;
    let topics = [ctx.data.as_str()];
    let mut r: JoinGroupResponse = w.call(ApiKey::JoinGroup, v, &join_request(&group, "", &topics))?;
    if v >= 4 {
        expect_code("the first JoinGroup", r.error_code, ErrorCode::MemberIdRequired.code())?;
        ensure!(!r.member_id.is_empty(), "MEMBER_ID_REQUIRED without a member id");
        let id = r.member_id.to_string();
        r = w.call(ApiKey::JoinGroup, v, &join_request(&group, &id, &topics))?;
        ensure!(r.member_id.as_str() == id, "rejoined as {:?}, was given {id}", r.member_id);
    }
    expect_code("JoinGroup", r.error_code, 0)?;
    ensure!(!r.member_id.is_empty() && r.leader == r.member_id, "member {:?}, leader {:?}", r.member_id, r.leader);
    ensure!(r.generation_id >= 1, "generation {}", r.generation_id);
    ensure!(r.protocol_name.as_ref().is_some_and(|p| p.as_str() == PROTOCOL), "protocol {:?}", r.protocol_name);
    if v >= 7 {
        ensure!(
            r.protocol_type.as_ref().is_some_and(|p| p.as_str() == PROTOCOL_TYPE),
            "protocol type {:?}",
            r.protocol_type
        );
    }
    ensure!(
        r.members.len() == 1 && r.members[0].member_id == r.member_id && r.members[0].metadata == subscription(&topics),
        "members {:?}",
        r.members
    );
    let mut m = fixture::Member {
        w,
        group,
        id: r.member_id.to_string(),
        generation: r.generation_id,
        topics: vec![ctx.data.clone()],
    };
    m.sync()?;
    m.leave()
}

// ---- SyncGroup ---------------------------------------------------------------------------

/// The leader's assignment comes back to it; a stale generation is ILLEGAL_GENERATION.
pub(crate) fn sync_group(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("sync", v);
    let mut m = join(ctx, &group, &[&ctx.data])?;
    let mine = assignment(&[&ctx.data]);
    let request = |generation: i32| {
        let mut a = SyncGroupRequestAssignment::default();
        a.member_id = sbs(&m.id);
        a.assignment = mine.clone();
        let mut req = SyncGroupRequest::default();
        req.group_id = GroupId(sbs(&group));
        req.generation_id = generation;
        req.member_id = sbs(&m.id);
        if v >= 5 {
            req.protocol_type = Some(sbs(PROTOCOL_TYPE));
            req.protocol_name = Some(sbs(PROTOCOL));
        }
        req.assignments = vec![a];
        req
    };
    let (good, stale) = (request(m.generation), request(m.generation + 7));
    let r: SyncGroupResponse = m.w.call(ApiKey::SyncGroup, v, &good)?;
    expect_code("SyncGroup", r.error_code, 0)?;
    ensure!(r.assignment == mine, "assignment {:?}, the leader gave {:?}", r.assignment, mine);
    if v >= 5 {
        ensure!(
            r.protocol_type.as_ref().is_some_and(|p| p.as_str() == PROTOCOL_TYPE)
                && r.protocol_name.as_ref().is_some_and(|p| p.as_str() == PROTOCOL),
            "protocol {:?} {:?}",
            r.protocol_type,
            r.protocol_name
        );
    }
    let r: SyncGroupResponse = m.w.call(ApiKey::SyncGroup, v, &stale)?;
    expect_code("SyncGroup with a stale generation", r.error_code, ErrorCode::IllegalGeneration.code())?;
    m.leave()
}

// ---- Heartbeat ---------------------------------------------------------------------------

/// A stable member's heartbeat is NONE; an unknown member's UNKNOWN_MEMBER_ID; a wrong
/// generation's ILLEGAL_GENERATION.
pub(crate) fn heartbeat(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("heartbeat", v);
    let mut m = stable_member(ctx, &group)?;
    let request = |member: &str, generation: i32| {
        let mut req = HeartbeatRequest::default();
        req.group_id = GroupId(sbs(&group));
        req.generation_id = generation;
        req.member_id = sbs(member);
        req
    };
    for (what, req, want) in [
        ("Heartbeat", request(&m.id, m.generation), 0),
        ("Heartbeat of an unknown member", request("nobody", m.generation), ErrorCode::UnknownMemberId.code()),
        ("Heartbeat with a wrong generation", request(&m.id, m.generation + 7), ErrorCode::IllegalGeneration.code()),
    ] {
        let r: HeartbeatResponse = m.w.call(ApiKey::Heartbeat, v, &req)?;
        expect_code(what, r.error_code, want)?;
    }
    m.leave()
}

// ---- LeaveGroup --------------------------------------------------------------------------

/// The member leaves (the group is then Empty); an unknown member is UNKNOWN_MEMBER_ID (per
/// member from v3).
pub(crate) fn leave_group(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("leave", v);
    let mut m = stable_member(ctx, &group)?;
    let request = |member: &str| {
        let mut req = LeaveGroupRequest::default();
        req.group_id = GroupId(sbs(&group));
        if v >= 3 {
            let mut id = MemberIdentity::default();
            id.member_id = sbs(member);
            req.members = vec![id];
        } else {
            req.member_id = sbs(member);
        }
        req
    };
    let check = |r: &LeaveGroupResponse, what: &str, member: &str, want: i16| {
        if v >= 3 {
            expect_code(what, r.error_code, 0)?;
            ensure!(r.members.len() == 1 && r.members[0].member_id.as_str() == member, "members {:?}", r.members);
            expect_code(&format!("{what}, for the member"), r.members[0].error_code, want)
        } else {
            expect_code(what, r.error_code, want)
        }
    };
    let r: LeaveGroupResponse = m.w.call(ApiKey::LeaveGroup, v, &request(&m.id))?;
    check(&r, "LeaveGroup", &m.id, 0)?;
    let state = fixture::group_state(&mut m.w, &group)?;
    ensure!(state == "Empty", "the group is {state} after its only member left");
    let r: LeaveGroupResponse = m.w.call(ApiKey::LeaveGroup, v, &request("nobody"))?;
    check(&r, "LeaveGroup of an unknown member", "nobody", ErrorCode::UnknownMemberId.code())
}

// ---- OffsetCommit ------------------------------------------------------------------------

fn commit_request(v: i16, group: &str, member: &str, generation: i32, topic: &str, offset: i64) -> OffsetCommitRequest {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    if v >= 6 {
        p.committed_leader_epoch = 0;
    }
    p.committed_metadata = Some(sbs(&format!("sweep-v{v}")));
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(sbs(topic));
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(sbs(group));
    req.generation_id_or_member_epoch = generation;
    req.member_id = sbs(member);
    if v <= 4 {
        req.retention_time_ms = -1;
    }
    req.topics = vec![t];
    req
}

fn commit_answer(r: &OffsetCommitResponse, topic: &str) -> Result<i16, String> {
    ensure!(
        r.topics.len() == 1 && r.topics[0].name.as_str() == topic && r.topics[0].partitions.len() == 1,
        "answered {:?}",
        r.topics
    );
    Ok(r.topics[0].partitions[0].error_code)
}

/// A member's commit and a commit to a group without members (generation -1) are both
/// fetched back; a commit for an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
pub(crate) fn offset_commit(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("commit", v);
    let mut m = stable_member(ctx, &group)?;
    let req = commit_request(v, &group, &m.id, m.generation, &ctx.data, 2);
    let r: OffsetCommitResponse = m.w.call(ApiKey::OffsetCommit, v, &req)?;
    expect_code("OffsetCommit of a member", commit_answer(&r, &ctx.data)?, 0)?;
    let got = committed(&mut m.w, &group, &ctx.data)?;
    ensure!(got == 2, "committed 2, fetched {got}");
    let missing = ctx.name("nowhere", v);
    let req = commit_request(v, &group, &m.id, m.generation, &missing, 1);
    let r: OffsetCommitResponse = m.w.call(ApiKey::OffsetCommit, v, &req)?;
    expect_code(
        "OffsetCommit for an unknown topic",
        commit_answer(&r, &missing)?,
        ErrorCode::UnknownTopicOrPartition.code(),
    )?;
    m.leave()?;

    let lone = ctx.name("commit-lone", v);
    let mut w = ctx.plain()?;
    let r: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, v, &commit_request(v, &lone, "", -1, &ctx.data, 1))?;
    expect_code("OffsetCommit to a group without members", commit_answer(&r, &ctx.data)?, 0)?;
    let got = committed(&mut w, &lone, &ctx.data)?;
    ensure!(got == 1, "committed 1 without members, fetched {got}");
    Ok(())
}

// ---- OffsetFetch -------------------------------------------------------------------------

/// (topic, partition, offset, leader epoch, metadata, error) of each partition answered.
type Fetched = Vec<(String, i32, i64, i32, Option<String>, i16)>;

/// OffsetFetch at `v` for one group: the partitions named (None: all), and the group-level
/// error (the top-level one before v8).
fn offset_fetch_at(ctx: &Ctx, v: i16, group: &str, topics: Option<&[&str]>) -> Result<(i16, Fetched), String> {
    let mut w = ctx.plain()?;
    let mut req = OffsetFetchRequest::default();
    if v >= 8 {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(sbs(group));
        g.topics = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut x = OffsetFetchRequestTopics::default();
                    x.name = TopicName(sbs(t));
                    x.partition_indexes = vec![0];
                    x
                })
                .collect()
        });
        req.groups = vec![g];
    } else {
        req.group_id = GroupId(sbs(group));
        req.topics = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut x = OffsetFetchRequestTopic::default();
                    x.name = TopicName(sbs(t));
                    x.partition_indexes = vec![0];
                    x
                })
                .collect()
        });
    }
    let r: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, v, &req)?;
    let opt = |m: &Option<ringbroker::protocol::StrBytes>| m.as_ref().map(|s| s.to_string());
    if v >= 8 {
        ensure!(r.groups.len() == 1 && r.groups[0].group_id.as_str() == group, "answered groups {:?}", r.groups);
        let g = &r.groups[0];
        let rows = g
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        opt(&p.metadata),
                        p.error_code,
                    )
                })
            })
            .collect();
        Ok((g.error_code, rows))
    } else {
        let rows = r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        opt(&p.metadata),
                        p.error_code,
                    )
                })
            })
            .collect();
        Ok((if v >= 2 { r.error_code } else { 0 }, rows))
    }
}

/// A committed offset is fetched by name (and in an all-topics fetch from v2); a group
/// without offsets answers -1.
pub(crate) fn offset_fetch(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("fetch-offsets", v);
    let mut w = ctx.plain()?;
    commit(&mut w, &group, None, &[(&ctx.data, 2)])?;
    let expect_row = |rows: &Fetched, what: &str| {
        let row = rows.iter().find(|r| r.0 == ctx.data && r.1 == 0);
        let Some((_, _, offset, epoch, metadata, code)) = row else {
            return Err(format!("{what}: {}-0 not answered: {rows:?}", ctx.data));
        };
        expect_code(what, *code, 0)?;
        ensure!(*offset == 2 && metadata.as_deref() == Some("sweep"), "{what}: offset {offset} metadata {metadata:?}");
        if v >= 5 {
            ensure!(*epoch == 0, "{what}: leader epoch {epoch}, committed 0");
        }
        Ok(())
    };
    ctx.eventually(|| {
        let (code, rows) = offset_fetch_at(ctx, v, &group, Some(&[&ctx.data]))?;
        expect_code("OffsetFetch", code, 0)?;
        expect_row(&rows, "OffsetFetch by name")
    })?;
    if v >= 2 {
        let (code, rows) = offset_fetch_at(ctx, v, &group, None)?;
        expect_code("OffsetFetch of all topics", code, 0)?;
        expect_row(&rows, "OffsetFetch of all topics")?;
    }
    let (code, rows) = offset_fetch_at(ctx, v, &ctx.name("no-offsets", v), Some(&[&ctx.data]))?;
    expect_code("OffsetFetch of a group without offsets", code, 0)?;
    ensure!(
        rows.len() == 1 && rows[0].2 == -1 && rows[0].5 == 0,
        "a group without offsets answered {rows:?}, expected offset -1"
    );
    Ok(())
}

// ---- ListGroups --------------------------------------------------------------------------

/// A stable group is listed (with its state from v4, its type from v5); a state filter
/// leaves out groups in other states.
pub(crate) fn list_groups(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("list", v);
    let mut m = stable_member(ctx, &group)?;
    let list = |states: &[&str]| {
        let mut req = ListGroupsRequest::default();
        if v >= 4 {
            req.states_filter = states.iter().map(|s| sbs(s)).collect();
        }
        if v >= 5 {
            req.types_filter = vec![sbs("classic")];
        }
        let r: ListGroupsResponse = ctx.plain()?.call(ApiKey::ListGroups, v, &req)?;
        expect_code("ListGroups", r.error_code, 0)?;
        Ok::<_, String>(r.groups.into_iter().find(|g| g.group_id.as_str() == group))
    };
    let g = list(&["Stable"])?.ok_or_else(|| format!("ListGroups does not list {group}"))?;
    ensure!(g.protocol_type.as_str() == PROTOCOL_TYPE, "protocol type {:?}", g.protocol_type);
    if v >= 4 {
        ensure!(g.group_state.as_str() == "Stable", "state {:?}", g.group_state);
        ensure!(list(&["Empty"])?.is_none(), "a Stable group listed under the Empty filter");
    }
    if v >= 5 {
        ensure!(g.group_type.as_str() == "classic", "type {:?}", g.group_type);
    }
    m.leave()
}

// ---- DescribeGroups ----------------------------------------------------------------------

/// A stable group with its member; an unknown group is Dead (GROUP_ID_NOT_FOUND from v6).
pub(crate) fn describe_groups(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("describe", v);
    let unknown = ctx.name("describe-unknown", v);
    let mut m = stable_member(ctx, &group)?;
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(sbs(&group)), GroupId(sbs(&unknown))];
    let r: DescribeGroupsResponse = m.w.call(ApiKey::DescribeGroups, v, &req)?;
    ensure!(r.groups.len() == 2, "{} groups answered for 2", r.groups.len());
    let find = |name: &str| {
        r.groups
            .iter()
            .find(|g| g.group_id.as_str() == name)
            .ok_or_else(|| format!("{name} not answered: {:?}", r.groups))
    };
    let g = find(&group)?;
    expect_code("DescribeGroups", g.error_code, 0)?;
    ensure!(
        g.group_id.as_str() == group
            && g.group_state.as_str() == "Stable"
            && g.protocol_type.as_str() == PROTOCOL_TYPE
            && g.protocol_data.as_str() == PROTOCOL,
        "group {:?} state {:?} protocol {:?} {:?}",
        g.group_id,
        g.group_state,
        g.protocol_type,
        g.protocol_data
    );
    if v >= 3 {
        ensure!(g.authorized_operations == AUTH_OPS_OMITTED, "authorized operations {}", g.authorized_operations);
    }
    ensure!(g.members.len() == 1, "{} members", g.members.len());
    let member = &g.members[0];
    ensure!(
        member.member_id.as_str() == m.id
            && member.client_id.as_str() == CLIENT_ID
            && !member.client_host.is_empty()
            && member.group_instance_id.is_none()
            && member.member_metadata == subscription(&[&ctx.data])
            && member.member_assignment == assignment(&[&ctx.data]),
        "member {member:?}"
    );
    let u = find(&unknown)?;
    if v >= 6 {
        expect_code("DescribeGroups of an unknown group", u.error_code, ErrorCode::GroupIdNotFound.code())?;
    } else {
        expect_code("DescribeGroups of an unknown group", u.error_code, 0)?;
        ensure!(u.group_state.as_str() == "Dead" && u.members.is_empty(), "an unknown group is {:?}", u.group_state);
    }
    if v >= 3 {
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![GroupId(sbs(&group))];
        req.include_authorized_operations = true;
        let r: DescribeGroupsResponse = m.w.call(ApiKey::DescribeGroups, v, &req)?;
        let g = r.groups.first().ok_or("no group answered")?;
        expect_code("DescribeGroups with authorized operations", g.error_code, 0)?;
        let want = all_operations(ResourceType::Group);
        ensure!(g.authorized_operations == want, "group operations {:#x}, expected {want:#x}", g.authorized_operations);
    }
    m.leave()
}

// ---- DeleteGroups ------------------------------------------------------------------------

/// A group without members is deleted with its offsets; one with a member is
/// NON_EMPTY_GROUP; an unknown one GROUP_ID_NOT_FOUND.
pub(crate) fn delete_groups(ctx: &Ctx, v: i16) -> Check {
    let (empty, busy, unknown) = (ctx.name("delete-group", v), ctx.name("delete-busy", v), ctx.name("delete-none", v));
    let mut w = ctx.plain()?;
    commit(&mut w, &empty, None, &[(&ctx.data, 2)])?;
    let mut m = stable_member(ctx, &busy)?;
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = [&empty, &busy, &unknown].iter().map(|g| GroupId(sbs(g))).collect();
    let r: DeleteGroupsResponse = w.call(ApiKey::DeleteGroups, v, &req)?;
    ensure!(r.results.len() == 3, "{} results for 3 groups", r.results.len());
    // Kafka answers in no particular order.
    for (name, want) in
        [(&empty, 0), (&busy, ErrorCode::NonEmptyGroup.code()), (&unknown, ErrorCode::GroupIdNotFound.code())]
    {
        let res = r
            .results
            .iter()
            .find(|g| g.group_id.as_str() == name.as_str())
            .ok_or_else(|| format!("no result for {name}: {:?}", r.results))?;
        expect_code(&format!("DeleteGroups of {name}"), res.error_code, want)?;
    }
    let got = committed(&mut w, &empty, &ctx.data)?;
    ensure!(got == -1, "the deleted group still has offset {got}");
    m.leave()
}

// ---- OffsetDelete ------------------------------------------------------------------------

/// Offsets of a topic the group does not subscribe to are deleted; those of a subscribed
/// topic are GROUP_SUBSCRIBED_TO_TOPIC; an unknown group is GROUP_ID_NOT_FOUND.
pub(crate) fn offset_delete(ctx: &Ctx, v: i16) -> Check {
    let group = ctx.name("offset-delete", v);
    let mut m = stable_member(ctx, &group)?;
    commit(&mut m.w, &group, Some((&m.id.clone(), m.generation)), &[(&ctx.data, 2), (&ctx.scratch, 1)])?;
    let request = |group: &str| {
        let mut req = OffsetDeleteRequest::default();
        req.group_id = GroupId(sbs(group));
        req.topics = [&ctx.data, &ctx.scratch]
            .iter()
            .map(|t| {
                let mut p = OffsetDeleteRequestPartition::default();
                p.partition_index = 0;
                let mut x = OffsetDeleteRequestTopic::default();
                x.name = TopicName(sbs(t));
                x.partitions = vec![p];
                x
            })
            .collect();
        req
    };
    let r: OffsetDeleteResponse = m.w.call(ApiKey::OffsetDelete, v, &request(&group))?;
    expect_code("OffsetDelete", r.error_code, 0)?;
    let code = |topic: &str| {
        r.topics
            .iter()
            .find(|t| t.name.as_str() == topic)
            .and_then(|t| t.partitions.iter().find(|p| p.partition_index == 0))
            .map(|p| p.error_code)
            .ok_or_else(|| format!("{topic}-0 not answered: {:?}", r.topics))
    };
    expect_code("OffsetDelete of a subscribed topic", code(&ctx.data)?, ErrorCode::GroupSubscribedToTopic.code())?;
    expect_code("OffsetDelete of another topic", code(&ctx.scratch)?, 0)?;
    ensure!(committed(&mut m.w, &group, &ctx.scratch)? == -1, "the deleted offset is still there");
    ensure!(committed(&mut m.w, &group, &ctx.data)? == 2, "the subscribed topic's offset went away");
    let r: OffsetDeleteResponse = m.w.call(ApiKey::OffsetDelete, v, &request(&ctx.name("offset-delete-none", v)))?;
    expect_code("OffsetDelete of an unknown group", r.error_code, ErrorCode::GroupIdNotFound.code())?;
    m.leave()
}
