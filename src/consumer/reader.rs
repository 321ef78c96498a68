//! Reading one partition's fetched chunks in order, sans-IO: the position the user has
//! reached, the batches to skip (before the position, control batches, aborted
//! transactions under read_committed), CRC checks and decompression. The partition
//! consumer feeds it chunks from its fetcher; the simulation feeds it directly. v2
//! batches and legacy v0/v1 messages (old log segments) are read alike; a legacy
//! message (or compressed wrapper) is one batch here, never transactional.
//!
//! Invariants:
//! - Each batch's header was parsed once, by the fetcher; here a batch is found again
//!   from its span, not parsed anew (a legacy message's few length fields are re-read).
//! - The position only moves forward, to the offset after the last batch handed out or
//!   skipped (or to a reset position). A batch that fails its CRC check or does not
//!   decompress is not passed over: it stays first, the position stays at it, and every
//!   read reports it again until [`PartitionReader::skip_bad_batch`] (the application's
//!   decision, as a seek past it is in the Java client).
//! - Aborted transactions begin at their first offset (from the fetch response) and end
//!   at their producer's abort marker, as the Java client does; a reset forgets them.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use crate::buf::{MemoryBudget, Permit};
use crate::engine::fetch::Chunk;
use crate::error::Error;
use crate::record::{
    AnyRecords, BatchRef, BatchSpan, Compression, ControlRecordType, Decompressor, RecordBatchRef,
    RecordError, RecordRef,
};

/// A fetched batch, borrowed from the fetch buffer (or, when compressed, from the
/// partition's decompression scratch buffer).
#[derive(Debug)]
pub struct FetchedBatch<'a> {
    batch: BatchRef<'a>,
    records: AnyRecords<'a>,
    /// The bytes the records point into.
    backing: &'a [u8],
    /// The fetch buffer, when `backing` is a slice of it (uncompressed batches).
    buffer: Option<Bytes>,
    start: i64,
    last_offset: i64,
    /// Its size in bytes as fetched (compressed).
    size: usize,
}

impl<'a> FetchedBatch<'a> {
    /// The v2 batch header; `None` for a legacy (v0/v1) message, see
    /// [`FetchedBatch::batch`].
    pub fn header(&self) -> Option<&RecordBatchRef<'a>> {
        self.batch.as_v2()
    }

    /// The batch, v2 or legacy.
    pub fn batch(&self) -> &BatchRef<'a> {
        &self.batch
    }

    /// The records at or after the consumer's position, borrowed: key, value and header
    /// slices point into the fetch buffer (or the decompression scratch). Legacy
    /// records have no headers.
    pub fn records(&self) -> impl Iterator<Item = Result<RecordRef<'a>, RecordError>> + 'a {
        let start = self.start;
        // One filtered iterator per format, chosen once per batch: the v2 loop is then
        // the same as without legacy support (a per-record enum dispatch cost 4% of the
        // consumer's instructions).
        match self.records.clone() {
            AnyRecords::V2(inner) => EitherRecords::V2(FromOffset { inner, start }),
            AnyRecords::Legacy(inner) => EitherRecords::Legacy(FromOffset { inner, start }),
        }
    }

    /// The offset the user's reading of this batch starts at (the consumer's position
    /// when the batch was taken).
    pub(crate) fn start(&self) -> i64 {
        self.start
    }

    /// The first offset handed out, the batch's last offset, and its size as fetched.
    pub(crate) fn extent(&self) -> (i64, i64, usize) {
        (
            self.start.max(self.batch.base_offset()),
            self.last_offset,
            self.size,
        )
    }

    /// A shared, owned handle to the bytes the records point into: a zero-copy slice of
    /// the fetch buffer for uncompressed batches, a copy of the decompressed records
    /// otherwise.
    pub fn shared_bytes(&self) -> Bytes {
        match &self.buffer {
            Some(b) => b.slice_ref(self.backing),
            None => Bytes::copy_from_slice(self.backing),
        }
    }

    /// `part` (a slice of a record of this batch) as a slice of `owner`, which came from
    /// [`FetchedBatch::shared_bytes`].
    pub(crate) fn share(&self, owner: &Bytes, part: &[u8]) -> Bytes {
        let offset = part.as_ptr() as usize - self.backing.as_ptr() as usize;
        owner.slice(offset..offset + part.len())
    }
}

/// The records (and errors) of `inner` from offset `start` on: `Iterator::filter`, but
/// always inlined, like the rest of the per-record path (left to the inliner, the whole
/// record decoder ended up out of line in a consume loop that had grown: 60 more
/// instructions a record, a quarter of the loop).
struct FromOffset<I> {
    inner: I,
    start: i64,
}

impl<'a, I: Iterator<Item = Result<RecordRef<'a>, RecordError>>> Iterator for FromOffset<I> {
    type Item = I::Item;

    #[inline(always)]
    fn next(&mut self) -> Option<I::Item> {
        loop {
            let item = self.inner.next()?;
            if item.as_ref().map_or(true, |r| r.offset() >= self.start) {
                return Some(item);
            }
        }
    }
}

/// The records of a v2 batch or of a legacy message, behind one type.
enum EitherRecords<A, B> {
    V2(A),
    Legacy(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for EitherRecords<A, B> {
    type Item = T;

    #[inline(always)]
    fn next(&mut self) -> Option<T> {
        match self {
            EitherRecords::V2(a) => a.next(),
            EitherRecords::Legacy(b) => b.next(),
        }
    }
}

/// What [`PartitionReader::advance`] found.
#[derive(Debug)]
pub(crate) enum Advance {
    /// A batch for the user is ready: take it with [`PartitionReader::take_ready`].
    Ready,
    /// The current chunk is used up: feed the next one.
    NeedChunk,
    /// The batch at the position is bad; it stays there (see
    /// [`PartitionReader::skip_bad_batch`]).
    Error(Error),
}

/// One partition's reading state.
#[derive(Debug)]
pub(crate) struct PartitionReader {
    /// The next offset to hand to the user.
    position: i64,
    /// The leader epoch of the batch the position last moved past (-1: none since the
    /// start or the last reset), committed with the position (KIP-320).
    position_epoch: i32,
    read_committed: bool,
    check_crcs: bool,
    current: Option<Chunk>,
    /// The batch found by `advance`, not handed out yet, and where it starts for the user.
    ready: Option<(BatchSpan, i64)>,
    /// The batch last handed out by `take_ready`, and where it started for the user.
    taken: Option<(BatchSpan, i64)>,
    /// The batch at the front of the chunk that was reported bad.
    bad: Option<BatchSpan>,
    /// A bad record met after every offset of its batch was handed out: reported by
    /// the next read (there is nothing to stay at).
    deferred: Option<Error>,
    scratch: Vec<u8>,
    decompressor: Decompressor,
    /// The decompressed sizes of the last two compressed batches: the smaller is the
    /// typical size worth keeping scratch space for (one huge batch is not typical).
    recent: [usize; 2],
    /// The consumer's memory budget, charged with the decompression memory kept
    /// between batches beyond [`FREE_MEMORY`].
    memory: MemoryBudget,
    charged: Option<Permit>,
    /// Aborted transactions not reached yet: first offset → producer ids.
    aborted_pending: BTreeMap<i64, Vec<i64>>,
    /// Producers whose open transaction is aborted.
    aborted_active: HashSet<i64>,
}

/// A v2 batch's transaction facts, or none for a legacy message.
struct TxnFacts {
    control: bool,
    abort_marker: bool,
    producer: i64,
    transactional: bool,
}

impl TxnFacts {
    /// The facts, or why a control batch's marker cannot be read (a malformed abort
    /// marker passed over would leave its producer's later transactions unread).
    fn of(batch: &BatchRef<'_>) -> Result<Self, RecordError> {
        Ok(match batch {
            BatchRef::V2(b) => TxnFacts {
                control: b.is_control(),
                abort_marker: matches!(b.control_record()?, Some(m) if m.kind == ControlRecordType::Abort),
                producer: b.producer_id(),
                transactional: b.is_transactional(),
            },
            BatchRef::Legacy(_) => TxnFacts {
                control: false,
                abort_marker: false,
                producer: -1,
                transactional: false,
            },
        })
    }
}

/// Decompression memory a partition keeps between batches without charging the memory
/// budget.
pub(crate) const FREE_MEMORY: usize = 1 << 20;

/// Codec state kept between batches when the budget covers it: a zstd context with an
/// 8 MiB window (what producers stream with, whatever the batch size) and its buffers.
const USUAL_CODEC_STATE: usize = 9 << 20;

/// Shrinks `v`'s allocation to `keep` bytes (its contents are scratch).
fn shrink_scratch(v: &mut Vec<u8>, keep: usize) {
    v.truncate(keep);
    v.shrink_to(keep);
}

fn corrupt(span: BatchSpan, error: RecordError) -> Error {
    Error::CorruptBatch {
        base_offset: span.base_offset,
        last_offset: span.last_offset,
        error,
    }
}

impl PartitionReader {
    /// A reader from `position`. `max_decompressed` caps one batch's decompressed size;
    /// `memory` (the consumer's budget) is charged with the decompression memory kept
    /// between batches.
    pub fn new(
        position: i64,
        read_committed: bool,
        check_crcs: bool,
        max_decompressed: usize,
        memory: MemoryBudget,
    ) -> Self {
        PartitionReader {
            position,
            position_epoch: -1,
            read_committed,
            check_crcs,
            current: None,
            ready: None,
            taken: None,
            bad: None,
            deferred: None,
            scratch: Vec::new(),
            decompressor: Decompressor::new(max_decompressed),
            recent: [0; 2],
            memory,
            charged: None,
            aborted_pending: BTreeMap::new(),
            aborted_active: HashSet::new(),
        }
    }

    /// The next offset to hand out.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// The leader epoch of the last batch the position moved past, if any since the
    /// start or the last reset.
    pub fn position_epoch(&self) -> Option<i32> {
        (self.position_epoch >= 0).then_some(self.position_epoch)
    }

    /// Takes the next chunk from the fetcher.
    pub fn push_chunk(&mut self, chunk: Chunk) {
        if self.read_committed {
            for &(producer, first) in &chunk.aborted {
                self.aborted_pending
                    .entry(first)
                    .or_default()
                    .push(producer);
            }
        }
        self.current = Some(chunk);
        self.ready = None;
        self.taken = None;
        self.bad = None;
    }

    /// The position moved (the reset policy): what was fetched is dropped, and so is
    /// what was known of aborted transactions — it described the log before the jump,
    /// and a producer left marked aborted would lose its later committed transactions.
    /// Chunks fetched from the new position carry their own aborted list.
    pub fn reset(&mut self, offset: i64) {
        self.position = offset;
        self.position_epoch = -1;
        self.current = None;
        self.ready = None;
        self.taken = None;
        self.bad = None;
        self.deferred = None;
        self.aborted_pending.clear();
        self.aborted_active.clear();
        self.settle_memory();
    }

    /// Bytes of decompression memory held now (scratch space and codec state).
    pub fn decompression_memory(&self) -> usize {
        self.scratch.capacity() + self.decompressor.state_bytes()
    }

    /// After a batch was used: keeps scratch space for the typical batch (at least
    /// [`FREE_MEMORY`]) and usual codec state, frees the rest, and charges what is
    /// kept beyond [`FREE_MEMORY`] to the memory budget; what the budget cannot cover
    /// is freed too. While a batch is in use its memory is bounded by the cap on
    /// decompressed size (and a zstd window no larger), not by the budget.
    fn settle_memory(&mut self) {
        let keep = FREE_MEMORY.max(self.recent[0].min(self.recent[1]));
        if self.scratch.capacity() > keep {
            shrink_scratch(&mut self.scratch, keep);
        }
        if self.decompressor.state_bytes() > keep.max(USUAL_CODEC_STATE) {
            self.decompressor.release_state();
        }
        let charge = self.decompression_memory().saturating_sub(FREE_MEMORY);
        if !self.charge_memory(charge) {
            self.decompressor.release_state();
            shrink_scratch(&mut self.scratch, FREE_MEMORY);
            self.charged = None;
        }
    }

    /// Holds exactly `bytes` of the memory budget; false when it cannot have them now.
    fn charge_memory(&mut self, bytes: usize) -> bool {
        let held = self.charged.as_ref().map_or(0, Permit::size);
        if bytes <= held {
            match self.charged.as_mut() {
                Some(p) if bytes > 0 => p.shrink_to(bytes),
                _ => self.charged = None,
            }
            return true;
        }
        let Ok(extra) = self.memory.try_acquire(bytes - held) else {
            return false;
        };
        match self.charged.as_mut() {
            None => self.charged = Some(extra),
            Some(p) => {
                if p.merge(extra).is_err() {
                    return false;
                }
            }
        }
        true
    }

    /// Moves to the next batch the user should see, skipping the rest. A bad batch
    /// stays first: it is reported again on every call.
    pub fn advance(&mut self) -> Advance {
        if self.ready.is_some() {
            return Advance::Ready;
        }
        if let Some(e) = self.deferred.take() {
            return Advance::Error(e);
        }
        if self.taken.take().is_some() {
            // The batch handed out last is no longer borrowed.
            self.settle_memory();
        }
        loop {
            let Some(chunk) = self.current.as_mut() else {
                return Advance::NeedChunk;
            };
            let Some(&span) = chunk.batches.front() else {
                self.current = None;
                return Advance::NeedChunk;
            };
            let Some(batch) = BatchRef::from_span(&chunk.records, span) else {
                self.current = None;
                return Advance::Error(Error::Batch("a batch span outside its chunk".into()));
            };
            let next = span.next_offset();
            let epoch = batch.partition_leader_epoch();
            if next <= self.position {
                chunk.batches.pop_front();
                continue; // all before the position (a batch we asked to start inside)
            }
            if self.check_crcs
                && let Err(e) = batch.verify_crc()
            {
                self.bad = Some(span);
                return Advance::Error(corrupt(span, e));
            }
            let facts = match TxnFacts::of(&batch) {
                Ok(f) => f,
                Err(e) => {
                    self.bad = Some(span);
                    return Advance::Error(corrupt(span, e));
                }
            };
            chunk.batches.pop_front();
            self.begin_aborted_up_to(span.last_offset);
            if facts.control {
                if facts.abort_marker {
                    self.aborted_active.remove(&facts.producer);
                }
                self.position = next;
                self.position_epoch = epoch;
                continue;
            }
            if self.read_committed
                && facts.transactional
                && self.aborted_active.contains(&facts.producer)
            {
                self.position = next;
                self.position_epoch = epoch;
                continue;
            }
            self.ready = Some((span, self.position));
            return Advance::Ready;
        }
    }

    /// Aborted transactions that begin at or before `last_offset` are now open.
    fn begin_aborted_up_to(&mut self, last_offset: i64) {
        while let Some(entry) = self.aborted_pending.first_entry() {
            if *entry.key() > last_offset {
                break;
            }
            self.aborted_active.extend(entry.remove());
        }
    }

    /// The batch [`PartitionReader::advance`] found, its records decompressed if needed.
    /// A batch that does not decompress stays first, the position at it.
    pub fn take_ready(&mut self) -> Option<Result<FetchedBatch<'_>, Error>> {
        let (span, start) = self.ready.take()?;
        let Some(chunk) = self.current.as_mut() else {
            return Some(Err(Error::Batch("a ready batch without its chunk".into())));
        };
        let Some(batch) = BatchRef::from_span(&chunk.records, span) else {
            return Some(Err(Error::Batch("a batch span outside its chunk".into())));
        };
        let zero_copy = batch.compression().ok() == Some(Compression::None);
        let records = match batch.records(&mut self.decompressor, &mut self.scratch) {
            Ok(r) => r,
            Err(e) => {
                chunk.batches.push_front(span);
                self.bad = Some(span);
                return Some(Err(corrupt(span, e)));
            }
        };
        if !zero_copy {
            self.recent = [self.recent[1], records.bytes().len()];
        }
        self.position = span.next_offset();
        self.position_epoch = batch.partition_leader_epoch();
        self.taken = Some((span, start));
        self.bad = None;
        Some(Ok(FetchedBatch {
            batch,
            backing: records.bytes(),
            records,
            buffer: zero_copy.then(|| chunk.records.clone()),
            start,
            last_offset: span.last_offset,
            size: span.len,
        }))
    }

    /// The next batch as owned messages (see `PartitionConsumer::next_messages`): a
    /// record that does not decode ends it there, the records before it come back, and
    /// the batch stays first with the position at the bad record, so the next read
    /// reports it.
    /// `observe` sees the batch before it is turned into messages.
    pub fn take_messages(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        observe: impl FnOnce(&FetchedBatch<'_>),
    ) -> Option<Result<Vec<super::Message>, Error>> {
        let (out, failure) = match self.take_ready()? {
            Ok(batch) => {
                observe(&batch);
                owned_messages(&batch, topic, partition)
            }
            Err(e) => return Some(Err(e)),
        };
        match failure {
            None => Some(Ok(out)),
            Some((offset, error)) => {
                let error = self.hold_bad_record(offset, error);
                if out.is_empty() {
                    Some(Err(error))
                } else {
                    Some(Ok(out))
                }
            }
        }
    }

    /// The batch last taken holds a record at `offset` that does not decode (and
    /// the records before it were handed out): the position goes back to `offset` and
    /// the batch stays first, reported on every read until skipped.
    fn hold_bad_record(&mut self, offset: i64, error: RecordError) -> Error {
        let Some((span, start)) = self.taken.take() else {
            return Error::Batch(error.to_string());
        };
        let error = corrupt(span, error);
        if offset >= span.next_offset() {
            // Past the batch's last offset: nothing of it is left to stay at.
            self.deferred = Some(error.clone());
            return error;
        }
        if let Some(chunk) = self.current.as_mut() {
            chunk.batches.push_front(span);
            self.position = offset.max(start);
            self.bad = Some(span);
        }
        error
    }

    /// Passes over the bad batch the last read reported, the position moving past it
    /// (the application's choice, as a seek past it is in the Java client): its first
    /// and last offset, or `None` when the last read reported no bad batch.
    pub fn skip_bad_batch(&mut self) -> Option<(i64, i64)> {
        let span = self.bad.take()?;
        let chunk = self.current.as_mut()?;
        if chunk.batches.front() != Some(&span) {
            return None;
        }
        chunk.batches.pop_front();
        self.begin_aborted_up_to(span.last_offset);
        self.position = self.position.max(span.next_offset());
        Some((span.base_offset, span.last_offset))
    }
}

/// The records of `batch` as owned messages, up to the first that does not decode:
/// that one's offset (the one after the last good record, or where the batch starts
/// for the user) and error.
pub(super) fn owned_messages(
    batch: &FetchedBatch<'_>,
    topic: &Arc<str>,
    partition: i32,
) -> (
    Vec<super::Message>,
    Option<(i64, crate::record::RecordError)>,
) {
    let owner = batch.shared_bytes();
    let mut out: Vec<super::Message> = Vec::new();
    let mut next = batch.start();
    for r in batch.records() {
        let r = match r {
            Ok(r) => r,
            Err(e) => return (out, Some((next, e))),
        };
        let mut headers = Vec::new();
        for h in r.headers() {
            match h {
                Ok(h) => headers.push((
                    String::from_utf8_lossy(h.key).into_owned(),
                    h.value.map(|v| batch.share(&owner, v)),
                )),
                Err(e) => return (out, Some((r.offset(), e))),
            }
        }
        next = r.offset().wrapping_add(1);
        out.push(super::Message {
            topic: topic.clone(),
            partition,
            offset: r.offset(),
            timestamp: r.timestamp(),
            key: r.key().map(|k| batch.share(&owner, k)),
            value: r.value().map(|v| batch.share(&owner, v)),
            headers,
        });
    }
    (out, None)
}

#[cfg(test)]
mod tests;
