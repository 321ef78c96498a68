//! Reading one partition's fetched chunks in order, sans-IO: the position the user has
//! reached, the batches to skip (before the position, control batches, aborted
//! transactions under read_committed), CRC checks and decompression. The partition
//! consumer feeds it chunks from its fetcher; the simulation feeds it directly.
//!
//! Invariants:
//! - Each batch's header was parsed once, by the fetcher; here a batch is found again
//!   from its span, not parsed anew.
//! - The position only moves forward, to the offset after the last batch handed out or
//!   skipped (or to a reset position).
//! - Aborted transactions begin at their first offset (from the fetch response) and end
//!   at their producer's abort marker, as the Java client does.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;

use crate::engine::fetch::Chunk;
use crate::error::Error;
use crate::record::{
    BatchSpan, Compression, ControlRecordType, Decompressor, RecordBatchRef, RecordError,
    RecordRef, Records,
};

/// A fetched batch, borrowed from the fetch buffer (or, when compressed, from the
/// partition's decompression scratch buffer).
#[derive(Debug)]
pub struct FetchedBatch<'a> {
    batch: RecordBatchRef<'a>,
    records: Records<'a>,
    /// The bytes the records point into.
    backing: &'a [u8],
    /// The fetch buffer, when `backing` is a slice of it (uncompressed batches).
    buffer: Option<Bytes>,
    start: i64,
}

impl<'a> FetchedBatch<'a> {
    /// The batch header.
    pub fn header(&self) -> &RecordBatchRef<'a> {
        &self.batch
    }

    /// The records at or after the consumer's position, borrowed: key, value and header
    /// slices point into the fetch buffer (or the decompression scratch).
    pub fn records(&self) -> impl Iterator<Item = Result<RecordRef<'a>, RecordError>> + 'a {
        let start = self.start;
        self.records
            .clone()
            .filter(move |r| r.as_ref().map_or(true, |r| r.offset() >= start))
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

/// What [`PartitionReader::advance`] found.
#[derive(Debug)]
pub(crate) enum Advance {
    /// A batch for the user is ready: take it with [`PartitionReader::take_ready`].
    Ready,
    /// The current chunk is used up: feed the next one.
    NeedChunk,
    /// The batch at the cursor is bad (and was passed over).
    Error(Error),
}

/// One partition's reading state.
#[derive(Debug)]
pub(crate) struct PartitionReader {
    /// The next offset to hand to the user.
    position: i64,
    read_committed: bool,
    check_crcs: bool,
    current: Option<Chunk>,
    /// The batch found by `advance`, not handed out yet, and where it starts for the user.
    ready: Option<(BatchSpan, i64)>,
    scratch: Vec<u8>,
    decompressor: Decompressor,
    /// Aborted transactions not reached yet: first offset → producer ids.
    aborted_pending: BTreeMap<i64, Vec<i64>>,
    /// Producers whose open transaction is aborted.
    aborted_active: HashSet<i64>,
}

impl PartitionReader {
    pub fn new(position: i64, read_committed: bool, check_crcs: bool) -> Self {
        PartitionReader {
            position,
            read_committed,
            check_crcs,
            current: None,
            ready: None,
            scratch: Vec::new(),
            decompressor: Decompressor::default(),
            aborted_pending: BTreeMap::new(),
            aborted_active: HashSet::new(),
        }
    }

    /// The next offset to hand out.
    pub fn position(&self) -> i64 {
        self.position
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
    }

    /// The position moved (the reset policy): what was fetched is dropped, and so is
    /// what was known of aborted transactions — it described the log before the jump,
    /// and a producer left marked aborted would lose its later committed transactions.
    /// Chunks fetched from the new position carry their own aborted list.
    pub fn reset(&mut self, offset: i64) {
        self.position = offset;
        self.current = None;
        self.ready = None;
        self.aborted_pending.clear();
        self.aborted_active.clear();
    }

    /// Moves to the next batch the user should see, skipping the rest.
    pub fn advance(&mut self) -> Advance {
        if self.ready.is_some() {
            return Advance::Ready;
        }
        loop {
            let Some(chunk) = self.current.as_mut() else {
                return Advance::NeedChunk;
            };
            let Some(span) = chunk.batches.pop_front() else {
                self.current = None;
                return Advance::NeedChunk;
            };
            let Some(batch) = RecordBatchRef::from_span(&chunk.records, span) else {
                self.current = None;
                return Advance::Error(Error::Batch("a batch span outside its chunk".into()));
            };
            let next = span.next_offset();
            if next <= self.position {
                continue; // all before the position (a batch we asked to start inside)
            }
            if self.check_crcs
                && let Err(e) = batch.verify_crc()
            {
                return Advance::Error(Error::Batch(e.to_string()));
            }
            let (control, abort_marker, producer, transactional) = (
                batch.is_control(),
                matches!(batch.control_record(), Ok(Some(m)) if m.kind == ControlRecordType::Abort),
                batch.producer_id(),
                batch.is_transactional(),
            );
            self.begin_aborted_up_to(span.last_offset);
            if control {
                if abort_marker {
                    self.aborted_active.remove(&producer);
                }
                self.position = next;
                continue;
            }
            if self.read_committed && transactional && self.aborted_active.contains(&producer) {
                self.position = next;
                continue;
            }
            let start = self.position;
            self.position = next;
            self.ready = Some((span, start));
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
    pub fn take_ready(&mut self) -> Option<Result<FetchedBatch<'_>, Error>> {
        let (span, start) = self.ready.take()?;
        let chunk = self.current.as_ref()?;
        let batch = RecordBatchRef::from_span(&chunk.records, span)?;
        let zero_copy = batch.compression().ok() == Some(Compression::None);
        let records = match batch.decompress_records(&mut self.decompressor, &mut self.scratch) {
            Ok(r) => r,
            Err(e) => return Some(Err(Error::Batch(e.to_string()))),
        };
        Some(Ok(FetchedBatch {
            batch,
            backing: records.bytes(),
            records,
            buffer: zero_copy.then(|| chunk.records.clone()),
            start,
        }))
    }
}

#[cfg(test)]
mod tests;
