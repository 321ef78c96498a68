//! Replicas: leader elections (ElectLeaders, KIP-460: preferred or unclean),
//! partition reassignments (AlterPartitionReassignments and
//! ListPartitionReassignments, KIP-455; both go to the controller) and log
//! directories (DescribeLogDirs, sent to every broker, since each reports only its own
//! disks).

use super::partitions::TopicPartition;
use super::{Admin, Route, check};
use crate::error::{Error, Result};
use crate::protocol::KafkaCode;
use crate::protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, DescribeLogDirsRequest, ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    alter_partition_reassignments::{ReassignablePartition, ReassignableTopic},
    elect_leaders::TopicPartitions,
    list_partition_reassignments::ListPartitionReassignmentsTopics,
};

/// Which leader an election picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// The preferred replica (the first of the assignment), if in sync.
    Preferred,
    /// Any live replica, even out of sync: may lose records.
    Unclean,
}

/// A partition's reassignment in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassignment {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The replicas now (old and new together while it runs).
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding: Vec<i32>,
    /// Replicas being removed.
    pub removing: Vec<i32>,
}

/// One replica in a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirReplica {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its size on disk, in bytes.
    pub size: i64,
    /// How far it is behind the leader's end (future replicas: behind the current one).
    pub offset_lag: i64,
    /// Whether it is a future replica (moving here between directories).
    pub is_future: bool,
}

/// One log directory of one broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDir {
    /// The broker.
    pub broker: i32,
    /// The directory's path.
    pub path: String,
    /// The directory's error (KAFKA_STORAGE_ERROR when offline), NONE when healthy.
    pub error: KafkaCode,
    /// The disk's size in bytes, -1 when the broker does not say (before v4).
    pub total_bytes: i64,
    /// The disk's free bytes, -1 when the broker does not say.
    pub usable_bytes: i64,
    /// The replicas in it, sorted.
    pub replicas: Vec<LogDirReplica>,
}

/// Groups partitions by topic for the requests that list them so.
fn grouped(partitions: &[TopicPartition]) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for (t, p) in partitions {
        match out.iter_mut().find(|(name, _)| name == t) {
            Some((_, ps)) => ps.push(*p),
            None => out.push((t.clone(), vec![*p])),
        }
    }
    out
}

impl Admin {
    /// Elects leaders of `partitions` (every partition when `None`); answers the
    /// partitions whose leader changed. ELECTION_NOT_NEEDED (the leader already is the
    /// one asked for) is no change, not an error; any other partition error fails the
    /// call, naming the partition.
    pub async fn elect_leaders(
        &self,
        election: Election,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<TopicPartition>> {
        let request = ElectLeadersRequest::default()
            .with_election_type(match election {
                Election::Preferred => 0,
                Election::Unclean => 1,
            })
            .with_topic_partitions(partitions.map(|ps| {
                grouped(ps)
                    .into_iter()
                    .map(|(t, ps)| TopicPartitions::default().with_topic(t).with_partitions(ps))
                    .collect()
            }))
            .with_timeout_ms(self.timeout_ms());
        self.run(Route::Controller, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                check(
                    ApiKey::ElectLeaders,
                    "the cluster",
                    response.error_code,
                    None,
                )?;
                let mut elected = Vec::new();
                for t in response.replica_election_results {
                    for p in t.partition_result {
                        let code = KafkaCode(p.error_code);
                        if code == KafkaCode::ELECTION_NOT_NEEDED {
                            continue;
                        }
                        check(
                            ApiKey::ElectLeaders,
                            &format!("{}-{}", t.topic, p.partition_id),
                            p.error_code,
                            p.error_message,
                        )?;
                        elected.push((t.topic.clone(), p.partition_id));
                    }
                }
                elected.sort();
                Ok(elected)
            }
        })
        .await
    }

    /// Moves each partition to the replicas given (`None` cancels its reassignment in
    /// progress). The first partition the controller refuses is an error naming it.
    pub async fn alter_partition_reassignments(
        &self,
        moves: &[(TopicPartition, Option<Vec<i32>>)],
    ) -> Result<()> {
        let mut topics: Vec<ReassignableTopic> = Vec::new();
        for (tp, replicas) in moves {
            if let Some(r) = replicas {
                check_replicas(tp, r)?;
            }
        }
        for ((topic, partition), replicas) in moves {
            let p = ReassignablePartition::default()
                .with_partition_index(*partition)
                .with_replicas(replicas.clone());
            match topics.iter_mut().find(|t| t.name == *topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    ReassignableTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(vec![p]),
                ),
            }
        }
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_topics(topics);
        self.run(Route::Controller, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                check(
                    ApiKey::AlterPartitionReassignments,
                    "the cluster",
                    response.error_code,
                    response.error_message,
                )?;
                for t in &response.responses {
                    for p in &t.partitions {
                        check(
                            ApiKey::AlterPartitionReassignments,
                            &format!("{}-{}", t.name, p.partition_index),
                            p.error_code,
                            p.error_message.clone(),
                        )?;
                    }
                }
                Ok(())
            }
        })
        .await
    }

    /// The reassignments in progress, of `partitions` or of every partition.
    pub async fn list_partition_reassignments(
        &self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<Reassignment>> {
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_topics(partitions.map(|ps| {
                grouped(ps)
                    .into_iter()
                    .map(|(t, ps)| {
                        ListPartitionReassignmentsTopics::default()
                            .with_name(t)
                            .with_partition_indexes(ps)
                    })
                    .collect()
            }));
        self.run(Route::Controller, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                check(
                    ApiKey::ListPartitionReassignments,
                    "the cluster",
                    response.error_code,
                    response.error_message,
                )?;
                let mut out: Vec<Reassignment> = response
                    .topics
                    .into_iter()
                    .flat_map(|t| {
                        let name = t.name;
                        t.partitions.into_iter().map(move |p| Reassignment {
                            topic: name.clone(),
                            partition: p.partition_index,
                            replicas: p.replicas,
                            adding: p.adding_replicas,
                            removing: p.removing_replicas,
                        })
                    })
                    .collect();
                out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                Ok(out)
            }
        })
        .await
    }

    /// Every log directory of every broker, with the replicas in it.
    pub async fn describe_log_dirs(&self) -> Result<Vec<LogDir>> {
        self.client.refresh_metadata(&[]).await?;
        let ids: Vec<i32> = self.client.metadata().brokers.keys().copied().collect();
        let mut out = Vec::new();
        for id in ids {
            out.extend(self.broker_log_dirs(id).await?);
        }
        Ok(out)
    }

    /// Broker `id`'s log directories.
    pub async fn broker_log_dirs(&self, id: i32) -> Result<Vec<LogDir>> {
        let label = format!("broker {id}");
        let label = &label;
        self.run(Route::Node(id), |broker| async move {
            let request = DescribeLogDirsRequest::default().with_topics(None);
            let response = broker.send(request).await?;
            check(ApiKey::DescribeLogDirs, label, response.error_code, None)?;
            Ok(response
                .results
                .into_iter()
                .map(|d| {
                    let mut replicas: Vec<LogDirReplica> = d
                        .topics
                        .into_iter()
                        .flat_map(|t| {
                            let name = t.name;
                            t.partitions.into_iter().map(move |p| LogDirReplica {
                                topic: name.clone(),
                                partition: p.partition_index,
                                size: p.partition_size,
                                offset_lag: p.offset_lag,
                                is_future: p.is_future_key,
                            })
                        })
                        .collect();
                    replicas.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                    LogDir {
                        broker: id,
                        path: d.log_dir,
                        error: KafkaCode(d.error_code),
                        total_bytes: d.total_bytes,
                        usable_bytes: d.usable_bytes,
                        replicas,
                    }
                })
                .collect())
        })
        .await
    }
}

/// A reassignment target must name distinct brokers.
pub(crate) fn check_replicas(tp: &TopicPartition, replicas: &[i32]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    if replicas.is_empty() || !replicas.iter().all(|r| *r >= 0 && seen.insert(*r)) {
        return Err(Error::InvalidArgument(format!(
            "{}-{}: replicas {replicas:?} must be distinct broker ids, at least one",
            tp.0, tp.1
        )));
    }
    Ok(())
}
