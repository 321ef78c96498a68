//! The consumer (Sarama's Consumer and PartitionConsumer): partition consumers over
//! lazily parsed fetch responses.
//!
//! `consume_partition` resolves the start position (oldest, newest, an offset, or a
//! timestamp through ListOffsets) and attaches the partition to the fetcher of its
//! leader: one fetcher per broker sends one Fetch for all its partitions (see
//! `fetcher`). Partition consumers started at once (several `consume_partition` calls
//! awaited together, a group member's new assignment) have their start offsets looked
//! up together: one ListOffsets per leader (`lookups`). A [`PartitionConsumer`] then
//! reads what arrives:
//! - [`PartitionConsumer::next_batch`] gives a [`FetchedBatch`] whose records are
//!   [`RecordRef`](crate::record::RecordRef)s borrowing the fetch buffer (or the decompression scratch): no
//!   allocation per record;
//! - [`PartitionConsumer::next_message`] gives owned [`Message`]s whose key and value are
//!   `Bytes` slices of the same buffer (no copy for uncompressed data).
//!
//! Control batches are skipped; under read_committed, records of aborted transactions
//! are filtered with the response's aborted-transaction list, as the Java client does.
//!
//! Leader epochs (KIP-320): a partition's fetch position carries the leader epoch of the
//! batch fetched just before it. When the partition is attached to a leader of a new
//! epoch (after a leader change or a FENCED_LEADER_EPOCH), OffsetForLeaderEpoch asks the
//! leader where that epoch ends; an end below the position (or a Fetch's
//! `diverging_epoch`) means the log was truncated, and the position moves back to the
//! first offset known to diverge (with a reset policy) or the consumer reports
//! [`Error::LogTruncation`] (reset `none`), as the Java client does. A Fetch answer that
//! names the new leader (KIP-951) moves the partition there without waiting for a
//! Metadata round trip.
//!
//! Follower fetching (KIP-392): with `client.rack` set, each Fetch names the rack; a
//! leader that names a replica in it as the preferred read replica has the partition
//! fetched there (see the internal `engine::fetch::replica` for when it goes back to the
//! leader); [`PartitionConsumer::fetching_from`] says which broker serves it.

mod api;
mod builder;
pub(crate) mod fetcher;
mod interceptor;
mod lookups;
mod metrics;
pub mod offsets;
pub(crate) mod reader;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

pub use api::{
    ConsumePartitionFuture, MessageSource, NextMessages, NextMessagesFuture, PartitionSource,
};
pub use builder::ConsumerBuilder;
pub use interceptor::{ConsumedBatch, ConsumerInterceptor};
pub use offsets::{OffsetManager, PartitionOffsetManager};
pub use reader::FetchedBatch;

use crate::buf::MemoryBudget;
use crate::client::Client;
use crate::config::{Config, ConsumerConfig, IsolationLevel, OffsetReset};
use crate::engine::fetch::FetchTarget;
use crate::engine::fetch::epochs::{self, EpochEnd, Validation};
use crate::engine::fetch::replica;
use crate::error::{Error, Result};
use crate::io::Broker;
use crate::protocol::messages::{
    OffsetForLeaderEpochRequest,
    offset_for_leader_epoch::{OffsetForLeaderPartition, OffsetForLeaderTopic},
};
use crate::protocol::{ApiKey, KafkaCode};
use fetcher::{Command, Delivery, PartitionShared};
use reader::{Advance, PartitionReader};

/// Where a partition consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offset {
    /// The oldest offset still kept.
    Oldest,
    /// The next offset to be written (only new records).
    Newest,
    /// An exact offset.
    Exact(i64),
    /// The first offset whose timestamp is at or after this (ms since the epoch).
    Timestamp(i64),
}

/// An error of one partition consumer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("consuming {topic}-{partition}: {error}")]
pub struct ConsumerError {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// What happened.
    #[source]
    pub error: Error,
}

/// A record with owned (shared, zero-copy for uncompressed data) key and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
    /// The timestamp (ms).
    pub timestamp: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<(String, Option<Bytes>)>,
}

pub(crate) struct ConsumerInner {
    pub client: Client,
    /// The client's configuration with this consumer's own `consumer` section: what
    /// the consumer, its fetchers and its offset managers read.
    pub config: Arc<Config>,
    budget: MemoryBudget,
    fetchers: Mutex<HashMap<i32, mpsc::Sender<Command>>>,
    /// Partitions with a live partition consumer.
    consuming: Mutex<HashSet<(String, i32)>>,
    /// ListOffsets lookups gathered by broker.
    lookups: lookups::Lookups,
    this: std::sync::Weak<ConsumerInner>,
}

/// Creates partition consumers. Cheap to clone; `Send + Sync`.
///
/// Each [`PartitionConsumer`] reads one partition from a start [`Offset`]; the fetcher of
/// each broker fetches all the partitions consumed there at once. For a consumer group
/// see [`GroupConsumer`](crate::group::GroupConsumer); [`Consumer::builder`] gives a
/// consumer settings of its own on a shared client.
///
/// ```no_run
/// use kring::consumer::{Consumer, Offset};
/// use kring::{Client, Config};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// let consumer = Consumer::new(client.clone())?;
/// let (oldest, next) = consumer.offsets("orders", 0).await?;
/// println!("partition 0 holds offsets {oldest}..{next}");
/// let mut pc = consumer.consume_partition("orders", 0, Offset::Newest).await?;
/// // Owned messages (Bytes sharing the fetch buffer); next_batch borrows instead.
/// while let Some(message) = pc.next_message().await {
///     let message = message?;
///     println!("{}: {:?}", message.offset, message.value);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Consumer {
    inner: Arc<ConsumerInner>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer").finish_non_exhaustive()
    }
}

impl ConsumerInner {
    /// ListOffsets at the partition's leader for `timestamp` (-2 earliest, -1 latest).
    async fn list_offset(&self, topic: &str, partition: i32, timestamp: i64) -> Result<i64> {
        for attempt in 0..20 {
            let (leader, _) = self.client.leader(topic, partition).await?;
            let isolation = match self.config.consumer.isolation_level {
                IsolationLevel::ReadUncommitted => 0,
                IsolationLevel::ReadCommitted => 1,
            };
            let lookup = lookups::Lookup {
                topic: Arc::from(topic),
                partition,
                timestamp,
            };
            let result = self.lookups.look_up(&leader, isolation, lookup).await;
            let code = match &result {
                Ok((code, _)) => *code,
                Err(_) => KafkaCode::NOT_LEADER_OR_FOLLOWER,
            };
            if let Ok((_, offset)) = result
                && code.is_ok()
            {
                // No record at or after the timestamp: the end of the log.
                if offset < 0 && timestamp >= 0 {
                    return Box::pin(self.list_offset(topic, partition, -1)).await;
                }
                return Ok(offset);
            }
            if !code.is_retriable() || attempt == 19 {
                return Err(match result {
                    Err(e) => Error::Io(e),
                    Ok(_) => Error::broker(code, ApiKey::ListOffsets, Some(topic), Some(partition)),
                });
            }
            let _ = self.client.refresh_after_error(&[topic]).await;
            self.client.sleep(Duration::from_millis(100)).await?;
        }
        unreachable!("the loop returns")
    }

    /// Applies the reset policy after OFFSET_OUT_OF_RANGE.
    async fn reset_offset(&self, p: &PartitionShared) -> Result<()> {
        let Some(ts) = fetcher::reset_timestamp(self.config.consumer.auto_offset_reset) else {
            return Err(Error::broker(
                KafkaCode::OFFSET_OUT_OF_RANGE,
                ApiKey::Fetch,
                Some(&p.topic),
                Some(p.partition),
            ));
        };
        let offset = self.list_offset(&p.topic, p.partition, ts).await?;
        tracing::info!(topic = %p.topic, partition = p.partition, offset, "offset out of range: reset");
        p.set_fetch_position(offset, -1);
        let _ = p.tx.send(Delivery::Reset(offset)).await;
        Ok(())
    }

    /// Whether `auto.offset.reset` names a policy (not `none`).
    fn has_reset_policy(&self) -> bool {
        fetcher::reset_timestamp(self.config.consumer.auto_offset_reset).is_some()
    }

    /// Acts on what the leader said of the partition's fetch position (see
    /// [`epochs::judge`]): a truncated log moves the position back to the first offset
    /// known to diverge, or, with reset `none`, is reported.
    async fn apply_validation(&self, p: &PartitionShared, end: EpochEnd) -> Result<()> {
        let position = p.fetch_position();
        match epochs::judge(position, end, self.has_reset_policy()) {
            Validation::Valid => Ok(()),
            Validation::ResetTo {
                offset,
                leader_epoch,
            } => {
                tracing::warn!(topic = %p.topic, partition = p.partition, position, offset, "log truncated: resetting to the first offset known to diverge");
                p.set_fetch_position(offset, leader_epoch);
                let _ = p.tx.send(Delivery::Reset(offset)).await;
                Ok(())
            }
            Validation::ApplyResetPolicy => {
                tracing::warn!(topic = %p.topic, partition = p.partition, position, "the leader does not know the position's epoch: applying the reset policy");
                self.reset_offset(p).await
            }
            Validation::Truncated { divergent_offset } => {
                tracing::warn!(topic = %p.topic, partition = p.partition, position, ?divergent_offset, "log truncated and auto.offset.reset is none");
                Err(Error::LogTruncation {
                    topic: p.topic.to_string(),
                    partition: p.partition,
                    position,
                    divergent_offset,
                })
            }
        }
    }

    /// A Fetch said the leader's log diverges below the position (`diverging_epoch`).
    pub(crate) async fn handle_divergence(&self, p: &PartitionShared, end: EpochEnd) {
        if let Err(e) = self.apply_validation(p, end).await {
            p.report(e);
        }
    }

    /// OffsetForLeaderEpoch at `leader` for the position's epoch: where it ends in the
    /// leader's log. `None` when the leader does not speak the API (nothing to check
    /// against); a retriable error when the leader or its epoch is not the one asked
    /// (the caller refreshes metadata and tries again).
    async fn epoch_end(
        &self,
        leader: &Broker,
        p: &PartitionShared,
        leader_epoch: i32,
    ) -> Result<Option<EpochEnd>> {
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id(-1)
            .with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(p.topic.to_string())
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default()
                            .with_partition(p.partition)
                            .with_current_leader_epoch(leader_epoch)
                            .with_leader_epoch(p.fetch_epoch()),
                    ]),
            ]);
        let response = match leader.send(request).await {
            Ok(r) => r,
            Err(crate::io::IoError::UnsupportedApi { .. }) => return Ok(None),
            Err(e) => return Err(Error::Io(e)),
        };
        let Some(answer) = response
            .topics
            .iter()
            .filter(|t| *t.topic == *p.topic)
            .flat_map(|t| t.partitions.iter())
            .find(|a| a.partition == p.partition)
        else {
            return Err(Error::Incomplete {
                api: ApiKey::OffsetForLeaderEpoch,
                resource: format!("{}-{}", p.topic, p.partition),
            });
        };
        let code = KafkaCode(answer.error_code);
        if !code.is_ok() {
            return Err(Error::broker(
                code,
                ApiKey::OffsetForLeaderEpoch,
                Some(&p.topic),
                Some(p.partition),
            ));
        }
        Ok(Some(EpochEnd {
            leader_epoch: answer.leader_epoch,
            end_offset: answer.end_offset,
        }))
    }

    /// Before a partition is fetched from a leader of a new epoch: validates its position
    /// there (KIP-320). A truncation with reset `none` is reported, and the partition is
    /// fetched on: each Fetch's `diverging_epoch` reports it again until the application
    /// moves on.
    async fn validate_position(
        &self,
        leader: &Broker,
        p: &PartitionShared,
        leader_epoch: i32,
    ) -> Result<()> {
        let previous = p.leader_epoch.load(Ordering::Acquire);
        if !epochs::needs_validation(previous, leader_epoch, p.fetch_epoch()) {
            return Ok(());
        }
        tracing::debug!(topic = %p.topic, partition = p.partition, previous, leader_epoch, position = p.fetch_position(), "validating the position after a leader change");
        let Some(end) = self.epoch_end(leader, p, leader_epoch).await? else {
            return Ok(());
        };
        match self.apply_validation(p, end).await {
            Err(e @ Error::LogTruncation { .. }) => {
                p.report(e);
                Ok(())
            }
            other => other,
        }
    }

    /// Attaches a partition to the fetcher of its leader (or of its read replica,
    /// KIP-392), its position validated first at the leader when the leader's epoch is
    /// new to it.
    async fn attach(&self, shared: Arc<PartitionShared>) -> Result<()> {
        let (leader, leader_epoch) = self.client.leader(&shared.topic, shared.partition).await?;
        self.validate_position(&leader, &shared, leader_epoch)
            .await?;
        shared.leader_epoch.store(leader_epoch, Ordering::Release);
        let broker = self.fetch_broker(&shared, &leader);
        shared.fetching_from.store(broker.id(), Ordering::Release);
        let tx = {
            let mut fetchers = self.fetchers.lock().map_err(|_| Error::ShuttingDown)?;
            match fetchers.get(&broker.id()) {
                Some(tx) if !tx.is_closed() => tx.clone(),
                _ => {
                    let (tx, rx) = mpsc::channel(256);
                    let weak = self.this.clone();
                    let budget = self.budget.clone();
                    let id = broker.id();
                    let settings = fetcher::settings_of(&self.config);
                    let runtime = self.client.runtime();
                    let connection = self.fetch_connection(&broker);
                    runtime.spawn_on(runtime.worker_for(id), move |_| async move {
                        fetcher::run(weak, connection.clone(), rx, budget, settings).await;
                        connection.close();
                    })?;
                    fetchers.insert(id, tx.clone());
                    tx
                }
            }
        };
        tx.send(Command::Add(shared))
            .await
            .map_err(|_| Error::ShuttingDown)
    }

    /// The connection a new fetcher sends its Fetch requests on: one of its own to the
    /// broker (as franz-go keeps), because Kafka answers a connection's requests in
    /// order, and a long-polling Fetch (up to `fetch.max.wait.ms` on a quiet partition)
    /// would otherwise hold up every ListOffsets, OffsetForLeaderEpoch and metadata
    /// request behind it: starting to read N idle partitions took N long polls. If the
    /// broker is not in the metadata (a bootstrap handle), the shared one.
    fn fetch_connection(&self, broker: &Broker) -> Broker {
        self.client
            .open_dedicated_connection(broker.id())
            .unwrap_or_else(|_| broker.clone())
    }

    /// Moves partitions whose leader changed (or whose fetcher broke) to their new leader:
    /// after `delay` and a metadata refresh, or, when `hinted` (the metadata already
    /// holds the new leader a broker named, KIP-951), at once, with the refresh in the
    /// background.
    fn reroute(&self, partitions: Vec<Arc<PartitionShared>>, delay: Duration, hinted: bool) {
        let Some(this) = self.this.upgrade() else {
            return;
        };
        tokio::task::spawn_local(async move {
            let topics: Vec<String> = partitions
                .iter()
                .map(|p| p.topic.to_string())
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            if hinted {
                let client = this.client.clone();
                tokio::task::spawn_local(async move {
                    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
                    let _ = client.refresh_after_error(&names).await;
                });
            } else {
                tokio::time::sleep(delay).await;
                let names: Vec<&str> = topics.iter().map(String::as_str).collect();
                let _ = this.client.refresh_after_error(&names).await;
            }
            for p in partitions {
                this.attach_retrying(p).await;
            }
        });
    }

    /// Attaches partitions again at once, with the metadata as it is: those whose read
    /// replica was named or aged out (KIP-392).
    fn reattach(&self, partitions: Vec<Arc<PartitionShared>>) {
        let Some(this) = self.this.upgrade() else {
            return;
        };
        tokio::task::spawn_local(async move {
            for p in partitions {
                this.attach_retrying(p).await;
            }
        });
    }

    /// Attaches a partition, retrying (with a metadata refresh) while its leader is
    /// not known; other errors are reported to its consumer.
    async fn attach_retrying(&self, p: Arc<PartitionShared>) {
        if p.closed.load(Ordering::Acquire) {
            return;
        }
        let mut delay = Duration::from_millis(100);
        loop {
            match self.attach(p.clone()).await {
                Ok(()) => return,
                Err(e) if e.is_retriable() && !p.tx.is_closed() => {
                    tracing::debug!(topic = %p.topic, partition = p.partition, error = %e, "no leader yet");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                    let _ = self.client.refresh_after_error(&[&p.topic]).await;
                }
                Err(e) => {
                    p.report(e);
                    return;
                }
            }
        }
    }

    /// The broker a partition led by `leader` is fetched from now (KIP-392, see
    /// [`replica::route`]): its read replica while that is current and metadata lists
    /// it, else the leader (an aged-out replica is forgotten; an unlisted one stays
    /// remembered while metadata is refreshed in the background).
    fn fetch_broker(&self, p: &PartitionShared, leader: &Broker) -> Broker {
        let now = std::time::Instant::now();
        let preferred = p.read_replica();
        let route = replica::route(preferred, leader.id(), now, |id| {
            self.client.broker(id).is_some()
        });
        match route {
            replica::Route::Replica(id) => {
                if let Some(b) = self.client.broker(id) {
                    return b;
                }
            }
            replica::Route::LeaderUntilKnown(id) => {
                tracing::debug!(topic = %p.topic, partition = p.partition, replica = id, "read replica not in metadata yet: fetching from the leader");
                let client = self.client.clone();
                let topic = p.topic.to_string();
                tokio::task::spawn_local(async move {
                    let _ = client.refresh_after_error(&[&topic]).await;
                });
            }
            replica::Route::Leader => {
                if preferred.is_some_and(|r| !r.is_current(now)) {
                    p.set_read_replica(None);
                }
            }
        }
        leader.clone()
    }
}

impl Consumer {
    /// A consumer on `client`'s connections, configured by `client.config().consumer`.
    pub fn new(client: Client) -> Result<Consumer> {
        let own = client.config().consumer.clone();
        Self::start(client, own)
    }

    /// A consumer with settings of its own over `client`'s connections and workers:
    /// starts from `client.config().consumer`; see [`ConsumerBuilder`].
    pub fn builder(client: &Client) -> ConsumerBuilder {
        ConsumerBuilder::new(client)
    }

    /// A consumer on `client` with `own` settings (validated with the client's).
    pub(crate) fn start(client: Client, own: ConsumerConfig) -> Result<Consumer> {
        let mut config = client.config().clone();
        config.consumer = own;
        config.validate()?;
        let config = Arc::new(config);
        let budget = MemoryBudget::new(config.consumer.fetch_buffer_memory);
        let lookups = lookups::Lookups::new(config.net.request_timeout);
        let inner = Arc::new_cyclic(|this| ConsumerInner {
            client,
            config,
            budget,
            fetchers: Mutex::new(HashMap::new()),
            consuming: Mutex::new(HashSet::new()),
            lookups,
            this: this.clone(),
        });
        Ok(Consumer { inner })
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// This consumer's settings (the client's, or its builder's).
    pub fn consumer_config(&self) -> &ConsumerConfig {
        &self.inner.config.consumer
    }

    /// An offset manager of group `group` with this consumer's settings
    /// (`enable.auto.commit`, `auto.commit.interval.ms`); [`OffsetManager::new`] takes
    /// the client's.
    pub fn offset_manager(&self, group: impl Into<String>) -> Result<OffsetManager> {
        OffsetManager::start(
            self.inner.client.clone(),
            group.into(),
            self.consumer_config(),
        )
    }

    /// The earliest and the next offset of a partition (ListOffsets at its leader).
    pub async fn offsets(&self, topic: &str, partition: i32) -> Result<(i64, i64)> {
        let earliest = self.inner.list_offset(topic, partition, -2).await?;
        let latest = self.inner.list_offset(topic, partition, -1).await?;
        Ok((earliest, latest))
    }

    /// Starts consuming `topic`/`partition` from `start`, with the fetcher's errors for
    /// it on a channel of their own from the very first fetch (see
    /// [`PartitionConsumer::errors_to_channel`]).
    pub async fn consume_partition_with_errors(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
        capacity: usize,
    ) -> Result<(PartitionConsumer, mpsc::Receiver<ConsumerError>)> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let pc = self.consume(topic, partition, start, Some(tx)).await?;
        Ok((pc, rx))
    }

    /// Starts consuming `topic`/`partition` from `start`. Starting many partitions,
    /// await the calls together (on tasks of their own, or joined): their start offsets
    /// are then looked up in one ListOffsets per leader rather than one round trip each.
    pub async fn consume_partition(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
    ) -> Result<PartitionConsumer> {
        self.consume(topic, partition, start, None).await
    }

    async fn consume(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
        errors: Option<mpsc::Sender<ConsumerError>>,
    ) -> Result<PartitionConsumer> {
        let count = self.inner.client.partitions(topic).await?.len();
        if partition < 0 || partition as usize >= count {
            return Err(Error::InvalidPartition {
                topic: topic.to_string(),
                partition,
                count,
            });
        }
        let claim = (topic.to_string(), partition);
        if !self
            .inner
            .consuming
            .lock()
            .map_err(|_| Error::ShuttingDown)?
            .insert(claim.clone())
        {
            return Err(Error::AlreadyConsumed {
                topic: topic.to_string(),
                partition,
            });
        }
        let guard = Claim {
            consumer: self.inner.this.clone(),
            key: Some(claim),
        };
        let offset = match start {
            Offset::Oldest => self.inner.list_offset(topic, partition, -2).await?,
            Offset::Newest => self.inner.list_offset(topic, partition, -1).await?,
            Offset::Timestamp(ts) => self.inner.list_offset(topic, partition, ts.max(0)).await?,
            Offset::Exact(o) => o,
        };
        let (tx, rx) = mpsc::channel(4);
        let shared = Arc::new(PartitionShared {
            topic: Arc::from(topic),
            partition,
            fetch_position: AtomicI64::new(offset),
            fetch_epoch: std::sync::atomic::AtomicI32::new(-1),
            leader_epoch: std::sync::atomic::AtomicI32::new(-1),
            high_watermark: AtomicI64::new(-1),
            paused: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            tx,
            errors: Mutex::new(errors),
            wake: Mutex::new(None),
            read_replica: Mutex::new(None),
            fetching_from: std::sync::atomic::AtomicI32::new(-1),
        });
        self.inner.attach(shared.clone()).await?;
        let config = &self.inner.config.consumer;
        Ok(PartitionConsumer {
            _claim: guard,
            metrics: metrics::PartitionMetrics::new(topic, partition, config.interceptors.clone()),
            budget: self.inner.budget.clone(),
            shared,
            rx,
            reader: PartitionReader::new(
                offset,
                config.isolation_level == IsolationLevel::ReadCommitted,
                config.check_crcs,
                config.fetch_max_decompressed_bytes,
                self.inner.budget.clone(),
            ),
            pending: std::collections::VecDeque::new(),
        })
    }

    /// [`Consumer::consume_partition`] for plain threads.
    pub fn consume_partition_blocking(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
    ) -> Result<PartitionConsumer> {
        crate::client::block_on(self.consume_partition(topic, partition, start))
    }

    /// Where the reset policy would put a partition now (for callers handling
    /// `OffsetReset::None` themselves).
    pub fn reset_policy(&self) -> OffsetReset {
        self.inner.config.consumer.auto_offset_reset
    }
}

/// Reads one partition, in order, from what its fetcher delivers.
#[derive(Debug)]
pub struct PartitionConsumer {
    _claim: Claim,
    shared: Arc<PartitionShared>,
    rx: mpsc::Receiver<Delivery>,
    reader: PartitionReader,
    /// Owned messages of the current batch not handed out yet (`next_message`).
    pending: std::collections::VecDeque<Message>,
    metrics: metrics::PartitionMetrics,
    /// The consumer's fetch memory (for the prefetch gauge).
    budget: MemoryBudget,
}

impl PartitionConsumer {
    fn error(&self, error: Error) -> ConsumerError {
        consumer_error(&self.shared, error)
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.shared.topic
    }

    /// The partition.
    pub fn partition(&self) -> i32 {
        self.shared.partition
    }

    /// The next offset this consumer will hand out.
    pub fn position(&self) -> i64 {
        self.reader.position()
    }

    /// The leader epoch of the batch last handed out (or passed over: control batches,
    /// aborted transactions), `None` before the first and after a seek: what a commit
    /// of [`PartitionConsumer::position`] carries (KIP-320), so a consumer starting from
    /// it can tell whether the log was truncated below it.
    pub fn position_leader_epoch(&self) -> Option<i32> {
        self.reader.position_epoch()
    }

    /// The partition's high watermark as of the latest fetch (-1 before the first).
    pub fn high_watermark(&self) -> i64 {
        self.shared.high_watermark.load(Ordering::Acquire)
    }

    /// The broker whose fetcher serves this partition (its id): the leader, or, with
    /// `client.rack` set, the replica in that rack the leader named (KIP-392). `None`
    /// before it was first attached. While the partition moves between brokers (a
    /// leader change, a read replica named or given up) it names the last one.
    pub fn fetching_from(&self) -> Option<i32> {
        let id = self.shared.fetching_from.load(Ordering::Acquire);
        (id >= 0).then_some(id)
    }

    /// Records between the position and the high watermark.
    pub fn lag(&self) -> i64 {
        (self.high_watermark() - self.position()).max(0)
    }

    /// Stops fetching for this partition (what is already fetched can still be read).
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::Release);
    }

    /// Whether [`PartitionConsumer::pause`] is in force.
    pub fn is_paused(&self) -> bool {
        self.shared.paused.load(Ordering::Acquire)
    }

    /// Resumes fetching.
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::Release);
        self.shared.wake_fetcher();
    }

    /// Stops consuming; the fetcher forgets the partition.
    pub fn close(self) {
        self.shared.closed.store(true, Ordering::Release);
    }

    /// Sends the errors the fetcher reports for this partition (broker error codes, a
    /// reset that the policy forbids) to the returned channel from now on, instead of
    /// returning them from `next_batch` (Sarama's `Errors()`). A full or dropped channel
    /// returns them inline again. Corrupt data is always reported inline, where it is met.
    pub fn errors_to_channel(&mut self, capacity: usize) -> mpsc::Receiver<ConsumerError> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        if let Ok(mut slot) = self.shared.errors.lock() {
            *slot = Some(tx);
        }
        rx
    }

    /// Applies what the fetcher delivered.
    fn apply(&mut self, delivery: Delivery) -> std::result::Result<(), ConsumerError> {
        match delivery {
            Delivery::Chunk(chunk) => {
                // Room in the channel again: the fetcher may fetch for us.
                self.shared.wake_fetcher();
                self.reader.push_chunk(chunk);
                let high_watermark = self.shared.high_watermark.load(Ordering::Acquire);
                self.metrics
                    .fetched(high_watermark, self.reader.position(), &self.budget);
                Ok(())
            }
            Delivery::Reset(offset) => {
                self.reader.reset(offset);
                Ok(())
            }
            Delivery::Error(e) => Err(self.error(e)),
        }
    }

    /// Feeds the reader chunks until it has a batch ready (`Ready(Some(Ok))`, then
    /// `take_ready_*`), or an error; `Ready(None)` when the fetcher is gone. The group
    /// consumer polls its partitions with this.
    pub(crate) fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<(), ConsumerError>>> {
        use std::task::Poll;
        loop {
            match self.reader.advance() {
                Advance::Ready => return Poll::Ready(Some(Ok(()))),
                Advance::NeedChunk => match self.rx.poll_recv(cx) {
                    Poll::Ready(Some(delivery)) => {
                        if let Err(e) = self.apply(delivery) {
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                },
                Advance::Error(e) => return Poll::Ready(Some(Err(self.error(e)))),
            }
        }
    }

    /// Feeds the reader chunks until it has a batch ready, or an error.
    async fn until_ready(&mut self) -> Option<std::result::Result<(), ConsumerError>> {
        std::future::poll_fn(|cx| self.poll_ready(cx)).await
    }

    /// The batch [`PartitionConsumer::poll_ready`] found.
    pub(crate) fn take_ready_batch(
        &mut self,
    ) -> Option<std::result::Result<FetchedBatch<'_>, ConsumerError>> {
        let (shared, metrics) = (&self.shared, &self.metrics);
        self.reader.take_ready().map(|r| match r {
            Ok(batch) => {
                metrics.handing_out(&shared.topic, shared.partition, &batch);
                Ok(batch)
            }
            Err(error) => Err(consumer_error(shared, error)),
        })
    }

    /// The batch [`PartitionConsumer::poll_ready`] found, as owned messages.
    pub(crate) fn take_ready_messages(
        &mut self,
    ) -> Option<std::result::Result<Vec<Message>, ConsumerError>> {
        let topic = self.shared.topic.clone();
        let (shared, metrics) = (&self.shared, &self.metrics);
        let observe = |batch: &FetchedBatch<'_>| {
            metrics.handing_out(&shared.topic, shared.partition, batch);
        };
        self.reader
            .take_messages(&topic, shared.partition, observe)
            .map(|r| r.map_err(|error| consumer_error(shared, error)))
    }

    /// The next batch with records for the user, or an error. `None` when the consumer's
    /// fetcher is gone (the consumer or client was closed).
    ///
    /// The batch's records borrow the fetch buffer (or, for a compressed batch, the
    /// decompression scratch): keys, values and headers are `&[u8]`, nothing is copied
    /// or allocated per record. The batch borrows the consumer, so it is dropped before
    /// the next call.
    ///
    /// A batch that fails its CRC check or does not decompress is reported as
    /// [`Error::CorruptBatch`] on this and every later call, the position staying at
    /// it, until [`PartitionConsumer::skip_bad_batch`].
    ///
    /// ```no_run
    /// use kring::consumer::{Consumer, Offset};
    /// use kring::{Client, Config};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
    /// let consumer = Consumer::new(client)?;
    /// let mut pc = consumer.consume_partition("orders", 0, Offset::Oldest).await?;
    /// let mut bytes = 0;
    /// while let Some(batch) = pc.next_batch().await {
    ///     for record in batch?.records() {
    ///         let record = record?;
    ///         let key: Option<&[u8]> = record.key();
    ///         let value: &[u8] = record.value().unwrap_or_default();
    ///         bytes += key.map_or(0, <[u8]>::len) + value.len();
    ///         for header in record.headers() {
    ///             let header = header?; // borrowed too: key and value are slices
    ///             println!("{}: {:?} = {:?}", record.offset(), header.key, header.value);
    ///         }
    ///     }
    ///     println!("{bytes} bytes so far, lag {}", pc.lag());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next_batch(
        &mut self,
    ) -> Option<std::result::Result<FetchedBatch<'_>, ConsumerError>> {
        if let Err(e) = self.until_ready().await? {
            return Some(Err(e));
        }
        self.take_ready_batch()
    }

    /// [`PartitionConsumer::next_batch`] for plain threads.
    pub fn next_batch_blocking(
        &mut self,
    ) -> Option<std::result::Result<FetchedBatch<'_>, ConsumerError>> {
        crate::client::block_on(self.next_batch())
    }

    /// Every record of the next batch as owned messages (their bytes shared with the
    /// fetch buffer when the batch is uncompressed). `None` when the consumer ended.
    ///
    /// A record that does not decode ends the batch there: the records before it come
    /// back first, and the next call reports the bad batch (again on every call, the
    /// position staying at the bad record, until [`PartitionConsumer::skip_bad_batch`]).
    pub async fn next_messages(
        &mut self,
    ) -> Option<std::result::Result<Vec<Message>, ConsumerError>> {
        if let Err(e) = self.until_ready().await? {
            return Some(Err(e));
        }
        self.take_ready_messages()
    }

    /// Passes over the corrupt batch the last read reported
    /// ([`Error::CorruptBatch`]): the position moves past it and reading goes on with
    /// the next batch — what a seek past the bad offsets does in the Java client. The
    /// batch's first and last offset, or `None` when the last read reported no corrupt
    /// batch (nothing is skipped then).
    pub fn skip_bad_batch(&mut self) -> Option<(i64, i64)> {
        let skipped = self.reader.skip_bad_batch();
        if let Some((first, last)) = skipped {
            tracing::warn!(topic = %self.shared.topic, partition = self.shared.partition, first, last, "corrupt batch skipped");
        }
        skipped
    }

    /// The next owned message, one at a time (a stream of [`Message`]s over
    /// [`PartitionConsumer::next_messages`]). `None` when the consumer ended.
    pub async fn next_message(&mut self) -> Option<std::result::Result<Message, ConsumerError>> {
        loop {
            if let Some(m) = self.pending.pop_front() {
                return Some(Ok(m));
            }
            match self.next_messages().await? {
                Ok(batch) => self.pending.extend(batch),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// [`PartitionConsumer::next_message`] for plain threads.
    pub fn next_message_blocking(&mut self) -> Option<std::result::Result<Message, ConsumerError>> {
        crate::client::block_on(self.next_message())
    }

    /// [`PartitionConsumer::next_messages`] for plain threads.
    pub fn next_messages_blocking(
        &mut self,
    ) -> Option<std::result::Result<Vec<Message>, ConsumerError>> {
        crate::client::block_on(self.next_messages())
    }
}

/// `error` as the partition's consumer reports it.
fn consumer_error(shared: &PartitionShared, error: Error) -> ConsumerError {
    metrics::count_error(&shared.topic, &error);
    ConsumerError {
        topic: shared.topic.to_string(),
        partition: shared.partition,
        error,
    }
}

/// Releases a partition's claim when its consumer goes away.
#[derive(Debug)]
struct Claim {
    consumer: std::sync::Weak<ConsumerInner>,
    key: Option<(String, i32)>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let (Some(inner), Some(key)) = (self.consumer.upgrade(), self.key.take())
            && let Ok(mut c) = inner.consuming.lock()
        {
            c.remove(&key);
        }
    }
}

impl Drop for PartitionConsumer {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}
