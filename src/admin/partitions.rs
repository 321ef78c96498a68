//! Partitions: add partitions to a topic (CreatePartitions), look up offsets
//! (ListOffsets: earliest, latest, by time, the record with the largest timestamp) and
//! delete records before an offset or a time (DeleteRecords). ListOffsets and
//! DeleteRecords go to each partition's leader, one request per leader; a partition
//! whose leader moved meanwhile is sent again to the new leader after a metadata
//! refresh.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{Admin, Route, check, left_out, passing_code, worth_retrying};
use crate::client::Broker;
use crate::error::{Error, Result};
use crate::protocol::KafkaCode;
use crate::protocol::messages::{
    ApiKey, CreatePartitionsRequest, DeleteRecordsRequest, ListOffsetsRequest,
    create_partitions::{CreatePartitionsAssignment, CreatePartitionsTopic},
    delete_records::{DeleteRecordsPartition, DeleteRecordsTopic},
    list_offsets::{ListOffsetsPartition, ListOffsetsTopic},
};

/// A topic partition.
pub type TopicPartition = (String, i32);

/// Which offset ListOffsets looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark: the offset the next record gets.
    Latest,
    /// The first record with a timestamp at or after this many ms since the epoch.
    Timestamp(i64),
    /// The record with the largest timestamp (KIP-734, ListOffsets v7+).
    MaxTimestamp,
}

impl OffsetSpec {
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::MaxTimestamp => -3,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }
}

/// One offset ListOffsets found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset; -1 when no record matches (a time after the last record).
    pub offset: i64,
    /// The record's timestamp for time lookups, -1 otherwise.
    pub timestamp: i64,
    /// The leader epoch of that offset, -1 when unknown.
    pub leader_epoch: i32,
}

/// Where DeleteRecords cuts a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteBefore {
    /// Every record below this offset.
    Offset(i64),
    /// Every record older than this many ms since the epoch (its offset is looked up
    /// with ListOffsets first).
    Timestamp(i64),
    /// Every record (up to the high watermark).
    HighWatermark,
}

impl Admin {
    /// Grows `topic` to `total` partitions, placed by the controller, and waits until
    /// each has a leader. Fewer than today is INVALID_PARTITIONS naming the topic and
    /// its count; with `validate_only` the controller checks without creating.
    pub async fn create_partitions(
        &self,
        topic: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<()> {
        self.create_partitions_placed(topic, total, None, validate_only)
            .await
    }

    /// As [`Admin::create_partitions`], with the replicas of each new partition given
    /// (one list of broker ids per new partition).
    pub async fn create_partitions_placed(
        &self,
        topic: &str,
        total: i32,
        placement: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<()> {
        if total < 1 {
            return Err(Error::InvalidArgument(format!(
                "topic {topic}: a partition count must be at least 1, not {total}"
            )));
        }
        let assignments = placement.map(|p| {
            p.into_iter()
                .map(|ids| CreatePartitionsAssignment::default().with_broker_ids(ids))
                .collect()
        });
        let request = CreatePartitionsRequest::default()
            .with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(topic.to_string())
                    .with_count(total)
                    .with_assignments(assignments),
            ])
            .with_timeout_ms(self.timeout_ms())
            .with_validate_only(validate_only);
        self.run(Route::Controller, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                let result = response
                    .results
                    .into_iter()
                    .next()
                    .ok_or_else(|| left_out(ApiKey::CreatePartitions, topic))?;
                check(
                    ApiKey::CreatePartitions,
                    topic,
                    result.error_code,
                    result.error_message,
                )
            }
        })
        .await?;
        if validate_only {
            return Ok(());
        }
        self.wait_for_partition_count(topic, total).await
    }

    /// Waits until metadata shows `topic` with `count` partitions, each with a leader.
    async fn wait_for_partition_count(&self, topic: &str, count: i32) -> Result<()> {
        let deadline = self.deadline();
        loop {
            self.client.refresh_metadata(&[topic]).await?;
            if let Some(t) = self.client.metadata().topics.get(topic)
                && t.partitions.len() == count as usize
                && t.partitions.iter().all(|p| p.leader >= 0)
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout(format!(
                    "{topic} does not show {count} partitions with leaders"
                )));
            }
            self.client.sleep(Duration::from_millis(50)).await?;
        }
    }

    /// The offset `spec` names in each of `partitions`, sorted by topic and partition.
    pub async fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<Vec<ListedOffset>> {
        // How long a broker may take to read an offset from remote storage (tiered
        // topics, ListOffsets v10+): the admin's timeout, as every admin request's
        // `timeout_ms`, where 0 would fail at once.
        let timeout_ms = self.timeout_ms();
        let found = self
            .on_leaders(ApiKey::ListOffsets, partitions, |broker, batch| {
                list_offsets_on(broker, batch, spec, timeout_ms)
            })
            .await?;
        Ok(found.into_values().collect())
    }

    /// The offset `spec` names in every partition of `topic`.
    pub async fn topic_offsets(&self, topic: &str, spec: OffsetSpec) -> Result<Vec<ListedOffset>> {
        let partitions = self.partitions_of(topic).await?;
        self.list_offsets(&partitions, spec).await
    }

    /// Deletes records of `topic`'s partitions before the given points and answers each
    /// partition's new log start offset (low watermark). An offset above the high
    /// watermark is OFFSET_OUT_OF_RANGE naming the partition.
    pub async fn delete_records(
        &self,
        topic: &str,
        cuts: &[(i32, DeleteBefore)],
    ) -> Result<Vec<(i32, i64)>> {
        let offsets = self.resolve_cuts(topic, cuts).await?;
        let keys: Vec<TopicPartition> = offsets.keys().cloned().collect();
        let timeout_ms = self.timeout_ms();
        let offsets = &offsets;
        let found = self
            .on_leaders(ApiKey::DeleteRecords, &keys, |broker, batch| async move {
                delete_records_on(broker, batch, offsets, timeout_ms).await
            })
            .await?;
        Ok(found.into_iter().map(|((_, p), low)| (p, low)).collect())
    }

    /// The offset each cut deletes before (-1: the high watermark).
    async fn resolve_cuts(
        &self,
        topic: &str,
        cuts: &[(i32, DeleteBefore)],
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        let mut out = BTreeMap::new();
        for &(partition, cut) in cuts {
            let offset = match cut {
                DeleteBefore::Offset(o) if o < 0 => {
                    return Err(Error::InvalidArgument(format!(
                        "{topic}-{partition}: cannot delete before offset {o}"
                    )));
                }
                DeleteBefore::Offset(o) => o,
                DeleteBefore::HighWatermark => -1,
                DeleteBefore::Timestamp(ms) => {
                    let key = (topic.to_string(), partition);
                    let found = self.list_offsets(&[key], OffsetSpec::Timestamp(ms)).await?;
                    found.first().map_or(-1, |f| f.offset)
                }
            };
            if out.insert((topic.to_string(), partition), offset).is_some() {
                return Err(Error::InvalidArgument(format!(
                    "{topic}-{partition} is given twice"
                )));
            }
        }
        Ok(out)
    }

    /// Every partition of `topic`, fresh from the cluster.
    pub(crate) async fn partitions_of(&self, topic: &str) -> Result<Vec<TopicPartition>> {
        let info = self.describe_topic(topic).await?;
        Ok(info
            .partitions
            .iter()
            .map(|p| (topic.to_string(), p.id))
            .collect())
    }

    /// Sends a per-partition API to each partition's leader, one request per leader
    /// with its partitions; partitions answered with "not the leader" (or whose leader
    /// could not be reached) go again after a metadata refresh, until the admin timeout.
    /// Any other per-partition error fails the call, naming the partition.
    pub(crate) async fn on_leaders<T, F, Fut>(
        &self,
        api: ApiKey,
        partitions: &[TopicPartition],
        send: F,
    ) -> Result<BTreeMap<TopicPartition, T>>
    where
        F: Fn(Broker, Vec<TopicPartition>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<(TopicPartition, PartitionAnswer<T>)>>>,
    {
        let config = self.client.config();
        let deadline = self.deadline();
        let mut done = BTreeMap::new();
        let mut pending: Vec<TopicPartition> = partitions.to_vec();
        loop {
            let mut last_error = None;
            let mut again = Vec::new();
            for (broker, batch) in self
                .by_leader(&pending, &mut again, &mut last_error)
                .await?
            {
                let asked = batch.clone();
                match send(broker, batch).await {
                    Ok(answers) => {
                        let mut answered = std::collections::HashSet::new();
                        for (tp, answer) in answers {
                            if !asked.contains(&tp) || !answered.insert(tp.clone()) {
                                continue;
                            }
                            match answer {
                                Ok(v) => {
                                    done.insert(tp, v);
                                }
                                Err(code) if passing_code(code) => {
                                    last_error =
                                        Some(Error::broker(code, api, Some(&tp.0), Some(tp.1)));
                                    again.push(tp);
                                }
                                Err(code) => {
                                    return Err(Error::broker(code, api, Some(&tp.0), Some(tp.1)));
                                }
                            }
                        }
                        if let Some(tp) = asked.iter().find(|tp| !answered.contains(*tp)) {
                            return Err(left_out(api, format!("{}-{}", tp.0, tp.1)));
                        }
                    }
                    Err(e) if worth_retrying(&e) => {
                        last_error = Some(e);
                        again.extend(asked);
                    }
                    Err(e) => return Err(e),
                }
            }
            if again.is_empty() {
                return Ok(done);
            }
            if Instant::now() >= deadline {
                return Err(last_error.unwrap_or_else(|| {
                    Error::Timeout(format!("{api:?}: leaders did not answer in time"))
                }));
            }
            let topics: Vec<&str> = again.iter().map(|(t, _)| t.as_str()).collect();
            let _ = self.client.refresh_metadata(&topics).await;
            self.client.sleep(config.admin.retry_backoff).await?;
            pending = again;
        }
    }

    /// `partitions` grouped by their current leader; those without a reachable leader
    /// go to `again` (an unknown topic or partition is an error).
    async fn by_leader(
        &self,
        partitions: &[TopicPartition],
        again: &mut Vec<TopicPartition>,
        last_error: &mut Option<Error>,
    ) -> Result<Vec<(Broker, Vec<TopicPartition>)>> {
        let mut groups: BTreeMap<i32, (Broker, Vec<TopicPartition>)> = BTreeMap::new();
        for tp in partitions {
            let leader = match self.client.leader(&tp.0, tp.1).await {
                Ok((b, _)) => b,
                Err(e) if worth_retrying(&e) => {
                    *last_error = Some(e);
                    again.push(tp.clone());
                    continue;
                }
                Err(e) => return Err(e),
            };
            if let Err(e) = leader.connect().await {
                *last_error = Some(e.into());
                again.push(tp.clone());
                continue;
            }
            groups
                .entry(leader.id())
                .or_insert_with(|| (leader, Vec::new()))
                .1
                .push(tp.clone());
        }
        Ok(groups.into_values().collect())
    }
}

/// A partition's answer: the value, or the broker's code for it.
pub(crate) type PartitionAnswer<T> = std::result::Result<T, KafkaCode>;

/// `partitions` grouped by topic, keeping their order.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        out.entry(t.as_str()).or_default().push(*p);
    }
    out
}

async fn list_offsets_on(
    broker: Broker,
    batch: Vec<TopicPartition>,
    spec: OffsetSpec,
    timeout_ms: i32,
) -> Result<Vec<(TopicPartition, PartitionAnswer<ListedOffset>)>> {
    let topics = by_topic(&batch)
        .into_iter()
        .map(|(t, ps)| {
            ListOffsetsTopic::default()
                .with_name(t.to_string())
                .with_partitions(
                    ps.into_iter()
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(p)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(spec.wire())
                        })
                        .collect(),
                )
        })
        .collect();
    let request = ListOffsetsRequest::default()
        .with_replica_id(-1)
        .with_timeout_ms(timeout_ms)
        .with_topics(topics);
    let response = broker.send(request).await?;
    let mut out = Vec::new();
    for t in response.topics {
        for p in t.partitions {
            let key = (t.name.clone(), p.partition_index);
            let answer = if p.error_code != 0 {
                Err(KafkaCode(p.error_code))
            } else {
                Ok(ListedOffset {
                    topic: t.name.clone(),
                    partition: p.partition_index,
                    offset: p.offset,
                    timestamp: p.timestamp,
                    leader_epoch: p.leader_epoch,
                })
            };
            out.push((key, answer));
        }
    }
    Ok(out)
}

async fn delete_records_on(
    broker: Broker,
    batch: Vec<TopicPartition>,
    offsets: &BTreeMap<TopicPartition, i64>,
    timeout_ms: i32,
) -> Result<Vec<(TopicPartition, PartitionAnswer<i64>)>> {
    let topics = by_topic(&batch)
        .into_iter()
        .map(|(t, ps)| {
            DeleteRecordsTopic::default()
                .with_name(t.to_string())
                .with_partitions(
                    ps.into_iter()
                        .map(|p| {
                            let offset = offsets.get(&(t.to_string(), p)).copied().unwrap_or(-1);
                            DeleteRecordsPartition::default()
                                .with_partition_index(p)
                                .with_offset(offset)
                        })
                        .collect(),
                )
        })
        .collect();
    let request = DeleteRecordsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(timeout_ms);
    let response = broker.send(request).await?;
    let mut out = Vec::new();
    for t in response.topics {
        for p in t.partitions {
            let answer = if p.error_code != 0 {
                Err(KafkaCode(p.error_code))
            } else {
                Ok(p.low_watermark)
            };
            out.push(((t.name.clone(), p.partition_index), answer));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_specs_on_the_wire() {
        assert_eq!(OffsetSpec::Earliest.wire(), -2);
        assert_eq!(OffsetSpec::Latest.wire(), -1);
        assert_eq!(OffsetSpec::MaxTimestamp.wire(), -3);
        assert_eq!(OffsetSpec::Timestamp(1234).wire(), 1234);
        let parts = vec![
            ("b".to_string(), 1),
            ("a".to_string(), 0),
            ("b".to_string(), 0),
        ];
        let grouped = by_topic(&parts);
        assert_eq!(grouped["b"], vec![1, 0]);
        assert_eq!(grouped["a"], vec![0]);
    }
}
