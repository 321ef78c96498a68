//! LeaveGroup (API 13): members leave, which starts a rebalance.

use kring::protocol::messages::{
    LeaveGroupRequest, LeaveGroupResponse, leave_group::MemberResponse,
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::{check_coordinator, fail};

pub(crate) fn leave(cx: &Ctx<'_>, r: &LeaveGroupRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    let leaving: Vec<(String, Option<String>)> = if cx.request.version < 3 {
        vec![(r.member_id.clone(), None)]
    } else {
        r.members
            .iter()
            .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
            .collect()
    };
    let Some(group) = st.groups.get_mut(&r.group_id) else {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    };
    let mut results = Vec::new();
    for (member_id, instance) in leaving {
        let code = match group.find_member(&member_id, instance.as_deref()) {
            Some(found) => {
                group.remove_member(&found);
                KafkaCode::NONE
            }
            None => KafkaCode::UNKNOWN_MEMBER_ID,
        };
        results.push(
            MemberResponse::default()
                .with_member_id(member_id)
                .with_group_instance_id(instance)
                .with_error_code(code.code()),
        );
    }
    cx.notify();
    if cx.request.version < 3 {
        let code = results.first().map_or(0, |m| m.error_code);
        return ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code));
    }
    ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_members(results))
}
