//! `Config`: every setting of a kring client in one struct tree (net, metadata,
//! producer, consumer, group, admin), with defaults chosen the way modern clients choose
//! them (the Java client 4.x and librdkafka), each documented with its reason.
//!
//! Settings can also come from the property names users already have in Java or
//! librdkafka configurations (`bootstrap.servers`, `linger.ms`, `acks`, ...): see
//! [`Config::from_properties`] and [`Config::set`]. [`Config::validate`] checks the
//! combination and names the field at fault. A producer or consumer may have settings of
//! its own over a shared client: its builder starts from the client's section and takes
//! that role's properties alone ([`PropertyScope`]).

mod properties;
mod roles;
pub mod security;

use std::time::Duration;

use crate::io::ConnectionConfig;
pub use crate::io::{Backend, BackendChoice};
use crate::runtime::RuntimeConfig;

pub use properties::PROPERTIES;
pub use roles::PropertyScope;
pub(crate) use roles::{Role, set_for_role};
pub use security::{
    OAuthToken, PemSource, SaslConfig, SaslMechanism, Secret, SecurityConfig, SecurityProtocol,
    TlsConfig, TokenProvider, UnsecuredJwt,
};

/// A configuration value that is missing, malformed or inconsistent with another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigurationError {
    /// A property name kring does not know.
    #[error("unknown configuration property {0:?}")]
    UnknownProperty(String),
    /// A value that does not parse or is out of range.
    #[error("invalid value {value:?} for {field}: {reason}")]
    InvalidValue {
        /// The field or property.
        field: String,
        /// The value given.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// Fields that do not go together.
    #[error("invalid configuration of {field}: {reason}")]
    Inconsistent {
        /// The field at fault.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// A property given to a role's builder (`Producer::builder`, ...) that belongs to
    /// another role or to the client (`bootstrap.servers`, `security.protocol`, ...).
    #[error("{}", roles::not_for_role(.property, .role, .belongs_to))]
    NotForRole {
        /// The property.
        property: String,
        /// The role it was given to ("a producer", ...).
        role: &'static str,
        /// Where it belongs.
        belongs_to: PropertyScope,
    },
}

/// The whole configuration.
///
/// Typed sections with the Java client's defaults, or properties by their Java or
/// librdkafka names ([`Config::set`], [`Config::from_properties`]);
/// [`Client::connect`](crate::Client::connect) validates it.
///
/// ```
/// use std::time::Duration;
/// use kring::Config;
/// use kring::config::{Acks, Compression};
///
/// let mut config = Config::new(["127.0.0.1:9092"]);
/// config.producer.acks = Acks::All;
/// config.producer.linger = Duration::from_millis(5);
/// config.set("compression.type", "zstd")?;
/// config.validate()?;
///
/// // The same from properties (a file of them: `kring -F FILE`).
/// let same = Config::from_properties([
///     ("bootstrap.servers", "127.0.0.1:9092"),
///     ("acks", "all"),
///     ("linger.ms", "5"),
///     ("compression.type", "zstd"),
/// ])?;
/// assert_eq!(same.producer.compression, Compression::Zstd);
/// assert_eq!(same.producer.linger, config.producer.linger);
/// assert!(config.set("no.such.property", "1").is_err());
/// # Ok::<(), kring::config::ConfigurationError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Brokers to bootstrap from, `host:port` (`bootstrap.servers`). No default: there is
    /// no sensible guess of where a cluster lives.
    pub bootstrap_servers: Vec<String>,
    /// Sent with every request so brokers can tell clients apart in logs and quotas
    /// (`client.id`, default `kring`).
    pub client_id: String,
    /// Connections and the I/O runtime.
    pub net: NetConfig,
    /// The cluster metadata cache.
    pub metadata: MetadataConfig,
    /// The producer.
    pub producer: ProducerConfig,
    /// The consumer.
    pub consumer: ConsumerConfig,
    /// Consumer groups.
    pub group: GroupConfig,
    /// Admin operations.
    pub admin: AdminConfig,
    /// TLS and SASL (`security.protocol`, `ssl.*`, `sasl.*`).
    pub security: SecurityConfig,
}

/// Connection and runtime settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NetConfig {
    /// TCP connect plus handshake limit (`socket.connection.setup.timeout.ms`, 10 s as in
    /// the Java client: long enough for a loaded broker, short enough to move on to the
    /// next bootstrap address).
    pub connect_timeout: Duration,
    /// Limit for a response (`request.timeout.ms`, 30 s as in the Java client, above the
    /// broker's default replica wait so acks=all produce does not time out spuriously).
    pub request_timeout: Duration,
    /// Requests awaiting a response per connection
    /// (`max.in.flight.requests.per.connection`, 5: the most idempotence keeps ordered).
    pub max_in_flight: usize,
    /// The largest response accepted (`receive.message.max.bytes`, 100 MiB as in
    /// librdkafka: above the default fetch.max.bytes, so only a hostile frame exceeds it).
    pub max_response_size: usize,
    /// First reconnect delay (`reconnect.backoff.ms`, 50 ms as in the Java client).
    pub reconnect_backoff: Duration,
    /// Reconnect delay cap (`reconnect.backoff.max.ms`, 1 s as in the Java client).
    pub reconnect_backoff_max: Duration,
    /// io_uring, epoll, or probe (`kring.io.backend`, default auto: io_uring where it
    /// works, since it batches submissions and saves syscalls).
    pub io_backend: BackendChoice,
    /// Worker threads (`kring.io.workers`, 0 = one per core: thread-per-core).
    pub workers: usize,
    /// Requests that may queue per connection before callers wait
    /// (`kring.io.queue.capacity`, 1024).
    pub queue_capacity: usize,
}

/// Metadata cache settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MetadataConfig {
    /// Refresh even without errors this often (`metadata.max.age.ms`, 5 min as in the
    /// Java client: picks up new partitions and brokers).
    pub refresh_interval: Duration,
    /// The least time between error-triggered refreshes (`retry.backoff.ms`, 100 ms), so
    /// a storm of stale-metadata errors causes one refresh.
    pub refresh_backoff: Duration,
    /// Let Metadata requests create missing topics (`allow.auto.create.topics`; false,
    /// unlike the Java consumer's historical default, because a typo should not create a
    /// topic).
    pub allow_auto_topic_creation: bool,
    /// How long the producer's `send` waits for a topic the cluster does not show yet
    /// before failing it with UNKNOWN_TOPIC_OR_PARTITION
    /// (`topic.metadata.propagation.max.ms`, 30 s as in librdkafka). A topic just
    /// created elsewhere reaches the brokers' metadata one broker at a time, so the
    /// broker asked may not know it yet; zero fails at the first answer that lacks it.
    pub topic_propagation_max: Duration,
}

/// The acknowledgement a produce request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=0: no answer at all.
    None,
    /// acks=1: the leader wrote it.
    Leader,
    /// acks=all (-1): every in-sync replica wrote it.
    All,
}

impl Acks {
    /// The wire value.
    pub fn as_i16(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Record batch compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4 (frame format).
    Lz4,
    /// Zstandard.
    Zstd,
}

/// How keyed and keyless records find a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionerKind {
    /// murmur2 of the key as the Java client does; keyless records stick to a partition
    /// per batch (KIP-794).
    Default,
    /// FNV-1a of the key, as Sarama's hash partitioner.
    Fnv1a,
    /// Round-robin over partitions, record by record.
    RoundRobin,
    /// A random partition per record.
    Random,
    /// The record's own partition; a record without one is an error.
    Manual,
}

/// Producer settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// Acknowledgement level (`acks`, default all: no acknowledged record is lost while
    /// one in-sync replica survives; required by idempotence).
    pub acks: Acks,
    /// How long a batch may wait for more records (`linger.ms`, 5 ms as in the Java client
    /// 4.0 and librdkafka: fuller batches for a barely noticeable delay). A batch is
    /// sealed within about half a millisecond of the end of its linger, on average at it
    /// (the workers' timers count whole milliseconds; a linger under a millisecond may
    /// run up to a millisecond less half of itself late), unless its connection is busy
    /// or its broker behind, when it stays open to take more records.
    pub linger: Duration,
    /// Target size of a batch in bytes (`batch.size`, 1,000,000 as in librdkafka: large
    /// batches amortise per-request costs; below the broker's default 1 MiB message cap).
    pub batch_size: usize,
    /// Memory for records not yet acknowledged (`buffer.memory`, 32 MiB as in the Java
    /// client); `send` waits when it is used up.
    pub buffer_memory: usize,
    /// How many records may be held not yet acknowledged (nor failed for good)
    /// (`queue.buffering.max.messages`; 0, the default: no limit, only `buffer.memory`
    /// counts, as in the Java client; librdkafka's default is 100,000). `send` waits
    /// while they are reached, with every batch sealed and sent at once, and `try_send`
    /// fails. With small records a limit binds before `buffer.memory` does, so the
    /// sender runs less far ahead of the broker.
    pub max_queued_records: usize,
    /// The largest produce request (`max.request.size`, 1 MiB as in the Java client).
    pub max_request_size: usize,
    /// Batch compression (`compression.type`, none as in both reference clients).
    pub compression: Compression,
    /// Exactly-once per partition within a session (`enable.idempotence`, true as in the
    /// Java client since 3.0).
    pub enable_idempotence: bool,
    /// How often a failed batch is retried (`retries`, unbounded as in the Java client;
    /// the delivery timeout is the real limit).
    pub retries: u32,
    /// First retry delay (`retry.backoff.ms`, 100 ms), doubling with each attempt. A
    /// batch may be retried from four fifths of its delay, so that retries due close
    /// together share a request (the Java client jitters the delay by ±20%).
    pub retry_backoff: Duration,
    /// Retry delay cap (`retry.backoff.max.ms`, 1 s, KIP-580).
    pub retry_backoff_max: Duration,
    /// Limit from `send` to acknowledgement, retries included (`delivery.timeout.ms`,
    /// 120 s as in the Java client).
    pub delivery_timeout: Duration,
    /// How records find partitions (`partitioner`, default murmur2 + sticky).
    pub partitioner: PartitionerKind,
    /// Transactional id (`transactional.id`, none): the producer is transactional
    /// (`init_transactions` first; every record in a transaction). Needs idempotence and
    /// `acks=all`.
    pub transactional_id: Option<String>,
    /// How long the coordinator lets a transaction stay open before it aborts it
    /// (`transaction.timeout.ms`, 60 s as in the Java client; the broker caps it at its
    /// `transaction.max.timeout.ms`).
    pub transaction_timeout: Duration,
    /// Code run on each record sent and each batch's outcome, in order (none by
    /// default; set in code, there is no property for it).
    pub interceptors: Interceptors<dyn crate::producer::ProducerInterceptor>,
}

/// Interceptors of one role, run in the order given. Equal when they hold the very same
/// interceptors (compared by pointer).
pub struct Interceptors<T: ?Sized>(Vec<std::sync::Arc<T>>);

impl<T: ?Sized> Interceptors<T> {
    /// Adds `interceptor` after those already there.
    pub fn push(&mut self, interceptor: std::sync::Arc<T>) {
        self.0.push(interceptor);
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each, in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|i| &**i)
    }
}

impl<T: ?Sized> Default for Interceptors<T> {
    fn default() -> Self {
        Interceptors(Vec::new())
    }
}

impl<T: ?Sized> Clone for Interceptors<T> {
    fn clone(&self) -> Self {
        Interceptors(self.0.clone())
    }
}

impl<T: ?Sized> PartialEq for Interceptors<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&other.0).all(|(a, b)| {
                std::ptr::addr_eq(std::sync::Arc::as_ptr(a), std::sync::Arc::as_ptr(b))
            })
    }
}

impl<T: ?Sized> std::fmt::Debug for Interceptors<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Interceptors({})", self.0.len())
    }
}

/// Where a consumer starts when it has no valid offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// The oldest offset still kept.
    Earliest,
    /// The next offset to be written.
    Latest,
    /// Fail with an error.
    None,
}

/// Which records a consumer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Everything up to the high watermark, aborted transactions included.
    ReadUncommitted,
    /// Only committed records, up to the last stable offset.
    ReadCommitted,
}

/// Consumer settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// Least data a fetch waits for (`fetch.min.bytes`, 1: answer as soon as anything is there).
    pub fetch_min_bytes: i32,
    /// Most data one fetch response may carry (`fetch.max.bytes`, 50 MiB as in the Java client).
    pub fetch_max_bytes: i32,
    /// Most data per partition in a fetch (`max.partition.fetch.bytes`, 1 MiB as in the
    /// Java client; KIP-74 still returns one larger batch so progress is made).
    pub max_partition_fetch_bytes: i32,
    /// Longest a broker holds a fetch waiting for `fetch_min_bytes` (`fetch.max.wait.ms`, 500 ms).
    pub fetch_max_wait: Duration,
    /// Where to start without a valid offset (`auto.offset.reset`, latest as in the Java client).
    pub auto_offset_reset: OffsetReset,
    /// Transactional visibility (`isolation.level`, read_uncommitted as in the Java client).
    pub isolation_level: IsolationLevel,
    /// Verify batch CRCs (`check.crcs`, true: corruption is rare but silent otherwise).
    pub check_crcs: bool,
    /// Memory for fetched responses not yet consumed (`kring.fetch.buffer.memory`, 64 MiB);
    /// the fetcher waits when it is used up. Decompression space a partition consumer
    /// keeps between batches beyond 1 MiB is charged to it as well (and freed when it
    /// does not fit).
    pub fetch_buffer_memory: usize,
    /// Most bytes one compressed batch may decompress to
    /// (`kring.fetch.max.decompressed.bytes`, 64 MiB; kring's own setting — neither the
    /// Java client nor librdkafka has one). A batch that inflates past it is reported
    /// as corrupt (a decompression bomb, or a cap set too low) and the consumer stays at
    /// it. At least `max_partition_fetch_bytes`.
    pub fetch_max_decompressed_bytes: usize,
    /// Commit offsets periodically (`enable.auto.commit`, true as in the Java client).
    pub enable_auto_commit: bool,
    /// Auto-commit period (`auto.commit.interval.ms`, 5 s).
    pub auto_commit_interval: Duration,
    /// Code run on each batch handed to the application, in order (none by default;
    /// set in code, there is no property for it).
    pub interceptors: Interceptors<dyn crate::consumer::ConsumerInterceptor>,
    /// The rack this client runs in (`client.rack`, empty = none, as in the Java client
    /// and librdkafka). Sent as `rack_id` in every Fetch (v11+, KIP-392): a broker whose
    /// `replica.selector.class` is rack-aware then names a replica in this rack
    /// (`preferred_read_replica`), and the consumer fetches from that follower, back to
    /// the leader after `metadata.max.age.ms` or when the follower fails. At most 32767
    /// bytes (a protocol string).
    pub client_rack: String,
}

/// Consumer group settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GroupConfig {
    /// The group (`group.id`, none).
    pub group_id: Option<String>,
    /// Static membership id (`group.instance.id`, none; KIP-345).
    pub group_instance_id: Option<String>,
    /// Member liveness limit (`session.timeout.ms`, 45 s as in the Java client since 3.0).
    /// Classic protocol only: with `group.protocol=consumer` the broker's applies, and a
    /// changed value is refused.
    pub session_timeout: Duration,
    /// Heartbeat period (`heartbeat.interval.ms`, 3 s: well under a third of the session).
    /// Classic protocol only, like the session timeout.
    pub heartbeat_interval: Duration,
    /// How long a rebalance may wait for members (`max.poll.interval.ms`, 5 min).
    pub rebalance_timeout: Duration,
    /// Assignors in preference order (`partition.assignment.strategy`, range then
    /// cooperative-sticky as in the Java client 4.0). Classic protocol only (a changed
    /// list is refused with `group.protocol=consumer`; see `remote_assignor`).
    pub assignment_strategies: Vec<String>,
    /// The rebalance protocol (`group.protocol`, classic as in the Java client 4.x).
    pub protocol: GroupProtocol,
    /// The broker-side assignor a KIP-848 member asks for (`group.remote.assignor`,
    /// none: the broker's default, `uniform`).
    pub remote_assignor: Option<String>,
}

/// Which rebalance protocol a group member speaks.
///
/// `Classic` is the default, as in the Java client 4.x: every broker since 0.9 speaks
/// it, its client-side assignors are the ones mixed groups of older Java, librdkafka
/// and Sarama members share, and static membership and the cooperative protocol work
/// with it. `Consumer` (KIP-848) moves assignment to the broker and rebalances without
/// a group-wide barrier; it needs Kafka 4.0+ — on a coordinator that does not offer
/// ConsumerGroupHeartbeat the member falls back to the classic protocol and says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup/Heartbeat with client-side assignors.
    #[default]
    Classic,
    /// KIP-848's ConsumerGroupHeartbeat with a broker-side assignor.
    Consumer,
}

/// Admin settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AdminConfig {
    /// Limit for an admin operation, retries included (`default.api.timeout.ms`, 60 s).
    pub timeout: Duration,
    /// Delay between retries (`retry.backoff.ms`, 100 ms).
    pub retry_backoff: Duration,
}

impl Default for NetConfig {
    fn default() -> Self {
        let conn = ConnectionConfig::default();
        NetConfig {
            connect_timeout: conn.connect_timeout,
            request_timeout: conn.request_timeout,
            max_in_flight: conn.max_in_flight,
            max_response_size: conn.max_response_size,
            reconnect_backoff: conn.reconnect_backoff,
            reconnect_backoff_max: conn.reconnect_backoff_max,
            io_backend: BackendChoice::Auto,
            workers: 0,
            queue_capacity: conn.queue_capacity,
        }
    }
}

impl Default for MetadataConfig {
    fn default() -> Self {
        MetadataConfig {
            refresh_interval: Duration::from_secs(300),
            refresh_backoff: Duration::from_millis(100),
            allow_auto_topic_creation: false,
            topic_propagation_max: Duration::from_secs(30),
        }
    }
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 1_000_000,
            buffer_memory: 32 * 1024 * 1024,
            max_queued_records: 0,
            max_request_size: 1024 * 1024,
            compression: Compression::None,
            enable_idempotence: true,
            retries: u32::MAX,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            delivery_timeout: Duration::from_secs(120),
            partitioner: PartitionerKind::Default,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            interceptors: Interceptors::default(),
        }
    }
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            max_partition_fetch_bytes: 1024 * 1024,
            fetch_max_wait: Duration::from_millis(500),
            auto_offset_reset: OffsetReset::Latest,
            isolation_level: IsolationLevel::ReadUncommitted,
            check_crcs: true,
            fetch_buffer_memory: 64 * 1024 * 1024,
            fetch_max_decompressed_bytes: crate::record::DEFAULT_MAX_DECOMPRESSED,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            interceptors: Interceptors::default(),
            client_rack: String::new(),
        }
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            group_id: None,
            group_instance_id: None,
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            rebalance_timeout: Duration::from_secs(300),
            assignment_strategies: vec!["range".into(), "cooperative-sticky".into()],
            protocol: GroupProtocol::Classic,
            remote_assignor: None,
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            timeout: Duration::from_secs(60),
            retry_backoff: Duration::from_millis(100),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bootstrap_servers: Vec::new(),
            client_id: "kring".into(),
            net: NetConfig::default(),
            metadata: MetadataConfig::default(),
            producer: ProducerConfig::default(),
            consumer: ConsumerConfig::default(),
            group: GroupConfig::default(),
            admin: AdminConfig::default(),
            security: SecurityConfig::default(),
        }
    }
}

/// With KIP-848 (`group.protocol=consumer`) the session, the heartbeat interval and the
/// assignment are the broker's: a member that changed `session.timeout.ms`,
/// `heartbeat.interval.ms` or `partition.assignment.strategy` is refused, as the Java
/// client refuses them, rather than having them ignored.
fn refuse_classic_only_settings(g: &GroupConfig) -> Result<(), ConfigurationError> {
    let classic = GroupConfig::default();
    let changed = [
        (
            "group.session_timeout",
            g.session_timeout != classic.session_timeout,
            "session.timeout.ms: the broker's group.consumer.session.timeout.ms applies",
        ),
        (
            "group.heartbeat_interval",
            g.heartbeat_interval != classic.heartbeat_interval,
            "heartbeat.interval.ms: the broker's group.consumer.heartbeat.interval.ms applies",
        ),
        (
            "group.assignment_strategies",
            g.assignment_strategies != classic.assignment_strategies,
            "partition.assignment.strategy: the broker assigns; choose its assignor with \
             group.remote.assignor",
        ),
    ];
    match changed.into_iter().find(|(_, set, _)| *set) {
        Some((field, _, why)) => Err(inconsistent(
            field,
            format!("is not used with group.protocol=consumer (KIP-848), leave it unset ({why})"),
        )),
        None => Ok(()),
    }
}

fn inconsistent(field: &'static str, reason: impl Into<String>) -> ConfigurationError {
    ConfigurationError::Inconsistent {
        field,
        reason: reason.into(),
    }
}

/// Whether `s` looks like `host:port` with a valid port.
pub(crate) fn is_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

impl Config {
    /// The defaults with these bootstrap servers.
    pub fn new<S: Into<String>>(bootstrap_servers: impl IntoIterator<Item = S>) -> Self {
        Config {
            bootstrap_servers: bootstrap_servers.into_iter().map(Into::into).collect(),
            ..Config::default()
        }
    }

    /// Checks every field and their combinations; the error names the field at fault.
    pub fn validate(&self) -> Result<(), ConfigurationError> {
        if self.bootstrap_servers.is_empty() {
            return Err(inconsistent(
                "bootstrap_servers",
                "at least one broker is needed",
            ));
        }
        if let Some(bad) = self.bootstrap_servers.iter().find(|s| !is_host_port(s)) {
            return Err(ConfigurationError::InvalidValue {
                field: "bootstrap_servers".into(),
                value: bad.clone(),
                reason: "expected host:port".into(),
            });
        }
        let n = &self.net;
        if n.connect_timeout.is_zero() {
            return Err(inconsistent("net.connect_timeout", "must be above zero"));
        }
        if n.request_timeout.is_zero() {
            return Err(inconsistent("net.request_timeout", "must be above zero"));
        }
        if n.max_in_flight == 0 {
            return Err(inconsistent("net.max_in_flight", "must be at least 1"));
        }
        if n.max_response_size < 1024 {
            return Err(inconsistent(
                "net.max_response_size",
                "must be at least 1 KiB",
            ));
        }
        if n.reconnect_backoff > n.reconnect_backoff_max {
            return Err(inconsistent(
                "net.reconnect_backoff",
                "must not exceed net.reconnect_backoff_max",
            ));
        }
        if n.queue_capacity == 0 {
            return Err(inconsistent("net.queue_capacity", "must be at least 1"));
        }
        if self.metadata.refresh_interval.is_zero() {
            return Err(inconsistent(
                "metadata.refresh_interval",
                "must be above zero",
            ));
        }
        let p = &self.producer;
        if p.batch_size == 0 {
            return Err(inconsistent("producer.batch_size", "must be above zero"));
        }
        if p.batch_size > p.buffer_memory {
            return Err(inconsistent(
                "producer.batch_size",
                "must not exceed producer.buffer_memory",
            ));
        }
        if p.max_request_size == 0 {
            return Err(inconsistent(
                "producer.max_request_size",
                "must be above zero",
            ));
        }
        if p.transactional_id.is_some() && p.acks != Acks::All {
            return Err(inconsistent(
                "producer.acks",
                "a transactional producer needs acks=all (acks=-1)",
            ));
        }
        if p.enable_idempotence {
            if p.acks != Acks::All {
                return Err(inconsistent(
                    "producer.acks",
                    "idempotence requires acks=all (or disable enable.idempotence)",
                ));
            }
            if n.max_in_flight > 5 {
                return Err(inconsistent(
                    "net.max_in_flight",
                    "idempotence keeps order for at most 5 requests in flight",
                ));
            }
            if p.retries == 0 {
                return Err(inconsistent(
                    "producer.retries",
                    "idempotence requires retries",
                ));
            }
        }
        if p.transactional_id.is_some() && !p.enable_idempotence {
            return Err(inconsistent(
                "producer.enable_idempotence",
                "a transactional producer must be idempotent",
            ));
        }
        if p.transactional_id.as_deref() == Some("") {
            return Err(inconsistent(
                "producer.transactional_id",
                "a transactional id must not be empty",
            ));
        }
        if p.transactional_id.is_some()
            && !(Duration::from_millis(1)..=Duration::from_millis(i32::MAX as u64))
                .contains(&p.transaction_timeout)
        {
            return Err(inconsistent(
                "producer.transaction_timeout",
                "must be between 1 ms and i32::MAX ms",
            ));
        }
        if p.delivery_timeout < p.linger + n.request_timeout {
            return Err(inconsistent(
                "producer.delivery_timeout",
                "must be at least linger + request timeout",
            ));
        }
        if p.retry_backoff > p.retry_backoff_max {
            return Err(inconsistent(
                "producer.retry_backoff",
                "must not exceed producer.retry_backoff_max",
            ));
        }
        let c = &self.consumer;
        if c.fetch_min_bytes < 0 {
            return Err(inconsistent(
                "consumer.fetch_min_bytes",
                "must not be negative",
            ));
        }
        if c.fetch_max_bytes <= 0 || c.max_partition_fetch_bytes <= 0 {
            return Err(inconsistent(
                "consumer.fetch_max_bytes",
                "fetch sizes must be above zero",
            ));
        }
        if c.fetch_min_bytes > c.fetch_max_bytes {
            return Err(inconsistent(
                "consumer.fetch_min_bytes",
                "must not exceed consumer.fetch_max_bytes",
            ));
        }
        if c.fetch_max_bytes as usize > n.max_response_size {
            return Err(inconsistent(
                "consumer.fetch_max_bytes",
                "must not exceed net.max_response_size",
            ));
        }
        if c.fetch_buffer_memory < c.fetch_max_bytes as usize {
            return Err(inconsistent(
                "consumer.fetch_buffer_memory",
                "must hold at least one full fetch (consumer.fetch_max_bytes)",
            ));
        }
        if c.fetch_max_decompressed_bytes < c.max_partition_fetch_bytes as usize {
            return Err(inconsistent(
                "consumer.fetch_max_decompressed_bytes",
                "must be at least consumer.max_partition_fetch_bytes",
            ));
        }
        if c.client_rack.len() > i16::MAX as usize {
            return Err(inconsistent(
                "consumer.client_rack",
                "must be at most 32767 bytes (a protocol string)",
            ));
        }
        if c.enable_auto_commit && c.auto_commit_interval.is_zero() {
            return Err(inconsistent(
                "consumer.auto_commit_interval",
                "must be above zero",
            ));
        }
        let g = &self.group;
        if g.protocol == GroupProtocol::Consumer {
            refuse_classic_only_settings(g)?;
        }
        if g.heartbeat_interval >= g.session_timeout {
            return Err(inconsistent(
                "group.heartbeat_interval",
                "must be below group.session_timeout",
            ));
        }
        if g.assignment_strategies.is_empty() {
            return Err(inconsistent(
                "group.assignment_strategies",
                "at least one assignor is needed",
            ));
        }
        if let Some(name) = g
            .assignment_strategies
            .iter()
            .find(|n| crate::group::assignor::Assignor::from_name(n).is_none())
        {
            return Err(inconsistent(
                "group.assignment_strategies",
                format!(
                    "unknown assignor {name:?} (range, roundrobin, sticky, cooperative-sticky)"
                ),
            ));
        }
        if g.group_instance_id.as_deref() == Some("") {
            return Err(inconsistent("group.group_instance_id", "must not be empty"));
        }
        if g.group_id.as_deref() == Some("") {
            return Err(inconsistent("group.group_id", "must not be empty"));
        }
        if self.admin.timeout.is_zero() {
            return Err(inconsistent("admin.timeout", "must be above zero"));
        }
        self.security.validate()
    }

    /// The connection settings this configuration implies.
    pub(crate) fn connection_config(&self) -> Result<ConnectionConfig, ConfigurationError> {
        Ok(ConnectionConfig {
            client_id: self.client_id.clone(),
            connect_timeout: self.net.connect_timeout,
            request_timeout: self.net.request_timeout,
            max_in_flight: self.net.max_in_flight,
            max_response_size: self.net.max_response_size,
            reconnect_backoff: self.net.reconnect_backoff,
            reconnect_backoff_max: self.net.reconnect_backoff_max,
            queue_capacity: self.net.queue_capacity,
            security: crate::io::security::connection_security(&self.security)?,
            ..ConnectionConfig::default()
        })
    }

    /// The runtime settings this configuration implies.
    pub(crate) fn runtime_config(&self) -> RuntimeConfig {
        RuntimeConfig {
            workers: self.net.workers,
            backend: self.net.io_backend,
            ..RuntimeConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_once_bootstrapped() {
        assert!(matches!(
            Config::default().validate(),
            Err(ConfigurationError::Inconsistent {
                field: "bootstrap_servers",
                ..
            })
        ));
        Config::new(["127.0.0.1:9092"]).validate().unwrap();
    }

    #[test]
    fn validation_names_the_field() {
        let base = Config::new(["localhost:9092"]);
        type Change = Box<dyn Fn(&mut Config)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "producer.acks",
                Box::new(|c| c.producer.acks = Acks::Leader),
            ),
            ("net.max_in_flight", Box::new(|c| c.net.max_in_flight = 6)),
            ("net.max_in_flight", Box::new(|c| c.net.max_in_flight = 0)),
            (
                "producer.batch_size",
                Box::new(|c| c.producer.batch_size = 64 << 20),
            ),
            (
                "producer.delivery_timeout",
                Box::new(|c| c.producer.delivery_timeout = Duration::from_secs(1)),
            ),
            (
                "group.heartbeat_interval",
                Box::new(|c| c.group.heartbeat_interval = Duration::from_secs(60)),
            ),
            (
                "consumer.fetch_min_bytes",
                Box::new(|c| c.consumer.fetch_min_bytes = i32::MAX),
            ),
            (
                "net.reconnect_backoff",
                Box::new(|c| c.net.reconnect_backoff = Duration::from_secs(9)),
            ),
            (
                "consumer.fetch_max_decompressed_bytes",
                Box::new(|c| c.consumer.fetch_max_decompressed_bytes = 1000),
            ),
            (
                "consumer.client_rack",
                Box::new(|c| c.consumer.client_rack = "r".repeat(40_000)),
            ),
            (
                "producer.enable_idempotence",
                Box::new(|c| {
                    c.producer.enable_idempotence = false;
                    c.producer.transactional_id = Some("t".into());
                }),
            ),
            (
                "group.session_timeout",
                Box::new(|c| {
                    c.group.protocol = GroupProtocol::Consumer;
                    c.group.session_timeout = Duration::from_secs(10);
                }),
            ),
            (
                "group.heartbeat_interval",
                Box::new(|c| {
                    c.group.protocol = GroupProtocol::Consumer;
                    c.group.heartbeat_interval = Duration::from_secs(1);
                }),
            ),
            (
                "group.assignment_strategies",
                Box::new(|c| {
                    c.group.protocol = GroupProtocol::Consumer;
                    c.group.assignment_strategies = vec!["range".into()];
                }),
            ),
        ];
        for (field, change) in cases {
            let mut c = base.clone();
            change(&mut c);
            match c.validate() {
                Err(ConfigurationError::Inconsistent { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        let mut c = base.clone();
        c.bootstrap_servers.push("no-port".into());
        assert!(matches!(
            c.validate(),
            Err(ConfigurationError::InvalidValue { field, .. }) if field == "bootstrap_servers"
        ));
        // A transactional producer: taken with acks=all, refused (and said why) with
        // another acks or an empty id.
        let mut c = base.clone();
        c.producer.transactional_id = Some("t".into());
        c.validate().unwrap();
        c.producer.acks = Acks::Leader;
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("transactional producer needs acks=all"),
            "{err}"
        );
        c.producer.acks = Acks::All;
        c.producer.transactional_id = Some(String::new());
        assert!(c.validate().unwrap_err().to_string().contains("empty"));
        // Group settings are taken now that groups exist; bad ones are refused.
        let mut c = base.clone();
        c.group.group_id = Some("g".into());
        c.group.group_instance_id = Some("i".into());
        c.group.session_timeout = Duration::from_secs(10);
        c.group.assignment_strategies = vec!["range".into()];
        c.validate().unwrap();
        for change in [
            Box::new(|c: &mut Config| c.group.assignment_strategies = vec!["fair".into()])
                as Change,
            Box::new(|c: &mut Config| c.group.group_instance_id = Some(String::new())),
        ] {
            let mut c = base.clone();
            change(&mut c);
            assert!(c.validate().is_err());
        }
        // acks=1 is fine once idempotence is off.
        let mut c = base;
        c.producer.enable_idempotence = false;
        c.producer.acks = Acks::Leader;
        c.validate().unwrap();
    }
}
