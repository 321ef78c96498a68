//! OffsetDelete (API 47): deletes a group's committed offsets of some partitions;
//! refused per partition with GROUP_SUBSCRIBED_TO_TOPIC while the group has members
//! (the fake cluster does not track subscriptions, so any member counts).

use kring::protocol::messages::{
    OffsetDeleteRequest, OffsetDeleteResponse,
    offset_delete::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic},
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::check_coordinator;

pub(crate) fn offset_delete(cx: &Ctx<'_>, r: &OffsetDeleteRequest) -> ResponseKind {
    let mut st = cx.lock();
    let top = match check_coordinator(&st, cx.broker, &r.group_id) {
        Err(code) => Some(code),
        Ok(()) if !st.groups.contains_key(&r.group_id) => Some(KafkaCode::GROUP_ID_NOT_FOUND),
        Ok(()) => None,
    };
    if let Some(code) = top {
        return ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default().with_error_code(code.code()),
        );
    }
    let Some(group) = st.groups.get_mut(&r.group_id) else {
        return ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default().with_error_code(KafkaCode::GROUP_ID_NOT_FOUND.code()),
        );
    };
    let active = !group.members.is_empty();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let code = if active {
                                KafkaCode::GROUP_SUBSCRIBED_TO_TOPIC
                            } else {
                                group.offsets.remove(&(t.name.clone(), p.partition_index));
                                KafkaCode::NONE
                            };
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    drop(st);
    cx.notify();
    ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_topics(topics))
}
