//! TxnOffsetCommit (API 28): offsets sent to a transaction, at the group's
//! coordinator. They stay pending in the transaction until its EndTxn: a commit makes
//! them the group's committed offsets, an abort drops them. From v3 a member's offsets
//! carry its generation (KIP-447): a classic member must be in the group at that
//! generation, a KIP-848 member at its current member epoch.

use kring::protocol::messages::{
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    txn_offset_commit::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic},
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::{Group, check_coordinator};
use crate::cluster::state::{Committed, State};
use crate::cluster::txn::fenced;

/// Kafka's `offset.metadata.max.bytes`.
const MAX_METADATA: usize = 4096;

/// KIP-447: the generation (or member epoch) the offsets were consumed in must be the
/// member's current one; offsets sent without membership are not checked.
fn member_current(group: Option<&Group>, r: &TxnOffsetCommitRequest) -> Result<(), KafkaCode> {
    if r.generation_id < 0 && r.member_id.is_empty() {
        return Ok(());
    }
    let group = group.ok_or(KafkaCode::ILLEGAL_GENERATION)?;
    if !group.consumer.members.is_empty() {
        return group
            .consumer
            .check_epoch(&r.member_id, r.generation_id, false)
            .map_err(|_| KafkaCode::ILLEGAL_GENERATION);
    }
    if group
        .find_member(&r.member_id, r.group_instance_id.as_deref())
        .is_none()
    {
        return Err(KafkaCode::UNKNOWN_MEMBER_ID);
    }
    if r.generation_id != group.generation {
        return Err(KafkaCode::ILLEGAL_GENERATION);
    }
    Ok(())
}

/// Every check before the offsets: the coordinator, the producer, the group in the
/// transaction, the member's generation.
fn admissible(
    st: &mut State,
    broker: i32,
    version: i16,
    r: &TxnOffsetCommitRequest,
) -> Result<(), KafkaCode> {
    check_coordinator(st, broker, &r.group_id)?;
    if r.group_id.is_empty() {
        return Err(KafkaCode::INVALID_GROUP_ID);
    }
    let txn = st.txn_of_producer(
        &r.transactional_id,
        r.producer_id,
        r.producer_epoch,
        fenced(version, 3),
    )?;
    if !txn.groups.contains(&r.group_id) {
        // AddOffsetsToTxn first (a broker verifying transactions refuses it too).
        return Err(KafkaCode::INVALID_TXN_STATE);
    }
    member_current(st.groups.get(&r.group_id), r)
}

fn answer(
    r: &TxnOffsetCommitRequest,
    mut code_of: impl FnMut(&str, i32) -> KafkaCode,
) -> ResponseKind {
    let topics = r
        .topics
        .iter()
        .map(|t| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code_of(&t.name, p.partition_index).code())
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
}

pub(crate) fn txn_offset_commit(cx: &Ctx<'_>, r: &TxnOffsetCommitRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = admissible(&mut st, cx.broker, cx.request.version, r) {
        return answer(r, |_, _| code);
    }
    let st = &mut *st;
    let mut pending = Vec::new();
    let response = answer(r, |topic, partition| {
        let known = st
            .topics
            .get(topic)
            .is_some_and(|t| (0..t.partitions.len() as i32).contains(&partition));
        let Some(p) = r
            .topics
            .iter()
            .filter(|t| t.name == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
        else {
            return KafkaCode::UNKNOWN_TOPIC_OR_PARTITION;
        };
        if !known {
            return KafkaCode::UNKNOWN_TOPIC_OR_PARTITION;
        }
        if p.committed_metadata
            .as_ref()
            .is_some_and(|m| m.len() > MAX_METADATA)
        {
            return KafkaCode::OFFSET_METADATA_TOO_LARGE;
        }
        pending.push((
            (topic.to_string(), partition),
            Committed {
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.clone(),
            },
        ));
        KafkaCode::NONE
    });
    if let Some(txn) = st.txns.get_mut(&r.transactional_id) {
        txn.pending_offsets
            .entry(r.group_id.clone())
            .or_default()
            .extend(pending);
    }
    response
}
