//! [`FakeCluster`]: an in-memory Kafka cluster of several brokers, each a real
//! loopback listener, modelled on franz-go's kfake.
//!
//! What it does: topics with partitions placed over the brokers, leaders with epochs,
//! an append-only log per partition (record batches stored as the producer sent them,
//! with the base offset and leader epoch the cluster assigned), high watermark and log
//! start, Produce (with idempotent sequence checks), Fetch (waiting up to `max_wait_ms`
//! for `min_bytes`, KIP-74 sizing, no fetch sessions), ListOffsets, OffsetForLeaderEpoch, DeleteRecords,
//! Metadata (optionally creating topics), CreateTopics, DeleteTopics,
//! FindCoordinator, InitProducerId, classic consumer groups (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups), KIP-848 groups
//! (ConsumerGroupHeartbeat, see [`consumer_group`]) and committed
//! offsets (OffsetCommit, OffsetFetch, OffsetDelete), transactions (v1, KIP-98:
//! InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit, EndTxn, markers, read_committed fetches; see [`txn`]), and the admin APIs users' tests
//! call: DescribeCluster, CreatePartitions, DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs (topic configs from a fixed list of known names with Kafka's
//! defaults; broker configs of any name, stored as dynamic ones). ApiVersions advertises
//! exactly these APIs, with every version kring speaks.
//!
//! What it leaves out: transactions v2 (KIP-890) and transaction timeouts, replication (followers never fetch: every replica
//! is always in sync while up), quotas, ACLs, list configs (APPEND/SUBTRACT), fetch
//! sessions, group session expiry, and KIP-848 groups in DescribeGroups/ListGroups.
//!
//! Faults are scripted through control hooks ([`FakeCluster::control`]), which see every
//! request before the cluster does and may answer it, drop the connection, delay it
//! or let it through, and through calls that move a partition's leader
//! ([`FakeCluster::move_leader`]), elect one uncleanly, truncating the log
//! ([`FakeCluster::unclean_election`]), or take a broker down ([`FakeCluster::take_down`]).
//! Fetch and OffsetForLeaderEpoch check leader epochs as a broker does (KIP-320: FENCED
//! or UNKNOWN_LEADER_EPOCH, `diverging_epoch` from v12), and Fetch and Produce name the
//! new leader on NOT_LEADER_OR_FOLLOWER (KIP-951). Follower fetching (KIP-392) is opt-in
//! per partition ([`FakeCluster::set_preferred_read_replica`]). Group faults have their own calls
//! (`move_coordinator`, `fail_next`, `fence_member`, in `faults.rs`), and so do
//! transaction faults (`move_coordinator_at_end`, `concurrent_transactions`,
//! `fence_transactional_id`, in `txn_faults.rs`).

mod consumer_group;
mod faults;
mod group;
mod handlers;
mod state;
mod txn;
mod txn_faults;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use bytes::Bytes;
use kring::protocol::messages::ApiVersionsResponse;
use kring::protocol::{ApiKey, RequestKind, ResponseKind, Uuid};
use kring::record::RecordBatchRef;

pub use self::faults::{Handed, request_group};
use self::state::{BrokerInfo, Config, Log, State};
pub use self::txn::EndedTxn;
pub use self::txn_faults::request_transactional_id;
use super::server::{ConnCtx, Outcome, Server, Service, Signal, lock, resolve};
use super::{MockError, ReceivedRequest, Reply};

/// The APIs the fake cluster implements, and so advertises.
const IMPLEMENTED: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DeleteRecords,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DescribeCluster,
    ApiKey::CreatePartitions,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DeleteGroups,
    ApiKey::OffsetDelete,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
];

type Hook = dyn Fn(&ReceivedRequest) -> Reply + Send + Sync;

struct Control {
    id: u64,
    api: Option<ApiKey>,
    once: bool,
    /// For `once` hooks: held while the hook runs, true once it has acted.
    spent: Mutex<bool>,
    hook: Box<Hook>,
}

#[derive(Default)]
struct Notes {
    unhandled: Vec<String>,
    failures: Vec<String>,
    malformed: Vec<String>,
}

/// The shared core: state, the listeners, hooks and history.
pub(crate) struct Core {
    state: Mutex<State>,
    changed: Condvar,
    controls: Mutex<Vec<Arc<Control>>>,
    next_control: AtomicU64,
    servers: Mutex<BTreeMap<i32, (SocketAddr, Option<Server>)>>,
    history: Mutex<VecDeque<ReceivedRequest>>,
    history_limit: usize,
    notes: Mutex<Notes>,
}

/// What a handler needs: the core, which broker it runs on, the request.
pub(crate) struct Ctx<'a> {
    core: &'a Core,
    broker: i32,
    request: &'a ReceivedRequest,
    signal: &'a Signal,
}

impl Ctx<'_> {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.core.state)
    }

    /// Wakes everything waiting on the state (call after changing it).
    fn notify(&self) {
        self.core.changed.notify_all();
    }

    /// Whether a waiting handler should give up: the cluster is closing or this
    /// broker went down.
    fn aborted(&self, st: &State) -> bool {
        st.closed || !st.is_up(self.broker) || self.signal.is_stopped()
    }

    /// Waits for a state change, at most until `deadline`.
    fn wait<'g>(&self, guard: MutexGuard<'g, State>, deadline: Instant) -> MutexGuard<'g, State> {
        let now = Instant::now();
        if now >= deadline {
            return guard;
        }
        self.core
            .changed
            .wait_timeout(guard, deadline - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }
}

impl Core {
    fn dispatch(&self, cx: &Ctx<'_>) -> Option<ResponseKind> {
        use self::handlers as h;
        Some(match &cx.request.request {
            RequestKind::ApiVersions(_) => h::api_versions::api_versions(),
            RequestKind::Metadata(r) => h::metadata::metadata(cx, r),
            RequestKind::CreateTopics(r) => h::create_topics::create_topics(cx, r),
            RequestKind::DeleteTopics(r) => h::delete_topics::delete_topics(cx, r),
            RequestKind::Produce(r) => h::produce::produce(cx, r),
            RequestKind::Fetch(r) => h::fetch::fetch(cx, r),
            RequestKind::ListOffsets(r) => h::list_offsets::list_offsets(cx, r),
            RequestKind::OffsetForLeaderEpoch(r) => {
                h::offset_for_leader_epoch::offset_for_leader_epoch(cx, r)
            }
            RequestKind::DeleteRecords(r) => h::delete_records::delete_records(cx, r),
            RequestKind::FindCoordinator(r) => h::find_coordinator::find_coordinator(cx, r),
            RequestKind::InitProducerId(r) => h::init_producer_id::init_producer_id(cx, r),
            RequestKind::JoinGroup(r) => h::join_group::join(cx, r),
            RequestKind::SyncGroup(r) => h::sync_group::sync(cx, r),
            RequestKind::Heartbeat(r) => h::heartbeat::heartbeat(cx, r),
            RequestKind::LeaveGroup(r) => h::leave_group::leave(cx, r),
            RequestKind::DescribeGroups(r) => h::describe_groups::describe(cx, r),
            RequestKind::ListGroups(r) => h::list_groups::list(cx, r),
            RequestKind::OffsetCommit(r) => h::offset_commit::offset_commit(cx, r),
            RequestKind::OffsetFetch(r) => h::offset_fetch::offset_fetch(cx, r),
            RequestKind::DescribeCluster(_) => h::describe_cluster::describe_cluster(cx),
            RequestKind::CreatePartitions(r) => h::create_partitions::create_partitions(cx, r),
            RequestKind::DescribeConfigs(r) => h::describe_configs::describe_configs(cx, r),
            RequestKind::AlterConfigs(r) => h::alter_configs::alter_configs(cx, r),
            RequestKind::IncrementalAlterConfigs(r) => {
                h::incremental_alter_configs::incremental_alter_configs(cx, r)
            }
            RequestKind::DeleteGroups(r) => h::delete_groups::delete_groups(cx, r),
            RequestKind::OffsetDelete(r) => h::offset_delete::offset_delete(cx, r),
            RequestKind::ConsumerGroupHeartbeat(r) => h::consumer_group_heartbeat::heartbeat(cx, r),
            RequestKind::AddPartitionsToTxn(r) => {
                h::add_partitions_to_txn::add_partitions_to_txn(cx, r)
            }
            RequestKind::AddOffsetsToTxn(r) => h::add_offsets_to_txn::add_offsets_to_txn(cx, r),
            RequestKind::EndTxn(r) => h::end_txn::end_txn(cx, r),
            RequestKind::TxnOffsetCommit(r) => h::txn_offset_commit::txn_offset_commit(cx, r),
            _ => return None,
        })
    }

    /// Runs the control hooks in order; the first that acts decides. Delays of hooks
    /// that pass are slept here, then the next hook (or the cluster) goes on.
    fn run_controls(&self, request: &ReceivedRequest, signal: &Signal) -> Option<Reply> {
        let controls: Vec<Arc<Control>> = lock(&self.controls).clone();
        for c in controls {
            if c.api.is_some_and(|a| a != request.api_key) {
                continue;
            }
            let reply = if c.once {
                let mut spent = lock(&c.spent);
                if *spent {
                    continue;
                }
                let reply = (c.hook)(request);
                if !reply.is_pass() || !reply.delay().is_zero() {
                    *spent = true;
                    lock(&self.controls).retain(|x| x.id != c.id);
                }
                reply
            } else {
                (c.hook)(request)
            };
            if reply.is_pass() {
                if !signal.sleep(reply.delay()) {
                    return Some(Reply::close());
                }
                continue;
            }
            return Some(reply);
        }
        None
    }

    fn note(&self, f: impl FnOnce(&mut Notes)) {
        f(&mut lock(&self.notes));
    }
}

struct ClusterService {
    core: Weak<Core>,
    broker: i32,
}

impl Service for ClusterService {
    fn handle(&self, conn: &ConnCtx<'_>, request: &ReceivedRequest) -> Outcome {
        let Some(core) = self.core.upgrade() else {
            return Outcome::Close;
        };
        {
            let mut history = lock(&core.history);
            if core.history_limit > 0 {
                if history.len() == core.history_limit {
                    history.pop_front();
                }
                history.push_back(request.clone());
            }
        }
        if let Some(reply) = core.run_controls(request, conn.signal) {
            if !conn.signal.sleep(reply.delay()) {
                return Outcome::Close;
            }
            match resolve(&reply, request) {
                Ok(Some(outcome)) => return outcome,
                Ok(None) => {}
                Err(what) => {
                    core.note(|n| n.failures.push(what));
                    return Outcome::Close;
                }
            }
        }
        let cx = Ctx {
            core: &core,
            broker: self.broker,
            request,
            signal: conn.signal,
        };
        match core.dispatch(&cx) {
            Some(response) => Outcome::Respond(Box::new(response)),
            None => {
                core.note(|n| n.unhandled.push(request.describe()));
                Outcome::Close
            }
        }
    }

    fn api_versions(&self) -> ApiVersionsResponse {
        handlers::api_versions::advertised()
    }

    fn malformed(&self, broker_id: i32, what: String) {
        if let Some(core) = self.core.upgrade() {
            core.note(|n| n.malformed.push(format!("broker {broker_id}: {what}")));
        }
    }

    fn failure(&self, what: String) {
        if let Some(core) = self.core.upgrade() {
            core.note(|n| n.failures.push(what));
        }
    }

    fn wake(&self) {
        if let Some(core) = self.core.upgrade() {
            // Take the lock so a waiter between its check and its wait sees this.
            drop(lock(&core.state));
            core.changed.notify_all();
        }
    }
}

/// Identifies a control hook, to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControlId(u64);

/// Settings for a [`FakeCluster`].
#[derive(Debug, Clone)]
pub struct FakeClusterBuilder {
    brokers: Vec<i32>,
    topics: Vec<(String, i32, i16)>,
    config: Config,
    history_limit: usize,
}

impl Default for FakeClusterBuilder {
    fn default() -> Self {
        FakeClusterBuilder {
            brokers: vec![1, 2, 3],
            topics: Vec::new(),
            config: Config {
                cluster_id: "kring-fake-cluster".into(),
                default_partitions: 1,
                default_replication: 3,
                auto_create_topics: false,
                auto_failover: true,
                max_message_bytes: 1_048_588,
                consumer_heartbeat_interval_ms: 500,
            },
            history_limit: 10_000,
        }
    }
}

impl FakeClusterBuilder {
    /// `n` brokers, with ids 1 to `n` (3 by default).
    pub fn brokers(mut self, n: usize) -> Self {
        self.brokers = (1..=n as i32).collect();
        self
    }

    /// Brokers with these ids.
    pub fn broker_ids(mut self, ids: &[i32]) -> Self {
        self.brokers = ids.to_vec();
        self.brokers.sort_unstable();
        self.brokers.dedup();
        self
    }

    /// Creates a topic at start, with `partitions` partitions and the default
    /// replication factor.
    pub fn topic(mut self, name: &str, partitions: i32) -> Self {
        self.topics.push((name.to_string(), partitions, -1));
        self
    }

    /// Creates a topic at start with an explicit replication factor.
    pub fn topic_replicated(mut self, name: &str, partitions: i32, replication: i16) -> Self {
        self.topics
            .push((name.to_string(), partitions, replication));
        self
    }

    /// Partitions of topics created without a count (Kafka's `num.partitions`, 1).
    pub fn default_partitions(mut self, n: i32) -> Self {
        self.config.default_partitions = n;
        self
    }

    /// Replication factor of topics created without one, capped by the live brokers
    /// (3 by default).
    pub fn default_replication(mut self, n: i16) -> Self {
        self.config.default_replication = n;
        self
    }

    /// Whether Metadata requests that allow it create unknown topics (off by default).
    pub fn auto_create_topics(mut self, on: bool) -> Self {
        self.config.auto_create_topics = on;
        self
    }

    /// Whether a broker going down hands its partitions to the next live replica (on
    /// by default); off, they stay leaderless (LEADER_NOT_AVAILABLE in Metadata) until
    /// it comes back or a leader is moved by hand.
    pub fn auto_failover(mut self, on: bool) -> Self {
        self.config.auto_failover = on;
        self
    }

    /// The heartbeat interval ConsumerGroupHeartbeat tells KIP-848 members (Kafka's
    /// `group.consumer.heartbeat.interval.ms`; 500 ms by default, shorter than Kafka's
    /// 5 s so that tests move on quickly).
    pub fn consumer_heartbeat_interval(mut self, interval: std::time::Duration) -> Self {
        self.config.consumer_heartbeat_interval_ms = i32::try_from(interval.as_millis())
            .unwrap_or(i32::MAX)
            .max(1);
        self
    }

    /// The largest record batch accepted (Kafka's `message.max.bytes`, 1048588).
    pub fn max_message_bytes(mut self, n: usize) -> Self {
        self.config.max_message_bytes = n;
        self
    }

    /// The cluster id in Metadata answers.
    pub fn cluster_id(mut self, id: &str) -> Self {
        self.config.cluster_id = id.to_string();
        self
    }

    /// How many requests [`FakeCluster::history`] keeps (the newest; 10 000 by
    /// default, 0 keeps none).
    pub fn history_limit(mut self, n: usize) -> Self {
        self.history_limit = n;
        self
    }

    /// Starts the brokers, each on an ephemeral loopback port, and creates the topics.
    pub fn build(self) -> Result<FakeCluster, MockError> {
        if self.brokers.is_empty() {
            return Err(MockError::InvalidArgument(
                "a cluster needs a broker".into(),
            ));
        }
        let mut listeners = Vec::new();
        // Bind first so that the state knows every address before anyone connects.
        for &id in &self.brokers {
            let listener =
                std::net::TcpListener::bind("127.0.0.1:0").map_err(|source| MockError::Bind {
                    addr: "127.0.0.1:0".into(),
                    source,
                })?;
            let addr = listener.local_addr().map_err(|source| MockError::Bind {
                addr: "127.0.0.1:0".into(),
                source,
            })?;
            listeners.push((id, addr, listener));
        }
        let brokers = listeners
            .iter()
            .map(|(id, addr, _)| {
                (
                    *id,
                    BrokerInfo {
                        host: addr.ip().to_string(),
                        port: i32::from(addr.port()),
                        up: true,
                    },
                )
            })
            .collect();
        let mut state = State::new(self.config, brokers);
        for (name, partitions, replication) in &self.topics {
            state
                .create_topic(name, *partitions, *replication, None, false)
                .map_err(|e| MockError::InvalidArgument(e.message))?;
        }
        let core = Arc::new(Core {
            state: Mutex::new(state),
            changed: Condvar::new(),
            controls: Mutex::new(Vec::new()),
            next_control: AtomicU64::new(0),
            servers: Mutex::new(BTreeMap::new()),
            history: Mutex::new(VecDeque::new()),
            history_limit: self.history_limit,
            notes: Mutex::new(Notes::default()),
        });
        let cluster = FakeCluster { core };
        for (id, addr, listener) in listeners {
            let server = Server::start(listener, id, cluster.service(id))?;
            lock(&cluster.core.servers).insert(id, (addr, Some(server)));
        }
        Ok(cluster)
    }
}

/// An in-memory Kafka cluster for tests: several brokers on loopback ports, topics,
/// logs, offsets and groups. What it implements is listed at the top of its module's
/// source (`kring-mock/src/cluster/mod.rs`).
///
/// ```
/// use std::time::Duration;
/// use kring::consumer::{Consumer, Offset};
/// use kring::producer::{Producer, ProducerRecord};
/// use kring::protocol::{ApiKey, KafkaCode};
/// use kring::{Client, Config};
/// use kring_mock::{FakeCluster, Reply};
///
/// let cluster = FakeCluster::builder().brokers(3).topic("events", 2).build()?;
/// // Script a fault: the first Produce anywhere fails with NOT_ENOUGH_REPLICAS.
/// cluster.control_once(Some(ApiKey::Produce), |_| {
///     Reply::error(KafkaCode::NOT_ENOUGH_REPLICAS)
/// });
///
/// // kring's own client, producer and consumer, bootstrapped from the fake cluster.
/// let mut config = Config::new(cluster.bootstrap());
/// config.producer.retry_backoff = Duration::from_millis(10);
/// let client = Client::connect_blocking(config)?;
/// let producer = Producer::new_blocking(client.clone())?;
/// let record = ProducerRecord::new("events").with_partition(0).with_value("hello");
/// // The producer retried: the record is in the log once, at offset 0.
/// assert_eq!(producer.send_blocking(record)?.wait()?.offset, 0);
/// producer.close_blocking()?;
/// assert_eq!(cluster.high_watermark("events", 0)?, 1);
///
/// let consumer = Consumer::new(client)?;
/// let mut partition = consumer.consume_partition_blocking("events", 0, Offset::Oldest)?;
/// let messages = loop {
///     let batch = partition.next_messages_blocking().expect("open")?;
///     if !batch.is_empty() {
///         break batch;
///     }
/// };
/// assert_eq!(messages[0].value.as_deref(), Some(&b"hello"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FakeCluster {
    core: Arc<Core>,
}

impl std::fmt::Debug for FakeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCluster")
            .field("brokers", &self.addresses())
            .finish_non_exhaustive()
    }
}

impl FakeCluster {
    /// A cluster of `brokers` brokers (ids 1 to `brokers`) and no topics.
    pub fn new(brokers: usize) -> Result<FakeCluster, MockError> {
        FakeClusterBuilder::default().brokers(brokers).build()
    }

    /// Settings for a cluster: 3 brokers, no topics, unless told otherwise.
    pub fn builder() -> FakeClusterBuilder {
        FakeClusterBuilder::default()
    }

    fn service(&self, id: i32) -> Arc<dyn Service> {
        Arc::new(ClusterService {
            core: Arc::downgrade(&self.core),
            broker: id,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.core.state)
    }

    fn changed(&self) {
        self.core.changed.notify_all();
    }

    /// Every broker's `host:port`, up or down, in broker id order: the bootstrap list.
    pub fn bootstrap(&self) -> Vec<String> {
        self.addresses().into_iter().map(|(_, a)| a).collect()
    }

    /// Every broker's id and `host:port`.
    pub fn addresses(&self) -> Vec<(i32, String)> {
        lock(&self.core.servers)
            .iter()
            .map(|(&id, (addr, _))| (id, addr.to_string()))
            .collect()
    }

    /// Broker `id`'s `host:port`.
    pub fn broker_address(&self, id: i32) -> Option<String> {
        lock(&self.core.servers)
            .get(&id)
            .map(|(addr, _)| addr.to_string())
    }

    /// The broker ids.
    pub fn broker_ids(&self) -> Vec<i32> {
        self.state().brokers.keys().copied().collect()
    }

    /// Whether broker `id` is up.
    pub fn is_up(&self, id: i32) -> bool {
        self.state().is_up(id)
    }

    /// Creates a topic (`replication` -1: the default, capped by the live brokers)
    /// and returns its id.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication: i16,
    ) -> Result<Uuid, MockError> {
        if partitions <= 0 {
            return Err(MockError::InvalidArgument(format!(
                "{partitions} partitions"
            )));
        }
        let created = self
            .state()
            .create_topic(name, partitions, replication, None, false);
        self.changed();
        match created {
            Ok(c) => Ok(c.id),
            Err(e) if e.code == kring::protocol::KafkaCode::TOPIC_ALREADY_EXISTS => {
                Err(MockError::TopicExists(name.to_string()))
            }
            Err(e) => Err(MockError::InvalidArgument(e.message)),
        }
    }

    /// Deletes a topic with its logs and committed offsets.
    pub fn delete_topic(&self, name: &str) -> Result<(), MockError> {
        let mut st = self.state();
        st.topics
            .remove(name)
            .ok_or_else(|| MockError::UnknownTopic(name.to_string()))?;
        for g in st.groups.values_mut() {
            g.offsets.retain(|(t, _), _| t != name);
        }
        drop(st);
        self.changed();
        Ok(())
    }

    /// The topic names.
    pub fn topics(&self) -> Vec<String> {
        self.state().topics.keys().cloned().collect()
    }

    /// A topic's id.
    pub fn topic_id(&self, name: &str) -> Option<Uuid> {
        self.state().topics.get(name).map(|t| t.id)
    }

    /// A topic's partition count.
    pub fn partition_count(&self, name: &str) -> Option<i32> {
        self.state()
            .topics
            .get(name)
            .map(|t| t.partitions.len() as i32)
    }

    fn with_partition<T>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut state::Partition, &Config) -> Result<T, MockError>,
    ) -> Result<T, MockError> {
        let mut st = self.state();
        let st = &mut *st;
        let t = st
            .topics
            .get_mut(topic)
            .ok_or_else(|| MockError::UnknownTopic(topic.to_string()))?;
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get_mut(i))
            .ok_or_else(|| MockError::UnknownPartition {
                topic: topic.to_string(),
                partition,
            })?;
        f(p, &st.config)
    }

    /// The leader of `topic`-`partition` (-1 when it has none), `None` if unknown.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.with_partition(topic, partition, |p, _| Ok(p.leader))
            .ok()
    }

    /// The leader epoch of `topic`-`partition`.
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        self.with_partition(topic, partition, |p, _| Ok(p.leader_epoch))
            .ok()
    }

    /// The replicas of `topic`-`partition`.
    pub fn replicas(&self, topic: &str, partition: i32) -> Option<Vec<i32>> {
        self.with_partition(topic, partition, |p, _| Ok(p.replicas.clone()))
            .ok()
    }

    /// Follower fetching (KIP-392): from now on the leader of `topic`-`partition`
    /// answers a Fetch (v11+) that names a rack with `replica` as the preferred read
    /// replica (and no records, as a broker does), and `replica` serves fetches of the
    /// partition from the shared log (every replica is in sync here). `None`: only the
    /// leader serves again, and the former replica answers NOT_LEADER_OR_FOLLOWER.
    /// `replica` must be a follower of the partition.
    pub fn set_preferred_read_replica(
        &self,
        topic: &str,
        partition: i32,
        replica: Option<i32>,
    ) -> Result<(), MockError> {
        self.with_partition(topic, partition, |p, _| {
            if let Some(r) = replica
                && (r == p.leader || !p.replicas.contains(&r))
            {
                return Err(MockError::InvalidArgument(format!(
                    "broker {r} is not a follower of {topic}-{partition}"
                )));
            }
            p.preferred_read_replica = replica;
            Ok(())
        })?;
        self.changed();
        Ok(())
    }

    /// Makes `broker` the leader of `topic`-`partition` (adding it to the replicas if
    /// needed) and bumps the leader epoch. The old leader then answers requests for
    /// the partition with NOT_LEADER_OR_FOLLOWER, and Metadata shows the new one.
    pub fn move_leader(&self, topic: &str, partition: i32, broker: i32) -> Result<(), MockError> {
        match self.state().brokers.get(&broker) {
            None => return Err(MockError::UnknownBroker(broker)),
            Some(b) if !b.up => return Err(MockError::BrokerDown(broker)),
            Some(_) => {}
        }
        self.with_partition(topic, partition, |p, _| {
            if !p.replicas.contains(&broker) {
                p.replicas.push(broker);
            }
            p.leader = broker;
            p.leader_epoch += 1;
            Ok(())
        })?;
        self.changed();
        Ok(())
    }

    /// An unclean leader election: `broker` becomes the leader of `topic`-`partition`
    /// (with a new leader epoch) holding only the log up to the last batch boundary at
    /// or below `log_end`; the records after it are gone, as when an out-of-sync replica
    /// is elected. Consumers that fetched past the cut find out through Fetch's
    /// `diverging_epoch` or OffsetForLeaderEpoch (KIP-320). Returns the new log end.
    pub fn unclean_election(
        &self,
        topic: &str,
        partition: i32,
        broker: i32,
        log_end: i64,
    ) -> Result<i64, MockError> {
        let end = self.with_partition(topic, partition, |p, _| Ok(p.log.truncate_to(log_end)))?;
        self.move_leader(topic, partition, broker)?;
        Ok(end)
    }

    /// Takes broker `id` down: its listener closes (new connections are refused), its
    /// open connections are closed, other brokers leave it out of Metadata, and its
    /// partitions fail over (see [`FakeClusterBuilder::auto_failover`]).
    pub fn take_down(&self, id: i32) -> Result<(), MockError> {
        {
            let mut st = self.state();
            match st.brokers.get(&id) {
                None => return Err(MockError::UnknownBroker(id)),
                Some(b) if !b.up => return Ok(()),
                Some(_) => {}
            }
            st.broker_down(id);
        }
        self.changed();
        let server = lock(&self.core.servers)
            .get_mut(&id)
            .and_then(|(_, s)| s.take());
        if let Some(mut server) = server {
            server.stop();
        }
        Ok(())
    }

    /// Brings broker `id` back at its old address. Partitions left leaderless that it
    /// replicates get it as leader; others keep their leaders.
    pub fn bring_up(&self, id: i32) -> Result<(), MockError> {
        let addr = match lock(&self.core.servers).get(&id) {
            None => return Err(MockError::UnknownBroker(id)),
            Some((_, Some(_))) => return Ok(()),
            Some((addr, None)) => *addr,
        };
        let server = Server::bind(addr, id, self.service(id))?;
        if let Some(slot) = lock(&self.core.servers).get_mut(&id) {
            slot.1 = Some(server);
        }
        self.state().broker_up(id);
        self.changed();
        Ok(())
    }

    /// Closes every open connection to broker `id` (it keeps listening).
    pub fn disconnect(&self, id: i32) {
        if let Some((_, Some(server))) = lock(&self.core.servers).get(&id) {
            server.disconnect_all();
        }
    }

    /// Connections broker `id` has accepted (since it last came up).
    pub fn connections(&self, id: i32) -> u64 {
        match lock(&self.core.servers).get(&id) {
            Some((_, Some(server))) => server.connections(),
            _ => 0,
        }
    }

    /// Appends a record batch (wire bytes, e.g. from [`super::record_batch`]) to
    /// `topic`-`partition` as if produced, and returns its base offset.
    pub fn append(&self, topic: &str, partition: i32, batch: &[u8]) -> Result<i64, MockError> {
        let offset = self.with_partition(topic, partition, |p, config| {
            let checked = Log::validate(batch, config.max_message_bytes)
                .map_err(|code| MockError::InvalidBatch(code.name().to_string()))?;
            Ok(p.log.append(&checked, p.leader_epoch))
        })?;
        self.changed();
        Ok(offset)
    }

    /// Appends `(key, value)` records as one batch stamped `timestamp`; returns the
    /// base offset.
    pub fn append_records(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        records: &[super::KeyValue<'_>],
    ) -> Result<i64, MockError> {
        let batch = super::record_batch(0, timestamp, records)?;
        self.append(topic, partition, &batch)
    }

    /// The stored batches of `topic`-`partition`, as Fetch returns them.
    pub fn batches(&self, topic: &str, partition: i32) -> Result<Vec<Bytes>, MockError> {
        self.with_partition(topic, partition, |p, _| {
            Ok(p.log.batches.iter().map(|b| b.bytes.clone()).collect())
        })
    }

    /// The `(offset, key, value)` of every record in `topic`-`partition` from the log
    /// start on (compressed batches are decompressed).
    #[allow(clippy::type_complexity)]
    pub fn records(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<(i64, Option<Bytes>, Option<Bytes>)>, MockError> {
        let (batches, start) = self.with_partition(topic, partition, |p, _| {
            Ok((
                p.log
                    .batches
                    .iter()
                    .map(|b| b.bytes.clone())
                    .collect::<Vec<_>>(),
                p.log.log_start,
            ))
        })?;
        let mut out = Vec::new();
        let mut decompressor = kring::record::Decompressor::default();
        let mut scratch = Vec::new();
        for bytes in &batches {
            let batch =
                RecordBatchRef::new(bytes).map_err(|e| MockError::InvalidBatch(e.to_string()))?;
            let records = batch
                .decompress_records(&mut decompressor, &mut scratch)
                .map_err(|e| MockError::InvalidBatch(e.to_string()))?;
            for r in records {
                let r = r.map_err(|e| MockError::InvalidBatch(e.to_string()))?;
                if r.offset() >= start {
                    out.push((
                        r.offset(),
                        r.key().map(Bytes::copy_from_slice),
                        r.value().map(Bytes::copy_from_slice),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The high watermark (next offset) of `topic`-`partition`.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Result<i64, MockError> {
        self.with_partition(topic, partition, |p, _| Ok(p.log.high_watermark))
    }

    /// The log start offset of `topic`-`partition`.
    pub fn log_start_offset(&self, topic: &str, partition: i32) -> Result<i64, MockError> {
        self.with_partition(topic, partition, |p, _| Ok(p.log.log_start))
    }

    /// Deletes the records of `topic`-`partition` before `offset` (at most the high
    /// watermark); returns the new log start.
    pub fn delete_records(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i64, MockError> {
        let start = self.with_partition(topic, partition, |p, _| {
            p.log.delete_before(offset);
            Ok(p.log.log_start)
        })?;
        self.changed();
        Ok(start)
    }

    /// The broker coordinating group (or transactional id) `key`, if any is up.
    pub fn coordinator(&self, key: &str) -> Option<i32> {
        self.state().coordinator(key)
    }

    /// Makes `broker` the coordinator of `key`; the old one then answers the group's
    /// requests with NOT_COORDINATOR. Group state and offsets stay (they are shared).
    pub fn set_coordinator(&self, key: &str, broker: i32) -> Result<(), MockError> {
        let mut st = self.state();
        if !st.brokers.contains_key(&broker) {
            return Err(MockError::UnknownBroker(broker));
        }
        st.coordinator_overrides.insert(key.to_string(), broker);
        drop(st);
        self.changed();
        Ok(())
    }

    /// The offset `group` committed for `topic`-`partition`.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        self.state()
            .groups
            .get(group)
            .and_then(|g| g.offsets.get(&(topic.to_string(), partition)))
            .map(|c| c.offset)
    }

    /// Commits `offset` for `group` on `topic`-`partition`, as a consumer would.
    pub fn commit(&self, group: &str, topic: &str, partition: i32, offset: i64) {
        self.state()
            .groups
            .entry(group.to_string())
            .or_default()
            .offsets
            .insert(
                (topic.to_string(), partition),
                state::Committed {
                    offset,
                    leader_epoch: -1,
                    metadata: None,
                },
            );
        self.changed();
    }

    /// The member ids of `group`.
    pub fn group_members(&self, group: &str) -> Vec<String> {
        self.state()
            .groups
            .get(group)
            .map(|g| g.members.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The generation of `group` (0 before its first rebalance).
    pub fn group_generation(&self, group: &str) -> Option<i32> {
        self.state().groups.get(group).map(|g| g.generation)
    }

    /// The state of `group` as DescribeGroups names it (`Empty`, `Stable`, ...).
    pub fn group_state(&self, group: &str) -> Option<&'static str> {
        self.state().groups.get(group).map(|g| g.state.name())
    }

    /// Adds a control hook: it sees every request (of `api`, or all when `None`)
    /// before the cluster does, on the connection's thread, and returns a [`Reply`]:
    /// an answer, an error, [`Reply::close`] to drop the connection, [`Reply::ignore`],
    /// or [`Reply::pass`] (optionally [`Reply::after`] a delay) to let the cluster
    /// handle it. Hooks run in the order added; the first that does not pass decides.
    /// A hook may call the cluster (e.g. move a leader, take its own broker down).
    pub fn control(
        &self,
        api: Option<ApiKey>,
        hook: impl Fn(&ReceivedRequest) -> Reply + Send + Sync + 'static,
    ) -> ControlId {
        self.add_control(api, false, Box::new(hook))
    }

    /// Like [`FakeCluster::control`], but the hook is removed once it has acted (any
    /// reply but a plain, undelayed pass).
    pub fn control_once(
        &self,
        api: Option<ApiKey>,
        hook: impl Fn(&ReceivedRequest) -> Reply + Send + Sync + 'static,
    ) -> ControlId {
        self.add_control(api, true, Box::new(hook))
    }

    fn add_control(&self, api: Option<ApiKey>, once: bool, hook: Box<Hook>) -> ControlId {
        let id = self.core.next_control.fetch_add(1, Ordering::Relaxed);
        lock(&self.core.controls).push(Arc::new(Control {
            id,
            api,
            once,
            spent: Mutex::new(false),
            hook,
        }));
        ControlId(id)
    }

    /// Removes a control hook.
    pub fn remove_control(&self, id: ControlId) {
        lock(&self.core.controls).retain(|c| c.id != id.0);
    }

    /// Removes every control hook.
    pub fn clear_controls(&self) {
        lock(&self.core.controls).clear();
    }

    /// The most recent requests received by any broker, oldest first.
    pub fn history(&self) -> Vec<ReceivedRequest> {
        lock(&self.core.history).iter().cloned().collect()
    }

    /// Forgets the history.
    pub fn clear_history(&self) {
        lock(&self.core.history).clear();
    }

    /// Requests of APIs the cluster does not implement (their connections were closed).
    pub fn unhandled(&self) -> Vec<String> {
        lock(&self.core.notes).unhandled.clone()
    }

    /// Request frames that did not decode (their connections were closed).
    pub fn protocol_errors(&self) -> Vec<String> {
        lock(&self.core.notes).malformed.clone()
    }

    /// Hook panics, replies of the wrong API, responses that failed to encode.
    pub fn failures(&self) -> Vec<String> {
        lock(&self.core.notes).failures.clone()
    }

    /// Stops every broker and wakes every waiting request.
    pub fn close(self) {
        drop(self);
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.state().closed = true;
        self.changed();
        let servers: Vec<Server> = lock(&self.core.servers)
            .values_mut()
            .filter_map(|(_, s)| s.take())
            .collect();
        for mut s in servers {
            s.stop();
        }
    }
}
