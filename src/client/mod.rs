//! `Client` (Sarama's Client): bootstrap, the cluster metadata cache, leader routing,
//! and group and transaction coordinators.
//!
//! Invariants:
//! - Metadata snapshots are immutable and swapped whole ([`ClusterMetadata`]); readers
//!   take an `Arc` and never block a refresh.
//! - Refreshes run in one task on a worker, so concurrent demands coalesce: every request
//!   waiting when a refresh starts is answered by it, and error-triggered refreshes are
//!   spaced by `metadata.refresh_backoff`, so a storm of stale-metadata errors costs one
//!   Metadata request. The same task refreshes periodically (`metadata.refresh_interval`).
//! - Timers live on the workers only; the public methods await channels, so they work
//!   from any async runtime, and the `_blocking` variants from plain threads.
//! - Broker handles follow metadata: a new broker is opened, one whose address changed is
//!   reopened, one that left is closed.
//! - After [`Client::close`], every call returns [`Error::ClosedClient`].

mod blocking;
pub mod metadata;

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;

pub use crate::io::{
    BlockingConnection, Broker, ConnectionConfig, ConnectionState, PendingResponse,
};
pub use blocking::block_on;
pub use metadata::{BrokerInfo, ClusterMetadata, LeaderHint, PartitionInfo, TopicInfo};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::io::IoError;
use crate::protocol::messages::{
    ApiKey, FindCoordinatorRequest, MetadataRequest, metadata::MetadataRequestTopic,
};
use crate::protocol::{KafkaCode, Request};
use crate::runtime::Runtime;

/// Which kind of coordinator (FindCoordinator's key type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoordinatorKind {
    /// A consumer group's coordinator.
    Group,
    /// A transactional id's coordinator.
    Transaction,
}

impl CoordinatorKind {
    fn key_type(self) -> i8 {
        match self {
            CoordinatorKind::Group => 0,
            CoordinatorKind::Transaction => 1,
        }
    }
}

pub use crate::protocol::is_stale_metadata;

struct RefreshDemand {
    /// `None`: every topic in the cluster.
    topics: Option<Vec<String>>,
    /// Triggered by an error: spaced by the refresh backoff.
    after_error: bool,
    reply: oneshot::Sender<Result<()>>,
}

/// State shared by the client handles and the metadata task.
struct Shared {
    config: Arc<Config>,
    conn_config: ConnectionConfig,
    runtime: Runtime,
    metadata: RwLock<Arc<ClusterMetadata>>,
    /// The snapshot's generation, readable without the lock (stored under it): per-record
    /// paths check a cache against it instead of taking the snapshot.
    metadata_generation: AtomicU64,
    brokers: Mutex<HashMap<i32, Broker>>,
    seeds: Vec<Broker>,
    coordinators: Mutex<HashMap<(CoordinatorKind, String), i32>>,
    closed: AtomicBool,
    close_notify: Notify,
    metadata_requests: AtomicU64,
}

struct ClientInner {
    shared: Arc<Shared>,
    refresh_tx: mpsc::Sender<RefreshDemand>,
}

/// A connection to a Kafka cluster: metadata, routing and coordinators. Cheap to clone;
/// `Send + Sync`.
///
/// It owns the worker threads and their broker connections; producers, consumers, group
/// members and [`Admin`](crate::admin::Admin) made from it share them.
/// [`Client::close`] ends them, as does dropping the last clone.
///
/// ```no_run
/// use kring::{Client, Config};
///
/// # async fn run() -> kring::Result<()> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// for topic in client.topics().await? {
///     println!("{topic}: partitions {:?}", client.partitions(&topic).await?);
/// }
/// client.close();
///
/// // From a plain thread:
/// let client = Client::connect_blocking(Config::new(["127.0.0.1:9092"]))?;
/// # drop(client);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.metadata();
        f.debug_struct("Client")
            .field("cluster_id", &m.cluster_id)
            .field("brokers", &m.brokers.len())
            .field("topics", &m.topics.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl Shared {
    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.close_notify.notify_one();
        for b in &self.seeds {
            b.close();
        }
        if let Ok(brokers) = self.brokers.lock() {
            for b in brokers.values() {
                b.close();
            }
        }
    }

    fn snapshot(&self) -> Arc<ClusterMetadata> {
        self.metadata.read().map(|m| m.clone()).unwrap_or_default()
    }

    /// Brokers to ask for metadata: connected ones first, then the rest, then the seeds.
    fn candidates(&self) -> Vec<Broker> {
        let mut known: Vec<Broker> = self
            .brokers
            .lock()
            .map(|b| b.values().cloned().collect())
            .unwrap_or_default();
        known.sort_by_key(|b| (!b.connected(), b.id()));
        known.extend(self.seeds.iter().cloned());
        known
    }

    /// Opens, reopens or closes broker handles to match `snapshot`.
    fn sync_brokers(&self, snapshot: &ClusterMetadata) -> Result<()> {
        let mut brokers = self.brokers.lock().map_err(|_| Error::ShuttingDown)?;
        brokers.retain(|id, handle| match snapshot.brokers.get(id) {
            Some(info) if info.addr() == handle.addr() => true,
            Some(info) => {
                tracing::info!(broker = id, old = handle.addr(), new = %info.addr(), "broker moved");
                handle.close();
                false
            }
            None => {
                tracing::info!(broker = id, addr = handle.addr(), "broker left the cluster");
                handle.close();
                false
            }
        });
        for (id, info) in &snapshot.brokers {
            if !brokers.contains_key(id) {
                let handle =
                    Broker::open(&self.runtime, *id, info.addr(), self.conn_config.clone())?;
                tracing::debug!(broker = id, addr = %info.addr(), "broker opened");
                brokers.insert(*id, handle);
            }
        }
        Ok(())
    }

    /// One Metadata round: ask candidates in turn until one answers.
    async fn fetch_metadata(&self, topics: Option<&[String]>) -> Result<()> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|t| {
                t.iter()
                    .map(|name| MetadataRequestTopic::default().with_name(Some(name.clone())))
                    .collect()
            }))
            .with_allow_auto_topic_creation(self.config.metadata.allow_auto_topic_creation);
        let mut attempts = Vec::new();
        for broker in self.candidates() {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::ClosedClient);
            }
            self.metadata_requests.fetch_add(1, Ordering::Relaxed);
            match broker.send(request.clone()).await {
                Ok(response) => {
                    self.update_metadata(|previous| {
                        Some(ClusterMetadata::apply(
                            previous,
                            &response,
                            topics.is_none(),
                        ))
                    })?;
                    return Ok(());
                }
                Err(e) => {
                    tracing::debug!(addr = broker.addr(), error = %e, "metadata request failed");
                    attempts.push(format!("{}: {e}", broker.addr()));
                }
            }
        }
        Err(Error::OutOfBrokers(attempts.join("; ")))
    }
}

impl Shared {
    /// Replaces the snapshot with what `next` makes of the current one (`None`: no
    /// change), under the write lock, so a refresh and a leader hint applied at the same
    /// time do not lose each other's update.
    fn update_metadata(
        &self,
        next: impl FnOnce(&ClusterMetadata) -> Option<ClusterMetadata>,
    ) -> Result<bool> {
        let mut m = self.metadata.write().map_err(|_| Error::ShuttingDown)?;
        let Some(next) = next(&m) else {
            return Ok(false);
        };
        log_changes(&m, &next);
        self.sync_brokers(&next)?;
        self.metadata_generation
            .store(next.generation, Ordering::Release);
        *m = Arc::new(next);
        Ok(true)
    }
}

fn log_changes(previous: &ClusterMetadata, next: &ClusterMetadata) {
    for (name, topic) in &next.topics {
        let Some(old) = previous.topics.get(name) else {
            continue;
        };
        for p in &topic.partitions {
            if let Some(o) = old.partitions.iter().find(|o| o.id == p.id)
                && o.leader != p.leader
            {
                tracing::info!(topic = %name, partition = p.id, from = o.leader, to = p.leader, "leader moved");
            }
        }
    }
}

/// The metadata task: coalesces refresh demands, spaces error-triggered refreshes and
/// refreshes periodically. Ends when every client handle is gone or the client closes.
async fn metadata_task(shared: Arc<Shared>, mut rx: mpsc::Receiver<RefreshDemand>) {
    let interval = shared.config.metadata.refresh_interval;
    let backoff = shared.config.metadata.refresh_backoff;
    let mut last_refresh: Option<Instant> = None;
    loop {
        let periodic_at = last_refresh.map_or_else(|| Instant::now() + interval, |t| t + interval);
        let first = tokio::select! {
            biased;
            _ = shared.close_notify.notified() => break,
            d = rx.recv() => match d { Some(d) => Some(d), None => break },
            _ = tokio::time::sleep_until(periodic_at) => None,
        };
        if shared.closed.load(Ordering::Acquire) {
            if let Some(d) = first {
                let _ = d.reply.send(Err(Error::ClosedClient));
            }
            break;
        }
        let mut demands: Vec<RefreshDemand> = first.into_iter().collect();
        // Errors arriving in a burst: wait out the backoff, gathering the burst.
        if demands.iter().any(|d| d.after_error)
            && let Some(t) = last_refresh
            && t.elapsed() < backoff
        {
            tokio::time::sleep_until(t + backoff).await;
        }
        while let Ok(d) = rx.try_recv() {
            demands.push(d);
        }
        let topics: Option<Vec<String>> = if demands.is_empty() {
            // Periodic: the topics we know.
            Some(shared.snapshot().topics.keys().cloned().collect())
        } else if demands.iter().any(|d| d.topics.is_none()) {
            None
        } else {
            let set: BTreeSet<String> = demands
                .iter()
                .flat_map(|d| d.topics.iter().flatten().cloned())
                .chain(shared.snapshot().topics.keys().cloned())
                .collect();
            Some(set.into_iter().collect())
        };
        let result = shared.fetch_metadata(topics.as_deref()).await;
        last_refresh = Some(Instant::now());
        if let Err(e) = &result {
            tracing::warn!(error = %e, "metadata refresh failed");
        }
        for d in demands {
            let _ = d.reply.send(result.clone());
        }
    }
    // Closed: fail whatever is still waiting.
    rx.close();
    while let Ok(d) = rx.try_recv() {
        let _ = d.reply.send(Err(Error::ClosedClient));
    }
}

impl Client {
    /// Connects to the cluster: validates `config`, starts a runtime of its own, and
    /// fetches metadata from the first bootstrap address that answers.
    pub async fn connect(config: Config) -> Result<Client> {
        config.validate()?;
        let runtime = Runtime::new(config.runtime_config())?;
        Self::connect_with_runtime(config, runtime).await
    }

    /// [`Client::connect`] for plain threads.
    pub fn connect_blocking(config: Config) -> Result<Client> {
        block_on(Self::connect(config))
    }

    /// Connects using an existing runtime (several clients can share one).
    #[doc(hidden)]
    pub async fn connect_with_runtime(config: Config, runtime: Runtime) -> Result<Client> {
        config.validate()?;
        crate::metrics::describe();
        let conn_config = config.connection_config()?;
        let mut seeds = Vec::new();
        for addr in &config.bootstrap_servers {
            seeds.push(Broker::open(
                &runtime,
                -1,
                addr.clone(),
                conn_config.clone(),
            )?);
        }
        let shared = Arc::new(Shared {
            config: Arc::new(config),
            conn_config,
            runtime: runtime.clone(),
            metadata: RwLock::new(Arc::new(ClusterMetadata::default())),
            metadata_generation: AtomicU64::new(ClusterMetadata::default().generation),
            brokers: Mutex::new(HashMap::new()),
            seeds,
            coordinators: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            close_notify: Notify::new(),
            metadata_requests: AtomicU64::new(0),
        });
        let (refresh_tx, refresh_rx) = mpsc::channel(1024);
        let task_shared = shared.clone();
        runtime.spawn_on(0, move |_| metadata_task(task_shared, refresh_rx))?;
        let client = Client {
            inner: Arc::new(ClientInner { shared, refresh_tx }),
        };
        // Bootstrap: brokers and controller, no topics.
        client.demand_refresh(Some(Vec::new()), false).await?;
        Ok(client)
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::ClosedClient)
        } else {
            Ok(())
        }
    }

    async fn demand_refresh(&self, topics: Option<Vec<String>>, after_error: bool) -> Result<()> {
        self.check_open()?;
        let (reply, rx) = oneshot::channel();
        self.inner
            .refresh_tx
            .send(RefreshDemand {
                topics,
                after_error,
                reply,
            })
            .await
            .map_err(|_| Error::ClosedClient)?;
        rx.await.map_err(|_| Error::ClosedClient)?
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared().config
    }

    /// The runtime the client's connections live on.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.shared().runtime
    }

    /// The I/O backend the client's workers drive their sockets with (`io_uring` or
    /// `epoll`).
    pub fn io_backend(&self) -> crate::config::Backend {
        self.shared().runtime.backend()
    }

    /// The current metadata snapshot.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.shared().snapshot()
    }

    /// The current snapshot's [`generation`](ClusterMetadata::generation), without
    /// taking the snapshot: a cache built from generation G is current while this is G.
    pub fn metadata_generation(&self) -> u64 {
        self.shared().metadata_generation.load(Ordering::Acquire)
    }

    /// How many Metadata requests the client has sent (refreshes, including failed attempts).
    pub fn metadata_requests(&self) -> u64 {
        self.shared().metadata_requests.load(Ordering::Relaxed)
    }

    /// Refreshes metadata for `topics` (plus the topics already cached) now.
    pub async fn refresh_metadata(&self, topics: &[&str]) -> Result<()> {
        self.demand_refresh(Some(topics.iter().map(|t| t.to_string()).collect()), false)
            .await
    }

    /// Refreshes metadata for every topic in the cluster.
    pub async fn refresh_all_metadata(&self) -> Result<()> {
        self.demand_refresh(None, false).await
    }

    /// Refreshes after an error that means stale metadata; a burst of such calls causes a
    /// single refresh, spaced from the previous by the refresh backoff.
    pub async fn refresh_after_error(&self, topics: &[&str]) -> Result<()> {
        self.demand_refresh(Some(topics.iter().map(|t| t.to_string()).collect()), true)
            .await
    }

    /// Applies leader hints from Produce or Fetch answers (KIP-951) to the metadata
    /// cache, so requests go to the new leader without waiting for a Metadata round
    /// trip; `endpoints` are the brokers the answer named. Hints older than what is
    /// cached are ignored. Whether anything changed.
    pub fn apply_leader_hints(&self, hints: &[LeaderHint], endpoints: &[BrokerInfo]) -> bool {
        if hints.is_empty() || self.is_closed() {
            return false;
        }
        self.shared()
            .update_metadata(|m| m.with_leader_hints(hints, endpoints))
            .unwrap_or(false)
    }

    /// Every topic in the cluster (fetches the full topic list).
    pub async fn topics(&self) -> Result<Vec<String>> {
        self.refresh_all_metadata().await?;
        let mut names: Vec<String> = self.metadata().topics.keys().cloned().collect();
        names.sort();
        Ok(names)
    }

    /// The topic's metadata, fetching it if not cached.
    pub async fn topic(&self, topic: &str) -> Result<TopicInfo> {
        self.check_open()?;
        if let Some(t) = self.metadata().topics.get(topic) {
            return Ok(t.clone());
        }
        self.refresh_metadata(&[topic]).await?;
        self.metadata().topics.get(topic).cloned().ok_or_else(|| {
            Error::broker(
                KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
                ApiKey::Metadata,
                Some(topic),
                None,
            )
        })
    }

    /// The topic's metadata, asking again while the cluster does not show the topic, for
    /// up to `within`: a topic created elsewhere reaches the brokers' metadata one
    /// broker at a time. Re-asks are spaced by the refresh backoff, doubling up to 1 s;
    /// after `within`, UNKNOWN_TOPIC_OR_PARTITION as from [`Client::topic`].
    pub async fn topic_within(&self, topic: &str, within: Duration) -> Result<TopicInfo> {
        let deadline = std::time::Instant::now().checked_add(within);
        let mut backoff = self.shared().config.metadata.refresh_backoff;
        loop {
            match self.topic(topic).await {
                Err(e) if is_unknown_topic(&e) => {
                    let Some(wait) = wait_before_asking_again(backoff, deadline) else {
                        return Err(e);
                    };
                    tracing::debug!(topic, ?wait, "topic not in metadata yet: asking again");
                    self.sleep(wait).await?;
                    backoff = backoff
                        .saturating_mul(2)
                        .clamp(Duration::from_millis(1), Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    /// The topic's partition ids.
    pub async fn partitions(&self, topic: &str) -> Result<Vec<i32>> {
        Ok(self
            .topic(topic)
            .await?
            .partitions
            .iter()
            .map(|p| p.id)
            .collect())
    }

    async fn partition_info(&self, topic: &str, partition: i32) -> Result<PartitionInfo> {
        let t = self.topic(topic).await?;
        t.partitions
            .iter()
            .find(|p| p.id == partition)
            .cloned()
            .ok_or(Error::InvalidPartition {
                topic: topic.to_string(),
                partition,
                count: t.partitions.len(),
            })
    }

    /// The leader of a partition and its leader epoch.
    pub async fn leader(&self, topic: &str, partition: i32) -> Result<(Broker, i32)> {
        let p = self.partition_info(topic, partition).await?;
        if p.leader < 0 {
            return Err(Error::broker(
                KafkaCode::LEADER_NOT_AVAILABLE,
                ApiKey::Metadata,
                Some(topic),
                Some(partition),
            ));
        }
        let broker = self.broker(p.leader).ok_or_else(|| {
            Error::broker(
                KafkaCode::LEADER_NOT_AVAILABLE,
                ApiKey::Metadata,
                Some(topic),
                Some(partition),
            )
        })?;
        Ok((broker, p.leader_epoch))
    }

    /// A partition's replicas.
    pub async fn replicas(&self, topic: &str, partition: i32) -> Result<Vec<i32>> {
        Ok(self.partition_info(topic, partition).await?.replicas)
    }

    /// A partition's in-sync replicas.
    pub async fn in_sync_replicas(&self, topic: &str, partition: i32) -> Result<Vec<i32>> {
        Ok(self.partition_info(topic, partition).await?.isr)
    }

    /// A partition's offline replicas.
    pub async fn offline_replicas(&self, topic: &str, partition: i32) -> Result<Vec<i32>> {
        Ok(self.partition_info(topic, partition).await?.offline)
    }

    /// The handle of broker `id`, if metadata lists it.
    pub fn broker(&self, id: i32) -> Option<Broker> {
        self.shared().brokers.lock().ok()?.get(&id).cloned()
    }

    /// Every broker metadata lists.
    pub fn brokers(&self) -> Vec<Broker> {
        let mut v: Vec<Broker> = self
            .shared()
            .brokers
            .lock()
            .map(|b| b.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by_key(Broker::id);
        v
    }

    /// The active controller.
    pub fn controller(&self) -> Option<Broker> {
        self.broker(self.metadata().controller_id)
    }

    /// Some broker to send a cluster-wide request to: a connected one if any.
    pub fn any_broker(&self) -> Result<Broker> {
        self.check_open()?;
        self.shared()
            .candidates()
            .into_iter()
            .next()
            .ok_or_else(|| Error::OutOfBrokers("no broker known".into()))
    }

    /// Sends `request` to some broker (a connected one if any) at the negotiated version.
    pub async fn send_any<R: Request + Send + 'static>(&self, request: R) -> Result<R::Response> {
        Ok(self.any_broker()?.send(request).await?)
    }

    /// The coordinator of consumer group `group`.
    pub async fn coordinator(&self, group: &str) -> Result<Broker> {
        self.find_coordinator(CoordinatorKind::Group, group).await
    }

    /// The coordinator of `key` (a group or a transactional id).
    pub(crate) async fn find_coordinator_of(
        &self,
        kind: CoordinatorKind,
        key: &str,
    ) -> Result<Broker> {
        self.find_coordinator(kind, key).await
    }

    /// The coordinator of transactional id `transactional_id`.
    pub async fn transaction_coordinator(&self, transactional_id: &str) -> Result<Broker> {
        self.find_coordinator(CoordinatorKind::Transaction, transactional_id)
            .await
    }

    /// A connection of its own to broker `id` (on the worker that owns that broker's
    /// sockets), for requests that may wait long and must not hold up the shared one:
    /// a group member's JoinGroup waits for the whole group, and Kafka answers a
    /// connection's requests in order. The caller closes it.
    pub fn open_dedicated_connection(&self, id: i32) -> Result<Broker> {
        let shared = self.shared();
        let info = shared
            .snapshot()
            .brokers
            .get(&id)
            .map(|b| b.addr())
            .ok_or_else(|| {
                Error::broker(
                    KafkaCode::BROKER_NOT_AVAILABLE,
                    ApiKey::Metadata,
                    None,
                    None,
                )
            })?;
        Ok(Broker::open(
            &shared.runtime,
            id,
            info,
            shared.conn_config.clone(),
        )?)
    }

    /// Forgets a cached coordinator (after NOT_COORDINATOR and the like).
    pub fn invalidate_coordinator(&self, kind: CoordinatorKind, key: &str) {
        if let Ok(mut c) = self.shared().coordinators.lock() {
            c.remove(&(kind, key.to_string()));
        }
    }

    /// The coordinators of several keys at once (batched in FindCoordinator v4+, one
    /// request per key before that).
    pub async fn coordinators(&self, kind: CoordinatorKind, keys: &[&str]) -> Result<Vec<Broker>> {
        let mut out = Vec::with_capacity(keys.len());
        let missing: Vec<&str> = {
            let cache = self
                .shared()
                .coordinators
                .lock()
                .map_err(|_| Error::ShuttingDown)?;
            keys.iter()
                .copied()
                .filter(|k| !cache.contains_key(&(kind, k.to_string())))
                .collect()
        };
        if !missing.is_empty() {
            self.lookup_coordinators(kind, &missing).await?;
        }
        for k in keys {
            out.push(self.find_coordinator(kind, k).await?);
        }
        Ok(out)
    }

    async fn find_coordinator(&self, kind: CoordinatorKind, key: &str) -> Result<Broker> {
        self.check_open()?;
        for attempt in 0..2 {
            let cached = self
                .shared()
                .coordinators
                .lock()
                .ok()
                .and_then(|c| c.get(&(kind, key.to_string())).copied());
            if let Some(id) = cached {
                if let Some(b) = self.broker(id) {
                    return Ok(b);
                }
                // A coordinator metadata does not list yet: learn about it.
                if attempt == 0 {
                    self.refresh_metadata(&[]).await?;
                    continue;
                }
            }
            self.lookup_coordinators(kind, &[key]).await?;
        }
        let id = self
            .shared()
            .coordinators
            .lock()
            .ok()
            .and_then(|c| c.get(&(kind, key.to_string())).copied());
        id.and_then(|id| self.broker(id)).ok_or_else(|| {
            Error::broker(
                KafkaCode::COORDINATOR_NOT_AVAILABLE,
                ApiKey::FindCoordinator,
                None,
                None,
            )
        })
    }

    /// FindCoordinator with retries (on a worker, where timers live) while the broker
    /// answers that the coordinator is loading or not available.
    async fn lookup_coordinators(&self, kind: CoordinatorKind, keys: &[&str]) -> Result<()> {
        let shared = self.inner.shared.clone();
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let found = self
            .run_on_worker(move || async move {
                let deadline = Instant::now() + shared.config.admin.timeout;
                let backoff = shared.config.admin.retry_backoff;
                loop {
                    match find_coordinators_once(&shared, kind, &keys).await {
                        Ok(found) => return Ok(found),
                        Err(e) if e.is_retriable() && Instant::now() + backoff < deadline => {
                            tracing::debug!(error = %e, "FindCoordinator retry");
                            tokio::time::sleep(backoff).await;
                        }
                        Err(e) => return Err(e),
                    }
                }
            })
            .await?;
        let mut cache = self
            .shared()
            .coordinators
            .lock()
            .map_err(|_| Error::ShuttingDown)?;
        for (key, id) in found {
            cache.insert((kind, key), id);
        }
        Ok(())
    }

    /// Runs `make()` on a worker and waits for its result.
    async fn run_on_worker<F, Fut, T>(&self, make: F) -> Result<T>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + 'static,
        T: Send + 'static,
    {
        self.check_open()?;
        let (tx, rx) = oneshot::channel();
        let runtime = self.runtime();
        runtime.spawn_on(runtime.worker_for(-1), move |_| async move {
            let _ = tx.send(make().await);
        })?;
        rx.await.map_err(|_| Error::ShuttingDown)?
    }

    /// Waits `duration` on a worker's timer, so callers on any executor (or none) can wait.
    /// Dropping the future stops the worker's timer too. Fails at once when the client's
    /// runtime shuts down meanwhile (an [`IoError::ShuttingDown`]).
    pub async fn sleep(&self, duration: std::time::Duration) -> Result<()> {
        self.check_open()?;
        Ok(self.runtime().sleep(duration).await?)
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.shared().closed.load(Ordering::Acquire)
    }

    /// Closes the client and its broker connections. Later calls fail with
    /// [`Error::ClosedClient`].
    pub fn close(&self) {
        self.shared().close();
    }
}

/// Whether `e` says the topic is not in the cluster's metadata.
fn is_unknown_topic(e: &Error) -> bool {
    e.code() == Some(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION)
}

/// How long to wait before asking again for a topic missing from metadata: the backoff,
/// cut short at `deadline` (none: no end); `None` once the deadline has passed.
fn wait_before_asking_again(
    backoff: Duration,
    deadline: Option<std::time::Instant>,
) -> Option<Duration> {
    let Some(deadline) = deadline else {
        return Some(backoff);
    };
    let left = deadline.checked_duration_since(std::time::Instant::now())?;
    (!left.is_zero()).then(|| backoff.min(left))
}

/// The first candidate broker that connects: a broker that just went down (often the
/// coordinator being looked up again, connected until then and first by id) is passed
/// over rather than asked again until metadata drops it.
async fn reachable_candidate(shared: &Shared) -> Result<Broker> {
    let mut last = None;
    for broker in shared.candidates() {
        match broker.connect().await {
            Ok(()) => return Ok(broker),
            Err(e) if e.is_retriable() => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(
        || Error::OutOfBrokers("no broker known".into()),
        Error::from,
    ))
}

async fn find_coordinators_once(
    shared: &Shared,
    kind: CoordinatorKind,
    keys: &[String],
) -> Result<Vec<(String, i32)>> {
    let broker = reachable_candidate(shared).await?;
    let version = broker
        .api_versions()
        .and_then(|v| v.version_for(ApiKey::FindCoordinator))
        .ok_or_else(|| IoError::UnsupportedApi {
            api: ApiKey::FindCoordinator,
            addr: broker.addr().to_string(),
        })?;
    let check = |code: i16, key: &str| {
        let code = KafkaCode(code);
        if code.is_ok() {
            Ok(())
        } else {
            Err(Error::Broker {
                code,
                api: ApiKey::FindCoordinator,
                topic: Some(key.to_string()),
                partition: None,
            })
        }
    };
    let mut found = Vec::new();
    if version >= 4 {
        let request = FindCoordinatorRequest::default()
            .with_key_type(kind.key_type())
            .with_coordinator_keys(keys.to_vec());
        let response = broker.send_version(request, version).await?;
        for c in response.coordinators {
            check(c.error_code, &c.key)?;
            found.push((c.key, c.node_id));
        }
    } else {
        for key in keys {
            let request = FindCoordinatorRequest::default()
                .with_key(key.clone())
                .with_key_type(if version >= 1 { kind.key_type() } else { 0 });
            let response = broker.send_version(request, version).await?;
            check(response.error_code, key)?;
            found.push((key.clone(), response.node_id));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_topic_is_asked_for_again_until_the_deadline() {
        let backoff = Duration::from_millis(100);
        let now = std::time::Instant::now();
        assert_eq!(wait_before_asking_again(backoff, None), Some(backoff));
        let far = now + Duration::from_secs(30);
        assert_eq!(wait_before_asking_again(backoff, Some(far)), Some(backoff));
        let long = Duration::from_secs(60);
        let cut = wait_before_asking_again(long, Some(far)).unwrap();
        assert!(
            cut <= Duration::from_secs(30),
            "cut at the deadline: {cut:?}"
        );
        assert_eq!(wait_before_asking_again(backoff, Some(now)), None);
    }
}
