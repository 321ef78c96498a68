//! OffsetCommit (API 8): simple (no member) and group commits; a classic member's
//! commit carries its generation, a KIP-848 member's its member epoch
//! (STALE_MEMBER_EPOCH when older).

use kring::protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse,
    offset_commit::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::{Group, GroupState, check_coordinator, fail};
use crate::cluster::state::Committed;

/// The largest committed metadata string accepted (Kafka's
/// `offset.metadata.max.bytes`).
const MAX_METADATA: usize = 4096;

/// Whether a commit from this member and generation is allowed now.
fn commit_allowed(group: Option<&Group>, r: &OffsetCommitRequest) -> Result<(), KafkaCode> {
    let simple = r.generation_id_or_member_epoch < 0 && r.member_id.is_empty();
    let Some(group) = group else {
        return if simple {
            Ok(())
        } else {
            Err(KafkaCode::ILLEGAL_GENERATION)
        };
    };
    if simple {
        return if group.members.is_empty() && group.consumer.members.is_empty() {
            Ok(())
        } else {
            Err(KafkaCode::UNKNOWN_MEMBER_ID)
        };
    }
    if !group.consumer.members.is_empty() {
        // KIP-848: the member epoch must be the member's current one.
        return group
            .consumer
            .check_epoch(&r.member_id, r.generation_id_or_member_epoch, true);
    }
    if group
        .find_member(&r.member_id, r.group_instance_id.as_deref())
        .is_none()
    {
        return Err(KafkaCode::UNKNOWN_MEMBER_ID);
    }
    if r.generation_id_or_member_epoch != group.generation {
        return Err(KafkaCode::ILLEGAL_GENERATION);
    }
    if group.state == GroupState::CompletingRebalance {
        return Err(KafkaCode::REBALANCE_IN_PROGRESS);
    }
    Ok(())
}

pub(crate) fn offset_commit(cx: &Ctx<'_>, r: &OffsetCommitRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    if r.group_id.is_empty() {
        return fail(cx, r, KafkaCode::INVALID_GROUP_ID);
    }
    if let Err(code) = commit_allowed(st.groups.get(&r.group_id), r) {
        return fail(cx, r, code);
    }
    let state = &mut *st;
    let group = state.groups.entry(r.group_id.clone()).or_default();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let known = state.topics.get(&t.name).is_some_and(|topic| {
                                (0..topic.partitions.len() as i32).contains(&p.partition_index)
                            });
                            let code = if !known {
                                KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
                            } else if p
                                .committed_metadata
                                .as_ref()
                                .is_some_and(|m| m.len() > MAX_METADATA)
                            {
                                KafkaCode::OFFSET_METADATA_TOO_LARGE
                            } else {
                                group.offsets.insert(
                                    (t.name.clone(), p.partition_index),
                                    Committed {
                                        offset: p.committed_offset,
                                        leader_epoch: p.committed_leader_epoch,
                                        metadata: p.committed_metadata.clone(),
                                    },
                                );
                                KafkaCode::NONE
                            };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    cx.notify();
    ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
}
