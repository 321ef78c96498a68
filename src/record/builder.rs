//! [`BatchBuilder`]: a v2 record batch written in place into a fixed arena.
//!
//! The builder owns an arena buffer (anything that is `AsRef<Vec<u8>> +
//! AsMut<Vec<u8>>`: a plain `Vec<u8>` or a [`crate::buf::PooledBuf`]). It reserves
//! the 61-byte header, then appends each record in its final wire form — varint
//! framing, then key, value and headers copied once, into place. Sealing backfills
//! the header (length, last offset delta, timestamps, count, attributes) and the
//! CRC-32C over `attributes..end` (the producer defers the CRC to when it stamps its id
//! and sequence, which the CRC covers); sealing with a codec compresses the records either
//! into a second arena, with the header written there (`seal_compressed`), or into a
//! scratch buffer copied back over them (`seal_compressed_in_place`), or from the scratch
//! into a buffer the caller offers once the compressed length is known
//! (`seal_compressed_moving`: the producer moves a small compressed batch out of its
//! arena into a buffer of its own size, so a batch never needs a second arena).
//!
//! Invariants: the arena never grows — a record that would not fit in the arena's
//! capacity (or the configured `max_size`) is refused with [`BuildError::Full`]
//! before a byte is written, so appending never reallocates and never allocates;
//! [`BatchBuilder::record_size`] is the exact number of bytes an append would add.

use super::batch::{ControlRecord, attr, off};
use super::compression::Compressor;
use super::varint::{self, put_varint, put_varlong, varint_len, varlong_len};
use super::{
    BATCH_HEADER_LEN, BATCH_LENGTH_OFFSET, Compression, MAGIC_V2, RecordBatchRef, RecordError,
    TimestampType,
};

/// A header to write: Kafka header keys are strings, values nullable bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The key.
    pub key: &'a str,
    /// The value, `None` for null.
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    /// A header with a value.
    pub fn new(key: &'a str, value: &'a [u8]) -> Self {
        Header {
            key,
            value: Some(value),
        }
    }

    fn encoded_len(&self) -> usize {
        varint_len(self.key.len() as i32) + self.key.len() + nullable_len(self.value)
    }
}

/// Errors from building a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The record does not fit in what is left of the arena: seal and start another.
    #[error("record of {needed} bytes does not fit in the {remaining} bytes left")]
    Full {
        /// Bytes the record needs.
        needed: usize,
        /// Bytes left in the batch.
        remaining: usize,
    },
    /// The arena cannot hold even the batch header.
    #[error("arena of {0} bytes cannot hold a batch header")]
    ArenaTooSmall(usize),
    /// A key, value, header or record longer than `i32::MAX`, or more records than
    /// an offset delta can count.
    #[error("{0} too large for the record format")]
    TooLarge(&'static str),
    /// The timestamp is so far from the batch's first that the delta overflows.
    #[error("timestamp {0} cannot be expressed as a delta from the batch's first")]
    Timestamp(i64),
    /// A data record appended to a control batch, or a control record to a data batch.
    #[error("control records and data records cannot share a batch")]
    ControlMismatch,
    /// Sealing a batch with no records.
    #[error("cannot seal an empty batch")]
    Empty,
    /// Compression failed.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// Fixed fields of a batch, set before the first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchOptions {
    /// Base offset; producers send 0 and the broker assigns offsets.
    pub base_offset: i64,
    /// Leader epoch; producers send -1.
    pub partition_leader_epoch: i32,
    /// Idempotent producer id (KIP-98), -1 for none.
    pub producer_id: i64,
    /// Producer epoch, -1 for none.
    pub producer_epoch: i16,
    /// Sequence of the first record, -1 for none.
    pub base_sequence: i32,
    /// Part of a transaction.
    pub transactional: bool,
    /// A control batch (transaction marker); holds only control records.
    pub control: bool,
    /// Timestamp type to declare.
    pub timestamp_type: TimestampType,
    /// Upper bound on the batch's encoded size (the arena's capacity also bounds it).
    pub max_size: usize,
    /// Sealing leaves the CRC to be computed once, when the producer state is set or
    /// the bytes are taken ([`SealedBatch::set_producer_state`],
    /// [`SealedBatch::into_inner`]), instead of computing it at sealing as well. The
    /// producer's own: a sealed batch whose CRC is pending must not be read through
    /// [`SealedBatch::as_bytes`], so it is not offered to users of the record layer.
    pub(crate) deferred_crc: bool,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            timestamp_type: TimestampType::CreateTime,
            max_size: usize::MAX,
            deferred_crc: false,
        }
    }
}

impl BatchOptions {
    /// Sets the base offset.
    pub fn with_base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// Sets the idempotent producer's id, epoch and first sequence number.
    pub fn with_producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch transactional.
    pub fn with_transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Makes this a control batch.
    pub fn with_control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Sets the timestamp type.
    pub fn with_timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = timestamp_type;
        self
    }

    /// Caps the batch's encoded size.
    pub fn with_max_size(mut self, max_size: usize) -> Self {
        self.max_size = max_size;
        self
    }

    /// Sets the partition leader epoch.
    pub fn with_partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Defers the CRC past sealing (see [`BatchOptions::deferred_crc`]): for the producer,
    /// which stamps its id and sequence on a sealed batch, changing the CRC anyway.
    pub(crate) fn with_deferred_crc(mut self, deferred: bool) -> Self {
        self.deferred_crc = deferred;
        self
    }
}

#[inline(always)]
fn nullable_len(field: Option<&[u8]>) -> usize {
    match field {
        Some(b) => varint_len(b.len() as i32) + b.len(),
        None => 1,
    }
}

/// Length of a record's body (everything after its length varint).
#[inline(always)]
fn body_len(
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
) -> usize {
    let mut n = 1 // attributes
        + varlong_len(timestamp_delta)
        + varint_len(offset_delta)
        + nullable_len(key)
        + nullable_len(value)
        + varint_len(headers.len() as i32);
    for h in headers {
        n += h.encoded_len();
    }
    n
}

/// Exact encoded size of one record, length prefix included, at the given offset
/// and timestamp deltas.
pub fn record_encoded_len(
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
) -> usize {
    let body = body_len(offset_delta, timestamp_delta, key, value, headers);
    varint::uvarlong_len(u64::from(varint::zigzag32(body as i32))) + body
}

/// Writes a v2 record batch in place into an arena. See the module docs.
///
/// ```
/// use kring::record::{BatchBuilder, BatchOptions, Header, RecordBatchRef};
///
/// let mut b = BatchBuilder::new(Vec::with_capacity(16 << 10), BatchOptions::default())?;
/// let size = b.record_size(1_700_000_000_000, Some(b"k"), Some(b"v"), &[]);
/// assert!(b.fits(size));
/// b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[Header::new("h", b"1")])?;
/// let sealed = b.seal()?;
/// let batch = RecordBatchRef::new(sealed.as_bytes())?;
/// batch.verify_crc()?;
/// assert_eq!(batch.record_count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct BatchBuilder<B> {
    buf: B,
    limit: usize,
    count: i32,
    first_timestamp: i64,
    max_timestamp: i64,
    options: BatchOptions,
}

impl<B: AsRef<Vec<u8>> + AsMut<Vec<u8>>> BatchBuilder<B> {
    /// Starts a batch in `buf`, which is cleared; its capacity (and
    /// `options.max_size`) bounds the batch.
    pub fn new(mut buf: B, options: BatchOptions) -> Result<Self, BuildError> {
        let v = buf.as_mut();
        v.clear();
        let limit = v.capacity().min(options.max_size);
        if limit < BATCH_HEADER_LEN {
            return Err(BuildError::ArenaTooSmall(limit));
        }
        v.extend_from_slice(&[0u8; BATCH_HEADER_LEN]);
        Ok(BatchBuilder {
            buf,
            limit,
            count: 0,
            first_timestamp: -1,
            max_timestamp: -1,
            options,
        })
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// No records yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded bytes so far, header included (the uncompressed batch size).
    pub fn size(&self) -> usize {
        self.buf.as_ref().len()
    }

    /// Bytes still free for records.
    pub fn remaining(&self) -> usize {
        self.limit - self.size()
    }

    /// The options the batch was started with.
    pub fn options(&self) -> &BatchOptions {
        &self.options
    }

    /// Exact bytes [`Self::append`] would add for this record now.
    #[inline]
    pub fn record_size(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> usize {
        let delta = if self.count == 0 {
            0
        } else {
            timestamp.wrapping_sub(self.first_timestamp)
        };
        record_encoded_len(self.count, delta, key, value, headers)
    }

    /// Whether `size` more bytes fit.
    #[inline]
    pub fn fits(&self, size: usize) -> bool {
        size <= self.remaining()
    }

    /// Appends a data record. [`BuildError::Full`] leaves the batch untouched.
    #[inline]
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Result<(), BuildError> {
        if self.options.control {
            return Err(BuildError::ControlMismatch);
        }
        self.append_record(timestamp, key, value, headers)
    }

    /// Appends a control record (a transaction marker) to a control batch.
    pub fn append_control(
        &mut self,
        timestamp: i64,
        record: ControlRecord,
    ) -> Result<(), BuildError> {
        if !self.options.control {
            return Err(BuildError::ControlMismatch);
        }
        let key = record.key_bytes();
        let value = record.value_bytes();
        let value = record.coordinator_epoch.map(|_| &value[..]);
        self.append_record(timestamp, Some(&key), value, &[])
    }

    #[inline(always)]
    fn append_record(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Result<(), BuildError> {
        let ts_delta = if self.count == 0 {
            0
        } else {
            timestamp
                .checked_sub(self.first_timestamp)
                .ok_or(BuildError::Timestamp(timestamp))?
        };
        let offset_delta = self.count;
        if offset_delta == i32::MAX {
            return Err(BuildError::TooLarge("record count"));
        }
        // Guard the i32 casts in the size arithmetic below.
        const MAX: usize = i32::MAX as usize / 2;
        if key.is_some_and(|k| k.len() > MAX)
            || value.is_some_and(|v| v.len() > MAX)
            || headers.len() > MAX
        {
            return Err(BuildError::TooLarge("key, value or header list"));
        }
        let body = body_len(offset_delta, ts_delta, key, value, headers);
        if body > MAX {
            return Err(BuildError::TooLarge("record"));
        }
        let total = varint_len(body as i32) + body;
        let remaining = self.remaining();
        if total > remaining {
            return Err(BuildError::Full {
                needed: total,
                remaining,
            });
        }

        let fields = RecordFields {
            body: body as i32,
            ts_delta,
            offset_delta,
            key,
            value,
            headers,
        };
        let v = self.buf.as_mut();
        if total <= Window::LEN && v.capacity() - v.len() >= Window::LEN {
            write_in_window(v, total, &fields);
        } else {
            stage_record(v, &fields);
        }

        if self.count == 0 {
            self.first_timestamp = timestamp;
            self.max_timestamp = timestamp;
        } else if timestamp > self.max_timestamp {
            self.max_timestamp = timestamp;
        }
        self.count += 1;
        Ok(())
    }

    /// Finishes the batch uncompressed: backfills the header and the CRC (which the
    /// crate's producer may defer to when it stamps its sequence).
    pub fn seal(self) -> Result<SealedBatch<B>, BuildError> {
        self.seal_moving(|_, _| None)
    }

    /// As [`seal`](Self::seal), but `elsewhere` may offer a buffer to hold the batch
    /// instead (given the arena, to take from it whatever it needs, such as part of its
    /// budget charge, and the batch's length): the batch is then copied into that buffer
    /// (cleared first; it should have room for the length, or it grows) and the arena
    /// is dropped. For a batch that fills a small part of its arena, so that the arena
    /// is free again while the batch waits to be sent and acknowledged.
    pub fn seal_moving(
        mut self,
        elsewhere: impl FnOnce(&mut B, usize) -> Option<B>,
    ) -> Result<SealedBatch<B>, BuildError> {
        if self.count == 0 {
            return Err(BuildError::Empty);
        }
        let header = self.header(self.attributes(Compression::None));
        let len = self.size();
        let mut buf = match elsewhere(&mut self.buf, len) {
            Some(mut other) => {
                let v = other.as_mut();
                v.clear();
                v.extend_from_slice(&self.buf.as_ref()[..len]);
                other
            }
            None => self.buf,
        };
        write_header(buf.as_mut(), &header);
        Ok(SealedBatch::new(
            buf,
            Compression::None,
            self.count,
            self.options.deferred_crc,
        ))
    }

    /// Finishes the batch compressed with `codec` into `out` (cleared first). Returns
    /// the sealed batch and the arena that is now free: normally the sealed batch
    /// lives in `out` and the uncompressed arena comes back free; when compressing
    /// would not shrink the records, or the result would not fit in `out`, the batch
    /// is sealed uncompressed in place and `out` comes back unused.
    pub fn seal_compressed(
        self,
        codec: Compression,
        compressor: &mut Compressor,
        mut out: B,
    ) -> Result<(SealedBatch<B>, B), BuildError> {
        if codec == Compression::None {
            return Ok((self.seal()?, out));
        }
        if self.count == 0 {
            return Err(BuildError::Empty);
        }
        let records = &self.buf.as_ref()[BATCH_HEADER_LEN..];
        let o = out.as_mut();
        o.clear();
        // Only as much of `out` as the uncompressed batch would take is useful.
        let room = o.capacity().min(self.size());
        if room > BATCH_HEADER_LEN {
            o.resize(room, 0);
            let compressed = compressor
                .compress(codec, records, &mut o[BATCH_HEADER_LEN..])
                .map_err(RecordError::from)?;
            if let Some(n) = compressed.filter(|&n| n < records.len()) {
                o.truncate(BATCH_HEADER_LEN + n);
                let header = self.header(self.attributes(codec));
                write_header(o, &header);
                let sealed = SealedBatch::new(out, codec, self.count, self.options.deferred_crc);
                let mut free = self.buf;
                free.as_mut().clear();
                return Ok((sealed, free));
            }
        }
        o.clear();
        Ok((self.seal()?, out))
    }

    /// Finishes the batch compressed with `codec` in the arena it was written in: the
    /// records are compressed into `scratch` and copied back over themselves, so the
    /// sealed batch keeps its arena (and whatever budget charged it) and needs no second
    /// one. `scratch` is the caller's to keep between batches: it grows to the largest
    /// batch's records and is never cleared, so it is not zeroed again for each batch.
    /// When compressing would not shrink the records, the batch is sealed uncompressed.
    pub fn seal_compressed_in_place(
        self,
        codec: Compression,
        compressor: &mut Compressor,
        scratch: &mut Vec<u8>,
    ) -> Result<SealedBatch<B>, BuildError> {
        self.seal_compressed_moving(codec, compressor, scratch, |_, _| None)
    }

    /// As [`seal_compressed_in_place`](Self::seal_compressed_in_place), but once the
    /// compressed batch's length is known, `elsewhere` may offer a buffer to hold it
    /// instead (given the arena, to take from it whatever it needs, such as part of
    /// its budget charge): the batch is then copied from `scratch` into that buffer
    /// (cleared first; it should have room for the length, or it grows) and the arena
    /// is dropped. The copy is the one the in-place seal makes anyway. A batch left
    /// uncompressed (no codec, or compressing would not shrink it) is offered to
    /// `elsewhere` as [`seal_moving`](Self::seal_moving) does.
    pub fn seal_compressed_moving(
        mut self,
        codec: Compression,
        compressor: &mut Compressor,
        scratch: &mut Vec<u8>,
        elsewhere: impl FnOnce(&mut B, usize) -> Option<B>,
    ) -> Result<SealedBatch<B>, BuildError> {
        if codec == Compression::None {
            return self.seal_moving(elsewhere);
        }
        if self.count == 0 {
            return Err(BuildError::Empty);
        }
        let records_len = self.size() - BATCH_HEADER_LEN;
        if scratch.len() < records_len {
            scratch.resize(records_len, 0);
        }
        let records = &self.buf.as_ref()[BATCH_HEADER_LEN..];
        let compressed = compressor
            .compress(codec, records, &mut scratch[..records_len])
            .map_err(RecordError::from)?;
        let Some(n) = compressed.filter(|&n| n < records_len) else {
            return self.seal_moving(elsewhere);
        };
        let header = self.header(self.attributes(codec));
        let mut buf = match elsewhere(&mut self.buf, BATCH_HEADER_LEN + n) {
            Some(mut other) => {
                let v = other.as_mut();
                v.clear();
                v.resize(BATCH_HEADER_LEN, 0);
                other
            }
            None => self.buf,
        };
        let v = buf.as_mut();
        v.truncate(BATCH_HEADER_LEN);
        v.extend_from_slice(&scratch[..n]);
        write_header(v, &header);
        Ok(SealedBatch::new(
            buf,
            codec,
            self.count,
            self.options.deferred_crc,
        ))
    }

    fn attributes(&self, codec: Compression) -> i16 {
        let mut a = i16::from(codec.id());
        if self.options.timestamp_type == TimestampType::LogAppendTime {
            a |= attr::TIMESTAMP_TYPE;
        }
        if self.options.transactional {
            a |= attr::TRANSACTIONAL;
        }
        if self.options.control {
            a |= attr::CONTROL;
        }
        a
    }

    fn header(&self, attributes: i16) -> HeaderFields {
        HeaderFields {
            base_offset: self.options.base_offset,
            partition_leader_epoch: self.options.partition_leader_epoch,
            attributes,
            last_offset_delta: self.count - 1,
            base_timestamp: self.first_timestamp,
            max_timestamp: self.max_timestamp,
            producer_id: self.options.producer_id,
            producer_epoch: self.options.producer_epoch,
            base_sequence: self.options.base_sequence,
            count: self.count,
        }
    }

    /// Gives the arena back without sealing.
    pub fn into_inner(self) -> B {
        self.buf
    }
}

/// A record's fields as [`BatchBuilder::append_record`] writes them.
struct RecordFields<'a, 'h> {
    body: i32,
    ts_delta: i64,
    offset_delta: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [Header<'h>],
}

/// The in-place write of a small record (see [`write_in_window`]).
struct Window;

impl Window {
    /// Records up to this size are written in place, where the arena's `Vec` has this
    /// much spare capacity (which may be more than the batch's own limit: the record
    /// was checked against that limit first, and the window is cut to the record). A 256-byte window was slower for records of 200-odd bytes (a larger
    /// zeroing, and their value copied by `memcpy` either way) than the stage.
    const LEN: usize = 128;
}

/// Writes a record of `total` bytes (at most [`Window::LEN`], with that much spare
/// capacity in `v`) straight into the arena: a fixed-size zeroed window is appended
/// (a few vector stores), the fields are written into it, and it is cut to the
/// record's length. Nothing is staged and read back: a stage written byte by byte
/// and then copied out stalled on the loads that read it.
#[inline(always)]
fn write_in_window(v: &mut Vec<u8>, total: usize, f: &RecordFields<'_, '_>) {
    let start = v.len();
    v.extend_from_slice(&[0u8; Window::LEN]);
    let out = &mut v[start..start + total];
    let mut at = put_varint(out, f.body);
    at += 1; // attributes: 0, already zero
    at += put_varlong(&mut out[at..], f.ts_delta);
    at += put_varint(&mut out[at..], f.offset_delta);
    at = put_nullable(out, at, f.key);
    at = put_nullable(out, at, f.value);
    at += put_varint(&mut out[at..], f.headers.len() as i32);
    for h in f.headers {
        at += put_varint(&mut out[at..], h.key.len() as i32);
        at = put_bytes(out, at, h.key.as_bytes());
        at = put_nullable(out, at, h.value);
    }
    debug_assert_eq!(at, total, "the record's size was computed for these fields");
    v.truncate(start + total);
}

/// A nullable length and payload at `at` in `out`; returns the position after it.
#[inline(always)]
fn put_nullable(out: &mut [u8], at: usize, field: Option<&[u8]>) -> usize {
    let at = at + put_varint(&mut out[at..], field.map_or(-1, |x| x.len() as i32));
    match field {
        Some(x) => put_bytes(out, at, x),
        None => at,
    }
}

/// `x` at `at` in `out`; returns the position after it. Short pieces (keys, headers) are
/// copied with a few fixed-size moves rather than a `memcpy` call.
#[inline(always)]
fn put_bytes(out: &mut [u8], at: usize, x: &[u8]) -> usize {
    let end = at + x.len();
    if x.len() <= Stage::SHORT {
        copy_short(&mut out[at..end], x);
    } else {
        out[at..end].copy_from_slice(x);
    }
    end
}

/// Writes a record through the stack stage: for records too large for the window,
/// or an arena near its end.
#[inline(always)]
fn stage_record(v: &mut Vec<u8>, f: &RecordFields<'_, '_>) {
    // Small pieces — the varints, short keys, short headers — are staged on the
    // stack and copied into the arena together: per-record cost is dominated by
    // the number of copies, not their size. Large keys and values go straight in.
    let mut st = Stage::new();
    st.varint(f.body);
    st.byte(0); // attributes
    st.varlong(f.ts_delta);
    st.varint(f.offset_delta);
    st.nullable(f.key, v);
    st.varint(f.value.map_or(-1, |x| x.len() as i32));
    if let Some(x) = f.value {
        st.flush(v);
        v.extend_from_slice(x);
    }
    st.varint(f.headers.len() as i32);
    for h in f.headers {
        if st.room() < 10 {
            st.flush(v);
        }
        st.varint(h.key.len() as i32);
        st.nullable_payload(Some(h.key.as_bytes()), v);
        if st.room() < 5 {
            st.flush(v);
        }
        st.varint(h.value.map_or(-1, |x| x.len() as i32));
        st.nullable_payload(h.value, v);
    }
    st.finish(v);
}

/// Stack staging for the small pieces of a record (see `stage_record`).
struct Stage {
    buf: [u8; Stage::CAP],
    n: usize,
}

impl Stage {
    const CAP: usize = 128;
    /// Payloads up to this size are staged with a few fixed-size moves; longer ones
    /// are copied into the arena directly.
    const SHORT: usize = 48;

    #[inline(always)]
    fn new() -> Self {
        Stage {
            buf: [0; Stage::CAP],
            n: 0,
        }
    }

    #[inline(always)]
    fn room(&self) -> usize {
        Stage::CAP - self.n
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.buf[self.n] = b;
        self.n += 1;
    }

    /// Needs 5 bytes of room (callers keep at least that much free).
    #[inline(always)]
    fn varint(&mut self, v: i32) {
        self.n += put_varint(&mut self.buf[self.n..], v);
    }

    #[inline(always)]
    fn varlong(&mut self, v: i64) {
        self.n += put_varlong(&mut self.buf[self.n..], v);
    }

    /// A nullable length and payload.
    #[inline(always)]
    fn nullable(&mut self, field: Option<&[u8]>, v: &mut Vec<u8>) {
        self.varint(field.map_or(-1, |x| x.len() as i32));
        self.nullable_payload(field, v);
    }

    /// A payload whose length is already staged: staged if short, else copied directly.
    #[inline(always)]
    fn nullable_payload(&mut self, field: Option<&[u8]>, v: &mut Vec<u8>) {
        let Some(x) = field else { return };
        if x.len() <= Stage::SHORT && x.len() + 10 <= self.room() {
            copy_short(&mut self.buf[self.n..], x);
            self.n += x.len();
        } else {
            self.flush(v);
            v.extend_from_slice(x);
        }
    }

    /// Appends the staged bytes. (Copying the whole fixed-size stage and cutting the
    /// excess off again, to have a few vector moves instead of a `memcpy` call, was
    /// measured slower: 16-byte keyed records of 200 B took 164 ns a record on the
    /// sending thread against 142, the wide loads waiting on the stage's byte stores.)
    #[inline(always)]
    fn flush(&mut self, v: &mut Vec<u8>) {
        v.extend_from_slice(&self.buf[..self.n]);
        self.n = 0;
    }

    #[inline(always)]
    fn finish(&mut self, v: &mut Vec<u8>) {
        if self.n == 1 {
            v.push(self.buf[0]);
        } else {
            self.flush(v);
        }
        self.n = 0;
    }
}

/// Copies `src` (at most [`Stage::SHORT`] bytes) to the front of `dst` with a few
/// fixed-size, possibly overlapping moves rather than a `memcpy` call.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n >= 32 {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 16..n].copy_from_slice(&src[n - 16..]);
        if n > 48 {
            dst[..n].copy_from_slice(src);
        }
    } else if n >= 16 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..n].copy_from_slice(&src[n - 16..]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..n].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..n].copy_from_slice(&src[n - 4..]);
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
}

struct HeaderFields {
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    count: i32,
}

/// Writes the 61-byte header into `v[..61]` for the batch that is all of `v`, all but
/// the CRC (see [`SealedBatch::new`]).
fn write_header(v: &mut [u8], h: &HeaderFields) {
    let total = v.len();
    let hdr = &mut v[..BATCH_HEADER_LEN];
    hdr[off::BASE_OFFSET..off::LENGTH].copy_from_slice(&h.base_offset.to_be_bytes());
    let length = (total - BATCH_LENGTH_OFFSET) as i32;
    hdr[off::LENGTH..off::PARTITION_LEADER_EPOCH].copy_from_slice(&length.to_be_bytes());
    hdr[off::PARTITION_LEADER_EPOCH..off::MAGIC]
        .copy_from_slice(&h.partition_leader_epoch.to_be_bytes());
    hdr[off::MAGIC] = MAGIC_V2 as u8;
    hdr[off::ATTRIBUTES..off::LAST_OFFSET_DELTA].copy_from_slice(&h.attributes.to_be_bytes());
    hdr[off::LAST_OFFSET_DELTA..off::BASE_TIMESTAMP]
        .copy_from_slice(&h.last_offset_delta.to_be_bytes());
    hdr[off::BASE_TIMESTAMP..off::MAX_TIMESTAMP].copy_from_slice(&h.base_timestamp.to_be_bytes());
    hdr[off::MAX_TIMESTAMP..off::PRODUCER_ID].copy_from_slice(&h.max_timestamp.to_be_bytes());
    hdr[off::PRODUCER_ID..off::PRODUCER_EPOCH].copy_from_slice(&h.producer_id.to_be_bytes());
    hdr[off::PRODUCER_EPOCH..off::BASE_SEQUENCE].copy_from_slice(&h.producer_epoch.to_be_bytes());
    hdr[off::BASE_SEQUENCE..off::RECORD_COUNT].copy_from_slice(&h.base_sequence.to_be_bytes());
    hdr[off::RECORD_COUNT..BATCH_HEADER_LEN].copy_from_slice(&h.count.to_be_bytes());
}

fn refresh_crc(batch: &mut [u8]) {
    let crc = super::crc::crc32c(&batch[off::ATTRIBUTES..]);
    batch[off::CRC..off::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
}

/// A finished batch in its arena, ready to be sent.
#[derive(Debug)]
pub struct SealedBatch<B> {
    buf: B,
    compression: Compression,
    count: i32,
    /// The CRC is not computed yet (built with [`BatchOptions::deferred_crc`]).
    crc_pending: bool,
}

impl<B: AsRef<Vec<u8>> + AsMut<Vec<u8>>> SealedBatch<B> {
    /// A batch whose header is written: its CRC is computed now, or left pending.
    fn new(mut buf: B, compression: Compression, count: i32, defer_crc: bool) -> Self {
        if !defer_crc {
            refresh_crc(buf.as_mut());
        }
        SealedBatch {
            buf,
            compression,
            count,
            crc_pending: defer_crc,
        }
    }

    /// A sealed batch again from its wire bytes (one whole v2 batch filling `buf`), so a
    /// batch already sent can be changed through the setters below (a producer restamps
    /// its id, epoch and sequence after an epoch bump). The CRC is checked.
    pub fn from_wire(buf: B) -> Result<Self, RecordError> {
        let (compression, count) = {
            let batch = RecordBatchRef::new(buf.as_ref())?;
            batch.verify_crc()?;
            (batch.compression()?, batch.record_count())
        };
        Ok(SealedBatch {
            buf,
            compression,
            count,
            crc_pending: false,
        })
    }

    /// The batch's wire bytes. (A batch the crate's producer sealed with its CRC
    /// deferred is read only through [`SealedBatch::into_inner`], which computes it.)
    pub fn as_bytes(&self) -> &[u8] {
        debug_assert!(!self.crc_pending, "the deferred CRC is not computed yet");
        self.buf.as_ref()
    }

    /// Encoded size.
    pub fn len(&self) -> usize {
        self.buf.as_ref().len()
    }

    /// Never true: an empty batch cannot be sealed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records in the batch.
    pub fn record_count(&self) -> usize {
        self.count as usize
    }

    /// The codec actually used (`None` if compression did not pay off).
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// A reader over the sealed bytes.
    pub fn as_batch(&self) -> Result<RecordBatchRef<'_>, RecordError> {
        RecordBatchRef::new(self.as_bytes())
    }

    /// Sets the producer id, epoch and base sequence after sealing (a producer
    /// assigns sequences when a batch is drained, not when it is filled); the CRC is
    /// recomputed.
    pub fn set_producer_state(&mut self, producer_id: i64, epoch: i16, base_sequence: i32) {
        let v = self.buf.as_mut();
        v[off::PRODUCER_ID..off::PRODUCER_EPOCH].copy_from_slice(&producer_id.to_be_bytes());
        v[off::PRODUCER_EPOCH..off::BASE_SEQUENCE].copy_from_slice(&epoch.to_be_bytes());
        v[off::BASE_SEQUENCE..off::RECORD_COUNT].copy_from_slice(&base_sequence.to_be_bytes());
        refresh_crc(v);
        self.crc_pending = false;
    }

    /// Sets the base offset (not covered by the CRC).
    pub fn set_base_offset(&mut self, base_offset: i64) {
        self.buf.as_mut()[off::BASE_OFFSET..off::LENGTH]
            .copy_from_slice(&base_offset.to_be_bytes());
    }

    /// Sets the partition leader epoch (not covered by the CRC).
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.buf.as_mut()[off::PARTITION_LEADER_EPOCH..off::MAGIC]
            .copy_from_slice(&epoch.to_be_bytes());
    }

    /// The arena, holding the batch bytes (the CRC computed now if it was deferred).
    pub fn into_inner(mut self) -> B {
        if self.crc_pending {
            refresh_crc(self.buf.as_mut());
        }
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of one record appended to a fresh batch in `arena`.
    fn one_record(
        arena: Vec<u8>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Vec<u8> {
        let mut b = BatchBuilder::new(arena, BatchOptions::default()).unwrap();
        b.append(1_700_000_000_000, Some(b"k0"), Some(b"v0"), &[])
            .unwrap();
        b.append(1_700_000_000_123, key, value, headers).unwrap();
        b.into_inner()
    }

    /// Records written in place (an arena with room to spare) and through the stage (an
    /// arena of exactly the batch's size) come out byte for byte the same, on both
    /// sides of the in-place window's size.
    #[test]
    fn in_place_and_staged_records_are_the_same_bytes() {
        let bytes: Vec<u8> = (0..400u32).map(|i| (i * 7 + 3) as u8).collect();
        let header_value = &bytes[..9];
        for len in (0..300)
            .step_by(7)
            .chain([110, 115, 118, 119, 120, 121, 122, 125, 128])
        {
            for (key, headers) in [
                (None, vec![]),
                (Some(&bytes[..16]), vec![]),
                (
                    Some(&bytes[..3]),
                    vec![
                        Header::new("trace", header_value),
                        Header {
                            key: "none",
                            value: None,
                        },
                    ],
                ),
            ] {
                let value = Some(&bytes[..len]);
                let roomy = one_record(Vec::with_capacity(64 << 10), key, value, &headers);
                let exact = one_record(Vec::with_capacity(roomy.len()), key, value, &headers);
                assert_eq!(roomy, exact, "value of {len} bytes, key {key:?}");
            }
        }
        // And the record reads back.
        let mut b = BatchBuilder::new(Vec::with_capacity(4096), BatchOptions::default()).unwrap();
        b.append(
            5,
            Some(b"key"),
            Some(&bytes[..100]),
            &[Header::new("h", b"v")],
        )
        .unwrap();
        let sealed = b.seal().unwrap();
        let batch = sealed.as_batch().unwrap();
        batch.verify_crc().unwrap();
        let r = batch.records().unwrap().next().unwrap().unwrap();
        assert_eq!(r.key(), Some(&b"key"[..]));
        assert_eq!(r.value(), Some(&bytes[..100]));
    }

    /// Every record the window takes is written exactly as the stage writes it: each
    /// total size up to the window's, keys of several sizes (empty and null too), null
    /// and non-null headers, negative and multi-byte deltas.
    #[test]
    fn the_window_and_the_stage_write_the_same_bytes() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i * 13 + 1) as u8).collect();
        let traced = [Header::new("trace", &bytes[..9])];
        let mixed = [
            Header::new("a", b""),
            Header {
                key: "none",
                value: None,
            },
        ];
        let header_sets: [&[Header<'_>]; 3] = [&[], &traced, &mixed];
        let mut compared = 0;
        for key in [
            None,
            Some(&bytes[..0]),
            Some(&bytes[..16]),
            Some(&bytes[..60]),
        ] {
            for headers in header_sets {
                for len in 0..=Window::LEN {
                    let value = Some(&bytes[..len]);
                    for (ts_delta, offset_delta) in [(0, 0), (123, 5), (-70_000, 300)] {
                        let body = body_len(offset_delta, ts_delta, key, value, headers);
                        let total = varint_len(body as i32) + body;
                        if total > Window::LEN {
                            continue;
                        }
                        let mut in_place = Vec::with_capacity(4 * Window::LEN);
                        in_place.extend_from_slice(b"before");
                        let mut staged = in_place.clone();
                        let fields = RecordFields {
                            body: body as i32,
                            ts_delta,
                            offset_delta,
                            key,
                            value,
                            headers,
                        };
                        write_in_window(&mut in_place, total, &fields);
                        stage_record(&mut staged, &fields);
                        assert_eq!(in_place, staged, "total {total}, key {key:?}, {headers:?}");
                        assert_eq!(in_place.len(), 6 + total);
                        compared += 1;
                    }
                }
            }
        }
        assert!(compared > 2_000, "{compared} records compared");
    }

    /// A batch limited below its arena's capacity fills exactly as one whose arena is the
    /// limit: the window's spare room past the limit is never kept.
    #[test]
    fn a_limit_below_the_arena_capacity_holds_as_an_arena_of_that_size() {
        let fill = |arena: Vec<u8>, limit: usize| {
            let options = BatchOptions::default().with_max_size(limit);
            let mut b = BatchBuilder::new(arena, options).unwrap();
            let mut i = 0u8;
            while b.append(7, Some(&[i; 5]), Some(&[i; 40]), &[]).is_ok() {
                i += 1;
            }
            (i, b.seal().unwrap().as_bytes().to_vec())
        };
        let (n_limited, limited) = fill(Vec::with_capacity(8192), 300);
        let (n_exact, exact) = fill(Vec::with_capacity(300), 300);
        assert!(n_limited >= 4, "{n_limited} records");
        assert_eq!(n_limited, n_exact);
        assert_eq!(limited, exact);
        assert!(limited.len() <= 300);
    }

    #[test]
    fn copy_short_copies_every_length_exactly() {
        let src: Vec<u8> = (1..=Stage::SHORT as u8).collect();
        for n in 0..=Stage::SHORT {
            let mut dst = [0u8; Stage::CAP];
            copy_short(&mut dst, &src[..n]);
            assert_eq!(&dst[..n], &src[..n], "length {n}");
            assert!(
                dst[n..].iter().all(|&b| b == 0),
                "length {n} wrote past the end"
            );
        }
    }

    #[test]
    fn flush_near_the_end_of_the_arena_copies_exactly() {
        // An arena with less than Window::LEN bytes of spare capacity takes the stage.
        let mut b = BatchBuilder::new(Vec::with_capacity(120), BatchOptions::default()).unwrap();
        b.append(5, Some(b"key"), Some(b"value"), &[Header::new("h", b"v")])
            .unwrap();
        let sealed = b.seal().unwrap();
        let batch = sealed.as_batch().unwrap();
        batch.verify_crc().unwrap();
        let r = batch.records().unwrap().next().unwrap().unwrap();
        assert_eq!(r.key(), Some(&b"key"[..]));
        assert_eq!(r.value(), Some(&b"value"[..]));
        assert_eq!(sealed.len(), sealed.as_bytes().len());
    }
}
