//! JoinGroup (API 11): joins wait until the rebalance completes (see
//! [`crate::cluster::group`] for the rebalance rules).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kring::protocol::messages::{
    JoinGroupRequest, JoinGroupResponse, join_group::JoinGroupResponseMember,
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::{GroupState, Member, check_coordinator, fail};

pub(crate) fn join(cx: &Ctx<'_>, r: &JoinGroupRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    if r.group_id.is_empty() {
        return fail(cx, r, KafkaCode::INVALID_GROUP_ID);
    }
    if r.protocol_type.is_empty() || r.protocols.is_empty() {
        return fail(cx, r, KafkaCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    let client_id = cx.request.client_id().unwrap_or_default().to_string();
    let state = &mut *st;
    let group = state.groups.entry(r.group_id.clone()).or_default();
    let others_agree = {
        let mut common: Option<BTreeSet<&str>> = None;
        for (id, m) in &group.members {
            if *id == r.member_id {
                continue;
            }
            let names: BTreeSet<&str> = m.protocols.iter().map(|(n, _)| n.as_str()).collect();
            common = Some(match common {
                None => names,
                Some(c) => c.intersection(&names).copied().collect(),
            });
        }
        common.is_none_or(|c| r.protocols.iter().any(|p| c.contains(p.name.as_str())))
    };
    let type_matches = group.members.is_empty()
        || group.protocol_type.as_deref() == Some(r.protocol_type.as_str());
    if !others_agree || !type_matches {
        return fail(cx, r, KafkaCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    let member_id = if r.member_id.is_empty() {
        match group.find_member("", r.group_instance_id.as_deref()) {
            Some(existing) => existing,
            None => {
                state.member_seq += 1;
                let prefix = if client_id.is_empty() {
                    "member"
                } else {
                    &client_id
                };
                format!("{prefix}-{}", state.member_seq)
            }
        }
    } else if group.members.contains_key(&r.member_id) {
        r.member_id.clone()
    } else {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    };
    let rebalance_ms = if r.rebalance_timeout_ms > 0 {
        r.rebalance_timeout_ms
    } else {
        r.session_timeout_ms
    };
    let seq = state.member_seq;
    let group = state.groups.entry(r.group_id.clone()).or_default();
    let member = group.members.entry(member_id.clone()).or_insert(Member {
        instance_id: None,
        client_id: client_id.clone(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout: Duration::ZERO,
        protocols: Vec::new(),
        assignment: Bytes::new(),
        seq,
    });
    member.instance_id = r.group_instance_id.clone();
    member.rebalance_timeout = Duration::from_millis(rebalance_ms.max(0) as u64);
    member.protocols = r
        .protocols
        .iter()
        .map(|p| (p.name.clone(), p.metadata.clone()))
        .collect();
    group.protocol_type = Some(r.protocol_type.clone());
    if group.state != GroupState::PreparingRebalance {
        group.begin_rebalance();
    }
    group.joined.insert(member_id.clone());
    let round = group.round;
    group.maybe_complete_join();
    cx.notify();

    loop {
        let Some(group) = st.groups.get_mut(&r.group_id) else {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        };
        if group.completed >= round {
            break;
        }
        if !group.members.contains_key(&member_id) {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        }
        let deadline = group.deadline.unwrap_or_else(Instant::now);
        if Instant::now() >= deadline {
            group.complete_join();
            cx.notify();
            break;
        }
        if cx.aborted(&st) {
            return fail(cx, r, KafkaCode::COORDINATOR_NOT_AVAILABLE);
        }
        st = cx.wait(st, deadline);
    }
    let group = &st.groups[&r.group_id];
    if !group.members.contains_key(&member_id) {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    }
    let leader = group.leader.clone().unwrap_or_default();
    let members = if leader == member_id {
        group
            .members
            .iter()
            .map(|(id, m)| {
                JoinGroupResponseMember::default()
                    .with_member_id(id.clone())
                    .with_group_instance_id(m.instance_id.clone())
                    .with_metadata(m.metadata(group.protocol.as_deref()))
            })
            .collect()
    } else {
        Vec::new()
    };
    ResponseKind::JoinGroup(
        JoinGroupResponse::default()
            .with_generation_id(group.generation)
            .with_protocol_type(group.protocol_type.clone())
            .with_protocol_name(Some(group.protocol.clone().unwrap_or_default()))
            .with_leader(leader)
            .with_member_id(member_id)
            .with_members(members),
    )
}
