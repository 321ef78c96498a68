//! Legacy message sets: magic 0 (Kafka 0.8) and magic 1 (0.10, KIP-32 timestamps),
//! which old brokers return and old log segments still hold.
//!
//! A message is `offset: i64, size: i32, crc: u32, magic: i8, attributes: i8,
//! [timestamp: i64 — magic 1 only], key: bytes, value: bytes`, with a CRC-32/IEEE
//! over `magic..end`. A compressed message is a *wrapper* whose value is a whole
//! compressed message set; for magic 1 the inner offsets are relative (the wrapper
//! carries the offset of the last inner message, KIP-31), for magic 0 they are
//! absolute. Snappy wrappers use the xerial framing Java writes, LZ4 wrappers in
//! magic 0 carry a wrong frame-descriptor checksum (KAFKA-3160).
//!
//! Invariants: parsing checks every length against the input; inner messages are
//! walked once to find the offset base before iteration, without allocating; a
//! compressed message inside a compressed wrapper is rejected.

use super::batch::RecordRef;
use super::compression::{Compressor, Decompressor, xerial_snappy};
use super::{Compression, RecordError, TimestampType, be_at};

const LOG_OVERHEAD: usize = 12; // offset + size
const V0_MIN: usize = 14; // crc, magic, attributes, key length, value length
const V1_MIN: usize = 22; // ... plus the timestamp

/// One legacy message (possibly a compressed wrapper), borrowed from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyMessageRef<'a> {
    bytes: &'a [u8],
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl<'a> LegacyMessageRef<'a> {
    /// Splits one message off the front of `input`: `Ok(None)` when only part of it
    /// is there, else the message and the rest.
    pub fn parse(input: &'a [u8]) -> Result<Option<(Self, &'a [u8])>, RecordError> {
        if input.len() < LOG_OVERHEAD {
            return Ok(None);
        }
        let size = be_at!(i32, input, 8);
        if size < 0 {
            return Err(RecordError::InvalidLength {
                what: "message size",
                length: i64::from(size),
            });
        }
        let total = LOG_OVERHEAD + size as usize;
        if input.len() < total {
            return Ok(None);
        }
        let (bytes, rest) = input.split_at(total);
        let magic = bytes.get(16).map(|&m| m as i8).unwrap_or(-1);
        let min = match magic {
            0 => V0_MIN,
            1 => V1_MIN,
            _ if (size as usize) < 5 => {
                return Err(RecordError::InvalidLength {
                    what: "message size",
                    length: i64::from(size),
                });
            }
            other => return Err(RecordError::UnsupportedMagic(other)),
        };
        if (size as usize) < min {
            return Err(RecordError::InvalidLength {
                what: "message size",
                length: i64::from(size),
            });
        }
        let mut body = &bytes[LOG_OVERHEAD + min - 8..];
        let key = read_bytes(&mut body, "message key")?;
        let value = read_bytes(&mut body, "message value")?;
        if !body.is_empty() {
            return Err(RecordError::TrailingBytes(body.len()));
        }
        Ok(Some((LegacyMessageRef { bytes, key, value }, rest)))
    }

    /// The message's offset (for a magic-1 wrapper, that of its last inner message).
    pub fn offset(&self) -> i64 {
        be_at!(i64, self.bytes, 0)
    }

    /// The whole message as it was on the wire.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Stored CRC-32/IEEE.
    pub fn crc(&self) -> u32 {
        be_at!(u32, self.bytes, 12)
    }

    /// Checks the CRC.
    pub fn verify_crc(&self) -> Result<(), RecordError> {
        let computed = crc32fast::hash(&self.bytes[16..]);
        let stored = self.crc();
        if stored == computed {
            Ok(())
        } else {
            Err(RecordError::CrcMismatch { stored, computed })
        }
    }

    /// 0 or 1.
    pub fn magic(&self) -> i8 {
        self.bytes[16] as i8
    }

    /// The attributes byte.
    pub fn attributes(&self) -> i8 {
        self.bytes[17] as i8
    }

    /// The codec of a wrapper; `None` for a plain message.
    pub fn compression(&self) -> Result<Compression, RecordError> {
        match Compression::from_id(self.attributes() as u8)? {
            Compression::Zstd => Err(RecordError::UnknownCompression(4)),
            c => Ok(c),
        }
    }

    /// Timestamp type (magic 1; magic 0 has no timestamps and reports create time).
    pub fn timestamp_type(&self) -> TimestampType {
        if self.magic() >= 1 && self.attributes() & 0x08 != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// The timestamp, -1 for magic 0.
    pub fn timestamp(&self) -> i64 {
        if self.magic() >= 1 {
            be_at!(i64, self.bytes, 18)
        } else {
            -1
        }
    }

    /// The key.
    pub fn key(&self) -> Option<&'a [u8]> {
        self.key
    }

    /// The value (for a wrapper, the compressed inner message set).
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value
    }

    /// The records of this message: itself, or the inner messages of a wrapper,
    /// decompressed into `scratch` (capped by `decompressor`).
    pub fn records<'s>(
        &self,
        decompressor: &mut Decompressor,
        scratch: &'s mut Vec<u8>,
    ) -> Result<LegacyRecords<'s>, RecordError>
    where
        'a: 's,
    {
        let codec = self.compression()?;
        if codec == Compression::None {
            let record = RecordRef::legacy(self.offset(), self.timestamp(), self.key, self.value);
            return Ok(LegacyRecords {
                single: Some(record),
                backing: self.bytes,
                inner: &[],
                offset_base: 0,
                log_append_time: None,
                failed: false,
            });
        }
        let compressed = self.value.unwrap_or(&[]);
        let n = decompressor.decompress_inner(codec, compressed, scratch, self.magic() == 0)?;
        let inner = &scratch[..n];
        // Magic 1 inner offsets are relative; the wrapper holds the last one's
        // absolute offset, so find the last relative offset first.
        let offset_base = if self.magic() >= 1 {
            let mut last = None;
            let mut rest = inner;
            while !rest.is_empty() {
                let (m, tail) = LegacyMessageRef::parse(rest)?.ok_or(RecordError::Truncated {
                    what: "inner message",
                    needed: LOG_OVERHEAD,
                    remaining: rest.len(),
                })?;
                last = Some(m.offset());
                rest = tail;
            }
            self.offset().wrapping_sub(last.unwrap_or(0))
        } else {
            0
        };
        Ok(LegacyRecords {
            single: None,
            backing: inner,
            inner,
            offset_base,
            log_append_time: (self.timestamp_type() == TimestampType::LogAppendTime)
                .then(|| self.timestamp()),
            failed: false,
        })
    }
}

fn read_bytes<'a>(buf: &mut &'a [u8], what: &'static str) -> Result<Option<&'a [u8]>, RecordError> {
    if buf.len() < 4 {
        return Err(RecordError::Truncated {
            what,
            needed: 4,
            remaining: buf.len(),
        });
    }
    let len = be_at!(i32, buf, 0);
    *buf = &buf[4..];
    if len == -1 {
        return Ok(None);
    }
    if len < 0 {
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

/// Records of a legacy message: the message itself, or a wrapper's inner messages.
#[derive(Debug, Clone)]
pub struct LegacyRecords<'a> {
    single: Option<RecordRef<'a>>,
    /// What the records point into: the message itself, or a wrapper's inner set.
    backing: &'a [u8],
    inner: &'a [u8],
    offset_base: i64,
    log_append_time: Option<i64>,
    failed: bool,
}

impl<'a> LegacyRecords<'a> {
    /// The bytes every record of this message points into (the message itself, or
    /// the decompressed inner messages of a wrapper).
    pub fn bytes(&self) -> &'a [u8] {
        self.backing
    }
}

impl<'a> Iterator for LegacyRecords<'a> {
    type Item = Result<RecordRef<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(r) = self.single.take() {
            return Some(Ok(r));
        }
        if self.failed || self.inner.is_empty() {
            return None;
        }
        let parsed = LegacyMessageRef::parse(self.inner).and_then(|m| {
            m.ok_or(RecordError::Truncated {
                what: "inner message",
                needed: LOG_OVERHEAD,
                remaining: self.inner.len(),
            })
        });
        let result = parsed.and_then(|(m, rest)| {
            if m.compression()? != Compression::None {
                return Err(RecordError::NestedCompression);
            }
            self.inner = rest;
            Ok(RecordRef::legacy(
                self.offset_base.wrapping_add(m.offset()),
                self.log_append_time.unwrap_or_else(|| m.timestamp()),
                m.key,
                m.value,
            ))
        });
        if result.is_err() {
            self.failed = true;
        }
        Some(result)
    }
}

/// Writes legacy message sets, as Kafka clients before 0.11 did. For tests, mock
/// brokers and tools; producers write v2 batches.
#[derive(Debug, Clone)]
pub struct LegacyWriter {
    magic: i8,
    buf: Vec<u8>,
    count: usize,
    last_offset: i64,
}

impl LegacyWriter {
    /// A writer of magic 0 or 1 messages.
    pub fn new(magic: i8) -> Result<Self, RecordError> {
        if !(0..=1).contains(&magic) {
            return Err(RecordError::UnsupportedMagic(magic));
        }
        Ok(LegacyWriter {
            magic,
            buf: Vec::new(),
            count: 0,
            last_offset: -1,
        })
    }

    /// Appends one uncompressed message.
    pub fn append(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) {
        write_message(&mut self.buf, self.magic, offset, 0, timestamp, key, value);
        self.count += 1;
        self.last_offset = offset;
    }

    /// The uncompressed message set.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    /// A single wrapper message holding the messages compressed with `codec`
    /// (gzip, snappy in xerial framing, or lz4), with `timestamp` on the wrapper.
    pub fn finish_compressed(
        self,
        codec: Compression,
        timestamp: i64,
        timestamp_type: TimestampType,
    ) -> Result<Vec<u8>, RecordError> {
        let inner = if self.magic >= 1 {
            // Inner offsets become relative: 0, 1, 2, ... in order.
            let mut relative = Vec::with_capacity(self.buf.len());
            let mut rest = &self.buf[..];
            let mut i = 0i64;
            while let Some((m, tail)) = LegacyMessageRef::parse(rest)? {
                write_message(
                    &mut relative,
                    self.magic,
                    i,
                    m.attributes(),
                    m.timestamp(),
                    m.key(),
                    m.value(),
                );
                i += 1;
                rest = tail;
            }
            relative
        } else {
            self.buf
        };
        let mut compressed = Vec::new();
        match codec {
            Compression::Snappy => xerial_snappy(&inner, &mut compressed)?,
            Compression::Gzip | Compression::Lz4 => {
                compressed.resize(Compressor::max_compressed_len(codec, inner.len()), 0);
                let n = Compressor::new()
                    .compress(codec, &inner, &mut compressed)?
                    .unwrap_or(0);
                compressed.truncate(n);
                if codec == Compression::Lz4 && self.magic == 0 && n >= 7 {
                    // KAFKA-3160: magic 0 hashed the frame magic into the checksum too.
                    compressed[6] = (twox_hash::XxHash32::oneshot(0, &compressed[..6]) >> 8) as u8;
                }
            }
            _ => return Err(RecordError::UnknownCompression(codec.id())),
        }
        let mut attributes = codec.id() as i8;
        if timestamp_type == TimestampType::LogAppendTime {
            attributes |= 0x08;
        }
        let mut out = Vec::new();
        write_message(
            &mut out,
            self.magic,
            self.last_offset,
            attributes,
            timestamp,
            None,
            Some(&compressed),
        );
        Ok(out)
    }
}

fn write_message(
    out: &mut Vec<u8>,
    magic: i8,
    offset: i64,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let start = out.len();
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&[0; 8]); // size and crc, backfilled
    out.push(magic as u8);
    out.push(attributes as u8);
    if magic >= 1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    let size = (out.len() - start - LOG_OVERHEAD) as i32;
    out[start + 8..start + 12].copy_from_slice(&size.to_be_bytes());
    let crc = crc32fast::hash(&out[start + 16..]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BatchRef, Batches};
    use proptest::prelude::*;

    type Msg = (Option<Vec<u8>>, Option<Vec<u8>>);
    /// Offset, timestamp, key, value.
    type Read = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn read_all(set: &[u8]) -> Vec<Read> {
        let mut d = Decompressor::new(1 << 20);
        let mut scratch = Vec::new();
        let mut out = Vec::new();
        let mut batches = Batches::new(set).verify_crc(true);
        for b in &mut batches {
            let b = b.unwrap();
            assert!(matches!(b, BatchRef::Legacy(_)));
            for r in b.records(&mut d, &mut scratch).unwrap() {
                let r = r.unwrap();
                out.push((
                    r.offset(),
                    r.timestamp(),
                    r.key().map(<[u8]>::to_vec),
                    r.value().map(<[u8]>::to_vec),
                ));
            }
        }
        assert!(batches.remainder().is_empty());
        out
    }

    #[test]
    fn known_v0_message_bytes() {
        // offset 5, key null, value "hi": the layout from the protocol guide.
        let mut w = LegacyWriter::new(0).unwrap();
        w.append(5, 0, None, Some(b"hi"));
        let set = w.finish();
        assert_eq!(set.len(), 12 + 14 + 2);
        assert_eq!(&set[..8], &5i64.to_be_bytes());
        assert_eq!(&set[8..12], &16i32.to_be_bytes());
        assert_eq!(&set[16..18], &[0, 0]);
        assert_eq!(&set[18..22], &(-1i32).to_be_bytes());
        assert_eq!(read_all(&set), vec![(5, -1, None, Some(b"hi".to_vec()))]);
    }

    #[test]
    fn corrupt_crc_nested_and_truncated() {
        let mut w = LegacyWriter::new(1).unwrap();
        w.append(0, 10, Some(b"k"), Some(b"v"));
        let mut set = w.finish();
        let last = set.len() - 1;
        set[last] ^= 1;
        let err = Batches::new(&set)
            .verify_crc(true)
            .next()
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, RecordError::CrcMismatch { .. }));
        // A partial message stops the walk cleanly.
        let mut b = Batches::new(&set[..set.len() - 3]);
        assert!(b.next().is_none());
        assert_eq!(b.remainder().len(), set.len() - 3);

        // A wrapper inside a wrapper.
        let mut inner = LegacyWriter::new(1).unwrap();
        inner.append(0, 1, None, Some(b"x"));
        let wrapper = inner
            .finish_compressed(Compression::Gzip, 1, TimestampType::CreateTime)
            .unwrap();
        let mut outer = LegacyWriter::new(1).unwrap();
        outer.buf = wrapper;
        outer.last_offset = 0;
        let nested = outer
            .finish_compressed(Compression::Gzip, 1, TimestampType::CreateTime)
            .unwrap();
        let mut d = Decompressor::new(1 << 20);
        let mut scratch = Vec::new();
        let m = LegacyMessageRef::parse(&nested).unwrap().unwrap().0;
        let err = m.records(&mut d, &mut scratch).unwrap().next().unwrap();
        assert_eq!(err, Err(RecordError::NestedCompression));
    }

    #[test]
    fn log_append_time_wrapper_stamps_inner_records() {
        let mut w = LegacyWriter::new(1).unwrap();
        w.append(100, 1, None, Some(b"a"));
        w.append(101, 2, None, Some(b"b"));
        let set = w
            .finish_compressed(Compression::Snappy, 999, TimestampType::LogAppendTime)
            .unwrap();
        let got = read_all(&set);
        assert_eq!(got[0].0, 100);
        assert_eq!(got[1].0, 101);
        assert!(got.iter().all(|r| r.1 == 999));
    }

    fn msgs() -> impl Strategy<Value = Vec<Msg>> {
        let field = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40));
        proptest::collection::vec((field.clone(), field), 1..20)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn prop_round_trip(
            magic in 0i8..=1,
            codec in proptest::sample::select(vec![
                Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4]),
            base in 0i64..1_000_000,
            messages in msgs(),
        ) {
            let mut w = LegacyWriter::new(magic).unwrap();
            for (i, (k, v)) in messages.iter().enumerate() {
                w.append(base + i as i64, 1000 + i as i64, k.as_deref(), v.as_deref());
            }
            let set = if codec == Compression::None {
                w.finish()
            } else {
                w.finish_compressed(codec, 5, TimestampType::CreateTime).unwrap()
            };
            let got = read_all(&set);
            prop_assert_eq!(got.len(), messages.len());
            for (i, (g, (k, v))) in got.iter().zip(&messages).enumerate() {
                prop_assert_eq!(g.0, base + i as i64);
                prop_assert_eq!(g.1, if magic == 0 { -1 } else { 1000 + i as i64 });
                prop_assert_eq!(&g.2, k);
                prop_assert_eq!(&g.3, v);
            }
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut d = Decompressor::new(1 << 16);
            let mut scratch = Vec::new();
            if let Ok(Some((m, _))) = LegacyMessageRef::parse(&bytes) {
                let _ = m.verify_crc();
                if let Ok(records) = m.records(&mut d, &mut scratch) {
                    for r in records { let _ = r; }
                }
            }
        }
    }
}
