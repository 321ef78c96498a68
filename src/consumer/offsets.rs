//! OffsetManager and PartitionOffsetManager (Sarama's): committed offsets of a group,
//! fetched with OffsetFetch and stored with OffsetCommit through the group coordinator,
//! manually or by periodic auto-commit. Coordinator moves (NOT_COORDINATOR,
//! COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) are retried after finding
//! the coordinator again. Group membership (join, sync, heartbeat) is not here: these
//! commits are those of a group with no generation (simple consumers), as Sarama's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::client::{Client, CoordinatorKind};
use crate::config::ConsumerConfig;
use crate::error::{Error, Result};
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use crate::protocol::messages::{OffsetCommitRequest, OffsetFetchRequest};
use crate::protocol::{ApiKey, KafkaCode};

#[derive(Debug, Clone)]
struct Marked {
    offset: i64,
    metadata: String,
    dirty: bool,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    group: String,
    marked: Mutex<HashMap<(String, i32), Marked>>,
    closed: AtomicBool,
}

/// Committed offsets of one consumer group. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OffsetManager {
    inner: Arc<Inner>,
}

/// One partition's committed offset within an [`OffsetManager`].
#[derive(Debug, Clone)]
pub struct PartitionOffsetManager {
    inner: Arc<Inner>,
    topic: String,
    partition: i32,
}

fn coordinator_moved(code: KafkaCode) -> bool {
    [
        KafkaCode::NOT_COORDINATOR,
        KafkaCode::COORDINATOR_NOT_AVAILABLE,
        KafkaCode::COORDINATOR_LOAD_IN_PROGRESS,
    ]
    .contains(&code)
}

/// Runs `op` against `group`'s coordinator, finding it again and retrying while it
/// moves (or answers another retriable error), for up to `default.api.timeout.ms`.
/// `op` answers a broker error code as `Ok(Err(code))`; other codes end it with an
/// error for `api`.
pub(crate) async fn with_group_coordinator<T, F, Fut>(
    client: &Client,
    group: &str,
    api: ApiKey,
    op: F,
) -> Result<T>
where
    F: FnMut(crate::io::Broker) -> Fut,
    Fut: std::future::Future<Output = Result<std::result::Result<T, KafkaCode>>>,
{
    with_coordinator(client, CoordinatorKind::Group, group, api, op).await
}

/// [`with_group_coordinator`] for a coordinator of either kind (a group's, or a
/// transactional id's).
pub(crate) async fn with_coordinator<T, F, Fut>(
    client: &Client,
    kind: CoordinatorKind,
    key: &str,
    api: ApiKey,
    mut op: F,
) -> Result<T>
where
    F: FnMut(crate::io::Broker) -> Fut,
    Fut: std::future::Future<Output = Result<std::result::Result<T, KafkaCode>>>,
{
    let timeout = client.config().admin.timeout;
    let backoff = client.config().admin.retry_backoff;
    let attempts = (timeout.as_millis() / backoff.as_millis().max(1)).clamp(1, 600) as usize;
    let mut last = Error::broker(KafkaCode::COORDINATOR_NOT_AVAILABLE, api, None, None);
    for _ in 0..attempts {
        let coordinator = match client.find_coordinator_of(kind, key).await {
            Ok(c) => c,
            Err(e) if e.is_retriable() => {
                client.sleep(backoff).await?;
                continue;
            }
            Err(e) => return Err(e),
        };
        match coordinator.connect().await {
            Ok(()) => {}
            // The coordinator's broker is gone (nothing was sent): another broker
            // takes over its keys, so look the coordinator up again.
            Err(e) if e.is_retriable() => {
                tracing::debug!(key = %key, ?kind, error = %e, ?api, "coordinator unreachable; looking it up again");
                client.invalidate_coordinator(kind, key);
                last = e.into();
                client.sleep(backoff).await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let answer = match op(coordinator).await {
            Ok(answer) => answer,
            // The connection failed under the request (the broker went down after the
            // connect above, or the request timed out): the coordinator may have moved
            // with it. Every request sent here may be sent again (the coordinator
            // answers a repeated one by its state), so look it up and retry.
            Err(e) if e.is_retriable() => {
                tracing::debug!(key = %key, ?kind, error = %e, ?api, "coordinator request failed; looking it up again");
                client.invalidate_coordinator(kind, key);
                last = e;
                client.sleep(backoff).await?;
                continue;
            }
            Err(e) => return Err(e),
        };
        match answer {
            Ok(v) => return Ok(v),
            Err(code) if coordinator_moved(code) || code.is_retriable() => {
                tracing::debug!(key = %key, ?kind, %code, ?api, "coordinator moved or busy; retrying");
                if coordinator_moved(code) {
                    client.invalidate_coordinator(kind, key);
                }
                last = Error::broker(code, api, None, None);
                client.sleep(backoff).await?;
            }
            Err(code) => return Err(Error::broker(code, api, None, None)),
        }
    }
    Err(last)
}

impl Inner {
    /// Runs `op` against the coordinator (see [`with_group_coordinator`]).
    async fn with_coordinator<T, F, Fut>(&self, mut op: F) -> Result<T>
    where
        F: FnMut(crate::io::Broker, i16) -> Fut,
        Fut: std::future::Future<Output = Result<std::result::Result<T, KafkaCode>>>,
    {
        with_group_coordinator(&self.client, &self.group, ApiKey::OffsetCommit, |b| {
            op(b, 0)
        })
        .await
    }

    async fn fetch(&self, topic: &str, partition: i32) -> Result<Option<(i64, String)>> {
        let group = self.group.clone();
        self.with_coordinator(|broker, _| {
            let group = group.clone();
            async move {
                let version = broker
                    .api_versions()
                    .and_then(|v| v.version_for(ApiKey::OffsetFetch))
                    .unwrap_or(1);
                let request = if version >= 8 {
                    OffsetFetchRequest::default().with_groups(vec![
                        OffsetFetchRequestGroup::default()
                            .with_group_id(group.clone())
                            .with_topics(Some(vec![
                                OffsetFetchRequestTopics::default()
                                    .with_name(topic.to_string())
                                    .with_partition_indexes(vec![partition]),
                            ])),
                    ])
                } else {
                    OffsetFetchRequest::default()
                        .with_group_id(group.clone())
                        .with_topics(Some(vec![
                            OffsetFetchRequestTopic::default()
                                .with_name(topic.to_string())
                                .with_partition_indexes(vec![partition]),
                        ]))
                };
                let response = broker.send_version(request, version).await?;
                let (top_code, found) = if version >= 8 {
                    let Some(g) = response.groups.first() else {
                        return Ok(Err(KafkaCode::COORDINATOR_NOT_AVAILABLE));
                    };
                    let p = g
                        .topics
                        .iter()
                        .filter(|t| t.name == topic)
                        .flat_map(|t| t.partitions.iter())
                        .find(|p| p.partition_index == partition)
                        .map(|p| (p.error_code, p.committed_offset, p.metadata.clone()));
                    (g.error_code, p)
                } else {
                    let p = response
                        .topics
                        .iter()
                        .filter(|t| t.name == topic)
                        .flat_map(|t| t.partitions.iter())
                        .find(|p| p.partition_index == partition)
                        .map(|p| (p.error_code, p.committed_offset, p.metadata.clone()));
                    (response.error_code, p)
                };
                if top_code != 0 {
                    return Ok(Err(KafkaCode(top_code)));
                }
                Ok(match found {
                    Some((code, _, _)) if code != 0 => Err(KafkaCode(code)),
                    Some((_, offset, metadata)) if offset >= 0 => {
                        Ok(Some((offset, metadata.unwrap_or_default())))
                    }
                    _ => Ok(None),
                })
            }
        })
        .await
    }

    async fn commit(&self) -> Result<()> {
        let dirty: Vec<((String, i32), Marked)> = self
            .marked
            .lock()
            .map_err(|_| Error::ShuttingDown)?
            .iter()
            .filter(|(_, m)| m.dirty)
            .map(|(k, m)| (k.clone(), m.clone()))
            .collect();
        if dirty.is_empty() {
            return Ok(());
        }
        let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
        for ((topic, partition), m) in &dirty {
            let p = OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(m.offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(m.metadata.clone()));
            match topics.iter_mut().find(|t| t.name == *topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    OffsetCommitRequestTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(vec![p]),
                ),
            }
        }
        let group = self.group.clone();
        self.with_coordinator(|broker, _| {
            let request = OffsetCommitRequest::default()
                .with_group_id(group.clone())
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(String::new())
                .with_retention_time_ms(-1)
                .with_topics(topics.clone());
            async move {
                let response = broker.send(request).await?;
                for t in &response.topics {
                    for p in &t.partitions {
                        if p.error_code != 0 {
                            return Ok(Err(KafkaCode(p.error_code)));
                        }
                    }
                }
                Ok(Ok(()))
            }
        })
        .await?;
        // Clear what was committed, unless marked again meanwhile.
        if let Ok(mut marked) = self.marked.lock() {
            for (k, m) in dirty {
                if let Some(cur) = marked.get_mut(&k)
                    && cur.offset == m.offset
                {
                    cur.dirty = false;
                }
            }
        }
        Ok(())
    }
}

/// Commits every `interval` until the manager is gone or closed, or the runtime shuts
/// down (a shutdown does not wait out the interval of a manager dropped meanwhile).
async fn auto_commit(
    inner: Weak<Inner>,
    interval: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        let Some(inner) = inner.upgrade() else { return };
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = inner.commit().await {
            tracing::warn!(group = %inner.group, error = %e, "auto-commit failed");
        }
    }
}

impl OffsetManager {
    /// Offsets of consumer group `group`; with `consumer.enable_auto_commit`, marked
    /// offsets are committed every `consumer.auto_commit_interval`.
    pub fn new(client: Client, group: impl Into<String>) -> Result<OffsetManager> {
        let own = client.config().consumer.clone();
        Self::start(client, group.into(), &own)
    }

    /// An offset manager whose auto-commit follows `own` (a consumer's settings, see
    /// [`Consumer::offset_manager`](crate::consumer::Consumer::offset_manager)).
    pub(crate) fn start(
        client: Client,
        group: String,
        own: &ConsumerConfig,
    ) -> Result<OffsetManager> {
        if group.is_empty() {
            return Err(Error::Configuration(
                crate::config::ConfigurationError::Inconsistent {
                    field: "group.group_id",
                    reason: "must not be empty".into(),
                },
            ));
        }
        let config = own.clone();
        let inner = Arc::new(Inner {
            client: client.clone(),
            group,
            marked: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        });
        if config.enable_auto_commit {
            let weak = Arc::downgrade(&inner);
            let runtime = client.runtime();
            let shutdown = runtime.shutdown_signal();
            runtime.spawn_on(runtime.worker_for(-1), move |_| {
                auto_commit(weak, config.auto_commit_interval, shutdown)
            })?;
        }
        Ok(OffsetManager { inner })
    }

    /// The group.
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// The committed offset and metadata of a partition, if any (OffsetFetch).
    pub async fn committed(&self, topic: &str, partition: i32) -> Result<Option<(i64, String)>> {
        self.inner.fetch(topic, partition).await
    }

    /// Manages one partition's offset, starting from what the group committed.
    pub async fn manage_partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<PartitionOffsetManager> {
        let committed = self.inner.fetch(topic, partition).await?;
        if let Some((offset, metadata)) = committed
            && let Ok(mut marked) = self.inner.marked.lock()
        {
            marked.insert(
                (topic.to_string(), partition),
                Marked {
                    offset,
                    metadata,
                    dirty: false,
                },
            );
        }
        Ok(PartitionOffsetManager {
            inner: self.inner.clone(),
            topic: topic.to_string(),
            partition,
        })
    }

    /// Commits every marked offset now.
    pub async fn commit(&self) -> Result<()> {
        self.inner.commit().await
    }

    /// [`OffsetManager::commit`] for plain threads.
    pub fn commit_blocking(&self) -> Result<()> {
        crate::client::block_on(self.commit())
    }

    /// Commits what is marked and stops auto-commit.
    pub async fn close(&self) -> Result<()> {
        let result = self.commit().await;
        self.inner.closed.store(true, Ordering::Release);
        result
    }
}

impl PartitionOffsetManager {
    /// The offset to consume next and its metadata: the last one marked, else the one
    /// committed, else `None`.
    pub fn next_offset(&self) -> Option<(i64, String)> {
        self.inner
            .marked
            .lock()
            .ok()?
            .get(&(self.topic.clone(), self.partition))
            .map(|m| (m.offset, m.metadata.clone()))
    }

    /// Marks `offset` (the next one to consume, as Kafka commits) with `metadata`, for
    /// the next commit.
    pub fn mark_offset(&self, offset: i64, metadata: &str) {
        if let Ok(mut marked) = self.inner.marked.lock() {
            marked.insert(
                (self.topic.clone(), self.partition),
                Marked {
                    offset,
                    metadata: metadata.to_string(),
                    dirty: true,
                },
            );
        }
    }
}
