//! Lazy, borrowed reading of v2 record batches (and, through [`BatchRef`], of legacy
//! message sets) from the bytes a Fetch response carried.
//!
//! Nothing is copied or allocated: [`RecordBatchRef`] is a checked view of one batch's
//! bytes whose header accessors are fixed-offset loads; [`Records`] parses one record
//! per `next()`; [`RecordRef`] hands out key, value and header slices of the input.
//! Compressed batches are inflated into a caller-owned scratch buffer first
//! ([`RecordBatchRef::decompress_records`]) and read the same way from there.
//!
//! Invariants: [`RecordBatchRef::parse`] checks the length and magic only, so header
//! reads cannot go out of bounds; the CRC is checked only by
//! [`RecordBatchRef::verify_crc`] (or [`Batches::verify_crc`]); a record count larger
//! than the records' bytes could hold is rejected before iteration starts, and an
//! iterator stops for good after its first error.

use super::compression::Decompressor;
use super::legacy::{LegacyMessageRef, LegacyRecords};
use super::varint::{self, VarintError};
use super::{
    BATCH_HEADER_LEN, BATCH_LENGTH_OFFSET, Compression, MAGIC_V2, MIN_RECORD_LEN, RecordError,
    TimestampType, be_at,
};

/// Byte offsets of the v2 batch header fields.
pub(crate) mod off {
    pub const BASE_OFFSET: usize = 0;
    pub const LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORD_COUNT: usize = 57;
}

/// Attribute bits of a v2 batch.
pub(crate) mod attr {
    pub const COMPRESSION_MASK: i16 = 0x07;
    pub const TIMESTAMP_TYPE: i16 = 0x08;
    pub const TRANSACTIONAL: i16 = 0x10;
    pub const CONTROL: i16 = 0x20;
    pub const DELETE_HORIZON: i16 = 0x40;
}

fn varint_err(what: &'static str) -> impl Fn(VarintError) -> RecordError {
    move |_| RecordError::Varint(what)
}

/// Where a parsed batch lies in its buffer, and its offsets: what the fetcher learns
/// from a batch's header once and hands to the consumer with the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSpan {
    /// Byte position of the batch in the buffer.
    pub start: usize,
    /// Its length in bytes, header included.
    pub len: usize,
    /// Offset of its first record.
    pub base_offset: i64,
    /// Offset of its last record.
    pub last_offset: i64,
}

impl BatchSpan {
    /// The offset after the batch's last record.
    pub fn next_offset(&self) -> i64 {
        self.last_offset.wrapping_add(1)
    }
}

/// One v2 record batch, borrowed from the input. Cheap to copy.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RecordBatchRef<'a> {
    /// Exactly the batch: header and records, `12 + length` bytes.
    bytes: &'a [u8],
}

impl std::fmt::Debug for RecordBatchRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatchRef")
            .field("base_offset", &self.base_offset())
            .field("len", &self.bytes.len())
            .field("attributes", &self.attributes())
            .field("record_count", &self.record_count())
            .finish_non_exhaustive()
    }
}

impl<'a> RecordBatchRef<'a> {
    /// Splits one v2 batch off the front of `input`. `Ok(None)` when `input` holds
    /// only part of a batch (a fetch cut mid-batch); otherwise the batch and the rest.
    /// Checks the length and magic; not the CRC (see [`Self::verify_crc`]).
    pub fn parse(input: &'a [u8]) -> Result<Option<(Self, &'a [u8])>, RecordError> {
        let Some(total) = batch_total_len(input)? else {
            return Ok(None);
        };
        if total < BATCH_HEADER_LEN {
            return Err(RecordError::InvalidLength {
                what: "record batch length",
                length: (total - BATCH_LENGTH_OFFSET) as i64,
            });
        }
        if input.len() < total {
            return Ok(None);
        }
        let magic = input[off::MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(RecordError::UnsupportedMagic(magic));
        }
        let (bytes, rest) = input.split_at(total);
        Ok(Some((RecordBatchRef { bytes }, rest)))
    }

    /// The batch again from where [`RecordBatchRef::parse`] found it in `buffer` (its
    /// [`BatchSpan`]), without parsing its header a second time. `None` if the span does
    /// not lie in `buffer`.
    pub fn from_span(buffer: &'a [u8], span: BatchSpan) -> Option<Self> {
        let bytes = buffer.get(span.start..span.start.checked_add(span.len)?)?;
        (bytes.len() >= BATCH_HEADER_LEN).then_some(RecordBatchRef { bytes })
    }

    /// Where this batch lies in `buffer`, which it must be a part of, with its offsets:
    /// what a reader keeps to come back to it ([`RecordBatchRef::from_span`]).
    pub fn span_in(&self, buffer: &[u8]) -> Option<BatchSpan> {
        let start = (self.bytes.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
        (start + self.bytes.len() <= buffer.len()).then(|| BatchSpan {
            start,
            len: self.bytes.len(),
            base_offset: self.base_offset(),
            last_offset: self.last_offset(),
        })
    }

    /// Reads exactly one batch that must fill `input`.
    pub fn new(input: &'a [u8]) -> Result<Self, RecordError> {
        match Self::parse(input)? {
            Some((batch, [])) => Ok(batch),
            Some((_, rest)) => Err(RecordError::TrailingBytes(rest.len())),
            None => Err(RecordError::Truncated {
                what: "record batch",
                needed: batch_total_len(input)?.unwrap_or(BATCH_HEADER_LEN),
                remaining: input.len(),
            }),
        }
    }

    /// The whole batch as it was on the wire.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The records section (compressed, if the batch is).
    pub fn records_bytes(&self) -> &'a [u8] {
        &self.bytes[BATCH_HEADER_LEN..]
    }

    /// Offset of the first record.
    pub fn base_offset(&self) -> i64 {
        be_at!(i64, self.bytes, off::BASE_OFFSET)
    }

    /// The `length` field: bytes after the first 12.
    pub fn batch_length(&self) -> i32 {
        be_at!(i32, self.bytes, off::LENGTH)
    }

    /// Leader epoch the broker stamped (not covered by the CRC).
    pub fn partition_leader_epoch(&self) -> i32 {
        be_at!(i32, self.bytes, off::PARTITION_LEADER_EPOCH)
    }

    /// The magic byte (always 2 here).
    pub fn magic(&self) -> i8 {
        self.bytes[off::MAGIC] as i8
    }

    /// The stored CRC-32C.
    pub fn crc(&self) -> u32 {
        be_at!(u32, self.bytes, off::CRC)
    }

    /// CRC-32C of the bytes the stored CRC covers (attributes to the end).
    pub fn compute_crc(&self) -> u32 {
        super::crc::crc32c(&self.bytes[off::ATTRIBUTES..])
    }

    /// Checks the stored CRC against the bytes.
    pub fn verify_crc(&self) -> Result<(), RecordError> {
        let (stored, computed) = (self.crc(), self.compute_crc());
        if stored == computed {
            Ok(())
        } else {
            Err(RecordError::CrcMismatch { stored, computed })
        }
    }

    /// The raw attributes.
    pub fn attributes(&self) -> i16 {
        be_at!(i16, self.bytes, off::ATTRIBUTES)
    }

    /// The codec of the records section.
    pub fn compression(&self) -> Result<Compression, RecordError> {
        Compression::from_id((self.attributes() & attr::COMPRESSION_MASK) as u8)
    }

    /// Create time or log-append time.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & attr::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Part of a transaction (KIP-98).
    pub fn is_transactional(&self) -> bool {
        self.attributes() & attr::TRANSACTIONAL != 0
    }

    /// Holds control records (transaction markers) rather than data.
    pub fn is_control(&self) -> bool {
        self.attributes() & attr::CONTROL != 0
    }

    /// `base_timestamp` is a delete horizon (KIP-534, compacted tombstones).
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & attr::DELETE_HORIZON != 0
    }

    /// Offset delta of the last record (`record_count - 1` when nothing was compacted).
    pub fn last_offset_delta(&self) -> i32 {
        be_at!(i32, self.bytes, off::LAST_OFFSET_DELTA)
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(i64::from(self.last_offset_delta()))
    }

    /// The offset after this batch: where the next fetch continues.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// Timestamp the record deltas are relative to.
    pub fn base_timestamp(&self) -> i64 {
        be_at!(i64, self.bytes, off::BASE_TIMESTAMP)
    }

    /// Largest record timestamp (the append time for log-append-time batches).
    pub fn max_timestamp(&self) -> i64 {
        be_at!(i64, self.bytes, off::MAX_TIMESTAMP)
    }

    /// Idempotent producer id, or -1.
    pub fn producer_id(&self) -> i64 {
        be_at!(i64, self.bytes, off::PRODUCER_ID)
    }

    /// Producer epoch, or -1.
    pub fn producer_epoch(&self) -> i16 {
        be_at!(i16, self.bytes, off::PRODUCER_EPOCH)
    }

    /// Sequence number of the first record, or -1.
    pub fn base_sequence(&self) -> i32 {
        be_at!(i32, self.bytes, off::BASE_SEQUENCE)
    }

    /// Number of records, as the header states it.
    pub fn record_count(&self) -> i32 {
        be_at!(i32, self.bytes, off::RECORD_COUNT)
    }

    /// Iterates the records of an uncompressed batch. A compressed batch is
    /// [`RecordError::Compressed`]: use [`Self::decompress_records`].
    pub fn records(&self) -> Result<Records<'a>, RecordError> {
        match self.compression()? {
            Compression::None => Records::new(self, self.records_bytes()),
            codec => Err(RecordError::Compressed(codec)),
        }
    }

    /// Iterates the records of any batch: compressed ones are decompressed into
    /// `scratch` (capped by `decompressor`), uncompressed ones read in place.
    pub fn decompress_records<'s>(
        &self,
        decompressor: &mut Decompressor,
        scratch: &'s mut Vec<u8>,
    ) -> Result<Records<'s>, RecordError>
    where
        'a: 's,
    {
        match self.compression()? {
            Compression::None => Records::new(self, self.records_bytes()),
            codec => {
                let n = decompressor.decompress(codec, self.records_bytes(), scratch)?;
                Records::new(self, &scratch[..n])
            }
        }
    }

    /// The control record of a control batch (a transaction marker), if this is one.
    /// Control batches are never compressed by brokers; a compressed one is an error.
    pub fn control_record(&self) -> Result<Option<ControlRecord>, RecordError> {
        if !self.is_control() {
            return Ok(None);
        }
        let record = self
            .records()?
            .next()
            .ok_or(RecordError::InvalidControlRecord(
                "control batch has no records",
            ))??;
        record.control().map(Some)
    }
}

/// Reads the `12 + length` total of the batch or message at the front of `input`,
/// or `None` when even that is not there yet.
fn batch_total_len(input: &[u8]) -> Result<Option<usize>, RecordError> {
    if input.len() < BATCH_LENGTH_OFFSET {
        return Ok(None);
    }
    let length = be_at!(i32, input, off::LENGTH);
    if length < 0 {
        return Err(RecordError::InvalidLength {
            what: "record batch length",
            length: i64::from(length),
        });
    }
    Ok(Some(BATCH_LENGTH_OFFSET + length as usize))
}

/// The records of one batch, parsed one per `next()`. Stops after `record_count`
/// records; an error ends the iteration.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    data: &'a [u8],
    remaining: u32,
    base_offset: i64,
    base_timestamp: i64,
    /// For log-append-time batches every record's timestamp is the batch's max.
    log_append_time: Option<i64>,
    /// The lowest offset delta the next record may have, and the batch's last delta:
    /// offsets strictly increase within the batch's range.
    min_delta: i64,
    last_delta: i32,
    failed: bool,
}

impl<'a> Records<'a> {
    /// The bytes of the records not yet iterated (all of them before the first `next`):
    /// the region every [`RecordRef`] from this iterator points into.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    fn new(batch: &RecordBatchRef<'_>, data: &'a [u8]) -> Result<Self, RecordError> {
        let count = batch.record_count();
        if count < 0 || (count as usize).saturating_mul(MIN_RECORD_LEN) > data.len() {
            return Err(RecordError::RecordCount {
                count: i64::from(count),
                bytes: data.len(),
            });
        }
        Ok(Records {
            data,
            remaining: count as u32,
            base_offset: batch.base_offset(),
            base_timestamp: batch.base_timestamp(),
            log_append_time: (batch.timestamp_type() == TimestampType::LogAppendTime)
                .then(|| batch.max_timestamp()),
            min_delta: 0,
            last_delta: batch.last_offset_delta(),
            failed: false,
        })
    }

    /// Records not yet returned, per the header's count.
    pub fn remaining(&self) -> usize {
        self.remaining as usize
    }

    // Always, with `next`: the per-record path is one loop in the caller's code.
    #[inline(always)]
    fn parse_next(&mut self) -> Result<RecordRef<'a>, RecordError> {
        let mut buf = self.data;
        let len = varint::read_varint(&mut buf).map_err(varint_err("record length"))?;
        if len < 0 {
            return Err(RecordError::InvalidLength {
                what: "record",
                length: i64::from(len),
            });
        }
        let len = len as usize;
        if len > buf.len() {
            return Err(RecordError::Truncated {
                what: "record",
                needed: len,
                remaining: buf.len(),
            });
        }
        let (mut body, rest) = buf.split_at(len);
        let Some((&attributes, tail)) = body.split_first() else {
            return Err(RecordError::Truncated {
                what: "record attributes",
                needed: 1,
                remaining: 0,
            });
        };
        body = tail;
        let ts_delta = varint::read_varlong(&mut body).map_err(varint_err("timestamp delta"))?;
        let offset_delta = varint::read_varint(&mut body).map_err(varint_err("offset delta"))?;
        if i64::from(offset_delta) < self.min_delta || offset_delta > self.last_delta {
            return Err(RecordError::OffsetDelta {
                delta: offset_delta,
                min: self.min_delta,
                last: self.last_delta,
            });
        }
        self.min_delta = i64::from(offset_delta) + 1;
        let key = read_nullable(&mut body, "record key")?;
        let value = read_nullable(&mut body, "record value")?;
        let header_count = varint::read_varint(&mut body).map_err(varint_err("header count"))?;
        if header_count < 0 || (header_count as usize).saturating_mul(2) > body.len() {
            return Err(RecordError::InvalidLength {
                what: "header count",
                length: i64::from(header_count),
            });
        }
        self.data = rest;
        Ok(RecordRef {
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp: match self.log_append_time {
                Some(t) => t,
                None => self.base_timestamp.wrapping_add(ts_delta),
            },
            attributes: attributes as i8,
            key,
            value,
            headers: Headers {
                data: body,
                remaining: header_count as u32,
            },
        })
    }
}

/// Reads a varint length and that many bytes; -1 is null.
#[inline(always)]
fn read_nullable<'a>(
    buf: &mut &'a [u8],
    what: &'static str,
) -> Result<Option<&'a [u8]>, RecordError> {
    let len = varint::read_varint(buf).map_err(varint_err(what))?;
    if len < 0 {
        if len == -1 {
            return Ok(None);
        }
        return Err(RecordError::InvalidLength {
            what,
            length: i64::from(len),
        });
    }
    let len = len as usize;
    if len > buf.len() {
        return Err(RecordError::Truncated {
            what,
            needed: len,
            remaining: buf.len(),
        });
    }
    let (field, rest) = buf.split_at(len);
    *buf = rest;
    Ok(Some(field))
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RecordRef<'a>, RecordError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            if self.failed || self.data.is_empty() {
                return None;
            }
            self.failed = true;
            return Some(Err(RecordError::TrailingBytes(self.data.len())));
        }
        if self.failed {
            return None;
        }
        self.remaining -= 1;
        let result = self.parse_next();
        if result.is_err() {
            self.failed = true;
        }
        Some(result)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.failed {
            (0, Some(0))
        } else {
            (0, Some(self.remaining as usize + 1))
        }
    }
}

/// One record, borrowed from the batch (or from the decompression scratch buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    offset: i64,
    timestamp: i64,
    attributes: i8,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Headers<'a>,
}

impl<'a> RecordRef<'a> {
    pub(crate) fn legacy(
        offset: i64,
        timestamp: i64,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
    ) -> Self {
        RecordRef {
            offset,
            timestamp,
            attributes: 0,
            key,
            value,
            headers: Headers {
                data: &[],
                remaining: 0,
            },
        }
    }

    /// Absolute offset.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Timestamp in milliseconds (create or log-append time, per the batch).
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// The record's own attributes byte (unused by Kafka so far).
    pub fn attributes(&self) -> i8 {
        self.attributes
    }

    /// The key, `None` for a null key.
    pub fn key(&self) -> Option<&'a [u8]> {
        self.key
    }

    /// The value, `None` for a null value (a tombstone).
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value
    }

    /// The headers, parsed lazily.
    pub fn headers(&self) -> Headers<'a> {
        self.headers
    }

    /// The control record this record encodes (only meaningful in a control batch).
    pub fn control(&self) -> Result<ControlRecord, RecordError> {
        ControlRecord::parse(self.key, self.value)
    }
}

/// The headers of one record. Iterating yields each header or the first error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a> {
    data: &'a [u8],
    remaining: u32,
}

impl<'a> Headers<'a> {
    /// Header count as the record states it.
    pub fn len(&self) -> usize {
        self.remaining as usize
    }

    /// No headers.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }
}

impl<'a> Iterator for Headers<'a> {
    type Item = Result<HeaderRef<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            if self.data.is_empty() {
                return None;
            }
            let actual = self.data.len();
            self.data = &[];
            return Some(Err(RecordError::TrailingBytes(actual)));
        }
        let mut buf = self.data;
        let result = (|| {
            let key = read_nullable(&mut buf, "header key")?.ok_or(RecordError::InvalidLength {
                what: "header key",
                length: -1,
            })?;
            let value = read_nullable(&mut buf, "header value")?;
            Ok(HeaderRef { key, value })
        })();
        match result {
            Ok(h) => {
                self.remaining -= 1;
                self.data = buf;
                Some(Ok(h))
            }
            Err(e) => {
                self.remaining = 0;
                self.data = &[];
                Some(Err(e))
            }
        }
    }
}

/// One record header, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    /// The key bytes (UTF-8 by Kafka's contract; see [`HeaderRef::key_str`]).
    pub key: &'a [u8],
    /// The value, `None` for null.
    pub value: Option<&'a [u8]>,
}

impl<'a> HeaderRef<'a> {
    /// The key as a string.
    pub fn key_str(&self) -> Result<&'a str, RecordError> {
        std::str::from_utf8(self.key).map_err(|_| RecordError::HeaderKeyUtf8)
    }
}

/// Kind of control record (`ControlRecordType.java`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ControlRecordType {
    /// Transaction aborted.
    Abort,
    /// Transaction committed.
    Commit,
    /// Any other type (KRaft's leader-change, snapshot and voter records).
    Other(i16),
}

impl ControlRecordType {
    /// The wire value.
    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::Other(id) => id,
        }
    }

    /// From the wire value.
    pub fn from_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            other => ControlRecordType::Other(other),
        }
    }
}

/// A control record: key `(version: i16, type: i16)`; for commit and abort markers the
/// value is `(version: i16, coordinator_epoch: i32)` (`EndTransactionMarker.java`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRecord {
    /// Commit, abort, or another type.
    pub kind: ControlRecordType,
    /// The transaction coordinator's epoch, for commit and abort markers.
    pub coordinator_epoch: Option<i32>,
}

impl ControlRecord {
    /// A transaction marker.
    pub fn marker(commit: bool, coordinator_epoch: i32) -> Self {
        ControlRecord {
            kind: if commit {
                ControlRecordType::Commit
            } else {
                ControlRecordType::Abort
            },
            coordinator_epoch: Some(coordinator_epoch),
        }
    }

    fn parse(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, RecordError> {
        let key = key.ok_or(RecordError::InvalidControlRecord("null key"))?;
        if key.len() < 4 {
            return Err(RecordError::InvalidControlRecord(
                "key shorter than 4 bytes",
            ));
        }
        if be_at!(i16, key, 0) < 0 {
            return Err(RecordError::InvalidControlRecord("negative key version"));
        }
        let kind = ControlRecordType::from_id(be_at!(i16, key, 2));
        let coordinator_epoch = match kind {
            ControlRecordType::Abort | ControlRecordType::Commit => {
                let value = value.ok_or(RecordError::InvalidControlRecord("null marker value"))?;
                if value.len() < 6 {
                    return Err(RecordError::InvalidControlRecord(
                        "marker value shorter than 6 bytes",
                    ));
                }
                Some(be_at!(i32, value, 2))
            }
            ControlRecordType::Other(_) => None,
        };
        Ok(ControlRecord {
            kind,
            coordinator_epoch,
        })
    }

    pub(crate) fn key_bytes(&self) -> [u8; 4] {
        let t = self.kind.id().to_be_bytes();
        [0, 0, t[0], t[1]]
    }

    pub(crate) fn value_bytes(&self) -> [u8; 6] {
        let e = self.coordinator_epoch.unwrap_or(0).to_be_bytes();
        [0, 0, e[0], e[1], e[2], e[3]]
    }
}

/// A batch of either format, as found in a `records` field.
#[derive(Debug, Clone, Copy)]
pub enum BatchRef<'a> {
    /// A v2 record batch.
    V2(RecordBatchRef<'a>),
    /// A legacy (v0/v1) message, possibly a compressed wrapper.
    Legacy(LegacyMessageRef<'a>),
}

impl<'a> BatchRef<'a> {
    /// Splits one batch (v2) or message (v0/v1) off the front of `input`, by the magic
    /// byte at the same place in both formats. `Ok(None)` when only part of it is there;
    /// an unknown magic in a complete batch is [`RecordError::UnsupportedMagic`]. The
    /// CRC is not checked.
    pub fn parse(input: &'a [u8]) -> Result<Option<(Self, &'a [u8])>, RecordError> {
        // Magic sits at byte 16 in both formats: after offset, length and CRC for a
        // legacy message, after offset, length and leader epoch for a batch.
        if input.len() <= off::MAGIC {
            return Ok(None);
        }
        match input[off::MAGIC] as i8 {
            MAGIC_V2 => Ok(RecordBatchRef::parse(input)?.map(|(b, rest)| (BatchRef::V2(b), rest))),
            0 | 1 => {
                Ok(LegacyMessageRef::parse(input)?.map(|(m, rest)| (BatchRef::Legacy(m), rest)))
            }
            other => {
                // A partial batch whose magic we cannot see yet is not an error; a
                // complete one with an unknown magic is.
                match batch_total_len(input)? {
                    Some(total) if total <= input.len() => {
                        Err(RecordError::UnsupportedMagic(other))
                    }
                    _ => Ok(None),
                }
            }
        }
    }

    /// The batch again from its [`BatchSpan`] in `buffer`: a v2 batch without parsing
    /// its header again, a legacy message re-read (a few length fields). `None` if the
    /// span does not hold what [`BatchRef::span_in`] found there.
    pub fn from_span(buffer: &'a [u8], span: BatchSpan) -> Option<Self> {
        let bytes = buffer.get(span.start..span.start.checked_add(span.len)?)?;
        match *bytes.get(off::MAGIC)? as i8 {
            MAGIC_V2 => RecordBatchRef::from_span(buffer, span).map(BatchRef::V2),
            0 | 1 => match LegacyMessageRef::parse(bytes) {
                Ok(Some((m, []))) => Some(BatchRef::Legacy(m)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Where this batch lies in `buffer`, which it must be a part of, with its offsets.
    /// A legacy wrapper's base offset is unknown until it is decompressed: its span
    /// gives the wrapper's own offset (that of its last inner message) for both.
    pub fn span_in(&self, buffer: &[u8]) -> Option<BatchSpan> {
        match self {
            BatchRef::V2(b) => b.span_in(buffer),
            BatchRef::Legacy(m) => {
                let bytes = m.as_bytes();
                let start = (bytes.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
                (start + bytes.len() <= buffer.len()).then(|| BatchSpan {
                    start,
                    len: bytes.len(),
                    base_offset: m.offset(),
                    last_offset: m.offset(),
                })
            }
        }
    }

    /// The leader epoch the broker stamped on a v2 batch; -1 for a legacy message,
    /// which has none.
    pub fn partition_leader_epoch(&self) -> i32 {
        self.as_v2()
            .map_or(-1, RecordBatchRef::partition_leader_epoch)
    }

    /// The v2 batch, if this is one.
    pub fn as_v2(&self) -> Option<&RecordBatchRef<'a>> {
        match self {
            BatchRef::V2(b) => Some(b),
            BatchRef::Legacy(_) => None,
        }
    }

    /// The codec of the batch (of a legacy wrapper).
    pub fn compression(&self) -> Result<Compression, RecordError> {
        match self {
            BatchRef::V2(b) => b.compression(),
            BatchRef::Legacy(m) => m.compression(),
        }
    }

    /// Offset of the first record (for a legacy wrapper, that of its last inner
    /// message: see [`BatchRef::span_in`]).
    pub fn base_offset(&self) -> i64 {
        match self {
            BatchRef::V2(b) => b.base_offset(),
            BatchRef::Legacy(m) => m.offset(),
        }
    }

    /// Checks the batch or message CRC.
    pub fn verify_crc(&self) -> Result<(), RecordError> {
        match self {
            BatchRef::V2(b) => b.verify_crc(),
            BatchRef::Legacy(m) => m.verify_crc(),
        }
    }

    /// Iterates the records, decompressing into `scratch` when needed.
    pub fn records<'s>(
        &self,
        decompressor: &mut Decompressor,
        scratch: &'s mut Vec<u8>,
    ) -> Result<AnyRecords<'s>, RecordError>
    where
        'a: 's,
    {
        Ok(match self {
            BatchRef::V2(b) => AnyRecords::V2(b.decompress_records(decompressor, scratch)?),
            BatchRef::Legacy(m) => AnyRecords::Legacy(m.records(decompressor, scratch)?),
        })
    }
}

/// Records of a batch of either format.
#[derive(Debug, Clone)]
pub enum AnyRecords<'a> {
    /// From a v2 batch.
    V2(Records<'a>),
    /// From a legacy message or wrapper.
    Legacy(LegacyRecords<'a>),
}

impl<'a> AnyRecords<'a> {
    /// The bytes every record not yet iterated points into.
    pub fn bytes(&self) -> &'a [u8] {
        match self {
            AnyRecords::V2(r) => r.bytes(),
            AnyRecords::Legacy(r) => r.bytes(),
        }
    }
}

impl<'a> Iterator for AnyRecords<'a> {
    type Item = Result<RecordRef<'a>, RecordError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            AnyRecords::V2(r) => r.next(),
            AnyRecords::Legacy(r) => r.next(),
        }
    }
}

/// Walks the batches of a `records` field (a Fetch response partition's
/// `records`), v2 and legacy alike. A partial batch at the end ends the walk
/// cleanly: [`Batches::remainder`] holds its bytes. An error ends it for good.
#[derive(Debug, Clone)]
pub struct Batches<'a> {
    rest: &'a [u8],
    verify_crc: bool,
    failed: bool,
}

impl<'a> Batches<'a> {
    /// Batches of `records`, CRCs unchecked.
    pub fn new(records: &'a [u8]) -> Self {
        Batches {
            rest: records,
            verify_crc: false,
            failed: false,
        }
    }

    /// Check each batch's CRC before yielding it (Java's `check.crcs`).
    pub fn verify_crc(mut self, verify: bool) -> Self {
        self.verify_crc = verify;
        self
    }

    /// Bytes not yet consumed: after the walk, the partial trailing batch, if any.
    pub fn remainder(&self) -> &'a [u8] {
        self.rest
    }

    fn parse_next(&mut self) -> Result<Option<BatchRef<'a>>, RecordError> {
        let Some((batch, rest)) = BatchRef::parse(self.rest)? else {
            return Ok(None);
        };
        if self.verify_crc {
            batch.verify_crc()?;
        }
        self.rest = rest;
        Ok(Some(batch))
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<BatchRef<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.parse_next() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
