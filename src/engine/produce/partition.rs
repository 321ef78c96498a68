//! One partition of the producer, sans-IO: the batch being written in place, sealed
//! batches waiting for the sink, batches on the wire, and the idempotence rules that
//! tie them together (KIP-98, KIP-360). Every rule is a method here; its fields are
//! private.
//!
//! The state sits behind one mutex ([`ProducePartition`]): appending threads take it to
//! write a record, the owning sink to drain and settle. It is the only structure a
//! user's thread and a worker share on the produce path (as franz-go's `recBuf`).
//!
//! Invariants:
//! - A record is copied once, into its final place in the open batch. A batch sealed
//!   filling at most half of its arena is then copied once more, whole, into a buffer
//!   of its own size, so that the arena is free again ([`Arena::smaller_home`]).
//! - Batches are sealed in one place, [`PartitionState::seal`]: by the appending thread
//!   when a batch is full, by the sink when linger expires or a flush asks.
//! - With idempotence, sequence numbers are assigned when a batch is first sent, in
//!   queue order, so a batch that expires unsent leaves no gap; they wrap to 0 after
//!   `i32::MAX` as Kafka's do. A batch that comes back for a retry goes back to the head
//!   of its queue in sequence order, and the partition sends nothing new until every
//!   batch still in flight has answered.
//! - Until the broker acknowledged a batch of the partition in the current epoch, one
//!   batch at a time is in flight: a broker without state for the producer accepts any
//!   first sequence, so a second batch could overtake a first that failed.
//! - A sealed batch's memory stays with its `Bytes` until every request carrying it is
//!   done, so a buffer is never reused while I/O may still read it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::arenas::{ArenaPools, next_class};
use super::completion::{
    BatchAck, BatchShared, ReportScope, TagReports, TaggedBatch, TaggedRecord,
};
use super::failures::DeliveryFailures;
use super::queued::QueuedRecords;
use super::wake::Wake;
use crate::buf::{ChargedBuf, PooledBuf};
use crate::error::Error;
use crate::protocol::KafkaCode;
use crate::record::{
    BATCH_HEADER_LEN, BatchBuilder, BatchOptions, BuildError, Compression, Compressor,
    Decompressor, Header, RecordBatchRef, SealedBatch, record_encoded_len,
};

/// The memory a batch is written into.
#[derive(Debug)]
pub(crate) enum Arena {
    /// A pooled buffer of one of the arena classes (16 KiB up to `batch.size`), charged
    /// to `buffer.memory`.
    Pooled(PooledBuf),
    /// A buffer of its own for a record larger than `batch.size`.
    Heap(Vec<u8>),
    /// A batch moved out of its pooled arena into a buffer of its own size, charged to
    /// `buffer.memory` by that size (see [`Arena::smaller_home`]).
    Charged(ChargedBuf),
}

impl AsRef<Vec<u8>> for Arena {
    fn as_ref(&self) -> &Vec<u8> {
        match self {
            Arena::Pooled(p) => p.as_ref(),
            Arena::Heap(v) => v,
            Arena::Charged(c) => c.as_ref(),
        }
    }
}

impl AsMut<Vec<u8>> for Arena {
    fn as_mut(&mut self) -> &mut Vec<u8> {
        match self {
            Arena::Pooled(p) => p.as_mut(),
            Arena::Heap(v) => v,
            Arena::Charged(c) => c.as_mut(),
        }
    }
}

impl Arena {
    /// Shared, immutable bytes without copying; a pooled buffer returns to its pool
    /// when the last `Bytes` of it is dropped.
    pub fn freeze(self) -> Bytes {
        match self {
            Arena::Pooled(p) => p.freeze(),
            Arena::Heap(v) => Bytes::from(v),
            Arena::Charged(c) => c.freeze(),
        }
    }

    /// Where a batch of `len` bytes (compressed or not) sealed in this arena should live
    /// instead, if anywhere: a buffer of exactly `len`, charged `len` of this pooled
    /// arena's charge, when that is at most half the arena and small enough to come
    /// cheaply from the heap ([`MOVE_MAX`]). The arena then goes back to its pool at
    /// once, with the rest of its charge. Kept in its arena, a batch filling a fraction
    /// of it (a compressed one, or one sealed by linger with a few records) holds the
    /// whole arena's charge until it is acknowledged: with many partitions (small
    /// batches, each in its own arena) `buffer.memory` then bounds how much is in flight
    /// long before the bytes do. Worse, the appending thread then waits for an arena
    /// for nearly every record, lingers expire on batches of a record or two, and those
    /// take whole arenas in turn: with 256 partitions whose leaders were not ready yet,
    /// most batches held one to four records.
    fn smaller_home(&mut self, len: usize) -> Option<Arena> {
        let Arena::Pooled(pooled) = self else {
            return None;
        };
        if len > MOVE_MAX || len > pooled.capacity() / 2 {
            return None;
        }
        let permit = pooled.split_charge(len)?;
        Some(Arena::Charged(ChargedBuf::new(permit)))
    }
}

/// The largest batch moved out of its arena (see [`Arena::smaller_home`]):
/// below glibc's default mmap threshold (128 KiB), so its buffer comes from the heap
/// without a system call or fresh pages; a larger one stays in its pooled arena.
const MOVE_MAX: usize = 64 * 1024;

/// The idempotent producer's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerId {
    pub id: i64,
    pub epoch: i16,
}

impl ProducerId {
    /// The identity an idempotent (not transactional) producer moves to when its
    /// sequences must start again: the same id at the next epoch, bumped by the producer
    /// itself (KIP-360, as the Java client does). A partition's leader takes sequence 0
    /// at a higher epoch and from then on refuses the old epoch, so a batch of the old
    /// epoch still on its way (a request the producer gave up on, carried late by TCP)
    /// can no longer be written behind the new epoch's. A new producer id would not
    /// fence it: the broker still accepts the old id's next sequence, out of order.
    /// (InitProducerId without a transactional id always returns a new id, whatever id
    /// and epoch it names.) `None` at the last epoch: only a new id will do then.
    pub fn next_epoch(self) -> Option<ProducerId> {
        (self.epoch < i16::MAX).then(|| ProducerId {
            id: self.id,
            epoch: self.epoch + 1,
        })
    }
}

/// The producer settings the partition and sink rules need.
#[derive(Debug, Clone)]
pub(crate) struct ProduceSettings {
    /// 0, 1 or -1.
    pub acks: i16,
    pub idempotent: bool,
    pub linger: Duration,
    /// How late the driver's timer may fire after the time it is set for (tokio's: up
    /// to a millisecond, never early; zero for a driver that wakes exactly on time).
    /// Lingers end half of it early ([`ProduceSettings::linger_ends`]).
    pub timer_resolution: Duration,
    pub batch_size: usize,
    pub max_request_size: usize,
    pub delivery_timeout: Duration,
    pub retries: u32,
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    /// How long the broker may wait for replication (the request's timeout_ms).
    pub request_timeout: Duration,
    /// Batches of one partition in flight without idempotence
    /// (`max.in.flight.requests.per.connection`).
    pub max_in_flight: usize,
    pub transactional_id: Option<String>,
    /// How long the coordinator lets a transaction stay open (`transaction.timeout.ms`).
    pub transaction_timeout: Duration,
    pub codec: Compression,
    /// Where the outcomes of records sent with a tag go (the producer's delivery
    /// handler), if anywhere.
    pub report_tagged: Option<TagReports>,
}

/// Most batches of one partition in flight with idempotence (what the broker tracks).
pub(crate) const MAX_IDEMPOTENT_IN_FLIGHT: usize = 5;

impl ProduceSettings {
    /// Batches of one partition that may be in flight at once: the connection's limit,
    /// and with idempotence no more than the broker tracks.
    pub fn per_partition_in_flight(&self) -> usize {
        if self.idempotent {
            self.max_in_flight.clamp(1, MAX_IDEMPOTENT_IN_FLIGHT)
        } else {
            self.max_in_flight.max(1)
        }
    }

    /// Produce requests a sink keeps on the wire to its broker at once
    /// (`max.in.flight.requests.per.connection`, which the connection enforces too).
    pub fn max_requests_in_flight(&self) -> usize {
        self.max_in_flight.max(1)
    }

    /// When a batch opened at `created` has lingered enough to be sealed: the end of its
    /// linger, less half the driver's timer resolution (and at most half the linger, so
    /// that a short linger still lingers). The sink sets its timer for this, and the
    /// timer fires up to a resolution after it: the batch is sealed within half a
    /// resolution of its linger's end, on average at it (a linger under a resolution may
    /// run up to a resolution less half of itself late; a batch held while its
    /// connection is busy stays open longer: [`PartitionState::seal_if_due`]). Sealed at the linger's end to the
    /// nanosecond instead, a batch went up to a whole resolution after it (half of one on
    /// average, added to every record's latency: measured 5.39 ms from send to answer
    /// above the round trip with `linger.ms` 5, one record a batch). Not a whole
    /// resolution early (never after the linger's end): tried, every batch lingered half
    /// a millisecond less than asked on average, and produce-100's batches, sealed by
    /// their linger, cost 4–9% more CPU in four by-hand sets.
    pub fn linger_ends(&self, created: Instant) -> Instant {
        created + self.linger - (self.timer_resolution / 2).min(self.linger / 2)
    }

    /// How long to wait before retry number `attempts + 1`: exponential to the cap.
    pub fn backoff(&self, attempts: u32) -> Duration {
        self.retry_backoff
            .saturating_mul(1u32 << attempts.min(16))
            .min(self.retry_backoff_max)
    }
}

/// When a partition refused with a retriable error may send again: any time from
/// `from` (four fifths of its backoff) and at the latest at `until` (all of it). The
/// sink wakes at the earliest `until` among its partitions and sends every partition
/// whose `from` has passed, so retries due close together go in one request instead of
/// one request each (the Java client jitters its backoff ±20% at random instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryWindow {
    pub from: Instant,
    pub until: Instant,
    /// When the refusal came.
    pub refused: Instant,
    /// The refusal said the broker does not serve the partition yet (see
    /// [`refused_as_unserved`]): the sink may probe it before the window (`sink.rs`).
    pub unserved: bool,
}

impl RetryWindow {
    /// The window of a retry refused at `now` that is to wait `backoff`.
    pub fn after(now: Instant, backoff: Duration) -> Self {
        RetryWindow {
            from: now + backoff - backoff / 5,
            until: now + backoff,
            refused: now,
            unserved: false,
        }
    }

    /// The same window, for a refusal that said the broker does not serve the
    /// partition yet, or not.
    pub fn for_unserved(self, unserved: bool) -> Self {
        RetryWindow { unserved, ..self }
    }
}

/// Whether `error` is a broker's answer that it does not serve the partition yet:
/// not (yet) its leader, or the partition not (yet) known to it. A new topic's
/// partitions are refused so by their leader until it has created their logs (a second
/// or two for a few hundred partitions), and a broker's while it loads its logs after a
/// restart; the metadata names that broker as the leader all along, so only a write
/// can tell when it serves them.
pub(crate) fn refused_as_unserved(error: &Error) -> bool {
    matches!(
        error.code(),
        Some(
            KafkaCode::NOT_LEADER_OR_FOLLOWER
                | KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
                | KafkaCode::LEADER_NOT_AVAILABLE
        )
    )
}

/// Kafka's sequence arithmetic: sequences wrap to 0 after `i32::MAX`
/// (`DefaultRecordBatch.incrementSequence`).
pub(crate) fn increment_sequence(sequence: i32, by: i32) -> i32 {
    if sequence > i32::MAX - by {
        by - (i32::MAX - sequence) - 1
    } else {
        sequence + by
    }
}

/// One record, as `append` takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordParts<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [Header<'a>],
    pub timestamp: i64,
}

/// What an append did. Its numbers are `usize`s, so that the discriminant, numbers and
/// batch each take a whole eight bytes: written and read back field by field in the
/// same widths (with `u32`s the discriminant and number shared eight bytes, written in
/// two stores and read in one load, a store-forwarding stall on every record).
#[derive(Debug)]
pub(crate) enum Appended {
    /// The record is record `index` of the batch completing through `shared` (a batch
    /// holds at most `i32::MAX` records).
    Done {
        shared: Arc<BatchShared>,
        index: usize,
    },
    /// The record, sent with a tag, is in the batch: its outcome goes to the producer's
    /// delivery handler.
    Tagged,
    /// The partition has no open batch and no arena of this class is free right now:
    /// wait for one and append again with it.
    NeedArena(usize),
    /// The producer holds as many unsettled records as `queue.buffering.max.messages`
    /// allows: wait for room ([`QueuedRecords::room`]) and append again (an arena waited
    /// for earlier stays with the caller).
    NeedRoom,
}

/// The batch currently being filled.
#[derive(Debug)]
struct OpenBatch {
    builder: BatchBuilder<Arena>,
    shared: Arc<BatchShared>,
    created: Instant,
    /// Its records sent with a tag, handed to `shared` when the batch is sealed or
    /// failed.
    tagged: Option<TaggedBatch>,
}

impl OpenBatch {
    /// Gives the batch's completion its tagged records, to report when it settles.
    fn hand_over_tagged(&mut self) {
        if let Some(tagged) = self.tagged.take() {
            self.shared.tag(tagged);
        }
    }
}

/// A sealed batch: mutable until first sent (so its producer state can be set), then
/// frozen.
#[derive(Debug)]
enum BatchData {
    Sealed(SealedBatch<Arena>),
    Frozen(Bytes),
}

/// A sealed batch waiting to be sent (or re-sent).
#[derive(Debug)]
struct QueuedBatch {
    data: BatchData,
    records: i32,
    /// Its size before compression.
    uncompressed: usize,
    shared: Arc<BatchShared>,
    created: Instant,
    attempts: u32,
    base_sequence: Option<i32>,
    /// Sent at least once.
    sent: bool,
    /// An attempt ended without a definite answer (the connection broke, the request
    /// timed out, the broker said REQUEST_TIMED_OUT): it may have been written. Such a
    /// batch must be resolved under its own epoch before an epoch bump renumbers it.
    maybe_written: bool,
}

/// A batch taken off its partition into a Produce request.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub partition: Arc<ProducePartition>,
    pub batch: Bytes,
    records: i32,
    uncompressed: usize,
    shared: Arc<BatchShared>,
    created: Instant,
    attempts: u32,
    base_sequence: Option<i32>,
    maybe_written: bool,
    /// The k-th batch of its partition in this drain: goes into request k (brokers take
    /// one batch per partition per request).
    pub round: usize,
}

/// How the broker (or the connection) answered for one batch.
#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    Acked(BatchAck),
    /// Retriable; `stale` when the metadata should be refreshed first.
    Retry {
        error: Error,
        stale: bool,
    },
    OutOfOrder(Error),
    UnknownProducer(Error),
    TooLarge(Error),
    Fatal(Error),
}

/// What settling a batch asks of the sink, and what became of the batch.
#[derive(Debug, Default, Clone)]
pub(crate) struct Effects {
    /// The producer epoch must be bumped before anything more is sent.
    pub bump: bool,
    /// The partition's metadata is stale.
    pub refresh: bool,
    /// What became of the batch (for metrics and acknowledgement hooks).
    pub report: BatchReport,
}

/// What became of a batch the broker (or the connection) answered for.
#[derive(Debug, Default, Clone)]
pub(crate) struct BatchReport {
    pub records: i32,
    /// Its size as sent.
    pub wire_bytes: usize,
    /// Its size before compression (the wire size when not compressed).
    pub uncompressed_bytes: usize,
    /// From its first record to this answer.
    pub waited: Duration,
    pub fate: Fate,
}

/// A batch's fate at an answer.
#[derive(Debug, Default, Clone)]
pub(crate) enum Fate {
    Acked(BatchAck),
    /// It goes again (a retry, a split, a resend under a new epoch).
    #[default]
    Retried,
    /// It failed for good with this error.
    Failed(Error),
}

/// Whether sealing happens because the batch filled its arena or because time (linger,
/// flush) asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SealReason {
    Full,
    Due,
}

thread_local! {
    /// The sealing thread's compressor, and the scratch its output goes to before it is
    /// copied back into the batch's arena or into a smaller buffer (see
    /// `BatchBuilder::seal_compressed_moving`).
    static COMPRESSION: std::cell::RefCell<(Compressor, Vec<u8>)> =
        std::cell::RefCell::new((Compressor::new(), Vec::new()));
}

/// One partition: its name and its state behind the lock appenders and the sink share.
#[derive(Debug)]
pub(crate) struct ProducePartition {
    pub topic: Arc<str>,
    pub index: i32,
    state: Mutex<PartitionState>,
}

impl ProducePartition {
    /// Partition `index` of `topic`, keeping the producer's `accounts`.
    pub fn new(topic: Arc<str>, index: i32, accounts: ProducerAccounts) -> Arc<Self> {
        Arc::new(ProducePartition {
            topic: topic.clone(),
            index,
            state: Mutex::new(PartitionState {
                framing: 256 + topic.len(),
                accounts: PartitionAccounts {
                    failures: accounts.failures,
                    queued: accounts.queued,
                    topic,
                    partition: index,
                },
                ..PartitionState::default()
            }),
        })
    }

    /// The state, locked. A panic while it was held cannot leave it half-updated in a
    /// way later calls trip over (every method keeps its invariants before it can
    /// panic), so a poisoned lock is taken as it is. Batches with tagged records settled
    /// under it finish settling (their delivery handler called) once it is released.
    #[inline]
    pub fn state(&self) -> StateGuard<'_> {
        let reports = ReportScope::enter();
        StateGuard {
            state: self.state.lock().unwrap_or_else(PoisonError::into_inner),
            _reports: reports,
        }
    }
}

/// A partition's state, locked; see [`ProducePartition::state`].
pub(crate) struct StateGuard<'a> {
    // Dropped first: the lock is released before the scope ends and runs handlers.
    state: MutexGuard<'a, PartitionState>,
    _reports: ReportScope,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = PartitionState;

    #[inline]
    fn deref(&self) -> &PartitionState {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut PartitionState {
        &mut self.state
    }
}

/// The producer-wide accounts every partition keeps: batches failed for good (for
/// flush) and records not settled yet (for `queue.buffering.max.messages`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ProducerAccounts {
    pub failures: Arc<DeliveryFailures>,
    pub queued: Arc<QueuedRecords>,
}

/// A partition's way to the producer's accounts, with its name for the failure log.
#[derive(Debug)]
struct PartitionAccounts {
    failures: Arc<DeliveryFailures>,
    queued: Arc<QueuedRecords>,
    topic: Arc<str>,
    partition: i32,
}

impl Default for PartitionAccounts {
    fn default() -> Self {
        PartitionAccounts {
            failures: Arc::default(),
            queued: Arc::default(),
            topic: Arc::from(""),
            partition: -1,
        }
    }
}

/// An in-flight batch: its completion, whether it is a retry, its record count.
type InFlight = (Arc<BatchShared>, bool, i32);

/// Everything about one partition (see the module's invariants).
#[derive(Default)]
pub(crate) struct PartitionState {
    open: Option<OpenBatch>,
    /// The arena size class of this partition's next batch (see `arenas.rs`).
    arena_class: usize,
    queue: VecDeque<QueuedBatch>,
    /// Batches on the wire, whether each is a retry, and its record count.
    in_flight: Vec<InFlight>,
    /// Batches with tagged records whose settling waits for the settling thread to let
    /// go of its locks (see `completion::ReportScope`): still pending for a flush.
    finishing: Vec<Arc<BatchShared>>,
    next_sequence: i32,
    acked_in_epoch: bool,
    /// The last sequence the broker acknowledged in this epoch.
    last_acked: Option<i32>,
    /// A batch failed and came back, or the partition moved between sinks with batches
    /// on the wire: send nothing until the in-flight ones answered.
    hold_until_drained: bool,
    /// Taken over by a sink while batches were on the wire through the previous one:
    /// the new sink is woken when the last of them answers.
    adopted_mid_flight: bool,
    /// No later than the creation of the oldest batch queued (see
    /// [`PartitionState::note_queued`]), so expiry need not look at every batch on
    /// every drain.
    oldest_queued: Option<Instant>,
    retry: Option<RetryWindow>,
    waker: Option<Arc<dyn Wake>>,
    /// Bytes of a Produce request around one batch of this partition (header, topic).
    framing: usize,
    accounts: PartitionAccounts,
    /// A transactional producer's partition is in the open transaction (the coordinator
    /// added it): only then may its batches go out.
    in_transaction: bool,
    /// The lowest sequences of this epoch whose batches failed for good (see
    /// [`EpochFailures`]).
    failures: EpochFailures,
}

/// The batches of the current epoch that failed for good after they got their sequences,
/// by what the broker may still do with them. The broker takes a batch only right after
/// the last one it wrote, so it takes nothing past a sequence that is never written.
#[derive(Debug, Default, Clone, Copy)]
struct EpochFailures {
    /// The lowest one surely not written (refused, or never sent): nothing past it is
    /// written in this epoch.
    unwritten: Option<i32>,
    /// The lowest one whose fate is unknown (an attempt of it may still be written):
    /// what is past it is written if, and only if, that attempt lands.
    lost: Option<i32>,
}

impl std::fmt::Debug for PartitionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionState")
            .field("open", &self.open.as_ref().map(|o| o.builder.len()))
            .field("queued", &self.queue.len())
            .field("in_flight", &self.in_flight.len())
            .field("next_sequence", &self.next_sequence)
            .finish_non_exhaustive()
    }
}

impl PartitionState {
    /// Fails a batch of `records` records for good: the producer's tally counts it (and
    /// logs it) unless it was settled already, then its futures get `error` and its
    /// records are no longer queued. Counted first, so a flush woken by the completion
    /// finds it. Every final failure goes through here, under the partition's lock
    /// (which every settling holds).
    fn fail_batch(&mut self, shared: &Arc<BatchShared>, records: i32, error: Error, now: Instant) {
        if shared.is_settled() {
            return;
        }
        let log = &self.accounts;
        log.failures
            .record(&log.topic, log.partition, records, &error, now);
        self.complete(shared, records, Err(error));
    }

    /// Settles a batch of `records` records with `outcome`, once: its records are then
    /// no longer queued (a later settling is ignored and gives back nothing).
    fn complete(
        &mut self,
        shared: &Arc<BatchShared>,
        records: i32,
        outcome: Result<BatchAck, Error>,
    ) {
        if shared.complete(outcome) {
            self.accounts.queued.give_back(records.max(0) as usize);
        }
        self.keep_while_finishing(shared);
    }

    /// Keeps a batch whose settling was deferred among the pending ones until it is
    /// resolved, so that a flush looking now still waits for it (and its handler).
    fn keep_while_finishing(&mut self, shared: &Arc<BatchShared>) {
        if shared.is_resolved() {
            return;
        }
        self.finishing.retain(|b| !b.is_resolved());
        self.finishing.push(shared.clone());
    }

    /// Whether the sink that drains this partition will drain it by `deadline` unwoken.
    fn sink_drains_by(&self, deadline: Instant) -> bool {
        self.waker.as_ref().is_some_and(|w| w.drains_by(deadline))
    }

    /// Whether the sink that drains this partition sleeps with every request slot
    /// taken: it sends nothing before its next answer, which brings it back to drain.
    fn sink_waits_for_an_answer(&self) -> bool {
        self.waker.as_ref().is_some_and(|w| w.waits_for_an_answer())
    }

    /// Wakes the sink that drains this partition.
    fn wake_sink(&self) {
        if let Some(w) = &self.waker {
            w.wake();
        }
    }

    /// A sink took the partition over: it wakes that sink from now on. Batches still on
    /// the wire through the previous sink must answer before anything more is sent, so
    /// order holds across the move.
    pub fn adopt(&mut self, waker: Arc<dyn Wake>) {
        if !self.in_flight.is_empty() {
            self.hold_until_drained = true;
            self.adopted_mid_flight = true;
        }
        self.waker = Some(waker);
        if self.has_pending() {
            self.wake_sink();
        }
    }

    /// Appends a record (on the appending thread). `arena` holds one waited for after an
    /// earlier [`Appended::NeedArena`], taken only when a batch opens in it; `now` is
    /// read only when a batch opens. The arena is lent, not moved in: the usual send has
    /// none, and moving a 48-byte `Option` in and an `Appended` holding it out cost the
    /// sending thread store-forwarding stalls on every record. Inlined:
    /// this is the per-record path, and the record encoder belongs inside it.
    ///
    /// The record is counted among the producer's queued records first; when their
    /// limit is reached nothing is appended ([`Appended::NeedRoom`]), and a record
    /// that is not appended after all is given back at once.
    #[inline]
    pub fn append(
        &mut self,
        record: RecordParts<'_>,
        tag: Option<u64>,
        arena: &mut Option<Arena>,
        settings: &ProduceSettings,
        pools: &ArenaPools,
        now: impl Fn() -> Instant,
    ) -> Result<Appended, Error> {
        if tag.is_some() && settings.report_tagged.is_none() {
            return Err(Error::InvalidArgument(
                "a tagged record needs a delivery handler".into(),
            ));
        }
        if !self.accounts.queued.try_take() {
            return Ok(Appended::NeedRoom);
        }
        // Counted: every way out but an append gives the record back (one function
        // still, so that the record encoder stays inlined into the sender's path).
        let not_appended = loop {
            if self.open.is_none() {
                match self.open_batch(record, arena, settings, pools, &now) {
                    Ok(None) => {}
                    Ok(Some(class)) => break Ok(Appended::NeedArena(class)),
                    Err(e) => break Err(e),
                }
            }
            let Some(open) = self.open.as_mut() else {
                continue;
            };
            // Appended in one pass: a record that does not fit leaves the batch as it
            // was and says how much room it needed.
            match open
                .builder
                .append(record.timestamp, record.key, record.value, record.headers)
            {
                Ok(()) => {
                    // A batch holds at most i32::MAX records (its offset deltas are i32s):
                    // a tagged record's index fits its list's u32.
                    let index = open.builder.len() - 1;
                    let done = match tag {
                        None => Appended::Done {
                            shared: open.shared.clone(),
                            index,
                        },
                        Some(tag) => {
                            self.tag_record(index as u32, record.timestamp, tag, settings);
                            Appended::Tagged
                        }
                    };
                    let Some(open) = self.open.as_mut() else {
                        return Ok(done);
                    };
                    // Nearly full: seal now rather than on the next record.
                    if open.builder.remaining() < 64 {
                        self.seal(SealReason::Full, settings, pools, &now);
                    }
                    return Ok(done);
                }
                // Whatever keeps the record out of a batch holding others (no room, a
                // record the format cannot hold, a timestamp too far from the batch's
                // first) seals that batch: the record gets a batch of its own, where
                // opening it tells a record too large apart.
                Err(
                    BuildError::Full { .. } | BuildError::TooLarge(_) | BuildError::Timestamp(_),
                ) if !open.builder.is_empty() => self.seal(SealReason::Full, settings, pools, &now),
                Err(BuildError::Full { needed, remaining }) => {
                    break Err(Error::MessageTooLarge {
                        size: needed,
                        max: remaining,
                    });
                }
                Err(BuildError::TooLarge(_)) => {
                    let size = open.builder.record_size(
                        record.timestamp,
                        record.key,
                        record.value,
                        record.headers,
                    );
                    break Err(Error::MessageTooLarge {
                        size,
                        max: open.builder.remaining(),
                    });
                }
                Err(e) => break Err(Error::Batch(e.to_string())),
            }
        };
        self.accounts.queued.give_back(1);
        not_appended
    }

    /// Notes that record `index` of the open batch was sent with `tag`.
    /// (`append` refused the tag before appending when there is no handler.)
    fn tag_record(&mut self, index: u32, timestamp: i64, tag: u64, settings: &ProduceSettings) {
        let (Some(open), Some(reports)) = (self.open.as_mut(), &settings.report_tagged) else {
            return;
        };
        let tagged = open.tagged.get_or_insert_with(|| TaggedBatch {
            reports: reports.clone(),
            topic: self.accounts.topic.clone(),
            partition: self.accounts.partition,
            records: reports.lists.take(),
        });
        tagged.records.push(TaggedRecord {
            index,
            timestamp,
            tag,
        });
    }

    /// Opens a batch for `record`, in `arena` or a pooled one. `Some(class)` when no
    /// arena of that class is free right now.
    fn open_batch(
        &mut self,
        record: RecordParts<'_>,
        arena: &mut Option<Arena>,
        settings: &ProduceSettings,
        pools: &ArenaPools,
        now: &impl Fn() -> Instant,
    ) -> Result<Option<usize>, Error> {
        let needed =
            BATCH_HEADER_LEN + record_encoded_len(0, 0, record.key, record.value, record.headers);
        // Room for the request and topic framing around one batch.
        let limit = settings.max_request_size.saturating_sub(self.framing);
        if needed > limit {
            return Err(Error::MessageTooLarge {
                size: needed,
                max: limit,
            });
        }
        let (buf, max) = match pools.class_for(self.arena_class, needed) {
            None => (Arena::Heap(Vec::with_capacity(needed)), needed),
            Some(class) => {
                // An arena waited for may be of another class (the partition's class
                // moved meanwhile): fine if the record fits.
                let pooled = match arena.take() {
                    Some(Arena::Pooled(b)) if b.capacity() >= needed => b,
                    _ => match pools.try_get(class) {
                        Ok(b) => b,
                        Err(_) => return Ok(Some(class)),
                    },
                };
                let max = pooled.capacity().min(settings.batch_size);
                (Arena::Pooled(pooled), max)
            }
        };
        // The CRC is computed once, when the batch is first taken to be sent (with its
        // producer id and sequence stamped, which the CRC covers), not at sealing too.
        let options = BatchOptions::default()
            .with_max_size(max)
            .with_transactional(settings.transactional_id.is_some())
            .with_deferred_crc(true);
        let builder = BatchBuilder::new(buf, options).map_err(|e| Error::Batch(e.to_string()))?;
        let created = now();
        self.open = Some(OpenBatch {
            builder,
            shared: BatchShared::new(),
            created,
            tagged: None,
        });
        // The sink may be asleep with no timer, or one later than this batch's linger:
        // let it learn the linger.
        // With no linger the batch is due at once: a sink whose timer is due but has
        // not fired yet is woken rather than left to the timer's next tick. A sink with
        // every slot taken sends nothing before its next answer, which it drains at.
        let due = settings.linger_ends(created);
        let sink_comes_by_then = !settings.linger.is_zero() && self.sink_drains_by(due);
        if !self.sink_looks_again_unwoken(settings)
            && !sink_comes_by_then
            && !self.sink_waits_for_an_answer()
        {
            self.wake_sink();
        }
        Ok(None)
    }

    /// Seals the open batch and queues it: the one place batches are sealed. A batch
    /// sealed full moves the partition's next arena up a size class; one sealed by time
    /// at under a quarter full moves it down. With a codec the batch is compressed in
    /// its own arena (or left as it is when compressing would not shrink it). Either way
    /// a batch filling at most half of its arena then moves to a buffer of its own size
    /// ([`Arena::smaller_home`]).
    /// `now` is read only when sealing fails (for the failure log).
    pub fn seal(
        &mut self,
        reason: SealReason,
        settings: &ProduceSettings,
        pools: &ArenaPools,
        now: &impl Fn() -> Instant,
    ) {
        let Some(mut open) = self.open.take() else {
            return;
        };
        if open.builder.is_empty() {
            return;
        }
        open.hand_over_tagged();
        let used = open.builder.size();
        let arena = used + open.builder.remaining();
        self.arena_class = next_class(
            self.arena_class,
            pools.largest(),
            reason == SealReason::Full,
            used,
            arena,
        );
        let records = open.builder.len() as i32;
        let mut moved = false;
        // In the batch's own arena, or moved to a buffer of its (compressed) size: either
        // stays charged to buffer.memory until the batch is settled.
        let mut elsewhere = |arena: &mut Arena, len| {
            let home = arena.smaller_home(len);
            moved = home.is_some();
            home
        };
        let sealed = if settings.codec == Compression::None {
            open.builder.seal_moving(elsewhere)
        } else {
            COMPRESSION.with(|c| {
                let (compressor, scratch) = &mut *c.borrow_mut();
                open.builder.seal_compressed_moving(
                    settings.codec,
                    compressor,
                    scratch,
                    &mut elsewhere,
                )
            })
        };
        if moved {
            // Its arena is cached now, uncharged, while the batch stays charged.
            pools.shed_past_budget();
        }
        // Looked at before the batch joins the queue: whether it could go at once.
        let wake = reason == SealReason::Full
            && !self.sink_looks_again_unwoken(settings)
            && !self.sink_waits_for_an_answer();
        match sealed {
            Ok(sealed) => self.enqueue(QueuedBatch {
                data: BatchData::Sealed(sealed),
                records,
                uncompressed: used,
                shared: open.shared,
                created: open.created,
                attempts: 0,
                base_sequence: None,
                sent: false,
                maybe_written: false,
            }),
            Err(e) => self.fail_batch(&open.shared, records, Error::Batch(e.to_string()), now()),
        }
        if wake {
            self.wake_sink();
        }
    }

    /// Seals the open batch if its linger ran out or a flush wants it; otherwise
    /// returns when its linger runs out. With `hold` (the partition is
    /// [`busy_sending`](PartitionState::busy_sending), its connection has no slot free, or
    /// its broker is behind: `super::pace`) a batch whose linger ran out stays
    /// open and keeps taking records until the partition can send it or it is full, as
    /// the Java client's accumulator and librdkafka's queues do: sealed at every linger,
    /// a partition waiting for a slow first answer would queue many small batches (more
    /// requests, more wake-ups and more to scan at every drain); its next state change
    /// brings the sink back (an answer, or the end of a retry window, which the sink
    /// sleeps until), and the deadline returned for it is its delivery timeout, past
    /// which it is sealed to expire like any other.
    pub fn seal_if_due(
        &mut self,
        now: Instant,
        flushing: bool,
        hold: bool,
        settings: &ProduceSettings,
        pools: &ArenaPools,
    ) -> Option<Instant> {
        let created = self.open.as_ref()?.created;
        let due = settings.linger_ends(created);
        // Held no longer than its delivery timeout: then it is sealed, and expires.
        let expires = created + settings.delivery_timeout;
        if hold && !flushing && now >= due && now < expires {
            return Some(expires);
        }
        if flushing || now >= due {
            self.seal(SealReason::Due, settings, pools, &|| now);
            None
        } else {
            Some(due)
        }
    }

    /// Fails queued batches past the delivery timeout. Returns whether one of them had a
    /// sequence (it was sent, and its fate is unknown; or it is part of a batch split
    /// after it was sent): its sequence will not be written in this epoch, so with
    /// idempotence the epoch must be bumped to renumber those after it.
    pub fn expire(&mut self, now: Instant, settings: &ProduceSettings) -> bool {
        let timeout = settings.delivery_timeout;
        // Every drain asks: most of the time the oldest batch queued is far from it.
        if self
            .oldest_queued
            .is_none_or(|oldest| now < oldest + timeout)
        {
            return false;
        }
        let mut numbered = false;
        // In place: this runs on every drain and should not reallocate the queue.
        let mut expired = Vec::new();
        self.queue.retain(|q| {
            if now < q.created + timeout {
                return true;
            }
            numbered |= q.base_sequence.is_some();
            let error = Error::Timeout(format!(
                "delivery.timeout.ms ({timeout:?}) expired after {} attempt(s)",
                q.attempts + u32::from(q.sent)
            ));
            let sequence = q.base_sequence;
            expired.push((
                q.shared.clone(),
                q.records,
                error,
                sequence,
                q.maybe_written,
            ));
            false
        });
        for (shared, records, error, sequence, maybe_written) in expired {
            self.note_failed_sequence(sequence, maybe_written);
            self.fail_batch(&shared, records, error, now);
        }
        match self.queue.iter().map(|q| q.created).min() {
            Some(oldest) => self.oldest_queued = Some(oldest),
            None => self.forget_queue_state(),
        }
        numbered && settings.idempotent
    }

    /// When the oldest batch queued runs out of time (no later: it may be earlier), so
    /// that the sink drains then even if nothing else wakes it.
    pub fn expiry_due(&self, settings: &ProduceSettings) -> Option<Instant> {
        let oldest = self.oldest_queued.filter(|_| !self.queue.is_empty())?;
        Some(oldest + settings.delivery_timeout)
    }

    /// The coordinator added the partition to the open transaction: its batches may go.
    pub fn join_transaction(&mut self) {
        self.in_transaction = true;
        if !self.queue.is_empty() {
            self.wake_sink();
        }
    }

    /// The transaction ended: the next one must add the partition again.
    pub fn leave_transaction(&mut self) {
        self.in_transaction = false;
    }

    /// When the open batch's linger is up ([`ProduceSettings::linger_ends`]), if one is
    /// open.
    pub fn due_at(&self, settings: &ProduceSettings) -> Option<Instant> {
        self.open.as_ref().map(|o| settings.linger_ends(o.created))
    }

    /// Whether sealed batches wait to be sent.
    pub fn has_sendable(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Whether sealed batches of this partition are queued or on the wire: an open
    /// batch goes after them, when they allow.
    #[cfg(test)]
    pub fn has_sealed(&self) -> bool {
        !self.queue.is_empty() || !self.in_flight.is_empty()
    }

    /// Whether anything is not settled yet (open, queued or in flight).
    pub fn has_pending(&self) -> bool {
        self.open.is_some() || !self.queue.is_empty() || !self.in_flight.is_empty()
    }

    /// Takes the batches that may go out now into `out` (assigning sequences to first
    /// sends), at most `rounds` of them (one per request the sink may still send).
    /// Returns when to look again (the end of its [`RetryWindow`]) if a retry backoff
    /// holds the partition.
    ///
    /// While an epoch bump is pending (`bumping`), only batches that may have been
    /// written go out, one at a time under their own epoch, to learn their fate.
    #[allow(clippy::too_many_arguments)]
    pub fn take_sendable(
        &mut self,
        this: &Arc<ProducePartition>,
        now: Instant,
        producer: Option<ProducerId>,
        bumping: bool,
        settings: &ProduceSettings,
        rounds: usize,
        out: &mut Vec<Outgoing>,
    ) -> Option<Instant> {
        if self.queue.is_empty() || (self.hold_until_drained && !self.in_flight.is_empty()) {
            return None;
        }
        if settings.transactional_id.is_some() && !self.in_transaction {
            return None;
        }
        if bumping
            && !(self.in_flight.is_empty() && self.queue.front().is_some_and(|q| q.maybe_written))
        {
            return None;
        }
        if let Some(window) = self.retry {
            if window.from > now {
                return Some(window.until);
            }
            self.retry = None;
        }
        self.hold_until_drained = false;
        let mut round = 0;
        // The limit is looked at again for each batch: parts of a split batch (not sent
        // yet) may go out several at a time, but a batch sent again behind them waits
        // until it can go alone.
        while self.in_flight.len() < self.in_flight_limit(bumping, settings) && round < rounds {
            let Some(mut q) = self.queue.pop_front() else {
                break;
            };
            let bytes = match std::mem::replace(&mut q.data, BatchData::Frozen(Bytes::new())) {
                BatchData::Frozen(b) => b,
                BatchData::Sealed(mut sealed) => {
                    if let Some(p) = producer.filter(|_| settings.idempotent) {
                        let seq = self.next_sequence;
                        self.next_sequence = increment_sequence(seq, q.records);
                        sealed.set_producer_state(p.id, p.epoch, seq);
                        q.base_sequence = Some(seq);
                    }
                    sealed.into_inner().freeze()
                }
            };
            self.in_flight.push((q.shared.clone(), q.sent, q.records));
            out.push(Outgoing {
                partition: this.clone(),
                batch: bytes,
                records: q.records,
                uncompressed: q.uncompressed,
                shared: q.shared,
                created: q.created,
                attempts: q.attempts,
                base_sequence: q.base_sequence,
                maybe_written: q.maybe_written,
                round,
            });
            round += 1;
        }
        None
    }

    /// How many batches may be on the wire at once now: one while an epoch bump is
    /// pending, before the first acknowledgement of an idempotent epoch and while a retry
    /// is unresolved; otherwise the settings' limit.
    fn in_flight_limit(&self, bumping: bool, settings: &ProduceSettings) -> usize {
        if bumping || (settings.idempotent && (!self.acked_in_epoch || self.retrying())) {
            1
        } else {
            settings.per_partition_in_flight()
        }
    }

    /// Whether a batch sealed now would have to wait behind what the partition already
    /// has queued or on the wire (its in-flight limit reached, the in-flight batches to
    /// be drained first, or a retry backoff running): then its open batch is better left
    /// open to fill up (see [`PartitionState::seal_if_due`]).
    pub fn busy_sending(&self, now: Instant, settings: &ProduceSettings) -> bool {
        (self.hold_until_drained && !self.in_flight.is_empty())
            || self.retry_queued().is_some_and(|w| w.from > now)
            || self.limit_taken(settings)
    }

    /// Whether what is on the wire and queued fills the partition's in-flight limit.
    fn limit_taken(&self, settings: &ProduceSettings) -> bool {
        self.in_flight.len() + self.queue.len() >= self.in_flight_limit(false, settings)
    }

    /// The retry window holding back a retried batch still queued.
    fn retry_queued(&self) -> Option<RetryWindow> {
        self.retry.filter(|_| !self.queue.is_empty())
    }

    /// When a probe of this partition would tell something its backoff does not, and
    /// when it was refused: it waits out the backoff of a refusal saying the broker does
    /// not serve it yet, with nothing on the wire, and the window opens later than
    /// `base` (the settings' `retry.backoff.ms`) after that refusal (so past the first
    /// retry, whose backoff is `base`). The time is `base` after the refusal: a probe
    /// then is no sooner than a first retry would be. `None` once the window is open at
    /// `now`.
    pub fn probe_time(&self, now: Instant, base: Duration) -> Option<(Instant, Instant)> {
        let w = self.retry_queued()?;
        let at = w.refused + base;
        (w.unserved && self.in_flight.is_empty() && w.from > now && w.from > at)
            .then_some((at, w.refused))
    }

    /// Takes the retried batch as the sink's probe: its backoff ended, taken as
    /// [`PartitionState::take_sendable`] takes it (without idempotence, with what may go
    /// beside it). Whether anything was taken; if not (outside a transaction, say), the
    /// backoff stays.
    #[allow(clippy::too_many_arguments)]
    pub fn take_probe(
        &mut self,
        this: &Arc<ProducePartition>,
        now: Instant,
        producer: Option<ProducerId>,
        settings: &ProduceSettings,
        rounds: usize,
        out: &mut Vec<Outgoing>,
    ) -> bool {
        let before = out.len();
        let window = self.retry.take();
        self.take_sendable(this, now, producer, false, settings, rounds, out);
        let taken = out.len() > before;
        if !taken {
            self.retry = window;
        }
        taken
    }

    /// Ends the backoff of a refusal from before `before` saying the broker did not serve
    /// the partition yet (a probe of its topic sent at `before` was acknowledged): the
    /// partition may send its retried batch at the next drain. Other backoffs stay.
    pub fn end_unserved_backoff(&mut self, before: Instant) {
        if self.retry.is_some_and(|w| w.unserved && w.refused < before) {
            self.retry = None;
        }
    }

    /// Whether the sink is sure to drain this partition again without being woken, and
    /// a batch opened or sealed now could not go before that anyway: an answer is due
    /// for a batch on the wire while the partition may send no more (held for its
    /// in-flight batches, or its in-flight limit taken by what is on the wire and
    /// queued), or a retried batch is queued in its backoff. What brings the sink back
    /// is then the answer, or the end of the retry window when its last drain reached
    /// the partition's retry (otherwise whatever stopped that drain short has a wake-up
    /// of its own: an answer for a full connection, joining the transaction, the end of
    /// an epoch bump, a hand-over to another sink). The appending thread then skips the
    /// wake-up, which would only cost the sink a drain of all its partitions while the
    /// broker is slow.
    fn sink_looks_again_unwoken(&self, settings: &ProduceSettings) -> bool {
        let answer_due = !self.in_flight.is_empty();
        (answer_due && (self.hold_until_drained || self.limit_taken(settings)))
            || self.retry_queued().is_some()
    }

    /// Whether the head of the queue is a batch coming back for a retry. Until every
    /// retried batch is resolved, one batch at a time goes out and nothing new: were new
    /// batches written meanwhile, a retry refused again could fall out of the five
    /// batches the broker remembers for deduplication, and its first attempt, if it was
    /// written, could then never be recognised (the Java client does the same).
    fn retrying(&self) -> bool {
        self.queue.front().is_some_and(|q| q.sent)
            || self.in_flight.iter().any(|(_, retry, _)| *retry)
    }

    fn finish_in_flight(&mut self, shared: &Arc<BatchShared>) {
        if let Some(i) = self
            .in_flight
            .iter()
            .position(|(f, _, _)| Arc::ptr_eq(f, shared))
        {
            self.in_flight.swap_remove(i);
        }
        // The last answer to come back through the sink it left: the sink that took it
        // over holds it until now and has no deadline for it, so it is told.
        if self.in_flight.is_empty() && std::mem::take(&mut self.adopted_mid_flight) {
            self.wake_sink();
        }
    }

    /// Puts a batch that came back in sequence order at the head of the queue, and holds
    /// the partition until the rest of its batches in flight have answered.
    fn requeue(&mut self, b: Outgoing, maybe_written: bool) {
        let batch = QueuedBatch {
            data: BatchData::Frozen(b.batch),
            records: b.records,
            uncompressed: b.uncompressed,
            shared: b.shared,
            created: b.created,
            attempts: b.attempts + 1,
            base_sequence: b.base_sequence,
            sent: true,
            maybe_written,
        };
        self.insert_in_order(batch);
        self.hold_until_drained = true;
    }

    /// Queues a batch newly sealed, behind the rest.
    fn enqueue(&mut self, batch: QueuedBatch) {
        self.note_queued(batch.created);
        self.queue.push_back(batch);
    }

    /// Keeps [`PartitionState::oldest_queued`] no later than the oldest batch queued
    /// (removals may leave it earlier: [`PartitionState::expire`] then looks and
    /// recomputes it).
    fn note_queued(&mut self, created: Instant) {
        self.oldest_queued = Some(self.oldest_queued.map_or(created, |o| o.min(created)));
    }

    fn insert_in_order(&mut self, batch: QueuedBatch) {
        self.note_queued(batch.created);
        let pos = match batch.base_sequence {
            None => 0,
            Some(seq) => self
                .queue
                .iter()
                .position(|q| q.base_sequence.is_none_or(|s| s > seq))
                .unwrap_or(self.queue.len()),
        };
        self.queue.insert(pos, batch);
    }

    /// Applies the verdict on a batch that came back (the rules are the Java client's;
    /// see the sink's module documentation).
    pub fn settle(
        &mut self,
        b: Outgoing,
        verdict: Verdict,
        now: Instant,
        settings: &ProduceSettings,
    ) -> Effects {
        self.finish_in_flight(&b.shared);
        let idempotent = settings.idempotent;
        let expired = now >= b.created + settings.delivery_timeout;
        let out_of_retries = b.attempts >= settings.retries;
        let mut effects = Effects {
            report: BatchReport {
                records: b.records,
                wire_bytes: b.batch.len(),
                uncompressed_bytes: b.uncompressed,
                waited: now.saturating_duration_since(b.created),
                fate: Fate::Retried,
            },
            ..Effects::default()
        };
        // An attempt that ended without the broker refusing it may have been written (an
        // out-of-order or unknown-producer refusal writes nothing).
        let unanswered =
            matches!(&verdict, Verdict::Retry { error, .. } if !refused_before_writing(error));
        match verdict {
            Verdict::Acked(ack) => {
                self.acked_in_epoch = true;
                if let Some(seq) = b.base_sequence {
                    self.note_acked(increment_sequence(seq, b.records - 1));
                }
                effects.report.fate = Fate::Acked(ack);
                self.complete(&b.shared, b.records, Ok(ack));
            }
            Verdict::Retry { error, .. }
            | Verdict::OutOfOrder(error)
            | Verdict::UnknownProducer(error)
                if expired || out_of_retries =>
            {
                effects.bump = idempotent;
                let error = if expired {
                    Error::Timeout(format!(
                        "delivery.timeout.ms ({:?}) expired after {} attempt(s); last error: {error}",
                        settings.delivery_timeout,
                        b.attempts + 1
                    ))
                } else {
                    error
                };
                self.note_failed_sequence(b.base_sequence, b.maybe_written || unanswered);
                effects.report.fate = Fate::Failed(error.clone());
                self.fail_batch(&b.shared, b.records, error, now);
            }
            Verdict::Retry { error, stale } => {
                tracing::debug!(topic = %b.partition.topic, partition = b.partition.index, %error, "produce retry");
                effects.refresh = stale;
                let window = RetryWindow::after(now, settings.backoff(b.attempts));
                self.retry = Some(window.for_unserved(refused_as_unserved(&error)));
                let maybe_written = b.maybe_written || !refused_before_writing(&error);
                self.requeue(b, maybe_written);
            }
            Verdict::OutOfOrder(error) => {
                // Out of order only because an earlier batch has not been written yet (it
                // is being retried, or still on the wire): retry behind it. A gap is when
                // this batch is the very next after the last one acknowledged, and still
                // refused (the Java client's rule).
                let gap = idempotent && self.is_next_sequence(b.base_sequence);
                if gap {
                    tracing::warn!(topic = %b.partition.topic, partition = b.partition.index, %error, "sequence gap: bumping the producer epoch");
                    effects.bump = true;
                }
                // Refused: not written now, nor by an earlier attempt the broker has
                // handled (that would still be among the five batches it remembers, and
                // be answered as a duplicate: while retrying, nothing new goes out). An
                // earlier attempt that ended without an answer may still be on its way,
                // though (a broken connection's request handled late), and be written
                // once the batches before it are. What the batches before it became
                // decides (a gap: the broker lost the sequence, nothing is coming):
                let lost_attempt = b.maybe_written && !gap;
                match self.failure_below(b.base_sequence) {
                    // One failed with its fate unknown: this one is written if, and only
                    // if, that one's lost attempt lands. That cannot be learned, and
                    // renumbered by an epoch bump it could be written twice: it fails
                    // (as a batch expiring on the wire does), and the epoch is bumped.
                    // Reported as a timeout: like that batch's, its fate is unknown.
                    Some(true) if lost_attempt => {
                        tracing::warn!(topic = %b.partition.topic, partition = b.partition.index, %error, "a batch's fate cannot be learned: failing it");
                        let error = Error::Timeout(format!(
                            "an earlier batch of the partition failed with its fate unknown, \
                             and this one may be written only with it (last error: {error})"
                        ));
                        effects.bump = idempotent;
                        effects.report.fate = Fate::Failed(error.clone());
                        self.note_failed_sequence(b.base_sequence, true);
                        self.fail_batch(&b.shared, b.records, error, now);
                    }
                    // One was refused for good: nothing past it is taken in this epoch,
                    // a lost attempt of this one included; the bump renumbers it.
                    Some(_) => self.requeue(b, false),
                    // Nothing before it failed: those before it are still on their way,
                    // and a lost attempt of it stays "maybe written", resolved under its
                    // own epoch once they are (an epoch bump waits). (A batch sent again
                    // goes out alone once those before it answered, so this is mostly a
                    // first attempt's refusal, never written.)
                    None => self.requeue(b, lost_attempt),
                }
            }
            Verdict::UnknownProducer(error) => {
                tracing::warn!(topic = %b.partition.topic, partition = b.partition.index, %error, "bumping the producer epoch");
                effects.bump = true;
                // The broker has no state for the producer: an earlier attempt's fate can
                // no longer be learned; the batch goes again under the new epoch.
                self.requeue(b, false);
            }
            // (A batch already failed, by a close, is not split into parts to send.)
            Verdict::TooLarge(error) if b.records > 1 && !b.shared.is_settled() => {
                match split(&b, settings) {
                    Ok(parts) => {
                        let children: Vec<Arc<BatchShared>> =
                            parts.iter().map(|q| q.shared.clone()).collect();
                        b.shared.split_into(children);
                        self.keep_while_finishing(&b.shared);
                        for q in parts.into_iter().rev() {
                            self.insert_in_order(q);
                        }
                        self.hold_until_drained = true;
                    }
                    Err(e) => {
                        tracing::warn!(%e, "could not split an oversized batch");
                        effects.bump = idempotent;
                        effects.report.fate = Fate::Failed(error.clone());
                        self.note_failed_sequence(b.base_sequence, b.maybe_written);
                        self.fail_batch(&b.shared, b.records, error, now);
                    }
                }
            }
            Verdict::TooLarge(error) | Verdict::Fatal(error) => {
                effects.bump = idempotent;
                effects.report.fate = Fate::Failed(error.clone());
                // A refusal wrote nothing; a connection that ended the attempt may have
                // let it through (a malformed answer, a close, a lost answer task).
                let lost = b.maybe_written || ended_after_sending(&error);
                self.note_failed_sequence(b.base_sequence, lost);
                self.fail_batch(&b.shared, b.records, error, now);
            }
        }
        effects
    }

    /// Records appended and not yet settled: in the open batch, queued, on the wire.
    pub fn unsettled_records(&self) -> u64 {
        let open = self.open.as_ref().map_or(0, |o| o.builder.len() as u64);
        let queued: u64 = self.queue.iter().map(|q| q.records.max(0) as u64).sum();
        let sent: u64 = self.in_flight.iter().map(|f| f.2.max(0) as u64).sum();
        open + queued + sent
    }

    /// Whether an epoch bump may renumber this partition now: nothing on the wire, and
    /// the first batch queued not one that may have been written under the current epoch.
    /// Those behind a batch surely not written cannot be, whatever became of their own
    /// attempts: the broker takes no sequence past a missing one (and during a bump only a
    /// batch that may have been written goes out, at the head of the queue, to learn its
    /// fate; waiting for those behind it would hold every partition until it expired).
    pub fn ready_for_bump(&self) -> bool {
        self.in_flight.is_empty() && !self.queue.front().is_some_and(|q| q.maybe_written)
    }

    /// Records that the broker acknowledged up to sequence `last` (acknowledgements of
    /// retried duplicates may come late: the furthest one counts).
    fn note_acked(&mut self, last: i32) {
        let ahead = |a: i32, b: i32| (a.wrapping_sub(b) as u32) < (1 << 30);
        if self.last_acked.is_none_or(|current| ahead(last, current)) {
            self.last_acked = Some(last);
        }
    }

    /// Notes that the batch numbered from `base` failed for good (`lost`: an attempt of it
    /// may still be written), keeping the lowest such sequence of each kind.
    fn note_failed_sequence(&mut self, base: Option<i32>, lost: bool) {
        let Some(base) = base else {
            return;
        };
        let slot = if lost {
            &mut self.failures.lost
        } else {
            &mut self.failures.unwritten
        };
        if slot.is_none_or(|lowest| sequence_before(base, lowest)) {
            *slot = Some(base);
        }
    }

    /// Whether a batch of this epoch before `base` failed for good: `Some(false)` when
    /// one surely not written is among them (nothing at `base` can be written in this
    /// epoch), `Some(true)` when only ones of unknown fate are.
    fn failure_below(&self, base: Option<i32>) -> Option<bool> {
        let base = base?;
        let below = |failed: Option<i32>| failed.is_some_and(|f| sequence_before(f, base));
        if below(self.failures.unwritten) {
            Some(false)
        } else if below(self.failures.lost) {
            Some(true)
        } else {
            None
        }
    }

    /// Whether a batch starting at `base` is the next the broker should take: right
    /// after the last acknowledged sequence (or the first of the epoch).
    fn is_next_sequence(&self, base: Option<i32>) -> bool {
        let expected = self
            .last_acked
            .map_or(0, |last| increment_sequence(last, 1));
        base == Some(expected)
    }

    /// After an epoch bump (nothing in flight): batches already sent are restamped with
    /// the new id and epoch and renumbered from 0, in queue order; unsent ones get their
    /// sequences when they go.
    pub fn restamp(&mut self, producer: ProducerId, now: Instant) {
        let mut next = 0i32;
        for mut q in std::mem::take(&mut self.queue) {
            if let BatchData::Frozen(bytes) = &q.data {
                match SealedBatch::from_wire(bytes.to_vec()) {
                    Ok(mut sealed) => {
                        sealed.set_producer_state(producer.id, producer.epoch, next);
                        q.data = BatchData::Frozen(Bytes::from(sealed.into_inner()));
                        q.base_sequence = Some(next);
                        next = increment_sequence(next, q.records);
                    }
                    Err(e) => {
                        let error = Error::Batch(format!("restamping a sent batch: {e}"));
                        self.fail_batch(&q.shared, q.records, error, now);
                        continue;
                    }
                }
            }
            self.queue.push_back(q);
        }
        self.next_sequence = next;
        if self.queue.is_empty() {
            self.forget_queue_state();
        }
        self.hold_until_drained = false;
        self.acked_in_epoch = false;
        self.last_acked = None;
        self.failures = EpochFailures::default();
    }

    /// Fails every batch not on the wire (open and queued) with `error`.
    pub fn fail_unsent(&mut self, error: &Error, now: Instant) {
        if let Some(mut open) = self.open.take() {
            open.hand_over_tagged();
            let records = open.builder.len() as i32;
            self.fail_batch(&open.shared, records, error.clone(), now);
        }
        for q in std::mem::take(&mut self.queue) {
            self.fail_batch(&q.shared, q.records, error.clone(), now);
        }
        self.forget_queue_state();
    }

    /// The queue is empty: a retry window or an expiry watermark of batches no longer
    /// there must not hold back, or delay, the batches queued next.
    fn forget_queue_state(&mut self) {
        self.retry = None;
        self.oldest_queued = None;
    }

    /// Fails everything not settled, in flight included (the connection and the
    /// runtime are gone).
    pub fn fail_all(&mut self, error: &Error, now: Instant) {
        self.fail_unsent(error, now);
        for (shared, _, records) in std::mem::take(&mut self.in_flight) {
            self.fail_batch(&shared, records, error.clone(), now);
        }
    }

    /// Every batch not yet settled (for flush).
    pub fn pending(&self) -> Vec<Arc<BatchShared>> {
        self.open
            .iter()
            .map(|o| o.shared.clone())
            .chain(self.queue.iter().map(|q| q.shared.clone()))
            .chain(self.in_flight.iter().map(|(f, _, _)| f.clone()))
            .chain(self.finishing.iter().filter(|b| !b.is_resolved()).cloned())
            .collect()
    }
}

/// Whether sequence `a` comes before `b` (sequences wrap at `i32::MAX`; two of one
/// epoch in flight are never a quarter of the range apart).
fn sequence_before(a: i32, b: i32) -> bool {
    a != b && (b.wrapping_sub(a) as u32) < (1 << 30)
}

/// Whether `error` ended an attempt that may have reached the broker.
fn ended_after_sending(error: &Error) -> bool {
    matches!(error, Error::Io(e) if e.may_have_reached_the_broker())
}

/// Whether a produce error means the broker did not write the batch: a refusal that
/// comes before the write, or a request that never reached it (no connection could be
/// made, its set-up failed). A connection that broke or timed out with the request on
/// it, and answers that were lost or garbled, leave its fate unknown; so do
/// REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS_AFTER_APPEND, which come after the write.
fn refused_before_writing(error: &Error) -> bool {
    refused_as_unserved(error)
        || matches!(error, Error::Io(e) if !e.may_have_reached_the_broker())
        || matches!(
            error.code(),
            Some(
                KafkaCode::NOT_ENOUGH_REPLICAS
                    | KafkaCode::FENCED_LEADER_EPOCH
                    | KafkaCode::UNKNOWN_LEADER_EPOCH
                    | KafkaCode::UNKNOWN_TOPIC_ID
                    | KafkaCode::INCONSISTENT_TOPIC_ID
            )
        )
}

/// One single-record batch per record of `b`, with the sequences `b` had (so the
/// partition's sequence range does not change).
fn split(b: &Outgoing, settings: &ProduceSettings) -> Result<Vec<QueuedBatch>, Error> {
    let batch_err = |e: crate::record::RecordError| Error::Batch(e.to_string());
    let batch = RecordBatchRef::new(&b.batch).map_err(batch_err)?;
    let mut decompressor = Decompressor::new(settings.max_request_size.max(1 << 20) * 4);
    let mut scratch = Vec::new();
    let records = batch
        .decompress_records(&mut decompressor, &mut scratch)
        .map_err(batch_err)?;
    let mut out = Vec::new();
    for (i, r) in records.enumerate() {
        let r = r.map_err(batch_err)?;
        let headers: Vec<Header<'_>> = r
            .headers()
            .map(|h| {
                let h = h.map_err(batch_err)?;
                Ok(Header {
                    key: h.key_str().map_err(batch_err)?,
                    value: h.value,
                })
            })
            .collect::<Result<_, Error>>()?;
        let size = BATCH_HEADER_LEN + record_encoded_len(0, 0, r.key(), r.value(), &headers);
        let mut options = BatchOptions::default()
            .with_max_size(size)
            .with_transactional(batch.is_transactional());
        let sequence = b.base_sequence.map(|s| increment_sequence(s, i as i32));
        if let Some(seq) = sequence {
            options = options.with_producer(batch.producer_id(), batch.producer_epoch(), seq);
        }
        let build_err = |e: crate::record::BuildError| Error::Batch(e.to_string());
        let mut builder =
            BatchBuilder::new(Arena::Heap(Vec::with_capacity(size)), options).map_err(build_err)?;
        builder
            .append(r.timestamp(), r.key(), r.value(), &headers)
            .map_err(build_err)?;
        let sealed = builder.seal().map_err(build_err)?;
        let frozen = sealed.into_inner().freeze();
        out.push(QueuedBatch {
            uncompressed: frozen.len(),
            data: BatchData::Frozen(frozen),
            records: 1,
            shared: BatchShared::new(),
            created: b.created,
            attempts: b.attempts,
            base_sequence: sequence,
            sent: false,
            maybe_written: false,
        });
    }
    Ok(out)
}

/// Counts the wake-ups a partition gives its sink (for the partition's and the sink's
/// tests).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct CountingWake(std::sync::atomic::AtomicUsize);

#[cfg(test)]
impl Wake for CountingWake {
    fn wake(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
impl CountingWake {
    pub fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
