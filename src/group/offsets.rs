//! A group member's offsets: the committed offsets of the partitions it is assigned
//! (one OffsetFetch for all of them, `require_stable` so offsets of transactions still
//! open are waited for, KIP-447), and commits that carry the member's generation and id
//! (and instance id), so a member that was fenced cannot overwrite what the partitions'
//! new owners commit. The coordinator's moves are retried through
//! [`with_group_coordinator`].

use std::collections::BTreeMap;

use super::TopicPartition;
use crate::client::Client;
use crate::consumer::offsets::with_group_coordinator;
use crate::engine::group::Generation;
use crate::error::{Error, Result};
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use crate::protocol::messages::{OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse};
use crate::protocol::{ApiKey, KafkaCode};

/// An offset to commit: the next one to consume, with the application's metadata and
/// the leader epoch of the record before it (KIP-320).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset to consume.
    pub offset: i64,
    /// Free text stored with it.
    pub metadata: String,
    /// The leader epoch of the last record consumed (the batch it came in), so a
    /// consumer starting from this offset can tell a truncated log; `None` when unknown
    /// (sent as -1). The group consumer fills it in; Java members read it too.
    pub leader_epoch: Option<i32>,
}

impl OffsetAndMetadata {
    /// `offset` with no metadata and no leader epoch.
    pub fn new(offset: i64) -> Self {
        OffsetAndMetadata {
            offset,
            metadata: String::new(),
            leader_epoch: None,
        }
    }

    /// With `metadata` stored beside the offset.
    pub fn with_metadata(mut self, metadata: impl Into<String>) -> Self {
        self.metadata = metadata.into();
        self
    }

    /// With the leader epoch of the last record consumed.
    pub fn with_leader_epoch(mut self, epoch: Option<i32>) -> Self {
        self.leader_epoch = epoch;
        self
    }

    /// The epoch as the wire has it (-1 for none).
    pub(crate) fn wire_epoch(&self) -> i32 {
        self.leader_epoch.unwrap_or(-1)
    }
}

/// Committed offsets of `partitions` in `group` (`None`: nothing committed).
pub(crate) async fn fetch_committed(
    client: &Client,
    group: &str,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, Option<i64>>> {
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    let by_topic = group_by_topic(partitions.iter().map(|tp| (tp, ())));
    with_group_coordinator(client, group, ApiKey::OffsetFetch, |broker| {
        let by_topic = &by_topic;
        async move {
            let version = broker
                .api_versions()
                .and_then(|v| v.version_for(ApiKey::OffsetFetch))
                .unwrap_or(1);
            let request = offset_fetch_request(group, by_topic, version);
            let response = broker.send_version(request, version).await?;
            Ok(committed_from(group, response, version, partitions))
        }
    })
    .await
}

fn offset_fetch_request(
    group: &str,
    by_topic: &BTreeMap<String, Vec<(i32, ())>>,
    version: i16,
) -> OffsetFetchRequest {
    if version >= 8 {
        let topics = by_topic
            .iter()
            .map(|(t, ps)| {
                OffsetFetchRequestTopics::default()
                    .with_name(t.clone())
                    .with_partition_indexes(ps.iter().map(|(p, _)| *p).collect())
            })
            .collect();
        OffsetFetchRequest::default()
            .with_groups(vec![
                OffsetFetchRequestGroup::default()
                    .with_group_id(group.to_string())
                    .with_topics(Some(topics)),
            ])
            .with_require_stable(true)
    } else {
        let topics = by_topic
            .iter()
            .map(|(t, ps)| {
                OffsetFetchRequestTopic::default()
                    .with_name(t.clone())
                    .with_partition_indexes(ps.iter().map(|(p, _)| *p).collect())
            })
            .collect();
        OffsetFetchRequest::default()
            .with_group_id(group.to_string())
            .with_topics(Some(topics))
            .with_require_stable(true)
    }
}

/// The committed offsets in an answer, or the first error code in it (the partition
/// errors of OffsetFetch are retriable ones: UNSTABLE_OFFSET_COMMIT while a transaction
/// that commits offsets is open).
fn committed_from(
    group: &str,
    response: OffsetFetchResponse,
    version: i16,
    wanted: &[TopicPartition],
) -> std::result::Result<BTreeMap<TopicPartition, Option<i64>>, KafkaCode> {
    let mut rows = Vec::new();
    let top = if version >= 8 {
        let Some(g) = response.groups.into_iter().find(|g| g.group_id == group) else {
            return Err(KafkaCode::COORDINATOR_NOT_AVAILABLE);
        };
        for t in g.topics {
            for p in t.partitions {
                rows.push((
                    t.name.clone(),
                    p.partition_index,
                    p.error_code,
                    p.committed_offset,
                ));
            }
        }
        g.error_code
    } else {
        for t in response.topics {
            for p in t.partitions {
                rows.push((
                    t.name.clone(),
                    p.partition_index,
                    p.error_code,
                    p.committed_offset,
                ));
            }
        }
        response.error_code
    };
    if top != 0 {
        return Err(KafkaCode(top));
    }
    let mut out: BTreeMap<TopicPartition, Option<i64>> =
        wanted.iter().map(|tp| (tp.clone(), None)).collect();
    for (topic, partition, code, offset) in rows {
        if code != 0 {
            return Err(KafkaCode(code));
        }
        if let Some(slot) = out.get_mut(&TopicPartition::new(topic, partition)) {
            *slot = (offset >= 0).then_some(offset);
        }
    }
    Ok(out)
}

/// Why a commit failed.
#[derive(Debug, Clone)]
pub(crate) enum CommitRefusal {
    /// The generation moved on (or the member was fenced): the member must rejoin.
    Fenced(KafkaCode),
    /// Any other error.
    Failed(Error),
}

/// Commits `offsets` for `generation` of `group`.
pub(crate) async fn commit(
    client: &Client,
    group: &str,
    generation: &Generation,
    instance_id: Option<&str>,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
) -> std::result::Result<(), CommitRefusal> {
    if offsets.is_empty() {
        return Ok(());
    }
    let topics: Vec<OffsetCommitRequestTopic> = group_by_topic(offsets.iter())
        .into_iter()
        .map(|(topic, partitions)| {
            OffsetCommitRequestTopic::default()
                .with_name(topic)
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, o)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(o.offset)
                                .with_committed_leader_epoch(o.wire_epoch())
                                .with_committed_metadata(Some(o.metadata.clone()))
                        })
                        .collect(),
                )
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(group.to_string())
        .with_generation_id_or_member_epoch(generation.generation_id)
        .with_member_id(generation.member_id.clone())
        .with_group_instance_id(instance_id.map(str::to_string))
        .with_retention_time_ms(-1)
        .with_topics(topics);
    let result = with_group_coordinator(client, group, ApiKey::OffsetCommit, |broker| {
        let request = request.clone();
        async move {
            let response = broker.send(request).await?;
            let code = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| KafkaCode(p.error_code))
                .find(|c| !c.is_ok());
            Ok(match code {
                None => Ok(None),
                // Not retried: the member must rejoin first.
                Some(c) if is_fencing(c) => Ok(Some(c)),
                Some(c) => Err(c),
            })
        }
    })
    .await;
    let name = match result {
        Ok(None) => crate::metrics::names::GROUP_COMMITS,
        _ => crate::metrics::names::GROUP_COMMIT_ERRORS,
    };
    metrics::counter!(name, "group" => group.to_string()).increment(1);
    match result {
        Ok(Some(code)) => Err(CommitRefusal::Fenced(code)),
        Ok(None) => Ok(()),
        Err(e) => Err(CommitRefusal::Failed(e)),
    }
}

/// Commit errors that mean this member's generation is over.
fn is_fencing(code: KafkaCode) -> bool {
    [
        KafkaCode::ILLEGAL_GENERATION,
        KafkaCode::UNKNOWN_MEMBER_ID,
        KafkaCode::REBALANCE_IN_PROGRESS,
        KafkaCode::FENCED_INSTANCE_ID,
        KafkaCode::STALE_MEMBER_EPOCH,
    ]
    .contains(&code)
}

/// Pairs grouped by topic, partitions in order.
fn group_by_topic<'a, V: Clone + 'a>(
    items: impl Iterator<Item = (&'a TopicPartition, V)>,
) -> BTreeMap<String, Vec<(i32, V)>> {
    let mut out: BTreeMap<String, Vec<(i32, V)>> = BTreeMap::new();
    for (tp, v) in items {
        out.entry(tp.topic.clone())
            .or_default()
            .push((tp.partition, v));
    }
    out
}
