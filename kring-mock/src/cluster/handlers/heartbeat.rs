//! Heartbeat (API 12): tells a member whether a rebalance is under way.

use kring::protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::{GroupState, check_coordinator, fail};

pub(crate) fn heartbeat(cx: &Ctx<'_>, r: &HeartbeatRequest) -> ResponseKind {
    let st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    let Some(group) = st.groups.get(&r.group_id) else {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    };
    if group
        .find_member(&r.member_id, r.group_instance_id.as_deref())
        .is_none()
    {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    }
    if r.generation_id != group.generation {
        return fail(cx, r, KafkaCode::ILLEGAL_GENERATION);
    }
    if group.state == GroupState::PreparingRebalance {
        return fail(cx, r, KafkaCode::REBALANCE_IN_PROGRESS);
    }
    ResponseKind::Heartbeat(HeartbeatResponse::default())
}
