//! The fake cluster's data: brokers, topics with their partitions' replicas, leaders
//! and logs, producer ids, groups. Pure data and the rules that change it; no sockets,
//! no waiting.
//!
//! Invariants:
//! - A partition's log is a run of stored batches with contiguous offsets from
//!   `log_start` (the first batch may begin before it, after DeleteRecords) up to the
//!   high watermark; every stored batch has had its base offset and partition leader
//!   epoch written by the cluster (the two header fields outside the CRC).
//! - Every leader change bumps the partition's leader epoch.
//! - Placement is a function of the live brokers and the topic's creation number.
//! - A producer with a transaction open on a partition has its first offset there in
//!   `open_txns` until its marker (a control batch) is appended; the last stable offset
//!   is the smallest such first offset (the high watermark when none is open).

use std::collections::{BTreeMap, VecDeque};

use bytes::{Bytes, BytesMut};
use kring::protocol::{KafkaCode, Uuid};
use kring::record::{Decompressor, RecordBatchRef};

use super::group::Group;
use crate::responses::id_from;

/// Settings of the fake cluster.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) cluster_id: String,
    pub(crate) default_partitions: i32,
    pub(crate) default_replication: i16,
    pub(crate) auto_create_topics: bool,
    pub(crate) auto_failover: bool,
    pub(crate) max_message_bytes: usize,
    /// The heartbeat interval KIP-848 members are told (`group.consumer.heartbeat.interval.ms`).
    pub(crate) consumer_heartbeat_interval_ms: i32,
}

#[derive(Debug, Clone)]
pub(crate) struct BrokerInfo {
    pub(crate) host: String,
    pub(crate) port: i32,
    pub(crate) up: bool,
}

/// One stored batch: its bytes as fetched, and the header fields looked up often.
#[derive(Debug, Clone)]
pub(crate) struct StoredBatch {
    pub(crate) base_offset: i64,
    /// The offset after its last record.
    pub(crate) next_offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) max_timestamp: i64,
    pub(crate) bytes: Bytes,
}

/// Sequence state of one idempotent producer on one partition (KIP-98).
#[derive(Debug, Clone, Default)]
pub(crate) struct ProducerSeq {
    epoch: i16,
    next_sequence: i32,
    /// The last five batches: (first sequence, last sequence, base offset).
    recent: VecDeque<(i32, i32, i64)>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Log {
    pub(crate) batches: Vec<StoredBatch>,
    pub(crate) log_start: i64,
    pub(crate) high_watermark: i64,
    producers: BTreeMap<i64, ProducerSeq>,
    /// Producers with a transaction open here: producer id → the offset of its first
    /// batch in the transaction.
    pub(crate) open_txns: BTreeMap<i64, i64>,
    /// Transactions aborted here, in the order of their markers.
    pub(crate) aborted: Vec<AbortedTxn>,
}

/// A transaction aborted on one partition: what a read_committed Fetch lists so the
/// consumer skips its batches (Kafka's `AbortedTxn` in the transaction index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AbortedTxn {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    /// The offset of its abort marker.
    pub(crate) last_offset: i64,
}

/// A validated batch waiting to be appended.
pub(crate) struct Incoming<'a> {
    batch: RecordBatchRef<'a>,
}

impl Incoming<'_> {
    /// The producer id and epoch of a transactional batch (`None` for others).
    pub(crate) fn transactional(&self) -> Option<(i64, i16)> {
        (self.batch.is_transactional() && !self.batch.is_control())
            .then(|| (self.batch.producer_id(), self.batch.producer_epoch()))
    }
}

/// What an append did.
pub(crate) enum Appended {
    /// Stored at this base offset.
    At(i64),
    /// A retry of a batch already stored at this base offset; nothing stored.
    Duplicate(i64),
}

impl Log {
    /// Parses and checks `records` (one or more v2 batches) without storing them.
    pub(crate) fn validate<'a>(
        records: &'a [u8],
        max_message_bytes: usize,
    ) -> Result<Vec<Incoming<'a>>, KafkaCode> {
        let mut out = Vec::new();
        let mut rest = records;
        while !rest.is_empty() {
            let (batch, tail) = match RecordBatchRef::parse(rest) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => return Err(KafkaCode::CORRUPT_MESSAGE),
                Err(kring::record::RecordError::UnsupportedMagic(_)) => {
                    return Err(KafkaCode::UNSUPPORTED_FOR_MESSAGE_FORMAT);
                }
                Err(_) => return Err(KafkaCode::CORRUPT_MESSAGE),
            };
            if batch.verify_crc().is_err() || batch.record_count() <= 0 {
                return Err(KafkaCode::CORRUPT_MESSAGE);
            }
            if batch.record_count() != batch.last_offset_delta().saturating_add(1) {
                return Err(KafkaCode::INVALID_RECORD);
            }
            if batch.as_bytes().len() > max_message_bytes {
                return Err(KafkaCode::MESSAGE_TOO_LARGE);
            }
            // Only the transaction coordinator writes markers (Kafka refuses control
            // batches from clients).
            if batch.is_control() {
                return Err(KafkaCode::INVALID_RECORD);
            }
            // A transactional batch needs a producer id (KIP-98).
            if batch.is_transactional() && batch.producer_id() < 0 {
                return Err(KafkaCode::INVALID_RECORD);
            }
            out.push(Incoming { batch });
            rest = tail;
        }
        if out.is_empty() {
            return Err(KafkaCode::CORRUPT_MESSAGE);
        }
        Ok(out)
    }

    /// Checks idempotent producers' sequence numbers for `batches`: the error, if any,
    /// or, when the first batch is a retry of one already stored, its base offset.
    pub(crate) fn check_sequences(
        &self,
        batches: &[Incoming<'_>],
    ) -> Result<Option<i64>, KafkaCode> {
        let mut expected: BTreeMap<i64, (i16, i32)> = BTreeMap::new();
        for (i, inc) in batches.iter().enumerate() {
            let b = &inc.batch;
            let pid = b.producer_id();
            if pid < 0 {
                continue;
            }
            let (epoch, seq) = (b.producer_epoch(), b.base_sequence());
            let last = seq.wrapping_add(b.last_offset_delta());
            let state = self.producers.get(&pid);
            let (known_epoch, next) = match expected.get(&pid) {
                Some(&(e, n)) => (Some(e), Some(n)),
                None => (state.map(|s| s.epoch), state.map(|s| s.next_sequence)),
            };
            match known_epoch {
                Some(e) if epoch < e => return Err(KafkaCode::INVALID_PRODUCER_EPOCH),
                Some(e) if epoch > e && seq != 0 => {
                    return Err(KafkaCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
                }
                Some(e) if epoch == e => {
                    if i == 0 {
                        if let Some(&(_, _, offset)) = state
                            .into_iter()
                            .flat_map(|s| s.recent.iter())
                            .find(|&&(first, l, _)| first == seq && l == last)
                        {
                            return Ok(Some(offset));
                        }
                    }
                    if next.is_some_and(|n| n != seq) {
                        return Err(KafkaCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
                    }
                }
                _ => {}
            }
            expected.insert(pid, (epoch, next_sequence(seq, b.record_count())));
        }
        Ok(None)
    }

    /// Appends checked batches: each gets the next offsets and `leader_epoch`. Returns
    /// the base offset of the first.
    pub(crate) fn append(&mut self, batches: &[Incoming<'_>], leader_epoch: i32) -> i64 {
        let first = self.high_watermark;
        for inc in batches {
            let b = &inc.batch;
            let base = self.high_watermark;
            let mut bytes = BytesMut::from(b.as_bytes());
            bytes[0..8].copy_from_slice(&base.to_be_bytes());
            bytes[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
            let next = base + i64::from(b.last_offset_delta()) + 1;
            self.batches.push(StoredBatch {
                base_offset: base,
                next_offset: next,
                leader_epoch,
                max_timestamp: b.max_timestamp(),
                bytes: bytes.freeze(),
            });
            self.high_watermark = next;
            let pid = b.producer_id();
            if inc.transactional().is_some() {
                self.open_txns.entry(pid).or_insert(base);
            }
            if pid >= 0 {
                let seq = b.base_sequence();
                let last = seq.wrapping_add(b.last_offset_delta());
                let state = self.producers.entry(pid).or_default();
                if state.epoch != b.producer_epoch() {
                    state.recent.clear();
                }
                state.epoch = b.producer_epoch();
                state.next_sequence = next_sequence(seq, b.record_count());
                state.recent.push_back((seq, last, base));
                if state.recent.len() > 5 {
                    state.recent.pop_front();
                }
            }
        }
        first
    }

    /// Appends the marker ending `producer_id`'s transaction here (a control batch of
    /// one commit or abort record, stamped with the producer's epoch, sequence -1, as
    /// the coordinator's WriteTxnMarkers writes it) and returns its offset. The
    /// producer's sequence state is left alone: the next transaction of the same epoch
    /// goes on from its last sequence. An abort of a transaction that wrote here is
    /// remembered for read_committed fetches.
    pub(crate) fn append_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
        timestamp: i64,
    ) -> Result<i64, kring::record::BuildError> {
        let options = kring::record::BatchOptions::default()
            .with_control(true)
            .with_transactional(true)
            .with_producer(producer_id, epoch, -1)
            .with_base_offset(self.high_watermark)
            .with_partition_leader_epoch(leader_epoch);
        let mut builder = kring::record::BatchBuilder::new(Vec::with_capacity(128), options)?;
        builder.append_control(
            timestamp,
            kring::record::ControlRecord::marker(commit, coordinator_epoch),
        )?;
        let sealed = builder.seal()?;
        let offset = self.high_watermark;
        self.batches.push(StoredBatch {
            base_offset: offset,
            next_offset: offset + 1,
            leader_epoch,
            max_timestamp: timestamp,
            bytes: Bytes::copy_from_slice(sealed.as_bytes()),
        });
        self.high_watermark = offset + 1;
        if let Some(first_offset) = self.open_txns.remove(&producer_id) {
            if !commit {
                self.aborted.push(AbortedTxn {
                    producer_id,
                    first_offset,
                    last_offset: offset,
                });
            }
        }
        Ok(offset)
    }

    /// The last stable offset: below it every transaction is decided (KIP-98).
    pub(crate) fn last_stable_offset(&self) -> i64 {
        self.open_txns
            .values()
            .copied()
            .min()
            .unwrap_or(self.high_watermark)
    }

    /// The aborted transactions a read_committed fetch of `[from, to)` must list:
    /// those whose marker is at or after `from` and which began before `to`.
    pub(crate) fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= from && a.first_offset < to)
            .copied()
            .collect()
    }

    /// Moves the log start to `offset` (at most the high watermark), dropping batches
    /// wholly before it.
    pub(crate) fn delete_before(&mut self, offset: i64) {
        let offset = offset.min(self.high_watermark);
        if offset <= self.log_start {
            return;
        }
        self.log_start = offset;
        self.batches.retain(|b| b.next_offset > offset);
        self.aborted.retain(|a| a.last_offset >= offset);
    }

    /// Cuts the log back to the last batch boundary at or below `offset` (what an
    /// unclean leader election does to the records the new leader never had), and
    /// returns the new log end.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> i64 {
        self.batches.retain(|b| b.next_offset <= offset);
        // Transactions are not replayed over a truncation: what began after the cut
        // is gone, and aborts whose markers were cut are forgotten.
        let end = self
            .batches
            .last()
            .map_or(self.log_start, |b| b.next_offset);
        self.open_txns.retain(|_, first| *first < end);
        self.aborted.retain(|a| a.last_offset < end);
        self.high_watermark = self
            .batches
            .last()
            .map_or(self.log_start, |b| b.next_offset)
            .max(self.log_start);
        self.high_watermark
    }

    /// Index of the batch holding `offset`.
    pub(crate) fn batch_index(&self, offset: i64) -> usize {
        self.batches.partition_point(|b| b.next_offset <= offset)
    }

    /// The first offset whose record timestamp is at least `timestamp`, with that
    /// timestamp and its batch's leader epoch.
    pub(crate) fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64, i32)> {
        let mut decompressor = Decompressor::default();
        let mut scratch = Vec::new();
        for b in &self.batches {
            if b.max_timestamp < timestamp {
                continue;
            }
            let Ok(batch) = RecordBatchRef::new(&b.bytes) else {
                continue;
            };
            if let Ok(records) = batch.decompress_records(&mut decompressor, &mut scratch) {
                for r in records.flatten() {
                    if r.timestamp() >= timestamp && r.offset() >= self.log_start {
                        return Some((r.offset(), r.timestamp(), b.leader_epoch));
                    }
                }
            }
        }
        None
    }

    /// The offset of the record with the largest timestamp (KIP-734), its timestamp
    /// and its batch's leader epoch.
    pub(crate) fn max_timestamp(&self) -> Option<(i64, i64, i32)> {
        let b = self.batches.iter().rev().max_by_key(|b| b.max_timestamp)?;
        let mut decompressor = Decompressor::default();
        let mut scratch = Vec::new();
        let batch = RecordBatchRef::new(&b.bytes).ok()?;
        let records = batch
            .decompress_records(&mut decompressor, &mut scratch)
            .ok()?;
        records
            .flatten()
            .filter(|r| r.timestamp() == b.max_timestamp)
            .map(|r| (r.offset(), r.timestamp(), b.leader_epoch))
            .next()
    }

    /// For OffsetForLeaderEpoch: the largest epoch at most `epoch` and the offset
    /// where the next epoch begins (or the high watermark).
    pub(crate) fn end_offset_for_epoch(&self, epoch: i32, current: i32) -> (i32, i64) {
        if epoch >= current {
            return (current, self.high_watermark);
        }
        let Some(found) = self
            .batches
            .iter()
            .map(|b| b.leader_epoch)
            .filter(|&e| e <= epoch)
            .max()
        else {
            return (-1, -1);
        };
        let end = self
            .batches
            .iter()
            .find(|b| b.leader_epoch > found)
            .map_or(self.high_watermark, |b| b.base_offset);
        (found, end)
    }
}

/// The sequence after a batch of `count` records starting at `seq`; sequences wrap
/// from `i32::MAX` to 0.
fn next_sequence(seq: i32, count: i32) -> i32 {
    ((i64::from(seq) + i64::from(count)) % (i64::from(i32::MAX) + 1)) as i32
}

#[derive(Debug, Clone)]
pub(crate) struct Partition {
    pub(crate) leader: i32,
    pub(crate) leader_epoch: i32,
    pub(crate) replicas: Vec<i32>,
    pub(crate) log: Log,
    /// The follower the leader names to a Fetch (v11+) that gives a rack (KIP-392), and
    /// which then serves fetches of it; `None`: only the leader serves.
    pub(crate) preferred_read_replica: Option<i32>,
}

#[derive(Debug, Clone)]
pub(crate) struct Topic {
    pub(crate) id: Uuid,
    pub(crate) partitions: Vec<Partition>,
    /// Configs set on the topic (overrides of [`TOPIC_CONFIG_DEFAULTS`]).
    pub(crate) configs: BTreeMap<String, String>,
}

/// The topic configs the fake cluster knows, with Kafka's defaults: a config not named
/// here is refused as unknown, as the broker does.
pub(crate) const TOPIC_CONFIG_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("compression.type", "producer"),
    ("delete.retention.ms", "86400000"),
    ("max.message.bytes", "1048588"),
    ("message.timestamp.type", "CreateTime"),
    ("min.cleanable.dirty.ratio", "0.5"),
    ("min.compaction.lag.ms", "0"),
    ("min.insync.replicas", "1"),
    ("retention.bytes", "-1"),
    ("retention.ms", "604800000"),
    ("segment.bytes", "1073741824"),
    ("segment.ms", "604800000"),
];

/// Committed offsets are per group.
#[derive(Debug, Clone)]
pub(crate) struct Committed {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: Option<String>,
}

/// Everything the cluster knows.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: Config,
    pub(crate) brokers: BTreeMap<i32, BrokerInfo>,
    pub(crate) topics: BTreeMap<String, Topic>,
    topics_created: u64,
    pub(crate) groups: BTreeMap<String, Group>,
    /// Dynamic broker configs by broker id (-1: the cluster-wide default).
    pub(crate) broker_configs: BTreeMap<i32, BTreeMap<String, String>>,
    pub(crate) coordinator_overrides: BTreeMap<String, i32>,
    pub(crate) next_producer_id: i64,
    /// The transaction coordinator's state, by transactional id.
    pub(crate) txns: BTreeMap<String, super::txn::Txn>,
    /// Every transaction that ended, oldest first (what tests read back).
    pub(crate) ended_txns: Vec<super::txn::EndedTxn>,
    pub(crate) member_seq: u64,
    pub(crate) closed: bool,
}

/// A topic as created (or, validating only, as it would be).
pub(crate) struct Created {
    pub(crate) id: Uuid,
    pub(crate) partitions: i32,
    pub(crate) replication: i16,
}

/// Why a topic could not be created.
pub(crate) struct CreateError {
    pub(crate) code: KafkaCode,
    pub(crate) message: String,
}

fn create_error(code: KafkaCode, message: impl Into<String>) -> CreateError {
    CreateError {
        code,
        message: message.into(),
    }
}

/// Kafka's topic name rule: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub(crate) fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl State {
    pub(crate) fn new(config: Config, brokers: BTreeMap<i32, BrokerInfo>) -> State {
        State {
            config,
            brokers,
            topics: BTreeMap::new(),
            topics_created: 0,
            groups: BTreeMap::new(),
            broker_configs: BTreeMap::new(),
            coordinator_overrides: BTreeMap::new(),
            next_producer_id: 1000,
            txns: BTreeMap::new(),
            ended_txns: Vec::new(),
            member_seq: 0,
            closed: false,
        }
    }

    pub(crate) fn is_up(&self, broker: i32) -> bool {
        self.brokers.get(&broker).is_some_and(|b| b.up)
    }

    pub(crate) fn live_brokers(&self) -> Vec<i32> {
        self.brokers
            .iter()
            .filter(|(_, b)| b.up)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Creates a topic. `assignment`, when given, lists each partition's replicas
    /// (leader first); otherwise partitions and replication fall back to the defaults
    /// when negative and replicas are placed round-robin over the live brokers.
    pub(crate) fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication: i16,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Created, CreateError> {
        if !valid_topic_name(name) {
            return Err(create_error(
                KafkaCode::INVALID_TOPIC_EXCEPTION,
                format!("topic name {name:?} is not valid"),
            ));
        }
        if self.topics.contains_key(name) {
            return Err(create_error(
                KafkaCode::TOPIC_ALREADY_EXISTS,
                format!("topic {name:?} already exists"),
            ));
        }
        let live = self.live_brokers();
        let replicas: Vec<Vec<i32>> = match assignment {
            Some(assignment) => {
                if assignment.is_empty() {
                    return Err(create_error(
                        KafkaCode::INVALID_REPLICA_ASSIGNMENT,
                        "empty replica assignment",
                    ));
                }
                for replicas in &assignment {
                    let mut sorted = replicas.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    if replicas.is_empty()
                        || sorted.len() != replicas.len()
                        || replicas.iter().any(|b| !self.brokers.contains_key(b))
                    {
                        return Err(create_error(
                            KafkaCode::INVALID_REPLICA_ASSIGNMENT,
                            format!("replicas {replicas:?} are not distinct known brokers"),
                        ));
                    }
                }
                assignment
            }
            None => {
                let partitions = if partitions == -1 {
                    self.config.default_partitions
                } else {
                    partitions
                };
                if partitions <= 0 {
                    return Err(create_error(
                        KafkaCode::INVALID_PARTITIONS,
                        format!("{partitions} partitions"),
                    ));
                }
                let replication = if replication == -1 {
                    self.config.default_replication.min(live.len() as i16)
                } else {
                    replication
                };
                if replication <= 0 || replication as usize > live.len() {
                    return Err(create_error(
                        KafkaCode::INVALID_REPLICATION_FACTOR,
                        format!(
                            "replication factor {replication} with {} live brokers",
                            live.len()
                        ),
                    ));
                }
                let n = live.len();
                let start = (self.topics_created % n as u64) as usize;
                (0..partitions as usize)
                    .map(|p| {
                        (0..replication as usize)
                            .map(|i| live[(start + p + i) % n])
                            .collect()
                    })
                    .collect()
            }
        };
        let replication = replicas[0].len() as i16;
        if validate_only {
            return Ok(Created {
                id: Uuid::ZERO,
                partitions: replicas.len() as i32,
                replication,
            });
        }
        self.topics_created += 1;
        let id = id_from(name.as_bytes(), self.topics_created);
        let created = Created {
            id,
            partitions: replicas.len() as i32,
            replication,
        };
        let topic = Topic {
            id,
            partitions: replicas
                .into_iter()
                .map(|replicas| {
                    let leader = replicas
                        .iter()
                        .copied()
                        .find(|r| self.is_up(*r))
                        .unwrap_or(-1);
                    Partition {
                        leader,
                        leader_epoch: 0,
                        replicas,
                        log: Log::default(),
                        preferred_read_replica: None,
                    }
                })
                .collect(),
            configs: BTreeMap::new(),
        };
        self.topics.insert(name.to_string(), topic);
        Ok(created)
    }

    /// Adds partitions to `topic` until it has `total`, placed round-robin over the
    /// live brokers with the topic's replication factor (or as `assignment` says).
    pub(crate) fn add_partitions(
        &mut self,
        topic: &str,
        total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<(), CreateError> {
        let live = self.live_brokers();
        let brokers: Vec<i32> = self.brokers.keys().copied().collect();
        let Some(t) = self.topics.get(topic) else {
            return Err(create_error(
                KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("topic {topic:?} does not exist"),
            ));
        };
        let current = t.partitions.len() as i32;
        if total <= current {
            return Err(create_error(
                KafkaCode::INVALID_PARTITIONS,
                format!(
                    "topic {topic:?} has {current} partitions, which is not fewer than the requested {total}"
                ),
            ));
        }
        let adding = (total - current) as usize;
        let replication = t.partitions.first().map_or(1, |p| p.replicas.len());
        let replicas: Vec<Vec<i32>> = match assignment {
            Some(a) => {
                let distinct_known = |r: &Vec<i32>| {
                    let mut s = r.clone();
                    s.sort_unstable();
                    s.dedup();
                    !r.is_empty() && s.len() == r.len() && r.iter().all(|b| brokers.contains(b))
                };
                if a.len() != adding || !a.iter().all(distinct_known) {
                    return Err(create_error(
                        KafkaCode::INVALID_REPLICA_ASSIGNMENT,
                        format!(
                            "{adding} new partitions need as many lists of distinct known brokers"
                        ),
                    ));
                }
                a
            }
            None => {
                if live.len() < replication {
                    return Err(create_error(
                        KafkaCode::INVALID_REPLICATION_FACTOR,
                        format!(
                            "replication factor {replication} with {} live brokers",
                            live.len()
                        ),
                    ));
                }
                (0..adding)
                    .map(|i| {
                        (0..replication)
                            .map(|r| live[(current as usize + i + r) % live.len()])
                            .collect()
                    })
                    .collect()
            }
        };
        if validate_only {
            return Ok(());
        }
        let up: Vec<i32> = live;
        if let Some(t) = self.topics.get_mut(topic) {
            for r in replicas {
                let leader = r.iter().copied().find(|b| up.contains(b)).unwrap_or(-1);
                t.partitions.push(Partition {
                    leader,
                    leader_epoch: 0,
                    replicas: r,
                    log: Log::default(),
                    preferred_read_replica: None,
                });
            }
        }
        Ok(())
    }

    /// The topic with id `id`.
    pub(crate) fn topic_by_id(&self, id: Uuid) -> Option<(&String, &Topic)> {
        if id.is_zero() {
            return None;
        }
        self.topics.iter().find(|(_, t)| t.id == id)
    }

    /// Marks `broker` down and, with auto failover, hands its partitions to their next
    /// live replica (leaderless when there is none).
    pub(crate) fn broker_down(&mut self, broker: i32) {
        if let Some(b) = self.brokers.get_mut(&broker) {
            b.up = false;
        }
        let failover = self.config.auto_failover;
        let live: Vec<i32> = self.live_brokers();
        for topic in self.topics.values_mut() {
            for p in &mut topic.partitions {
                if p.leader == broker {
                    p.leader = if failover {
                        p.replicas
                            .iter()
                            .copied()
                            .find(|r| live.contains(r))
                            .unwrap_or(-1)
                    } else {
                        -1
                    };
                    p.leader_epoch += 1;
                }
            }
        }
    }

    /// Marks `broker` up; leaderless partitions it replicates get it as leader.
    pub(crate) fn broker_up(&mut self, broker: i32) {
        if let Some(b) = self.brokers.get_mut(&broker) {
            b.up = true;
        }
        for topic in self.topics.values_mut() {
            for p in &mut topic.partitions {
                if p.leader == -1 && p.replicas.contains(&broker) {
                    p.leader = broker;
                    p.leader_epoch += 1;
                }
            }
        }
    }

    /// The broker coordinating `key` (a group or transactional id): an override if it
    /// is up, otherwise a hash of the key over all brokers, moving on to the next live
    /// one when that broker is down. `None` when every broker is down.
    pub(crate) fn coordinator(&self, key: &str) -> Option<i32> {
        if let Some(&id) = self.coordinator_overrides.get(key) {
            if self.is_up(id) {
                return Some(id);
            }
        }
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        if ids.is_empty() {
            return None;
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let start = (h % ids.len() as u64) as usize;
        (0..ids.len())
            .map(|i| ids[(start + i) % ids.len()])
            .find(|&id| self.is_up(id))
    }

    /// A new producer id.
    pub(crate) fn allocate_producer_id(&mut self) -> i64 {
        let id = self.next_producer_id;
        self.next_producer_id += 1;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_batch;
    use kring::record::{BatchBuilder, BatchOptions};

    fn idempotent_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
        let mut b = BatchBuilder::new(
            Vec::with_capacity(1024),
            BatchOptions::default().with_producer(pid, epoch, seq),
        )
        .unwrap();
        for i in 0..n {
            b.append(i as i64, None, Some(b"v"), &[]).unwrap();
        }
        Bytes::copy_from_slice(b.seal().unwrap().as_bytes())
    }

    #[test]
    fn appends_assign_offsets_and_epochs() {
        let mut log = Log::default();
        let one = record_batch(77, 5, &[(None, Some(b"a")), (None, Some(b"b"))]).unwrap();
        let checked = Log::validate(&one, 1 << 20).unwrap();
        assert_eq!(log.append(&checked, 3), 0);
        let checked = Log::validate(&one, 1 << 20).unwrap();
        assert_eq!(log.append(&checked, 4), 2);
        assert_eq!(log.high_watermark, 4);
        let stored = RecordBatchRef::new(&log.batches[1].bytes).unwrap();
        assert_eq!(stored.base_offset(), 2);
        assert_eq!(stored.partition_leader_epoch(), 4);
        stored.verify_crc().unwrap();
        assert_eq!(log.batch_index(3), 1);
        assert_eq!(log.end_offset_for_epoch(3, 4), (3, 2));
        assert_eq!(log.end_offset_for_epoch(1, 4), (-1, -1));
        // An unclean election cuts back to a batch boundary.
        let mut cut = log.clone();
        assert_eq!(cut.truncate_to(3), 2);
        assert_eq!(cut.batches.len(), 1);
        assert_eq!(cut.end_offset_for_epoch(3, 5), (3, 2));
        log.delete_before(3);
        assert_eq!((log.log_start, log.batches.len()), (3, 1));
    }

    #[test]
    fn rejects_corrupt_batches() {
        let mut bad = record_batch(0, 0, &[(None, Some(b"x"))]).unwrap().to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(
            Log::validate(&bad, 1 << 20).err(),
            Some(KafkaCode::CORRUPT_MESSAGE)
        );
        assert_eq!(
            Log::validate(&bad[..20], 1 << 20).err(),
            Some(KafkaCode::CORRUPT_MESSAGE)
        );
        assert_eq!(
            Log::validate(&[], 1 << 20).err(),
            Some(KafkaCode::CORRUPT_MESSAGE)
        );
        let ok = record_batch(0, 0, &[(None, Some(&[0u8; 100][..]))]).unwrap();
        assert_eq!(
            Log::validate(&ok, 50).err(),
            Some(KafkaCode::MESSAGE_TOO_LARGE)
        );
    }

    #[test]
    fn idempotent_sequences() {
        let mut log = Log::default();
        let first = idempotent_batch(7, 0, 0, 3);
        let v = Log::validate(&first, 1 << 20).unwrap();
        assert_eq!(log.check_sequences(&v).unwrap(), None);
        log.append(&v, 0);
        // A retry of the same batch is answered with its offset and not stored again.
        assert_eq!(log.check_sequences(&v).unwrap(), Some(0));
        let gap = idempotent_batch(7, 0, 5, 1);
        let v = Log::validate(&gap, 1 << 20).unwrap();
        assert_eq!(
            log.check_sequences(&v).err(),
            Some(KafkaCode::OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        let next = idempotent_batch(7, 0, 3, 1);
        let v = Log::validate(&next, 1 << 20).unwrap();
        assert_eq!(log.check_sequences(&v).unwrap(), None);
        let stale = idempotent_batch(7, -1, 0, 1);
        let v = Log::validate(&stale, 1 << 20).unwrap();
        assert!(log.check_sequences(&v).is_err());
        assert_eq!(next_sequence(i32::MAX, 1), 0);
    }

    fn transactional_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
        let mut b = BatchBuilder::new(
            Vec::with_capacity(1024),
            BatchOptions::default()
                .with_producer(pid, epoch, seq)
                .with_transactional(true),
        )
        .unwrap();
        for i in 0..n {
            b.append(i as i64, None, Some(b"v"), &[]).unwrap();
        }
        Bytes::copy_from_slice(b.seal().unwrap().as_bytes())
    }

    #[test]
    fn markers_end_transactions_and_move_the_last_stable_offset() {
        let mut log = Log::default();
        let plain = record_batch(0, 0, &[(None, Some(b"a"))]).unwrap();
        log.append(&Log::validate(&plain, 1 << 20).unwrap(), 0);
        let t = transactional_batch(7, 0, 0, 2);
        log.append(&Log::validate(&t, 1 << 20).unwrap(), 0);
        assert_eq!((log.high_watermark, log.last_stable_offset()), (3, 1));
        // An abort: the marker at 3, the transaction listed for offsets 1..=3.
        assert_eq!(log.append_marker(7, 0, false, 0, 0, 5).unwrap(), 3);
        assert_eq!(log.last_stable_offset(), 4);
        assert_eq!(
            log.aborted_between(0, 4),
            vec![AbortedTxn {
                producer_id: 7,
                first_offset: 1,
                last_offset: 3
            }]
        );
        assert!(log.aborted_between(4, 10).is_empty());
        let marker = RecordBatchRef::new(&log.batches[2].bytes).unwrap();
        marker.verify_crc().unwrap();
        assert!(marker.is_control() && marker.is_transactional());
        assert_eq!(marker.base_offset(), 3);
        // The marker leaves the sequences alone: the next transaction goes on from 2.
        let next = transactional_batch(7, 0, 2, 1);
        let v = Log::validate(&next, 1 << 20).unwrap();
        assert_eq!(log.check_sequences(&v).unwrap(), None);
        log.append(&v, 0);
        assert_eq!(log.append_marker(7, 0, true, 0, 0, 6).unwrap(), 5);
        assert_eq!(log.aborted.len(), 1, "a commit is not listed");
        // Clients may not write markers.
        assert_eq!(
            Log::validate(&log.batches[2].bytes, 1 << 20).err(),
            Some(KafkaCode::INVALID_RECORD)
        );
    }
}
