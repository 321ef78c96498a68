//! What a [`super::MockBroker`] answers with: the [`MockResponse`] trait, the
//! `Mock*Response` builders (each builds its response from the request it answers, so
//! the topics and partitions asked for are the ones answered), [`MockSequence`], and
//! small helpers for tests. The error answer to any request,
//! [`error_response`](crate::error_response) (as Java's
//! `AbstractRequest.getErrorResponse`), is generated: `src/generated/`.
//!
//! Invariant: every builder fills every field at every version a client may send, with
//! the schema's defaults where the builder was told nothing, so its answer encodes at
//! the request's version.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;
use kring::protocol::messages::{
    ApiVersionsResponse, FetchResponse, FindCoordinatorResponse, HeartbeatResponse,
    InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse, ListOffsetsResponse,
    MetadataResponse, OffsetCommitResponse, OffsetFetchResponse, ProduceResponse,
    SyncGroupResponse,
    api_versions::ApiVersion,
    fetch::{FetchableTopicResponse, PartitionData},
    find_coordinator::Coordinator,
    join_group::JoinGroupResponseMember,
    leave_group::MemberResponse,
    list_offsets::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
    metadata::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic},
    offset_commit::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
    offset_fetch::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    },
    produce::{PartitionProduceResponse, TopicProduceResponse},
};
use kring::protocol::{ApiKey, KafkaCode, RequestKind, Uuid};
use kring::record::{BatchBuilder, BatchOptions, RecordBatchRef};

use super::server::lock;
use super::{KeyValue, MockBroker, MockError, ReceivedRequest, Reply};

/// Answers requests for a [`MockBroker`]: given a request, the [`Reply`] to it.
///
/// Closures `Fn(&ReceivedRequest) -> Reply` are handlers, and so is any [`Reply`] (a
/// fixed response), [`MockSequence`] and every `Mock*Response` builder.
///
/// ```
/// use kring_mock::{MockResponse, ReceivedRequest, Reply};
/// use kring::protocol::KafkaCode;
/// use kring::protocol::messages::{HeartbeatRequest, HeartbeatResponse};
///
/// // Fails heartbeats from generation 3 and older, accepts the rest.
/// fn check(request: &ReceivedRequest) -> Reply {
///     match request.decode::<HeartbeatRequest>() {
///         Some(h) if h.generation_id <= 3 => Reply::error(KafkaCode::ILLEGAL_GENERATION),
///         _ => HeartbeatResponse::default().into(),
///     }
/// }
/// fn handler() -> impl MockResponse { check }
/// ```
pub trait MockResponse: Send + Sync + 'static {
    /// The reply to `request`.
    fn respond(&self, request: &ReceivedRequest) -> Reply;
}

impl<F> MockResponse for F
where
    F: Fn(&ReceivedRequest) -> Reply + Send + Sync + 'static,
{
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        self(request)
    }
}

impl MockResponse for Reply {
    fn respond(&self, _request: &ReceivedRequest) -> Reply {
        self.clone()
    }
}

/// Answers each request with the next of its steps; once they run out, the last step
/// answers every later request (Sarama's `MockSequence`). An empty sequence passes.
///
/// ```
/// use kring_mock::{MockProduceResponse, MockSequence, Reply};
/// use kring::protocol::KafkaCode;
///
/// // The first produce fails with NOT_LEADER_OR_FOLLOWER, the retry succeeds.
/// let produce = MockSequence::new()
///     .then(MockProduceResponse::new().error("t", 0, KafkaCode::NOT_LEADER_OR_FOLLOWER))
///     .then(MockProduceResponse::new().offset("t", 0, 42));
/// # let _ = produce;
/// ```
#[derive(Default)]
pub struct MockSequence {
    steps: Vec<Box<dyn MockResponse>>,
    next: Mutex<usize>,
}

impl std::fmt::Debug for MockSequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockSequence")
            .field("steps", &self.steps.len())
            .field("next", &*lock(&self.next))
            .finish()
    }
}

impl MockSequence {
    /// An empty sequence.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a step.
    pub fn then(mut self, step: impl MockResponse) -> Self {
        self.steps.push(Box::new(step));
        self
    }

    /// Steps taken so far.
    pub fn taken(&self) -> usize {
        *lock(&self.next)
    }
}

impl MockResponse for MockSequence {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let index = {
            let mut next = lock(&self.next);
            let i = *next;
            *next += 1;
            i
        };
        match self.steps.get(index).or(self.steps.last()) {
            Some(step) => step.respond(request),
            None => Reply::pass(),
        }
    }
}

/// The id the mock builders give a topic (Metadata v10+, Fetch v13+): a fixed
/// function of the name, never zero.
pub fn topic_id(name: &str) -> Uuid {
    id_from(name.as_bytes(), 0)
}

/// A deterministic, nonzero UUID from `bytes` and `salt` (two FNV-1a hashes).
pub(crate) fn id_from(bytes: &[u8], salt: u64) -> Uuid {
    let hash = |seed: u64| {
        let mut h = seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&hash(0xcbf2_9ce4_8422_2325).to_be_bytes());
    out[8..].copy_from_slice(&hash(0x6c62_272e_07bb_0142).to_be_bytes());
    if out == [0; 16] {
        out[15] = 1;
    }
    Uuid(out)
}

/// A v2 record batch (uncompressed) holding `records` as `(key, value)` pairs, with
/// the given base offset and every record stamped `timestamp`: test data for
/// [`MockFetchResponse::records`] and [`super::FakeCluster::append`].
///
/// ```
/// let batch = kring_mock::record_batch(0, 1_700_000_000_000, &[
///     (Some(b"k1".as_slice()), Some(b"v1".as_slice())),
///     (None, Some(b"v2".as_slice())),
/// ])?;
/// let parsed = kring::record::RecordBatchRef::new(&batch)?;
/// assert_eq!(parsed.record_count(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn record_batch(
    base_offset: i64,
    timestamp: i64,
    records: &[KeyValue<'_>],
) -> Result<Bytes, MockError> {
    // Generous bound: each record needs at most its key and value plus 5 varints of
    // 10 bytes and its attributes.
    let capacity = kring::record::BATCH_HEADER_LEN
        + records
            .iter()
            .map(|(k, v)| k.map_or(0, <[u8]>::len) + v.map_or(0, <[u8]>::len) + 64)
            .sum::<usize>();
    let invalid = |e: kring::record::BuildError| MockError::InvalidBatch(e.to_string());
    let mut builder = BatchBuilder::new(
        Vec::with_capacity(capacity),
        BatchOptions::default().with_base_offset(base_offset),
    )
    .map_err(invalid)?;
    for (key, value) in records {
        builder
            .append(timestamp, *key, *value, &[])
            .map_err(invalid)?;
    }
    let sealed = builder.seal().map_err(invalid)?;
    Ok(Bytes::copy_from_slice(sealed.as_bytes()))
}

/// Every API kring knows, with every version it can encode and decode: what a
/// [`MockBroker`] advertises by default.
pub(crate) fn all_api_versions() -> Vec<ApiVersion> {
    ApiKey::ALL
        .iter()
        .map(|api| {
            let v = api.versions();
            ApiVersion::default()
                .with_api_key(api.key())
                .with_min_version(v.min)
                .with_max_version(v.max)
        })
        .collect()
}

/// Splits `host:port` (an IPv6 host may be bracketed) for the builders.
fn host_port(addr: std::net::SocketAddr) -> (String, i32) {
    (addr.ip().to_string(), i32::from(addr.port()))
}

// ------------------------------------------------------------------ ApiVersions

/// An ApiVersions answer: by default every API and version kring speaks.
///
/// ```
/// use kring_mock::{MockApiVersionsResponse, MockBroker};
/// use kring::protocol::ApiKey;
///
/// // A broker too old for anything but Metadata v0-v4 (and ApiVersions).
/// let broker = MockBroker::new(1)?;
/// broker.set_handler(
///     ApiKey::ApiVersions,
///     MockApiVersionsResponse::new()
///         .only(&[ApiKey::ApiVersions, ApiKey::Metadata])
///         .versions(ApiKey::Metadata, 0, 4),
/// );
/// # Ok::<(), kring_mock::MockError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MockApiVersionsResponse {
    versions: BTreeMap<i16, (i16, i16)>,
    error: KafkaCode,
}

impl Default for MockApiVersionsResponse {
    fn default() -> Self {
        Self::new()
    }
}

impl MockApiVersionsResponse {
    /// Every API and version kring speaks.
    pub fn new() -> Self {
        MockApiVersionsResponse {
            versions: all_api_versions()
                .into_iter()
                .map(|v| (v.api_key, (v.min_version, v.max_version)))
                .collect(),
            error: KafkaCode::NONE,
        }
    }

    /// Advertises only `apis` (with kring's versions, unless set otherwise).
    pub fn only(mut self, apis: &[ApiKey]) -> Self {
        self.versions
            .retain(|k, _| apis.iter().any(|a| a.key() == *k));
        self
    }

    /// Stops advertising `api`.
    pub fn without(mut self, api: ApiKey) -> Self {
        self.versions.remove(&api.key());
        self
    }

    /// Advertises `api` with versions `min..=max`.
    pub fn versions(mut self, api: ApiKey, min: i16, max: i16) -> Self {
        self.versions.insert(api.key(), (min, max));
        self
    }

    /// Answers with this error code (and the versions).
    pub fn error(mut self, code: KafkaCode) -> Self {
        self.error = code;
        self
    }

    /// The response this builder gives.
    pub fn build(&self) -> ApiVersionsResponse {
        ApiVersionsResponse::default()
            .with_error_code(self.error.code())
            .with_api_keys(
                self.versions
                    .iter()
                    .map(|(&api_key, &(min_version, max_version))| {
                        ApiVersion::default()
                            .with_api_key(api_key)
                            .with_min_version(min_version)
                            .with_max_version(max_version)
                    })
                    .collect(),
            )
    }
}

impl MockResponse for MockApiVersionsResponse {
    fn respond(&self, _request: &ReceivedRequest) -> Reply {
        self.build().into()
    }
}

// ------------------------------------------------------------------ Metadata

#[derive(Debug, Clone)]
struct MetaPartition {
    leader: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    error: KafkaCode,
}

#[derive(Debug, Clone, Default)]
struct MetaTopic {
    error: KafkaCode,
    partitions: BTreeMap<i32, MetaPartition>,
}

/// A Metadata answer: brokers, and for each topic its partitions' leaders (Sarama's
/// `MockMetadataResponse`). Only the topics a request asks for are answered; a topic
/// the builder does not know is UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID when
/// asked for by id). Topic ids are [`topic_id`] of the name.
///
/// ```
/// use kring_mock::{MockBroker, MockMetadataResponse};
/// use kring::protocol::ApiKey;
///
/// let seed = MockBroker::new(1)?;
/// let leader = MockBroker::new(2)?;
/// seed.set_handler(
///     ApiKey::Metadata,
///     MockMetadataResponse::new()
///         .broker_of(&seed)
///         .broker_of(&leader)
///         .leader("orders", 0, leader.id())
///         .leader("orders", 1, seed.id()),
/// );
/// # Ok::<(), kring_mock::MockError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MockMetadataResponse {
    brokers: BTreeMap<i32, (String, i32)>,
    controller: i32,
    cluster_id: Option<String>,
    topics: BTreeMap<String, MetaTopic>,
}

impl Default for MockMetadataResponse {
    fn default() -> Self {
        Self::new()
    }
}

impl MockMetadataResponse {
    /// No brokers, no topics; cluster id `kring-mock`.
    pub fn new() -> Self {
        MockMetadataResponse {
            brokers: BTreeMap::new(),
            controller: -1,
            cluster_id: Some("kring-mock".into()),
            topics: BTreeMap::new(),
        }
    }

    /// Lists broker `id` at `host:port`.
    pub fn broker(mut self, id: i32, host: &str, port: u16) -> Self {
        self.brokers.insert(id, (host.to_string(), i32::from(port)));
        self
    }

    /// Lists a mock broker at its address.
    pub fn broker_of(mut self, broker: &MockBroker) -> Self {
        self.brokers.insert(broker.id(), host_port(broker.addr()));
        self
    }

    /// Sets the controller id (the first broker listed otherwise).
    pub fn controller(mut self, id: i32) -> Self {
        self.controller = id;
        self
    }

    /// Sets the cluster id.
    pub fn cluster_id(mut self, id: Option<&str>) -> Self {
        self.cluster_id = id.map(str::to_string);
        self
    }

    /// Declares a topic with `partitions` partitions, all led by `leader`.
    pub fn topic(mut self, name: &str, partitions: i32, leader: i32) -> Self {
        for p in 0..partitions {
            self = self.leader(name, p, leader);
        }
        self
    }

    /// Makes `leader` the leader (and only replica) of `topic`-`partition`, at leader
    /// epoch 0 unless set by [`Self::leader_epoch`].
    pub fn leader(mut self, topic: &str, partition: i32, leader: i32) -> Self {
        let p = self
            .topics
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_insert(MetaPartition {
                leader,
                leader_epoch: 0,
                replicas: vec![leader],
                error: KafkaCode::NONE,
            });
        p.leader = leader;
        if !p.replicas.contains(&leader) {
            p.replicas.push(leader);
        }
        self
    }

    /// Sets the replicas of `topic`-`partition` (the leader is the first, unless set).
    pub fn replicas(mut self, topic: &str, partition: i32, replicas: &[i32]) -> Self {
        let leader = replicas.first().copied().unwrap_or(-1);
        let p = self
            .topics
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_insert(MetaPartition {
                leader,
                leader_epoch: 0,
                replicas: Vec::new(),
                error: KafkaCode::NONE,
            });
        p.replicas = replicas.to_vec();
        self
    }

    /// Sets the leader epoch of `topic`-`partition`.
    pub fn leader_epoch(mut self, topic: &str, partition: i32, epoch: i32) -> Self {
        self = self.ensure_partition(topic, partition);
        if let Some(p) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(&partition))
        {
            p.leader_epoch = epoch;
        }
        self
    }

    /// Answers `topic` with a topic-level error (and no partitions when the code is
    /// not NONE).
    pub fn topic_error(mut self, topic: &str, code: KafkaCode) -> Self {
        self.topics.entry(topic.to_string()).or_default().error = code;
        self
    }

    /// Answers `topic`-`partition` with a partition-level error.
    pub fn partition_error(mut self, topic: &str, partition: i32, code: KafkaCode) -> Self {
        self = self.ensure_partition(topic, partition);
        if let Some(p) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(&partition))
        {
            p.error = code;
        }
        self
    }

    fn ensure_partition(mut self, topic: &str, partition: i32) -> Self {
        self.topics
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_insert(MetaPartition {
                leader: -1,
                leader_epoch: 0,
                replicas: Vec::new(),
                error: KafkaCode::NONE,
            });
        self
    }

    fn topic_entry(&self, name: &str, spec: &MetaTopic) -> MetadataResponseTopic {
        let partitions = if spec.error.is_ok() {
            spec.partitions
                .iter()
                .map(|(&index, p)| {
                    MetadataResponsePartition::default()
                        .with_error_code(p.error.code())
                        .with_partition_index(index)
                        .with_leader_id(p.leader)
                        .with_leader_epoch(p.leader_epoch)
                        .with_replica_nodes(p.replicas.clone())
                        .with_isr_nodes(p.replicas.clone())
                })
                .collect()
        } else {
            Vec::new()
        };
        MetadataResponseTopic::default()
            .with_error_code(spec.error.code())
            .with_name(Some(name.to_string()))
            .with_topic_id(topic_id(name))
            .with_partitions(partitions)
    }

    /// The response to a request for `topics` (`None`: every topic).
    pub fn build(&self, request: &kring::protocol::messages::MetadataRequest) -> MetadataResponse {
        let topics = match &request.topics {
            None => self
                .topics
                .iter()
                .map(|(n, t)| self.topic_entry(n, t))
                .collect(),
            Some(list) => list
                .iter()
                .map(|t| {
                    let by_name = t.name.as_deref().and_then(|n| self.topics.get_key_value(n));
                    let by_id = || {
                        self.topics
                            .iter()
                            .find(|(n, _)| !t.topic_id.is_zero() && topic_id(n) == t.topic_id)
                    };
                    match by_name.or_else(by_id) {
                        Some((n, spec)) => self.topic_entry(n, spec),
                        None => MetadataResponseTopic::default()
                            .with_error_code(if t.name.is_some() {
                                KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                            } else {
                                KafkaCode::UNKNOWN_TOPIC_ID.code()
                            })
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id),
                    }
                })
                .collect(),
        };
        MetadataResponse::default()
            .with_brokers(
                self.brokers
                    .iter()
                    .map(|(&node_id, (host, port))| {
                        MetadataResponseBroker::default()
                            .with_node_id(node_id)
                            .with_host(host.clone())
                            .with_port(*port)
                    })
                    .collect(),
            )
            .with_cluster_id(self.cluster_id.clone())
            .with_controller_id(if self.controller >= 0 {
                self.controller
            } else {
                self.brokers.keys().next().copied().unwrap_or(-1)
            })
            .with_topics(topics)
    }
}

impl MockResponse for MockMetadataResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        match &request.request {
            RequestKind::Metadata(m) => {
                // v0: an empty list means every topic.
                if request.version == 0 && m.topics.as_ref().is_some_and(Vec::is_empty) {
                    let mut all = m.clone();
                    all.topics = None;
                    return self.build(&all).into();
                }
                self.build(m).into()
            }
            _ => Reply::pass(),
        }
    }
}

// ------------------------------------------------------------------ Produce

/// A Produce answer mirroring the request's partitions (Sarama's
/// `MockProduceResponse`): NONE and base offset 0 unless set per partition.
#[derive(Debug, Clone, Default)]
pub struct MockProduceResponse {
    errors: BTreeMap<(String, i32), KafkaCode>,
    offsets: BTreeMap<(String, i32), i64>,
    log_start: BTreeMap<(String, i32), i64>,
}

impl MockProduceResponse {
    /// Every partition succeeds at base offset 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fails `topic`-`partition` with `code`.
    pub fn error(mut self, topic: &str, partition: i32, code: KafkaCode) -> Self {
        self.errors.insert((topic.to_string(), partition), code);
        self
    }

    /// Answers `topic`-`partition` with this base offset.
    pub fn offset(mut self, topic: &str, partition: i32, base_offset: i64) -> Self {
        self.offsets
            .insert((topic.to_string(), partition), base_offset);
        self
    }

    /// Answers `topic`-`partition` with this log start offset (v5+).
    pub fn log_start_offset(mut self, topic: &str, partition: i32, offset: i64) -> Self {
        self.log_start
            .insert((topic.to_string(), partition), offset);
        self
    }
}

impl MockResponse for MockProduceResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::Produce(r) = &request.request else {
            return Reply::pass();
        };
        ProduceResponse::default()
            .with_responses(
                r.topic_data
                    .iter()
                    .map(|t| {
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_partition_responses(
                                t.partition_data
                                    .iter()
                                    .map(|p| {
                                        let key = (t.name.clone(), p.index);
                                        let code =
                                            self.errors.get(&key).copied().unwrap_or_default();
                                        PartitionProduceResponse::default()
                                            .with_index(p.index)
                                            .with_error_code(code.code())
                                            .with_base_offset(if code.is_ok() {
                                                self.offsets.get(&key).copied().unwrap_or(0)
                                            } else {
                                                -1
                                            })
                                            .with_log_start_offset(
                                                self.log_start.get(&key).copied().unwrap_or(0),
                                            )
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into()
    }
}

// ------------------------------------------------------------------ Fetch

#[derive(Debug, Clone, Default)]
struct FetchPart {
    batches: Vec<Bytes>,
    high_watermark: Option<i64>,
    log_start: i64,
    error: KafkaCode,
}

/// A Fetch answer (Sarama's `MockFetchResponse`): for each partition asked for, the
/// batches set for it whose records reach the fetch offset, its high watermark (the
/// offset after the last batch unless set) and its error code. Partitions nobody set
/// up answer NONE with no records. Topics asked for by id (v13+) are matched by
/// [`topic_id`] of the names set here.
///
/// ```
/// use kring_mock::{MockFetchResponse, record_batch};
///
/// let batch = record_batch(10, 0, &[(None, Some(b"hello".as_slice()))])?;
/// let fetch = MockFetchResponse::new()
///     .records("events", 0, batch)
///     .high_watermark("events", 0, 11);
/// # let _ = fetch;
/// # Ok::<(), kring_mock::MockError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MockFetchResponse {
    partitions: BTreeMap<(String, i32), FetchPart>,
}

impl MockFetchResponse {
    /// Nothing set up: every partition answers empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a record batch (wire bytes, e.g. from [`record_batch`]) to `topic`-`partition`.
    pub fn records(mut self, topic: &str, partition: i32, batch: impl Into<Bytes>) -> Self {
        self.part(topic, partition).batches.push(batch.into());
        self
    }

    /// Sets the high watermark of `topic`-`partition`.
    pub fn high_watermark(mut self, topic: &str, partition: i32, offset: i64) -> Self {
        self.part(topic, partition).high_watermark = Some(offset);
        self
    }

    /// Sets the log start offset of `topic`-`partition`.
    pub fn log_start_offset(mut self, topic: &str, partition: i32, offset: i64) -> Self {
        self.part(topic, partition).log_start = offset;
        self
    }

    /// Fails `topic`-`partition` with `code`.
    pub fn error(mut self, topic: &str, partition: i32, code: KafkaCode) -> Self {
        self.part(topic, partition).error = code;
        self
    }

    fn part(&mut self, topic: &str, partition: i32) -> &mut FetchPart {
        self.partitions
            .entry((topic.to_string(), partition))
            .or_default()
    }

    fn topic_name(&self, name: &str, id: Uuid, version: i16) -> Option<String> {
        if version < 13 {
            return Some(name.to_string());
        }
        self.partitions
            .keys()
            .map(|(n, _)| n)
            .find(|n| topic_id(n) == id)
            .cloned()
    }
}

/// The offset after the last record of `batch`, if it parses.
fn batch_next_offset(batch: &[u8]) -> Option<i64> {
    RecordBatchRef::parse(batch)
        .ok()
        .flatten()
        .map(|(b, _)| b.next_offset())
}

impl MockResponse for MockFetchResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::Fetch(r) = &request.request else {
            return Reply::pass();
        };
        let responses = r
            .topics
            .iter()
            .map(|t| {
                let name = self.topic_name(&t.topic, t.topic_id, request.version);
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                let Some(name) = &name else {
                                    return PartitionData::default()
                                        .with_partition_index(p.partition)
                                        .with_error_code(KafkaCode::UNKNOWN_TOPIC_ID.code())
                                        .with_high_watermark(-1);
                                };
                                let spec = self.partitions.get(&(name.clone(), p.partition));
                                let Some(spec) = spec else {
                                    return PartitionData::default()
                                        .with_partition_index(p.partition)
                                        .with_log_start_offset(0)
                                        .with_last_stable_offset(0);
                                };
                                let mut records = Vec::new();
                                let mut end = 0;
                                for b in &spec.batches {
                                    let next = batch_next_offset(b);
                                    end = end.max(next.unwrap_or(0));
                                    if next.is_none_or(|n| n > p.fetch_offset) {
                                        records.extend_from_slice(b);
                                    }
                                }
                                let hwm = spec.high_watermark.unwrap_or(end);
                                PartitionData::default()
                                    .with_partition_index(p.partition)
                                    .with_error_code(spec.error.code())
                                    .with_high_watermark(hwm)
                                    .with_last_stable_offset(hwm)
                                    .with_log_start_offset(spec.log_start)
                                    .with_records(Some(if spec.error.is_ok() {
                                        Bytes::from(records)
                                    } else {
                                        Bytes::new()
                                    }))
                            })
                            .collect(),
                    )
            })
            .collect();
        FetchResponse::default().with_responses(responses).into()
    }
}

// ------------------------------------------------------------------ ListOffsets

/// A ListOffsets answer (Sarama's `MockOffsetResponse`): the offset set for each
/// (partition, timestamp) asked for. Unset, the earliest (-2) and latest (-1) offsets
/// are 0 and any other timestamp finds nothing (offset -1).
#[derive(Debug, Clone, Default)]
pub struct MockListOffsetsResponse {
    offsets: BTreeMap<(String, i32, i64), i64>,
    errors: BTreeMap<(String, i32), KafkaCode>,
}

impl MockListOffsetsResponse {
    /// The timestamp that asks for the earliest offset.
    pub const EARLIEST: i64 = -2;
    /// The timestamp that asks for the latest offset (the high watermark).
    pub const LATEST: i64 = -1;

    /// Nothing set up.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers `timestamp` for `topic`-`partition` with `offset`.
    pub fn offset(mut self, topic: &str, partition: i32, timestamp: i64, offset: i64) -> Self {
        self.offsets
            .insert((topic.to_string(), partition, timestamp), offset);
        self
    }

    /// Fails `topic`-`partition` with `code`.
    pub fn error(mut self, topic: &str, partition: i32, code: KafkaCode) -> Self {
        self.errors.insert((topic.to_string(), partition), code);
        self
    }
}

impl MockResponse for MockListOffsetsResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::ListOffsets(r) = &request.request else {
            return Reply::pass();
        };
        ListOffsetsResponse::default()
            .with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        ListOffsetsTopicResponse::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        let code = self
                                            .errors
                                            .get(&(t.name.clone(), p.partition_index))
                                            .copied()
                                            .unwrap_or_default();
                                        let offset = self
                                            .offsets
                                            .get(&(t.name.clone(), p.partition_index, p.timestamp))
                                            .copied()
                                            .unwrap_or(if p.timestamp < 0 { 0 } else { -1 });
                                        let found = (code.is_ok() && offset >= 0)
                                            .then_some((offset, -1, 0));
                                        list_offsets_partition(
                                            p.partition_index,
                                            code,
                                            found,
                                            request.version,
                                        )
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into()
    }
}

/// A ListOffsets partition answer fitted to `version`: v0 lists offsets in
/// `old_style_offsets`, v1+ has one offset and its timestamp, v4+ its leader epoch.
pub(crate) fn list_offsets_partition(
    partition_index: i32,
    code: KafkaCode,
    found: Option<(i64, i64, i32)>,
    version: i16,
) -> ListOffsetsPartitionResponse {
    let mut out = ListOffsetsPartitionResponse::default()
        .with_partition_index(partition_index)
        .with_error_code(code.code());
    if let Some((offset, timestamp, epoch)) = found {
        if version == 0 {
            out.old_style_offsets = vec![offset];
        } else {
            out.offset = offset;
            out.timestamp = timestamp;
            if version >= 4 {
                out.leader_epoch = epoch;
            }
        }
    }
    out
}

// ------------------------------------------------------------------ FindCoordinator

/// A FindCoordinator answer (Sarama's `MockFindCoordinatorResponse`): the coordinator
/// set for each key asked for (groups and transactional ids alike);
/// COORDINATOR_NOT_AVAILABLE for keys nobody set up.
#[derive(Debug, Clone, Default)]
pub struct MockFindCoordinatorResponse {
    coordinators: BTreeMap<String, (i32, String, i32)>,
    errors: BTreeMap<String, KafkaCode>,
}

impl MockFindCoordinatorResponse {
    /// Nothing set up.
    pub fn new() -> Self {
        Self::default()
    }

    /// `key`'s coordinator is broker `id` at `host:port`.
    pub fn coordinator(mut self, key: &str, id: i32, host: &str, port: u16) -> Self {
        self.coordinators
            .insert(key.to_string(), (id, host.to_string(), i32::from(port)));
        self
    }

    /// `key`'s coordinator is this mock broker.
    pub fn coordinator_of(mut self, key: &str, broker: &MockBroker) -> Self {
        let (host, port) = host_port(broker.addr());
        self.coordinators
            .insert(key.to_string(), (broker.id(), host, port));
        self
    }

    /// Fails the lookup of `key` with `code`.
    pub fn error(mut self, key: &str, code: KafkaCode) -> Self {
        self.errors.insert(key.to_string(), code);
        self
    }

    fn lookup(&self, key: &str) -> (i32, String, i32, KafkaCode) {
        if let Some(code) = self.errors.get(key) {
            return (-1, String::new(), -1, *code);
        }
        match self.coordinators.get(key) {
            Some((id, host, port)) => (*id, host.clone(), *port, KafkaCode::NONE),
            None => (-1, String::new(), -1, KafkaCode::COORDINATOR_NOT_AVAILABLE),
        }
    }
}

impl MockResponse for MockFindCoordinatorResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::FindCoordinator(r) = &request.request else {
            return Reply::pass();
        };
        let message = |code: KafkaCode| (!code.is_ok()).then(|| code.name().to_string());
        if request.version >= 4 {
            return FindCoordinatorResponse::default()
                .with_coordinators(
                    r.coordinator_keys
                        .iter()
                        .map(|k| {
                            let (node_id, host, port, code) = self.lookup(k);
                            Coordinator::default()
                                .with_key(k.clone())
                                .with_node_id(node_id)
                                .with_host(host)
                                .with_port(port)
                                .with_error_code(code.code())
                                .with_error_message(message(code))
                        })
                        .collect(),
                )
                .into();
        }
        let (node_id, host, port, code) = self.lookup(&r.key);
        FindCoordinatorResponse::default()
            .with_error_code(code.code())
            .with_error_message(message(code))
            .with_node_id(node_id)
            .with_host(host)
            .with_port(port)
            .into()
    }
}

// ------------------------------------------------------------------ OffsetCommit

/// An OffsetCommit answer mirroring the request's partitions (Sarama's
/// `MockOffsetCommitResponse`): NONE unless set per partition.
#[derive(Debug, Clone, Default)]
pub struct MockOffsetCommitResponse {
    errors: BTreeMap<(String, i32), KafkaCode>,
    all: Option<KafkaCode>,
}

impl MockOffsetCommitResponse {
    /// Every partition succeeds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fails `topic`-`partition` with `code`.
    pub fn error(mut self, topic: &str, partition: i32, code: KafkaCode) -> Self {
        self.errors.insert((topic.to_string(), partition), code);
        self
    }

    /// Fails every partition with `code`.
    pub fn error_all(mut self, code: KafkaCode) -> Self {
        self.all = Some(code);
        self
    }
}

impl MockResponse for MockOffsetCommitResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::OffsetCommit(r) = &request.request else {
            return Reply::pass();
        };
        OffsetCommitResponse::default()
            .with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(
                                                self.errors
                                                    .get(&(t.name.clone(), p.partition_index))
                                                    .copied()
                                                    .or(self.all)
                                                    .unwrap_or_default()
                                                    .code(),
                                            )
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into()
    }
}

// ------------------------------------------------------------------ OffsetFetch

/// (topic, [(partition, offset, metadata, code)]).
type CommittedByTopic = Vec<(String, Vec<(i32, i64, Option<String>, KafkaCode)>)>;

/// An OffsetFetch answer (Sarama's `MockOffsetFetchResponse`): the committed offset
/// set for each partition asked for (-1, no offset, otherwise), for whichever group
/// is asked; all set partitions when the request asks for every topic.
#[derive(Debug, Clone, Default)]
pub struct MockOffsetFetchResponse {
    offsets: BTreeMap<(String, i32), (i64, Option<String>, KafkaCode)>,
    error: KafkaCode,
}

impl MockOffsetFetchResponse {
    /// Nothing committed.
    pub fn new() -> Self {
        Self::default()
    }

    /// `topic`-`partition` has `offset` committed, with `metadata`.
    pub fn offset(
        mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        metadata: Option<&str>,
    ) -> Self {
        self.offsets.insert(
            (topic.to_string(), partition),
            (offset, metadata.map(str::to_string), KafkaCode::NONE),
        );
        self
    }

    /// Fails `topic`-`partition` with `code`.
    pub fn partition_error(mut self, topic: &str, partition: i32, code: KafkaCode) -> Self {
        self.offsets
            .insert((topic.to_string(), partition), (-1, None, code));
        self
    }

    /// Fails the whole request (top-level code, or each group's code in v8+).
    pub fn error(mut self, code: KafkaCode) -> Self {
        self.error = code;
        self
    }

    fn partitions_for(&self, asked: Option<Vec<(String, Vec<i32>)>>) -> CommittedByTopic {
        let lookup = |t: &str, p: i32| {
            self.offsets
                .get(&(t.to_string(), p))
                .cloned()
                .unwrap_or((-1, None, KafkaCode::NONE))
        };
        match asked {
            Some(topics) => topics
                .into_iter()
                .map(|(t, parts)| {
                    let ps = parts
                        .into_iter()
                        .map(|p| {
                            let (o, m, c) = lookup(&t, p);
                            (p, o, m, c)
                        })
                        .collect();
                    (t, ps)
                })
                .collect(),
            None => {
                let mut by_topic: BTreeMap<String, Vec<_>> = BTreeMap::new();
                for ((t, p), (o, m, c)) in &self.offsets {
                    by_topic
                        .entry(t.clone())
                        .or_default()
                        .push((*p, *o, m.clone(), *c));
                }
                by_topic.into_iter().collect()
            }
        }
    }
}

impl MockResponse for MockOffsetFetchResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::OffsetFetch(r) = &request.request else {
            return Reply::pass();
        };
        let ok = self.error.is_ok();
        let topics = if ok && request.version < 8 {
            self.partitions_for(r.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                    .collect()
            }))
        } else {
            Vec::new()
        };
        OffsetFetchResponse::default()
            .with_error_code(self.error.code())
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, ps)| {
                        OffsetFetchResponseTopic::default()
                            .with_name(name)
                            .with_partitions(
                                ps.into_iter()
                                    .map(|(p, o, m, c)| {
                                        OffsetFetchResponsePartition::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(o)
                                            .with_committed_leader_epoch(-1)
                                            .with_metadata(m.or_else(|| Some(String::new())))
                                            .with_error_code(c.code())
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_groups(
                r.groups
                    .iter()
                    .filter(|_| request.version >= 8)
                    .map(|g| {
                        let topics = if ok {
                            self.partitions_for(g.topics.as_ref().map(|ts| {
                                ts.iter()
                                    .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                                    .collect()
                            }))
                        } else {
                            Vec::new()
                        };
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(self.error.code())
                            .with_topics(
                                topics
                                    .into_iter()
                                    .map(|(name, ps)| {
                                        OffsetFetchResponseTopics::default()
                                            .with_name(name)
                                            .with_partitions(
                                                ps.into_iter()
                                                    .map(|(p, o, m, c)| {
                                                        OffsetFetchResponsePartitions::default()
                                                            .with_partition_index(p)
                                                            .with_committed_offset(o)
                                                            .with_committed_leader_epoch(-1)
                                                            .with_metadata(
                                                                m.or_else(|| Some(String::new())),
                                                            )
                                                            .with_error_code(c.code())
                                                    })
                                                    .collect(),
                                            )
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into()
    }
}

// ------------------------------------------------------------------ InitProducerId

/// An InitProducerId answer: producer id 1000 at epoch 0 unless set.
#[derive(Debug, Clone)]
pub struct MockInitProducerIdResponse {
    producer_id: i64,
    epoch: i16,
    error: KafkaCode,
}

impl Default for MockInitProducerIdResponse {
    fn default() -> Self {
        Self::new()
    }
}

impl MockInitProducerIdResponse {
    /// Producer id 1000, epoch 0.
    pub fn new() -> Self {
        MockInitProducerIdResponse {
            producer_id: 1000,
            epoch: 0,
            error: KafkaCode::NONE,
        }
    }

    /// Answers with this producer id and epoch.
    pub fn producer(mut self, id: i64, epoch: i16) -> Self {
        self.producer_id = id;
        self.epoch = epoch;
        self
    }

    /// Fails with `code`.
    pub fn error(mut self, code: KafkaCode) -> Self {
        self.error = code;
        self
    }
}

impl MockResponse for MockInitProducerIdResponse {
    fn respond(&self, _request: &ReceivedRequest) -> Reply {
        let ok = self.error.is_ok();
        InitProducerIdResponse::default()
            .with_error_code(self.error.code())
            .with_producer_id(if ok { self.producer_id } else { -1 })
            .with_producer_epoch(if ok { self.epoch } else { -1 })
            .into()
    }
}

// ------------------------------------------------------------------ group APIs

/// A JoinGroup answer: generation 1, the joiner's member id (`member-1` for a first
/// join), the first protocol it offered, and the joiner as leader and sole member
/// unless set otherwise.
#[derive(Debug, Clone)]
pub struct MockJoinGroupResponse {
    generation: i32,
    protocol: Option<String>,
    leader: Option<String>,
    member_id: Option<String>,
    members: Vec<(String, Bytes)>,
    error: KafkaCode,
}

impl Default for MockJoinGroupResponse {
    fn default() -> Self {
        Self::new()
    }
}

impl MockJoinGroupResponse {
    /// Generation 1, the joiner leads.
    pub fn new() -> Self {
        MockJoinGroupResponse {
            generation: 1,
            protocol: None,
            leader: None,
            member_id: None,
            members: Vec::new(),
            error: KafkaCode::NONE,
        }
    }

    /// Sets the generation.
    pub fn generation(mut self, generation: i32) -> Self {
        self.generation = generation;
        self
    }

    /// Sets the chosen protocol.
    pub fn protocol(mut self, name: &str) -> Self {
        self.protocol = Some(name.to_string());
        self
    }

    /// Sets the leader's member id.
    pub fn leader(mut self, member_id: &str) -> Self {
        self.leader = Some(member_id.to_string());
        self
    }

    /// Sets the member id given to the joiner.
    pub fn member_id(mut self, member_id: &str) -> Self {
        self.member_id = Some(member_id.to_string());
        self
    }

    /// Lists a member (sent to the leader only) with its protocol metadata.
    pub fn member(mut self, member_id: &str, metadata: impl Into<Bytes>) -> Self {
        self.members.push((member_id.to_string(), metadata.into()));
        self
    }

    /// Fails with `code`.
    pub fn error(mut self, code: KafkaCode) -> Self {
        self.error = code;
        self
    }
}

impl MockResponse for MockJoinGroupResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::JoinGroup(r) = &request.request else {
            return Reply::pass();
        };
        if !self.error.is_ok() {
            return Reply::error(self.error);
        }
        let member_id = self.member_id.clone().unwrap_or_else(|| {
            if r.member_id.is_empty() {
                "member-1".to_string()
            } else {
                r.member_id.clone()
            }
        });
        let protocol = self
            .protocol
            .clone()
            .or_else(|| r.protocols.first().map(|p| p.name.clone()))
            .unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_else(|| member_id.clone());
        let members = if leader != member_id {
            Vec::new()
        } else if self.members.is_empty() {
            let metadata = r
                .protocols
                .iter()
                .find(|p| p.name == protocol)
                .map(|p| p.metadata.clone())
                .unwrap_or_default();
            vec![
                JoinGroupResponseMember::default()
                    .with_member_id(member_id.clone())
                    .with_group_instance_id(r.group_instance_id.clone())
                    .with_metadata(metadata),
            ]
        } else {
            self.members
                .iter()
                .map(|(id, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(id.clone())
                        .with_metadata(metadata.clone())
                })
                .collect()
        };
        JoinGroupResponse::default()
            .with_generation_id(self.generation)
            .with_protocol_type(Some(r.protocol_type.clone()))
            .with_protocol_name(Some(protocol))
            .with_leader(leader)
            .with_member_id(member_id)
            .with_members(members)
            .into()
    }
}

/// A SyncGroup answer carrying an assignment (empty unless set).
#[derive(Debug, Clone, Default)]
pub struct MockSyncGroupResponse {
    assignment: Bytes,
    error: KafkaCode,
}

impl MockSyncGroupResponse {
    /// An empty assignment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers with this assignment (the consumer protocol's bytes).
    pub fn assignment(mut self, assignment: impl Into<Bytes>) -> Self {
        self.assignment = assignment.into();
        self
    }

    /// Fails with `code`.
    pub fn error(mut self, code: KafkaCode) -> Self {
        self.error = code;
        self
    }
}

impl MockResponse for MockSyncGroupResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::SyncGroup(r) = &request.request else {
            return Reply::pass();
        };
        SyncGroupResponse::default()
            .with_error_code(self.error.code())
            .with_protocol_type(r.protocol_type.clone())
            .with_protocol_name(r.protocol_name.clone())
            .with_assignment(if self.error.is_ok() {
                self.assignment.clone()
            } else {
                Bytes::new()
            })
            .into()
    }
}

/// A Heartbeat answer: NONE unless set.
#[derive(Debug, Clone, Default)]
pub struct MockHeartbeatResponse {
    error: KafkaCode,
}

impl MockHeartbeatResponse {
    /// Succeeds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fails with `code`.
    pub fn error(mut self, code: KafkaCode) -> Self {
        self.error = code;
        self
    }
}

impl MockResponse for MockHeartbeatResponse {
    fn respond(&self, _request: &ReceivedRequest) -> Reply {
        HeartbeatResponse::default()
            .with_error_code(self.error.code())
            .into()
    }
}

/// A LeaveGroup answer: NONE for the request and each member leaving (v3+) unless set.
#[derive(Debug, Clone, Default)]
pub struct MockLeaveGroupResponse {
    error: KafkaCode,
}

impl MockLeaveGroupResponse {
    /// Succeeds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fails with `code`.
    pub fn error(mut self, code: KafkaCode) -> Self {
        self.error = code;
        self
    }
}

impl MockResponse for MockLeaveGroupResponse {
    fn respond(&self, request: &ReceivedRequest) -> Reply {
        let RequestKind::LeaveGroup(r) = &request.request else {
            return Reply::pass();
        };
        LeaveGroupResponse::default()
            .with_error_code(self.error.code())
            .with_members(if self.error.is_ok() {
                r.members
                    .iter()
                    .map(|m| {
                        MemberResponse::default()
                            .with_member_id(m.member_id.clone())
                            .with_group_instance_id(m.group_instance_id.clone())
                    })
                    .collect()
            } else {
                Vec::new()
            })
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Action, error_response};
    use bytes::BytesMut;
    use kring::protocol::messages::{
        AddOffsetsToTxnRequest, ApiVersionsRequest, CreateTopicsRequest, DeleteRecordsRequest,
        DeleteTopicsRequest, DescribeGroupsRequest, EndTxnRequest, FetchRequest,
        FindCoordinatorRequest, HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest,
        LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest, MetadataRequest,
        OffsetCommitRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest,
        SyncGroupRequest,
        fetch::{FetchPartition, FetchTopic},
        metadata::MetadataRequestTopic,
        produce::{PartitionProduceData, TopicProduceData},
    };
    use kring::protocol::{Message, Request, ResponseKind};

    fn received<R: Request>(request: R, version: i16) -> ReceivedRequest {
        // The raw body is only for `decode`; requests that cannot be written at this
        // version are still answered from their decoded form.
        let mut body = BytesMut::new();
        let _ = request.encode(&mut body, version);
        ReceivedRequest {
            broker_id: 1,
            connection: 0,
            header: Default::default(),
            api_key: R::API_KEY,
            version,
            request: request.into_kind(),
            body: body.freeze(),
        }
    }

    fn body(reply: &Reply) -> &ResponseKind {
        match reply.action() {
            Action::Respond(r) => r,
            other => panic!("not a response: {other:?}"),
        }
    }

    /// A response encodes at every version of its API.
    fn encodes_everywhere(response: &ResponseKind) {
        let api = response.api_key();
        for v in api.versions().min..=api.versions().max {
            response
                .encode(&mut BytesMut::new(), v)
                .unwrap_or_else(|e| panic!("{} v{v}: {e}", api.name()));
        }
    }

    #[test]
    fn error_responses_mirror_the_request_and_encode() {
        let produce = ProduceRequest::default().with_topic_data(vec![
            TopicProduceData::default()
                .with_name("t".into())
                .with_partition_data(vec![PartitionProduceData::default().with_index(3)]),
        ]);
        let Some(ResponseKind::Produce(p)) = error_response(
            &produce.clone().into_kind(),
            11,
            KafkaCode::NOT_ENOUGH_REPLICAS,
        ) else {
            panic!()
        };
        assert_eq!(p.responses[0].partition_responses[0].index, 3);
        assert_eq!(
            p.responses[0].partition_responses[0].error_code,
            KafkaCode::NOT_ENOUGH_REPLICAS.code()
        );
        let covered = [
            produce.into_kind(),
            FetchRequest::default().into_kind(),
            ListOffsetsRequest::default().into_kind(),
            MetadataRequest::default().into_kind(),
            OffsetCommitRequest::default().into_kind(),
            OffsetFetchRequest::default().into_kind(),
            FindCoordinatorRequest::default().into_kind(),
            JoinGroupRequest::default().into_kind(),
            HeartbeatRequest::default().into_kind(),
            LeaveGroupRequest::default().into_kind(),
            SyncGroupRequest::default().into_kind(),
            DescribeGroupsRequest::default().into_kind(),
            ListGroupsRequest::default().into_kind(),
            ApiVersionsRequest::default().into_kind(),
            CreateTopicsRequest::default().into_kind(),
            DeleteTopicsRequest::default().into_kind(),
            DeleteRecordsRequest::default().into_kind(),
            InitProducerIdRequest::default().into_kind(),
            OffsetForLeaderEpochRequest::default().into_kind(),
            AddOffsetsToTxnRequest::default().into_kind(),
            EndTxnRequest::default().into_kind(),
        ];
        for request in covered {
            let api = request.api_key();
            for v in api.versions().min..=api.versions().max {
                let response = error_response(&request, v, KafkaCode::UNKNOWN_SERVER_ERROR)
                    .unwrap_or_else(|| panic!("{api:?} not covered"));
                assert_eq!(response.api_key(), api);
                response
                    .encode(&mut BytesMut::new(), v)
                    .unwrap_or_else(|e| panic!("{} v{v}: {e}", api.name()));
            }
        }
    }

    #[test]
    fn builders_answer_what_was_asked() {
        let metadata = MockMetadataResponse::new()
            .broker(1, "127.0.0.1", 9092)
            .topic("a", 2, 1);
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some("a".into())),
            MetadataRequestTopic::default().with_name(Some("zz".into())),
        ]));
        let reply = metadata.respond(&received(request, 12));
        encodes_everywhere(body(&reply));
        let ResponseKind::Metadata(m) = body(&reply) else {
            panic!()
        };
        assert_eq!(m.topics[0].partitions.len(), 2);
        assert_eq!(m.topics[0].topic_id, topic_id("a"));
        assert_eq!(
            m.topics[1].error_code,
            KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code()
        );

        let b0 = record_batch(0, 5, &[(None, Some(b"x"))]).unwrap();
        let b1 = record_batch(1, 5, &[(None, Some(b"y")), (None, Some(b"z"))]).unwrap();
        let fetch = MockFetchResponse::new()
            .records("a", 0, b0)
            .records("a", 0, b1.clone());
        let request = FetchRequest::default().with_topics(vec![
            FetchTopic::default()
                .with_topic_id(topic_id("a"))
                .with_partitions(vec![FetchPartition::default().with_fetch_offset(1)]),
        ]);
        let reply = fetch.respond(&received(request, FetchRequest::MAX_STABLE_VERSION));
        encodes_everywhere(body(&reply));
        let ResponseKind::Fetch(f) = body(&reply) else {
            panic!()
        };
        let p = &f.responses[0].partitions[0];
        assert_eq!(p.high_watermark, 3);
        assert_eq!(
            p.records.as_deref(),
            Some(&b1[..]),
            "only the batch reaching offset 1"
        );

        let offsets = MockOffsetFetchResponse::new().offset("a", 0, 7, None);
        let reply = offsets.respond(&received(
            OffsetFetchRequest::default().with_topics(None),
            7,
        ));
        let ResponseKind::OffsetFetch(o) = body(&reply) else {
            panic!()
        };
        assert_eq!(o.topics[0].partitions[0].committed_offset, 7);

        let join = MockJoinGroupResponse::new().respond(&received(
            JoinGroupRequest::default().with_protocol_type("consumer".into()),
            0,
        ));
        encodes_everywhere(body(&join));
    }

    /// Every builder's answer to a request at version v encodes at v.
    #[test]
    fn builders_fit_every_version() {
        fn check<R: Request + Clone>(builder: &dyn MockResponse, request: R) {
            let api = R::API_KEY;
            for v in api.versions().min..=api.versions().max {
                let reply = builder.respond(&received(request.clone(), v));
                let Action::Respond(r) = reply.action() else {
                    continue;
                };
                r.encode(&mut BytesMut::new(), v)
                    .unwrap_or_else(|e| panic!("{} v{v}: {e}", api.name()));
            }
        }
        let broker = crate::MockBroker::new(1).unwrap();
        check(
            &MockMetadataResponse::new()
                .broker_of(&broker)
                .topic("t", 2, 1),
            MetadataRequest::default().with_topics(None),
        );
        check(
            &MockProduceResponse::new().offset("t", 0, 5),
            ProduceRequest::default().with_topic_data(vec![
                TopicProduceData::default()
                    .with_name("t".into())
                    .with_partition_data(vec![PartitionProduceData::default()]),
            ]),
        );
        check(
            &MockListOffsetsResponse::new().offset("t", 0, -1, 9),
            ListOffsetsRequest::default().with_topics(vec![
                kring::protocol::messages::list_offsets::ListOffsetsTopic::default()
                    .with_name("t".into())
                    .with_partitions(vec![
                        kring::protocol::messages::list_offsets::ListOffsetsPartition::default()
                            .with_timestamp(-1),
                    ]),
            ]),
        );
        check(
            &MockFindCoordinatorResponse::new().coordinator_of("g", &broker),
            FindCoordinatorRequest::default()
                .with_key("g".into())
                .with_coordinator_keys(vec!["g".into()]),
        );
        check(
            &MockOffsetFetchResponse::new().offset("t", 0, 3, Some("m")),
            OffsetFetchRequest::default()
                .with_group_id("g".into())
                .with_topics(None)
                .with_groups(vec![
                    kring::protocol::messages::offset_fetch::OffsetFetchRequestGroup::default()
                        .with_group_id("g".into())
                        .with_topics(None),
                ]),
        );
        check(
            &MockOffsetCommitResponse::new(),
            OffsetCommitRequest::default(),
        );
        check(
            &MockApiVersionsResponse::new(),
            ApiVersionsRequest::default(),
        );
        check(
            &MockInitProducerIdResponse::new(),
            InitProducerIdRequest::default(),
        );
        check(
            &MockJoinGroupResponse::new(),
            JoinGroupRequest::default().with_protocol_type("consumer".into()),
        );
        check(&MockSyncGroupResponse::new(), SyncGroupRequest::default());
        check(&MockHeartbeatResponse::new(), HeartbeatRequest::default());
        check(&MockLeaveGroupResponse::new(), LeaveGroupRequest::default());
        check(
            &MockFetchResponse::new().records("t", 0, record_batch(0, 0, &[(None, None)]).unwrap()),
            FetchRequest::default().with_topics(vec![
                FetchTopic::default()
                    .with_topic("t".into())
                    .with_topic_id(topic_id("t"))
                    .with_partitions(vec![FetchPartition::default()]),
            ]),
        );
    }

    #[test]
    fn sequence_repeats_its_last_step() {
        let seq = MockSequence::new()
            .then(Reply::error(KafkaCode::NOT_COORDINATOR))
            .then(Reply::close());
        let r = received(HeartbeatRequest::default(), 0);
        assert!(matches!(seq.respond(&r).action(), Action::Error(_)));
        assert!(matches!(seq.respond(&r).action(), Action::Close));
        assert!(matches!(seq.respond(&r).action(), Action::Close));
        assert_eq!(seq.taken(), 3);
        assert!(MockSequence::new().respond(&r).is_pass());
    }

    #[test]
    fn ids_are_stable_and_nonzero() {
        assert_eq!(topic_id("x"), topic_id("x"));
        assert_ne!(topic_id("x"), topic_id("y"));
        assert!(!topic_id("").is_zero());
        assert_ne!(id_from(b"x", 1), id_from(b"x", 2));
    }
}
