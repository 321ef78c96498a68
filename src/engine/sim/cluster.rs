//! The simulation's cluster: a sans-IO model of a few Kafka brokers serving one topic,
//! strict where the client's correctness is at stake. It answers decoded requests with
//! Kafka's rules — leadership per partition (moved on command, the leader epoch bumped),
//! one replicated log per partition, idempotent producers' sequences checked as
//! `ProducerStateManager` does (duplicates of the last five batches answered with the
//! original offsets, gaps refused, a new epoch starting at 0, old epochs fenced), fetch
//! sessions (KIP-227) and long polls. Faults it is told to inject: retriable produce
//! errors, with or without the write having happened, partitions short of in-sync
//! replicas (every write refused while it lasts), and forgotten fetch sessions.
//!
//! Deterministic: no clock, no random numbers of its own; everything it does is a
//! function of the requests, the time passed in and the faults it is handed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::engine::produce::partition::increment_sequence;
use crate::protocol::messages::api_versions::ApiVersion;
use crate::protocol::messages::fetch::{FetchableTopicResponse, PartitionData};
use crate::protocol::messages::init_producer_id::InitProducerIdResponse;
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use crate::protocol::messages::metadata::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use crate::protocol::messages::produce::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use crate::protocol::messages::{
    ApiKey, ApiVersionsResponse, FetchRequest, FetchResponse, InitProducerIdRequest,
    ListOffsetsRequest, ListOffsetsResponse, MetadataResponse, ProduceRequest, ProduceResponse,
};
use crate::protocol::{KafkaCode, RequestKind, ResponseKind, Uuid};
use crate::record::RecordBatchRef;

/// How a produce request is answered this time (chosen by the simulation's faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProduceFault {
    None,
    /// A retriable error; nothing written (NOT_ENOUGH_REPLICAS).
    RefuseRetriable,
    /// Written, then answered with a retriable error (REQUEST_TIMED_OUT: replication
    /// was slow): the client cannot know the write happened.
    WriteThenTimeOut,
}

/// What the cluster does with a request.
#[derive(Debug)]
pub(super) enum Reply {
    Respond(ResponseKind),
    /// A fetch with nothing to return yet: answer it when data arrives or at the deadline.
    Park(FetchRequest),
}

#[derive(Debug)]
struct Stored {
    next_offset: i64,
    bytes: Bytes,
}

/// Sequence state of one idempotent producer on one partition (KIP-98).
#[derive(Debug, Clone)]
struct ProducerSeq {
    epoch: i16,
    last_sequence: i32,
    /// The last five batches: (first sequence, last sequence, base offset).
    recent: VecDeque<(i32, i32, i64)>,
}

#[derive(Debug)]
struct Partition {
    leader: i32,
    leader_epoch: i32,
    log: Vec<Stored>,
    next_offset: i64,
    producers: BTreeMap<i64, ProducerSeq>,
    /// Its in-sync replicas are fewer than `min.insync.replicas`: every write is refused
    /// (NOT_ENOUGH_REPLICAS, as Kafka refuses a write with acks=all, which the simulated
    /// producer always uses) until they catch up.
    short_of_replicas: bool,
}

/// A fetch session (KIP-227): the partitions it holds and their fetch offsets.
#[derive(Debug, Default)]
struct Session {
    epoch: i32,
    partitions: BTreeMap<i32, i64>,
}

/// The cluster.
#[derive(Debug)]
pub(super) struct SimCluster {
    pub brokers: Vec<i32>,
    pub topic: String,
    pub topic_id: Uuid,
    partitions: Vec<Partition>,
    next_producer_id: i64,
    sessions: BTreeMap<i32, Session>,
    next_session: i32,
    /// What it did, for the run's trace.
    pub events: Vec<String>,
    /// Whether a produce refused for want of leadership names the partition's leader
    /// and its endpoint (KIP-951, Produce v10 and later), as Kafka 3.7 and later do.
    pub names_leaders: bool,
    /// Refusals that named a leader so far: every fourth names none (-1, -1, no
    /// endpoint), as a broker whose metadata has no leader for the partition does.
    refusals_naming: u64,
}

impl SimCluster {
    pub fn new(brokers: i32, partitions: i32) -> Self {
        SimCluster {
            brokers: (1..=brokers).collect(),
            topic: "sim".into(),
            topic_id: Uuid([7; 16]),
            partitions: (0..partitions)
                .map(|p| Partition {
                    leader: 1 + p % brokers,
                    leader_epoch: 0,
                    log: Vec::new(),
                    next_offset: 0,
                    producers: BTreeMap::new(),
                    short_of_replicas: false,
                })
                .collect(),
            next_producer_id: 1000,
            sessions: BTreeMap::new(),
            next_session: 1,
            events: Vec::new(),
            names_leaders: false,
            refusals_naming: 0,
        }
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// The end of a partition's log (its high watermark: every write is replicated).
    pub fn log_end(&self, partition: usize) -> i64 {
        self.partitions[partition].next_offset
    }

    /// Every stored batch of a partition, in offset order.
    pub fn log(&self, partition: usize) -> impl Iterator<Item = &Bytes> {
        self.partitions[partition].log.iter().map(|s| &s.bytes)
    }

    /// Moves a partition's leadership to `broker` (a leader election).
    pub fn move_leader(&mut self, partition: usize, broker: i32) {
        let p = &mut self.partitions[partition];
        if p.leader != broker {
            p.leader = broker;
            p.leader_epoch += 1;
        }
    }

    /// Starts or ends a spell of `partition` refusing writes for want of in-sync replicas.
    pub fn set_short_of_replicas(&mut self, partition: usize, short: bool) {
        if let Some(p) = self.partitions.get_mut(partition) {
            p.short_of_replicas = short;
        }
    }

    /// Forgets every fetch session (a broker restart, or session eviction).
    pub fn forget_sessions(&mut self) {
        self.sessions.clear();
    }

    /// Answers one request that arrived at `broker`.
    pub fn handle(
        &mut self,
        broker: i32,
        version: i16,
        request: RequestKind,
        fault: ProduceFault,
    ) -> Option<Reply> {
        let response = match request {
            RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions()),
            RequestKind::Metadata(_) => ResponseKind::Metadata(self.metadata()),
            RequestKind::InitProducerId(r) => {
                ResponseKind::InitProducerId(self.init_producer_id(&r))
            }
            RequestKind::Produce(r) => ResponseKind::Produce(self.produce(broker, &r, fault)),
            RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(self.list_offsets(broker, &r)),
            RequestKind::Fetch(r) => return Some(self.fetch(broker, version, r, false)),
            _ => return None,
        };
        Some(Reply::Respond(response))
    }

    fn metadata(&self) -> MetadataResponse {
        let partitions = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, p)| {
                MetadataResponsePartition::default()
                    .with_partition_index(i as i32)
                    .with_leader_id(p.leader)
                    .with_leader_epoch(p.leader_epoch)
                    .with_replica_nodes(self.brokers.clone())
                    .with_isr_nodes(self.brokers.clone())
            })
            .collect();
        MetadataResponse::default()
            .with_cluster_id(Some("sim".into()))
            .with_controller_id(1)
            .with_brokers(
                self.brokers
                    .iter()
                    .map(|&b| {
                        MetadataResponseBroker::default()
                            .with_node_id(b)
                            .with_host("sim".into())
                            .with_port(b)
                    })
                    .collect(),
            )
            .with_topics(vec![
                MetadataResponseTopic::default()
                    .with_name(Some(self.topic.clone()))
                    .with_topic_id(self.topic_id)
                    .with_partitions(partitions),
            ])
    }

    /// Kafka's rule: without a transactional id, always a new producer id at epoch 0,
    /// whatever id and epoch the request names (only a transaction coordinator bumps an
    /// epoch).
    fn init_producer_id(&mut self, r: &InitProducerIdRequest) -> InitProducerIdResponse {
        let (id, epoch) = if r.transactional_id.is_none() || r.producer_id < 0 {
            self.next_producer_id += 1;
            (self.next_producer_id, 0)
        } else {
            (r.producer_id, r.producer_epoch.saturating_add(1))
        };
        InitProducerIdResponse::default()
            .with_producer_id(id)
            .with_producer_epoch(epoch)
    }

    fn produce(&mut self, broker: i32, r: &ProduceRequest, fault: ProduceFault) -> ProduceResponse {
        let mut topics = Vec::new();
        let mut named = BTreeSet::new();
        for t in &r.topic_data {
            let mut answers = Vec::new();
            for pd in &t.partition_data {
                let (code, base_offset) = if t.name != self.topic {
                    (KafkaCode::UNKNOWN_TOPIC_OR_PARTITION, -1)
                } else {
                    self.produce_partition(broker, pd.index, pd.records.as_ref(), fault)
                };
                let mut answer = PartitionProduceResponse::default()
                    .with_index(pd.index)
                    .with_error_code(code.code())
                    .with_base_offset(base_offset)
                    .with_log_append_time_ms(-1);
                if code == KafkaCode::NOT_LEADER_OR_FOLLOWER
                    && let Some(leader) = self.leader_to_name(pd.index)
                {
                    if leader.leader_id >= 0 {
                        named.insert(leader.leader_id);
                    }
                    answer = answer.with_current_leader(leader);
                }
                answers.push(answer);
            }
            topics.push(
                TopicProduceResponse::default()
                    .with_name(t.name.clone())
                    .with_partition_responses(answers),
            );
        }
        let endpoints = named
            .into_iter()
            .map(|id| {
                NodeEndpoint::default()
                    .with_node_id(id)
                    .with_host("sim".into())
                    .with_port(id)
            })
            .collect();
        ProduceResponse::default()
            .with_responses(topics)
            .with_node_endpoints(endpoints)
    }

    /// The leader a refusal for want of leadership names (KIP-951), if this cluster
    /// names leaders: the partition's, or none (-1, -1) every fourth time.
    fn leader_to_name(&mut self, index: i32) -> Option<LeaderIdAndEpoch> {
        let p = self
            .partitions
            .get(index as usize)
            .filter(|_| self.names_leaders)?;
        self.refusals_naming += 1;
        let (id, epoch) = if self.refusals_naming % 4 == 0 {
            (-1, -1)
        } else {
            (p.leader, p.leader_epoch)
        };
        Some(
            LeaderIdAndEpoch::default()
                .with_leader_id(id)
                .with_leader_epoch(epoch),
        )
    }

    fn produce_partition(
        &mut self,
        broker: i32,
        index: i32,
        records: Option<&Bytes>,
        fault: ProduceFault,
    ) -> (KafkaCode, i64) {
        let Some(p) = self.partitions.get_mut(index as usize) else {
            return (KafkaCode::UNKNOWN_TOPIC_OR_PARTITION, -1);
        };
        if p.leader != broker {
            return (KafkaCode::NOT_LEADER_OR_FOLLOWER, -1);
        }
        if fault == ProduceFault::RefuseRetriable || p.short_of_replicas {
            return (KafkaCode::NOT_ENOUGH_REPLICAS, -1);
        }
        let Some(bytes) = records else {
            return (KafkaCode::CORRUPT_MESSAGE, -1);
        };
        let batch = match RecordBatchRef::new(bytes) {
            Ok(b) if b.verify_crc().is_ok() && b.record_count() > 0 => b,
            _ => return (KafkaCode::CORRUPT_MESSAGE, -1),
        };
        let described = format!(
            "p{index}@b{broker}: pid {} epoch {} seq {}+{}",
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence(),
            batch.record_count()
        );
        let checked = p.check_sequence(&batch);
        self.events.push(format!(
            "{described}: {checked:?} {fault:?} (end {})",
            p.next_offset
        ));
        match checked {
            Err(code) => (code, -1),
            // A retry of a batch already written: the original offset, as Kafka answers.
            Ok(Some(base_offset)) => (KafkaCode::NONE, base_offset),
            Ok(None) => {
                let base_offset = p.append(&batch);
                match fault {
                    ProduceFault::WriteThenTimeOut => (KafkaCode::REQUEST_TIMED_OUT, -1),
                    _ => (KafkaCode::NONE, base_offset),
                }
            }
        }
    }

    fn list_offsets(&self, broker: i32, r: &ListOffsetsRequest) -> ListOffsetsResponse {
        let topics = r
            .topics
            .iter()
            .map(|t| {
                let partitions =
                    t.partitions
                        .iter()
                        .map(|lp| {
                            let answer = ListOffsetsPartitionResponse::default()
                                .with_partition_index(lp.partition_index);
                            match self.partitions.get(lp.partition_index as usize) {
                                Some(p) if p.leader == broker => answer
                                    .with_offset(if lp.timestamp == -2 { 0 } else { p.next_offset })
                                    .with_timestamp(-1),
                                Some(_) => {
                                    answer.with_error_code(KafkaCode::NOT_LEADER_OR_FOLLOWER.code())
                                }
                                None => answer
                                    .with_error_code(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code()),
                            }
                        })
                        .collect();
                ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
        ListOffsetsResponse::default().with_topics(topics)
    }

    /// Answers a fetch, or parks it when it has nothing to return and may wait. With
    /// `expired` (its long poll ran out) it is answered whatever it holds.
    pub fn fetch(&mut self, broker: i32, version: i16, r: FetchRequest, expired: bool) -> Reply {
        let wanted = match self.session_view(&r) {
            Ok(w) => w,
            Err(code) => {
                return Reply::Respond(ResponseKind::Fetch(
                    FetchResponse::default().with_error_code(code.code()),
                ));
            }
        };
        let mut answers = Vec::new();
        let mut any_data = false;
        for (index, offset, max_bytes) in &wanted {
            let answer = self.fetch_partition(broker, *index, *offset, *max_bytes);
            any_data |=
                answer.records.as_ref().is_some_and(|b| !b.is_empty()) || answer.error_code != 0;
            answers.push((answer, *offset));
        }
        if !any_data && !expired && r.max_wait_ms > 0 {
            return Reply::Park(r);
        }
        let session_id = self.commit_session(&r, &wanted);
        let incremental = r.session_id != 0;
        let partitions: Vec<PartitionData> = answers
            .into_iter()
            .filter(|(a, _)| {
                !incremental
                    || a.error_code != 0
                    || a.records.as_ref().is_some_and(|b| !b.is_empty())
            })
            .map(|(a, _)| a)
            .collect();
        let topic = if version >= 13 {
            FetchableTopicResponse::default().with_topic_id(self.topic_id)
        } else {
            FetchableTopicResponse::default().with_topic(self.topic.clone())
        };
        Reply::Respond(ResponseKind::Fetch(
            FetchResponse::default()
                .with_session_id(session_id)
                .with_responses(if partitions.is_empty() {
                    Vec::new()
                } else {
                    vec![topic.with_partitions(partitions)]
                }),
        ))
    }

    /// Whether a parked fetch can be answered now (data arrived for one of its partitions).
    pub fn fetch_ready(&self, broker: i32, r: &FetchRequest) -> bool {
        let Ok(wanted) = self.session_view(r) else {
            return true;
        };
        wanted.iter().any(|&(index, offset, _)| {
            self.partitions
                .get(index as usize)
                .is_none_or(|p| p.leader != broker || offset != p.next_offset)
        })
    }

    /// The (partition, offset, max bytes) a fetch asks for, its session applied.
    fn session_view(&self, r: &FetchRequest) -> Result<Vec<(i32, i64, i32)>, KafkaCode> {
        let sent: Vec<(i32, i64, i32)> = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| (p.partition, p.fetch_offset, p.partition_max_bytes))
            .collect();
        if r.session_id == 0 {
            return Ok(sent);
        }
        let Some(session) = self.sessions.get(&r.session_id) else {
            return Err(KafkaCode::FETCH_SESSION_ID_NOT_FOUND);
        };
        if r.session_epoch != session.epoch + 1 {
            return Err(KafkaCode::INVALID_FETCH_SESSION_EPOCH);
        }
        let forgotten: BTreeSet<i32> = r
            .forgotten_topics_data
            .iter()
            .flat_map(|f| f.partitions.iter().copied())
            .collect();
        let mut all: BTreeMap<i32, (i64, i32)> = session
            .partitions
            .iter()
            .filter(|(p, _)| !forgotten.contains(p))
            .map(|(&p, &o)| (p, (o, 1 << 20)))
            .collect();
        for (p, o, m) in sent {
            all.insert(p, (o, m));
        }
        Ok(all.into_iter().map(|(p, (o, m))| (p, o, m)).collect())
    }

    /// Records what the session now holds; returns the session id to answer with.
    fn commit_session(&mut self, r: &FetchRequest, wanted: &[(i32, i64, i32)]) -> i32 {
        let id = match (r.session_id, r.session_epoch) {
            (0, 0) => {
                self.next_session += 1;
                self.next_session
            }
            (0, _) => return 0,
            (id, _) => id,
        };
        let session = self.sessions.entry(id).or_default();
        session.epoch = if r.session_id == 0 {
            0
        } else {
            r.session_epoch
        };
        session.partitions = wanted.iter().map(|&(p, o, _)| (p, o)).collect();
        id
    }

    fn fetch_partition(
        &self,
        broker: i32,
        index: i32,
        offset: i64,
        max_bytes: i32,
    ) -> PartitionData {
        let answer = PartitionData::default().with_partition_index(index);
        let Some(p) = self.partitions.get(index as usize) else {
            return answer.with_error_code(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code());
        };
        if p.leader != broker {
            return answer.with_error_code(KafkaCode::NOT_LEADER_OR_FOLLOWER.code());
        }
        if offset > p.next_offset || offset < 0 {
            return answer.with_error_code(KafkaCode::OFFSET_OUT_OF_RANGE.code());
        }
        let mut out = BytesMut::new();
        for s in p.log.iter().filter(|s| s.next_offset > offset) {
            if !out.is_empty() && out.len() + s.bytes.len() > max_bytes.max(1) as usize {
                break;
            }
            out.extend_from_slice(&s.bytes);
        }
        answer
            .with_high_watermark(p.next_offset)
            .with_last_stable_offset(p.next_offset)
            .with_log_start_offset(0)
            .with_records(Some(out.freeze()))
    }
}

impl Partition {
    /// Kafka's sequence rules: `Ok(Some(offset))` for a duplicate of a recent batch,
    /// `Ok(None)` to append, or the error.
    fn check_sequence(&self, batch: &RecordBatchRef<'_>) -> Result<Option<i64>, KafkaCode> {
        let pid = batch.producer_id();
        if pid < 0 {
            return Ok(None);
        }
        let (epoch, first) = (batch.producer_epoch(), batch.base_sequence());
        let last = increment_sequence(first, batch.record_count() - 1);
        let Some(state) = self.producers.get(&pid) else {
            // No state for the producer: any sequence is accepted.
            return Ok(None);
        };
        if epoch < state.epoch {
            return Err(KafkaCode::INVALID_PRODUCER_EPOCH);
        }
        if epoch == state.epoch {
            if let Some(&(_, _, offset)) = state
                .recent
                .iter()
                .find(|(f, l, _)| *f == first && *l == last)
            {
                return Ok(Some(offset));
            }
            if first != increment_sequence(state.last_sequence, 1) {
                return Err(KafkaCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
            }
        } else if first != 0 {
            return Err(KafkaCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
        }
        Ok(None)
    }

    fn append(&mut self, batch: &RecordBatchRef<'_>) -> i64 {
        let base_offset = self.next_offset;
        let count = i64::from(batch.record_count());
        let mut bytes = batch.as_bytes().to_vec();
        // The base offset is outside the CRC: the broker writes it.
        bytes[..8].copy_from_slice(&base_offset.to_be_bytes());
        self.log.push(Stored {
            next_offset: base_offset + count,
            bytes: Bytes::from(bytes),
        });
        self.next_offset += count;
        let pid = batch.producer_id();
        if pid >= 0 {
            let first = batch.base_sequence();
            let last = increment_sequence(first, batch.record_count() - 1);
            let state = self.producers.entry(pid).or_insert(ProducerSeq {
                epoch: batch.producer_epoch(),
                last_sequence: -1,
                recent: VecDeque::new(),
            });
            if state.epoch != batch.producer_epoch() {
                state.epoch = batch.producer_epoch();
                state.recent.clear();
            }
            state.last_sequence = last;
            state.recent.push_back((first, last, base_offset));
            if state.recent.len() > 5 {
                state.recent.pop_front();
            }
        }
        base_offset
    }
}

/// Every API the simulation answers, at the versions this crate speaks.
fn api_versions() -> ApiVersionsResponse {
    let apis = [
        ApiKey::ApiVersions,
        ApiKey::Metadata,
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::InitProducerId,
    ];
    ApiVersionsResponse::default().with_api_keys(
        apis.iter()
            .map(|a| {
                ApiVersion::default()
                    .with_api_key(a.key())
                    .with_min_version(a.versions().min)
                    .with_max_version(a.max_stable_version())
            })
            .collect(),
    )
}

/// When a parked fetch must be answered whatever it holds.
pub(super) fn fetch_deadline(now: Instant, r: &FetchRequest) -> Instant {
    now + std::time::Duration::from_millis(r.max_wait_ms.max(0) as u64)
}
