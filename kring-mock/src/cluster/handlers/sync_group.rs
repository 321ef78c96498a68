//! SyncGroup (API 14): the leader hands out assignments; followers wait for them.

use std::time::Instant;

use kring::protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::{Group, GroupState, check_coordinator, fail};

pub(crate) fn sync(cx: &Ctx<'_>, r: &SyncGroupRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    let ok = |group: &Group, member: &str| {
        ResponseKind::SyncGroup(
            SyncGroupResponse::default()
                .with_protocol_type(group.protocol_type.clone())
                .with_protocol_name(group.protocol.clone())
                .with_assignment(group.members[member].assignment.clone()),
        )
    };
    loop {
        let Some(group) = st.groups.get_mut(&r.group_id) else {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        };
        let Some(member) = group.find_member(&r.member_id, r.group_instance_id.as_deref()) else {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        };
        if r.generation_id != group.generation {
            return fail(cx, r, KafkaCode::ILLEGAL_GENERATION);
        }
        if r.protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != group.protocol_type.as_ref())
            || r.protocol_name
                .as_ref()
                .is_some_and(|p| Some(p) != group.protocol.as_ref())
        {
            return fail(cx, r, KafkaCode::INCONSISTENT_GROUP_PROTOCOL);
        }
        match group.state {
            GroupState::Stable => return ok(group, &member),
            GroupState::PreparingRebalance => return fail(cx, r, KafkaCode::REBALANCE_IN_PROGRESS),
            GroupState::Empty => return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID),
            GroupState::CompletingRebalance => {}
        }
        if group.leader.as_deref() == Some(member.as_str()) {
            for a in &r.assignments {
                if let Some(m) = group.members.get_mut(&a.member_id) {
                    m.assignment = a.assignment.clone();
                }
            }
            group.state = GroupState::Stable;
            group.deadline = None;
            let answer = ok(group, &member);
            cx.notify();
            return answer;
        }
        let deadline = group.deadline.unwrap_or_else(Instant::now);
        if Instant::now() >= deadline {
            // The leader never sent its assignment: start over without it.
            if let Some(leader) = group.leader.clone() {
                group.remove_member(&leader);
            }
            cx.notify();
            return fail(cx, r, KafkaCode::REBALANCE_IN_PROGRESS);
        }
        if cx.aborted(&st) {
            return fail(cx, r, KafkaCode::COORDINATOR_NOT_AVAILABLE);
        }
        st = cx.wait(st, deadline);
    }
}
