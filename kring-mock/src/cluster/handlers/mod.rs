//! The fake cluster's answers, one file per API (as franz-go's kfake has them), and
//! the checks they share. Each handler follows the broker's checks in Kafka's order:
//! topic known, partition known, this broker the leader, the leader epoch current,
//! then the operation. Group handlers (JoinGroup ... OffsetFetch) work on the group
//! model in [`super::group`].

pub(super) mod add_offsets_to_txn;
pub(super) mod add_partitions_to_txn;
pub(super) mod alter_configs;
pub(super) mod api_versions;
mod configs;
pub(super) mod consumer_group_heartbeat;
pub(super) mod create_partitions;
pub(super) mod create_topics;
pub(super) mod delete_groups;
pub(super) mod delete_records;
pub(super) mod delete_topics;
pub(super) mod describe_cluster;
pub(super) mod describe_configs;
pub(super) mod describe_groups;
pub(super) mod end_txn;
pub(super) mod fetch;
pub(super) mod find_coordinator;
pub(super) mod heartbeat;
pub(super) mod incremental_alter_configs;
pub(super) mod init_producer_id;
pub(super) mod join_group;
pub(super) mod leave_group;
pub(super) mod list_groups;
pub(super) mod list_offsets;
pub(super) mod metadata;
pub(super) mod offset_commit;
pub(super) mod offset_delete;
pub(super) mod offset_fetch;
pub(super) mod offset_for_leader_epoch;
pub(super) mod produce;
pub(super) mod sync_group;
pub(super) mod txn_offset_commit;

use kring::protocol::KafkaCode;

use crate::cluster::state::{Partition, State, Topic};

/// Looks up a partition this broker must lead: the partition, or the error to answer.
fn led_partition<'a>(
    st: &'a State,
    broker: i32,
    topic: Option<&'a Topic>,
    partition: i32,
    current_epoch: i32,
) -> Result<&'a Partition, KafkaCode> {
    let p = topic
        .and_then(|t| {
            usize::try_from(partition)
                .ok()
                .and_then(|i| t.partitions.get(i))
        })
        .ok_or(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION)?;
    if p.leader != broker || !st.is_up(broker) {
        return Err(KafkaCode::NOT_LEADER_OR_FOLLOWER);
    }
    check_epoch(current_epoch, p.leader_epoch)?;
    Ok(p)
}

/// Looks up a partition this broker serves fetches of: as its leader, or (KIP-392,
/// `follower_fetch`: a consumer's Fetch v11+) as the follower the leader names as its
/// preferred read replica.
fn served_partition<'a>(
    st: &'a State,
    broker: i32,
    topic: Option<&'a Topic>,
    partition: i32,
    current_epoch: i32,
    follower_fetch: bool,
) -> Result<&'a Partition, KafkaCode> {
    let p = topic
        .and_then(|t| {
            usize::try_from(partition)
                .ok()
                .and_then(|i| t.partitions.get(i))
        })
        .ok_or(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION)?;
    if follower_fetch && p.leader != broker && p.preferred_read_replica == Some(broker) {
        if !st.is_up(broker) {
            return Err(KafkaCode::NOT_LEADER_OR_FOLLOWER);
        }
        check_epoch(current_epoch, p.leader_epoch)?;
        return Ok(p);
    }
    led_partition(st, broker, topic, partition, current_epoch)
}

/// KIP-320: a client's view of the leader epoch must be the current one (-1 skips it).
fn check_epoch(asked: i32, current: i32) -> Result<(), KafkaCode> {
    match asked {
        a if a < 0 || a == current => Ok(()),
        a if a < current => Err(KafkaCode::FENCED_LEADER_EPOCH),
        _ => Err(KafkaCode::UNKNOWN_LEADER_EPOCH),
    }
}

pub(super) fn partition_mut<'a>(
    st: &'a mut State,
    topic: &str,
    partition: i32,
) -> Option<&'a mut Partition> {
    st.topics.get_mut(topic).and_then(|t| {
        usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get_mut(i))
    })
}
