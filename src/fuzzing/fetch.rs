//! The consumer's fetch handling under fuzzing: one partition's fetcher
//! (`engine::fetch`) sends Fetches and takes FetchResponses built from the input (error
//! code, high watermark, aborted-transaction list, records bytes), and the partition
//! reader (`consumer::reader`) reads every chunk delivered: control batches, aborted
//! transactions under read_committed or not, CRC checks on or off, compressed batches
//! through the partition's one decompressor, batches cut at the end of a response,
//! borrowed batches or owned messages, the reset policy after OFFSET_OUT_OF_RANGE and
//! the application skipping bad batches. Every record, key, value and header is read.
//!
//! Input: `flags, version, start: i64, max_decompressed`, then rounds (at most
//! [`MAX_ROUNDS`]), each `error_code: i16, high_watermark: i64, n: u8, n × (producer_id:
//! i64, first_offset: i64), len: u32, len bytes of records` (fewer at the end of the
//! input: a partial trailing batch).
//!
//! Checked: the reader always makes progress (no loop); records handed out are at or
//! after the position their batch was taken at; a bad batch read borrowed is reported
//! again by the next read, the position staying at it (never passed over); all memory
//! charged to the consumer's budget comes back once everything is dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Cursor, Violation, violation};
use crate::buf::MemoryBudget;
use crate::consumer::reader::{Advance, PartitionReader};
use crate::engine::fetch::replica::ReadReplica;
use crate::engine::fetch::{Chunk, FetchSettings, FetchTarget, Fetcher, Next};
use crate::error::Error;
use crate::protocol::messages::FetchResponse;
use crate::protocol::messages::fetch::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use crate::protocol::{ApiKey, KafkaCode, Uuid};

/// Flag: read_committed.
pub const READ_COMMITTED: u8 = 1;
/// Flag: check CRCs (Java's `check.crcs`).
pub const CHECK_CRCS: u8 = 2;
/// Flag: read owned messages (`next_messages`) instead of borrowed batches.
pub const OWNED: u8 = 4;
/// Flag: skip bad batches (the application's `skip_bad_batch`) and read on.
pub const SKIP_BAD: u8 = 8;

/// Responses per input.
pub const MAX_ROUNDS: usize = 16;
/// The consumer's memory budget.
const BUDGET: usize = 64 << 20;
const TOPIC: &str = "fuzz";
const TOPIC_ID: Uuid = Uuid([7; 16]);

/// One FetchResponse of a [`FetchScript`] (for the one partition).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Round {
    /// The partition's error code.
    pub error_code: i16,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// (producer id, first offset) of aborted transactions.
    pub aborted: Vec<(i64, i64)>,
    /// The records field.
    pub records: Vec<u8>,
    /// The records field's length as written, when it should differ from its bytes
    /// (the last round of a cut input).
    pub claimed_len: Option<u32>,
}

/// A fetch input, structured (seeds are written from this).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchScript {
    /// [`READ_COMMITTED`], [`CHECK_CRCS`], [`OWNED`], [`SKIP_BAD`].
    pub flags: u8,
    /// The Fetch version is the lowest supported plus this, modulo the range.
    pub version: u8,
    /// Where the consumer starts.
    pub start: i64,
    /// The cap on one batch's decompressed size is 1 KiB << (this % 14).
    pub max_decompressed: u8,
    /// The responses.
    pub rounds: Vec<Round>,
}

impl FetchScript {
    /// The input bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![self.flags, self.version];
        out.extend_from_slice(&self.start.to_be_bytes());
        out.push(self.max_decompressed);
        for r in &self.rounds {
            out.extend_from_slice(&r.error_code.to_be_bytes());
            out.extend_from_slice(&r.high_watermark.to_be_bytes());
            let aborted = &r.aborted[..r.aborted.len().min(255)];
            out.push(aborted.len() as u8);
            for (producer, first) in aborted {
                out.extend_from_slice(&producer.to_be_bytes());
                out.extend_from_slice(&first.to_be_bytes());
            }
            let len = r.claimed_len.unwrap_or(r.records.len() as u32);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&r.records);
        }
        out
    }

    /// Any bytes as a script.
    pub fn parse(data: &[u8]) -> Self {
        let mut c = Cursor::new(data);
        let (flags, version) = (c.u8(), c.u8());
        let start = c.i64();
        let max_decompressed = c.u8();
        let mut rounds = Vec::new();
        while !c.is_empty() && rounds.len() < MAX_ROUNDS {
            let error_code = c.i16();
            let high_watermark = c.i64();
            let n = c.u8();
            let aborted = (0..n).map(|_| (c.i64(), c.i64())).collect();
            let len = c.u32();
            let records = c.take(len as usize).to_vec();
            rounds.push(Round {
                error_code,
                high_watermark,
                aborted,
                records,
                claimed_len: None,
            });
        }
        FetchScript {
            flags,
            version,
            start,
            max_decompressed,
            rounds,
        }
    }
}

/// What an input reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchReport {
    /// Fetches sent.
    pub fetches: usize,
    /// Chunks the fetcher delivered.
    pub chunks: usize,
    /// Batches handed to the user.
    pub batches: usize,
    /// Records handed to the user.
    pub records: usize,
    /// Errors the reader reported (corrupt batches, bad records).
    pub read_errors: usize,
    /// Errors the fetcher reported (error codes, malformed batches).
    pub fetch_errors: usize,
    /// Resets after OFFSET_OUT_OF_RANGE.
    pub resets: usize,
    /// The reader's position at the end.
    pub position: i64,
}

enum Delivery {
    Chunk(Chunk),
    Reset(i64),
}

/// The partition as its fetcher sees it: a queue of two chunks (the consumer's room).
/// (Atomics and a mutex only because the fetcher holds its partitions in `Arc`s; one
/// thread runs everything.)
struct Partition {
    topic: Arc<str>,
    position: AtomicI64,
    high_watermark: AtomicI64,
    queue: Mutex<VecDeque<Delivery>>,
    errors: AtomicUsize,
}

impl Partition {
    fn queue(&self) -> MutexGuard<'_, VecDeque<Delivery>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl FetchTarget for Partition {
    fn topic(&self) -> &Arc<str> {
        &self.topic
    }
    fn partition(&self) -> i32 {
        0
    }
    fn fetch_position(&self) -> i64 {
        self.position.load(Relaxed)
    }
    fn fetch_epoch(&self) -> i32 {
        -1
    }
    fn set_fetch_position(&self, offset: i64, _epoch: i32) {
        self.position.store(offset, Relaxed);
    }
    fn current_leader_epoch(&self) -> i32 {
        -1
    }
    fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Relaxed)
    }
    fn set_high_watermark(&self, offset: i64) {
        self.high_watermark.store(offset, Relaxed);
    }
    fn paused(&self) -> bool {
        false
    }
    fn has_room(&self) -> bool {
        self.queue().len() < 2
    }
    fn is_closed(&self) -> bool {
        false
    }
    fn deliver(&self, chunk: Chunk) -> bool {
        if !self.has_room() {
            return false;
        }
        self.queue().push_back(Delivery::Chunk(chunk));
        true
    }
    fn report(&self, _error: Error) {
        self.errors.fetch_add(1, Relaxed);
    }
    /// The scripted answers never name a read replica (and the fetcher's broker id is
    /// unknown): always the leader.
    fn read_replica(&self) -> Option<ReadReplica> {
        None
    }
    fn set_read_replica(&self, _replica: Option<ReadReplica>) {}
}

/// Runs one input; see the module docs for the format and what is checked.
pub fn run(data: &[u8]) -> Result<FetchReport, Violation> {
    let script = FetchScript::parse(data);
    let budget = MemoryBudget::new(BUDGET);
    let report = run_script(&script, &budget)?;
    if budget.available() != budget.capacity() {
        return Err(violation(format!(
            "{} bytes of the memory budget still held after everything was dropped",
            budget.capacity() - budget.available()
        )));
    }
    Ok(report)
}

struct Harness {
    partition: Arc<Partition>,
    fetcher: Fetcher<Partition>,
    reader: PartitionReader,
    version: i16,
    owned: bool,
    skip_bad: bool,
    start: i64,
    now: Instant,
    report: FetchReport,
}

fn run_script(script: &FetchScript, budget: &MemoryBudget) -> Result<FetchReport, Violation> {
    let range = ApiKey::Fetch.versions();
    let span = (range.max - range.min).saturating_add(1).max(1);
    let version = range.min + (i16::from(script.version) % span);
    let read_committed = script.flags & READ_COMMITTED != 0;
    let settings = FetchSettings {
        max_wait: Duration::from_millis(500),
        min_bytes: 1,
        max_bytes: 8 << 20,
        partition_max_bytes: 4 << 20,
        isolation_level: i8::from(read_committed),
        error_backoff: Duration::from_millis(100),
        error_backoff_max: Duration::from_secs(1),
        rack_id: String::new(),
        read_replica_max_age: Duration::from_secs(300),
    };
    let partition = Arc::new(Partition {
        topic: Arc::from(TOPIC),
        position: AtomicI64::new(script.start),
        high_watermark: AtomicI64::new(-1),
        queue: Mutex::new(VecDeque::new()),
        errors: AtomicUsize::new(0),
    });
    let mut fetcher = Fetcher::new(settings);
    fetcher.add(partition.clone());
    let max_decompressed = 1024usize << (script.max_decompressed % 14);
    let reader = PartitionReader::new(
        script.start,
        read_committed,
        script.flags & CHECK_CRCS != 0,
        max_decompressed,
        budget.clone(),
    );
    let mut h = Harness {
        partition,
        fetcher,
        reader,
        version,
        owned: script.flags & OWNED != 0,
        skip_bad: script.flags & SKIP_BAD != 0,
        start: script.start,
        now: Instant::now(),
        report: FetchReport::default(),
    };
    // Reader steps per round before it counts as a loop: a step hands out a batch,
    // skips one, reports an error or takes a chunk, and every batch takes bytes.
    let steps = 64 + script.rounds.iter().map(|r| r.records.len()).sum::<usize>();
    for round in &script.rounds {
        h.fetch(round, budget)?;
        h.read(steps)?;
    }
    h.report.fetch_errors = h.partition.errors.load(Relaxed);
    h.report.position = h.reader.position();
    Ok(h.report)
}

impl Harness {
    /// One Fetch answered with `round`, once the fetcher wants to fetch.
    fn fetch(&mut self, round: &Round, budget: &MemoryBudget) -> Result<(), Violation> {
        let Some((max_bytes, short_poll)) = self.next_fetch() else {
            return Ok(());
        };
        let request = self
            .fetcher
            .build_request(self.version, max_bytes, short_poll, &|_| TOPIC_ID);
        let position = self.partition.fetch_position();
        let asked = request.topics.iter().flat_map(|t| t.partitions.iter());
        if let Some(p) = asked.into_iter().find(|p| p.fetch_offset != position) {
            return Err(violation(format!(
                "fetching from {} at fetch position {position}",
                p.fetch_offset
            )));
        }
        let Ok(permit) = budget.try_acquire(max_bytes) else {
            return Ok(());
        };
        self.report.fetches += 1;
        let response = response_of(round, self.version);
        let queued = self.partition.queue().len();
        let outcome = self
            .fetcher
            .handle_response(response, self.version, permit, self.now);
        self.report.chunks += self.partition.queue().len().saturating_sub(queued);
        for p in outcome.reset {
            // The reset policy (earliest): back to where the consumer started.
            self.report.resets += 1;
            p.set_fetch_position(self.start, -1);
            p.queue().push_back(Delivery::Reset(self.start));
        }
        for p in outcome
            .moved
            .into_iter()
            .chain(outcome.redirected)
            .chain(outcome.fallback)
        {
            // Rerouted to the same broker.
            self.fetcher.add(p);
        }
        Ok(())
    }

    /// What the fetcher decides, time moving on while it waits (a backoff, a short
    /// poll's wait for room); `None` when it keeps waiting.
    fn next_fetch(&mut self) -> Option<(usize, bool)> {
        for _ in 0..4 {
            match self.fetcher.poll_next(self.now, BUDGET) {
                Next::Fetch {
                    max_bytes,
                    short_poll,
                } => return Some((max_bytes, short_poll)),
                Next::Wait { until } => {
                    self.now = until.max(self.now + Duration::from_millis(1));
                }
                Next::Idle => return None,
            }
        }
        None
    }

    /// Reads until the reader needs a chunk the fetcher has not delivered, or stops at
    /// a bad batch (when not skipping).
    fn read(&mut self, limit: usize) -> Result<(), Violation> {
        for _ in 0..limit {
            match self.reader.advance() {
                Advance::NeedChunk => {
                    let next = self.partition.queue().pop_front();
                    match next {
                        Some(Delivery::Chunk(chunk)) => self.reader.push_chunk(chunk),
                        Some(Delivery::Reset(offset)) => self.reader.reset(offset),
                        None => return Ok(()),
                    }
                }
                Advance::Error(_) => {
                    if !self.bad_batch()? {
                        return Ok(());
                    }
                }
                Advance::Ready => {
                    let ok = if self.owned {
                        self.take_messages()?
                    } else {
                        self.take_batch()?
                    };
                    if !ok && !self.bad_batch()? {
                        return Ok(());
                    }
                }
            }
        }
        Err(violation(format!(
            "the reader took {limit} steps without finishing a round"
        )))
    }

    /// Takes the ready batch and reads every record; false when it is bad.
    fn take_batch(&mut self) -> Result<bool, Violation> {
        let Some(taken) = self.reader.take_ready() else {
            return Err(violation("advance said Ready, take_ready had nothing"));
        };
        let Ok(batch) = taken else {
            return Ok(false);
        };
        self.report.batches += 1;
        let start = batch.start();
        for record in batch.records() {
            // A bad record ends the batch for a borrowed reader (the error is theirs).
            let Ok(record) = record else { break };
            if record.offset() < start {
                return Err(violation(format!(
                    "record at {} handed out, the batch was taken at {start}",
                    record.offset()
                )));
            }
            touch(record.key());
            touch(record.value());
            for header in record.headers() {
                let Ok(header) = header else { break };
                touch(Some(header.key));
                touch(header.value);
            }
            self.report.records += 1;
        }
        Ok(true)
    }

    /// Takes the ready batch as owned messages; false when it is bad.
    fn take_messages(&mut self) -> Result<bool, Violation> {
        let position = self.reader.position();
        let topic = self.partition.topic.clone();
        let Some(taken) = self.reader.take_messages(&topic, 0, |_| {}) else {
            return Err(violation("advance said Ready, take_messages had nothing"));
        };
        let Ok(messages) = taken else {
            return Ok(false);
        };
        self.report.batches += 1;
        for m in &messages {
            if m.offset < position {
                return Err(violation(format!(
                    "message at {} handed out, the position was {position}",
                    m.offset
                )));
            }
            touch(m.key.as_deref());
            touch(m.value.as_deref());
            for (_, value) in &m.headers {
                touch(value.as_deref());
            }
        }
        self.report.records += messages.len();
        Ok(true)
    }

    /// The last read reported a bad batch: for a borrowed reader, the next read must
    /// report it again at the same position. Then it is skipped if the input says so;
    /// returns whether reading goes on.
    fn bad_batch(&mut self) -> Result<bool, Violation> {
        self.report.read_errors += 1;
        if !self.owned {
            let position = self.reader.position();
            let again = match self.reader.advance() {
                Advance::Error(_) => true,
                Advance::Ready => matches!(self.reader.take_ready(), Some(Err(_))),
                Advance::NeedChunk => false,
            };
            if !again {
                return Err(violation(format!(
                    "a bad batch at {position} was reported once, then passed over"
                )));
            }
            if self.reader.position() != position {
                return Err(violation(format!(
                    "the position moved from {position} to {} at a bad batch",
                    self.reader.position()
                )));
            }
        }
        Ok(self.skip_bad && self.reader.skip_bad_batch().is_some())
    }
}

/// Reads every byte, as a user touching the data would.
fn touch(bytes: Option<&[u8]>) {
    if let Some(b) = bytes {
        std::hint::black_box(b.iter().fold(0u8, |a, &x| a ^ x));
    }
}

/// The FetchResponse for one round, addressed to the harness's partition.
fn response_of(round: &Round, version: i16) -> FetchResponse {
    let aborted = (version >= 4).then(|| {
        round
            .aborted
            .iter()
            .map(|&(producer_id, first_offset)| {
                AbortedTransaction::default()
                    .with_producer_id(producer_id)
                    .with_first_offset(first_offset)
            })
            .collect()
    });
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_error_code(round.error_code)
        .with_high_watermark(round.high_watermark)
        .with_last_stable_offset(round.high_watermark)
        .with_aborted_transactions(aborted)
        .with_records(Some(Bytes::copy_from_slice(&round.records)));
    let topic = if version >= 13 {
        FetchableTopicResponse::default().with_topic_id(TOPIC_ID)
    } else {
        FetchableTopicResponse::default().with_topic(TOPIC.into())
    };
    FetchResponse::default()
        .with_error_code(KafkaCode::NONE.code())
        .with_responses(vec![topic.with_partitions(vec![partition])])
}
