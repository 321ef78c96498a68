//! Kafka record formats, sans-IO: the v2 record batch (magic 2, KIP-98) written in
//! place and read lazily, the four compression codecs, and the legacy v0/v1 message
//! sets that old brokers and old logs still return.
//!
//! - [`BatchBuilder`] encodes records straight into their final wire position in a
//!   caller-owned arena (`Vec<u8>` or a pooled buffer from the crate's buffer pools); the 61-byte
//!   batch header is reserved up front and backfilled on seal, with the CRC-32C.
//!   Compression happens on seal, into a second arena or back into the first.
//! - [`RecordBatchRef`] / [`RecordRef`] read a batch from a borrowed `&'a [u8]`:
//!   header fields are plain loads, the CRC is checked only when asked, and keys,
//!   values and headers come back as sub-slices of the input (or of the caller's
//!   decompression scratch buffer for compressed batches).
//! - [`Batches`] walks a `records` field of a Fetch response, v2 and legacy alike,
//!   stopping cleanly at a partial trailing batch (brokers cut fetches mid-batch).
//!
//! Invariants, because wire data is hostile: no function here panics on any input,
//! nothing allocates more than the input (or the caller's decompression cap) could
//! justify, and every malformed input is a [`RecordError`]. The layouts are those of
//! `shared/kafka-protocol/docs/` ("Record Batch", "Message Sets", KIP-98, KIP-32).

mod batch;
mod builder;
mod compression;
mod crc;
mod legacy;
#[cfg(test)]
mod tests;
mod varint;

pub use batch::{
    AnyRecords, BatchRef, BatchSpan, Batches, ControlRecord, ControlRecordType, HeaderRef, Headers,
    RecordBatchRef, RecordRef, Records,
};
pub use builder::{
    BatchBuilder, BatchOptions, BuildError, Header, SealedBatch, record_encoded_len,
};
pub use compression::{CompressionError, CompressionLevels, Compressor, Decompressor};
pub use legacy::{LegacyMessageRef, LegacyRecords, LegacyWriter};

/// Size of the fixed v2 record batch header, up to and including the record count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes of the header that precede the `length` field's coverage (base offset and
/// length itself): `length` counts everything after these 12 bytes.
pub const BATCH_LENGTH_OFFSET: usize = 12;
/// The v2 magic byte.
pub const MAGIC_V2: i8 = 2;
/// Smallest possible encoded v2 record: a length varint and six one-byte fields
/// (attributes, timestamp delta, offset delta, key length, value length, header count).
pub const MIN_RECORD_LEN: usize = 7;
/// Default cap on the decompressed size of one batch (64 MiB), a little above the
/// largest `message.max.bytes` brokers are usually configured with.
pub const DEFAULT_MAX_DECOMPRESSED: usize = 64 << 20;

/// Compression codec, as stored in the low three bits of the batch attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip (RFC 1952), as Java's `GZIPOutputStream` writes it.
    Gzip,
    /// Snappy: the raw block format for v2 batches written here; the xerial framing
    /// Java clients write is also read.
    Snappy,
    /// LZ4 frame format (lz4 v1.5.1 frame, independent blocks).
    Lz4,
    /// Zstandard (KIP-110; v2 batches only).
    Zstd,
}

impl Compression {
    /// Every codec, `None` first.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The attribute bits for this codec.
    pub const fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The codec for attribute bits `id & 7`.
    pub fn from_id(id: u8) -> Result<Self, RecordError> {
        match id & 0x07 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(RecordError::UnknownCompression(other)),
        }
    }

    /// The name Kafka uses in `compression.type`.
    pub const fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Which timestamp a batch carries (attribute bit 3, KIP-32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// The producer's timestamp.
    #[default]
    CreateTime,
    /// The broker's append time; every record's timestamp is the batch's max timestamp.
    LogAppendTime,
}

/// Errors from reading or writing records. Nothing in this module panics on bad
/// input; every defect ends here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// A length or field ran past the end of its enclosing batch or record.
    #[error("truncated {what}: needed {needed} bytes, {remaining} remain")]
    Truncated {
        /// The field or structure being read.
        what: &'static str,
        /// Bytes it needed.
        needed: usize,
        /// Bytes that remained.
        remaining: usize,
    },
    /// A varint ran out of input, was longer than its type allows, or had excess bits.
    #[error("malformed varint in {0}")]
    Varint(&'static str),
    /// A length field was negative (other than the null marker -1) or impossible.
    #[error("invalid length {length} for {what}")]
    InvalidLength {
        /// The field.
        what: &'static str,
        /// Its value.
        length: i64,
    },
    /// The stored CRC does not match the bytes.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// A magic byte this reader does not know.
    #[error("unsupported magic byte {0}")]
    UnsupportedMagic(i8),
    /// Codec bits 5..=7.
    #[error("unknown compression codec id {0}")]
    UnknownCompression(u8),
    /// The record count is negative, or larger than the records' bytes could hold.
    #[error("record count {count} impossible in {bytes} bytes of records")]
    RecordCount {
        /// The claimed count.
        count: i64,
        /// Bytes available for records.
        bytes: usize,
    },
    /// Bytes left over after the last record the header announced.
    #[error("{0} bytes after the last record of the batch")]
    TrailingBytes(usize),
    /// A record's fields did not add up to its declared length.
    #[error("record length {declared} does not match its fields ({actual} bytes)")]
    RecordLengthMismatch {
        /// The record's length prefix.
        declared: usize,
        /// Bytes its fields took.
        actual: usize,
    },
    /// [`RecordBatchRef::records`] on a compressed batch; use
    /// [`RecordBatchRef::decompress_records`].
    #[error("batch is compressed with {0:?}; decompress it first")]
    Compressed(Compression),
    /// A compressed legacy message inside a compressed wrapper.
    #[error("nested compression in a legacy message set")]
    NestedCompression,
    /// A control record whose key or value is malformed.
    #[error("malformed control record: {0}")]
    InvalidControlRecord(&'static str),
    /// A codec failed, or the output exceeded the cap.
    #[error(transparent)]
    Compression(#[from] CompressionError),
    /// A header key is not UTF-8.
    #[error("record header key is not valid UTF-8")]
    HeaderKeyUtf8,
    /// A record's offset delta is not above the previous record's, or lies past the
    /// batch's last offset delta: offsets increase within a batch (compaction leaves
    /// gaps, never repeats), so such a record would repeat or overtake an offset.
    #[error("record offset delta {delta} out of order: expected {min}..={last}")]
    OffsetDelta {
        /// The record's delta.
        delta: i32,
        /// The lowest delta it could have (one above the previous record's).
        min: i64,
        /// The batch's last offset delta.
        last: i32,
    },
}

/// Reads a big-endian integer at `at` from a slice already checked to be long enough.
macro_rules! be_at {
    ($ty:ty, $buf:expr, $at:expr) => {{
        const N: usize = std::mem::size_of::<$ty>();
        let mut raw = [0u8; N];
        raw.copy_from_slice(&$buf[$at..$at + N]);
        <$ty>::from_be_bytes(raw)
    }};
}
pub(crate) use be_at;

#[cfg(test)]
mod codec_id_tests {
    use super::*;

    #[test]
    fn codec_ids_round_trip() {
        for c in Compression::ALL {
            assert_eq!(Compression::from_id(c.id()), Ok(c));
        }
        assert_eq!(
            Compression::from_id(5),
            Err(RecordError::UnknownCompression(5))
        );
        // Only the low three bits are the codec.
        assert_eq!(Compression::from_id(0x0c), Ok(Compression::Zstd));
    }
}
