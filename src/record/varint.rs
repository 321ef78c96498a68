//! Zig-zag varints over borrowed slices, for the record formats.
//!
//! `src/protocol/primitives.rs` reads varints from `bytes::Bytes`; records are read
//! from a plain `&'a [u8]` (the borrowed reader hands out sub-slices with the input's
//! lifetime) and written into a `Vec<u8>` arena, so this module has its own small,
//! branch-light versions. Encoding is Kafka's (protobuf's) zig-zag LEB128:
//! `shared/kafka-protocol/docs/protocol.html`, "varint" and "varlong".
//!
//! Invariants: a read never panics and never reads past the slice; a varint longer
//! than its type allows (5 bytes for 32 bits, 10 for 64) or whose last byte carries
//! bits past the type's width is [`VarintError::Overlong`], never silently truncated.

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The input ended inside the varint.
    Truncated,
    /// More bytes than the type allows, or bits past its width.
    Overlong,
}

/// Reads an unsigned 32-bit LEB128 varint from the front of `buf`, advancing it.
///
/// One- and two-byte varints (every length below 8 KiB, most deltas) are decoded
/// inline; longer ones take the out-of-line path.
#[inline(always)]
pub(crate) fn read_uvarint(buf: &mut &[u8]) -> Result<u32, VarintError> {
    let b = *buf;
    if let Some(&b0) = b.first() {
        if b0 < 0x80 {
            *buf = &b[1..];
            return Ok(u32::from(b0));
        }
        if let Some(&b1) = b.get(1) {
            if b1 < 0x80 {
                *buf = &b[2..];
                return Ok(u32::from(b0 & 0x7f) | u32::from(b1) << 7);
            }
        }
    }
    read_uvarint_slow(buf)
}

#[inline(never)]
fn read_uvarint_slow(buf: &mut &[u8]) -> Result<u32, VarintError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        let Some(&b) = buf.get(i) else {
            return Err(VarintError::Truncated);
        };
        if i == 4 && b > 0x0f {
            // The fifth byte may only carry the top four bits of a u32.
            return Err(VarintError::Overlong);
        }
        value |= u32::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            *buf = &buf[i + 1..];
            return Ok(value);
        }
    }
    Err(VarintError::Overlong)
}

/// Reads an unsigned 64-bit LEB128 varint from the front of `buf`, advancing it.
#[inline(always)]
pub(crate) fn read_uvarlong(buf: &mut &[u8]) -> Result<u64, VarintError> {
    let b = *buf;
    if let Some(&b0) = b.first() {
        if b0 < 0x80 {
            *buf = &b[1..];
            return Ok(u64::from(b0));
        }
        if let Some(&b1) = b.get(1) {
            if b1 < 0x80 {
                *buf = &b[2..];
                return Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
            }
        }
    }
    read_uvarlong_slow(buf)
}

#[inline(never)]
fn read_uvarlong_slow(buf: &mut &[u8]) -> Result<u64, VarintError> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let Some(&b) = buf.get(i) else {
            return Err(VarintError::Truncated);
        };
        if i == 9 && b > 0x01 {
            return Err(VarintError::Overlong);
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            *buf = &buf[i + 1..];
            return Ok(value);
        }
    }
    Err(VarintError::Overlong)
}

/// Reads a zig-zag signed 32-bit varint.
#[inline(always)]
pub(crate) fn read_varint(buf: &mut &[u8]) -> Result<i32, VarintError> {
    read_uvarint(buf).map(zigzag_decode32)
}

/// Reads a zig-zag signed 64-bit varint.
#[inline(always)]
pub(crate) fn read_varlong(buf: &mut &[u8]) -> Result<i64, VarintError> {
    read_uvarlong(buf).map(zigzag_decode64)
}

#[inline(always)]
fn zigzag_decode32(n: u32) -> i32 {
    ((n >> 1) as i32) ^ -((n & 1) as i32)
}

#[inline(always)]
fn zigzag_decode64(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

#[inline(always)]
pub(crate) fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

#[inline(always)]
pub(crate) fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Encoded width of an unsigned LEB128 value (1..=10 bytes).
#[inline(always)]
pub(crate) const fn uvarlong_len(v: u64) -> usize {
    // Bits needed, rounded up to 7-bit groups; 0 still takes one byte.
    // (9 * bits + 64) / 64 == ceil(bits / 7) for 1 <= bits <= 64, without a division.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    (9 * bits + 64) / 64
}

/// Encoded width of a zig-zag signed 32-bit varint.
#[inline(always)]
pub(crate) const fn varint_len(v: i32) -> usize {
    uvarlong_len(((v << 1) ^ (v >> 31)) as u32 as u64)
}

/// Encoded width of a zig-zag signed 64-bit varlong.
#[inline(always)]
pub(crate) const fn varlong_len(v: i64) -> usize {
    uvarlong_len(((v << 1) ^ (v >> 63)) as u64)
}

/// Writes an unsigned LEB128 value into `out` (which must hold 10 bytes), returning
/// the width written.
#[inline(always)]
pub(crate) fn put_uvarlong(out: &mut [u8], v: u64) -> usize {
    // One- and two-byte values (lengths under 8 KiB, most deltas) without a loop.
    if v < 0x80 {
        out[0] = v as u8;
        return 1;
    }
    if v < 0x4000 {
        let two = &mut out[..2];
        two[0] = (v as u8) | 0x80;
        two[1] = (v >> 7) as u8;
        return 2;
    }
    put_uvarlong_long(out, v)
}

#[inline(never)]
fn put_uvarlong_long(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

/// Writes a zig-zag signed 32-bit varint into `out`, returning the width.
#[inline(always)]
pub(crate) fn put_varint(out: &mut [u8], v: i32) -> usize {
    put_uvarlong(out, u64::from(zigzag32(v)))
}

/// Writes a zig-zag signed 64-bit varlong into `out`, returning the width.
#[inline(always)]
pub(crate) fn put_varlong(out: &mut [u8], v: i64) -> usize {
    put_uvarlong(out, zigzag64(v))
}

/// Appends a zig-zag signed 32-bit varint to `out`.
#[cfg(test)]
fn push_varint(out: &mut Vec<u8>, v: i32) {
    let mut tmp = [0u8; 10];
    let n = put_varint(&mut tmp, v);
    out.extend_from_slice(&tmp[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // From the protocol guide's examples and protobuf's zig-zag table.
        let cases: [(i32, &[u8]); 6] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (v, bytes) in cases {
            let mut out = [0u8; 10];
            let n = put_varint(&mut out, v);
            assert_eq!(&out[..n], bytes, "{v}");
            assert_eq!(varint_len(v), n);
            let mut slice = bytes;
            assert_eq!(read_varint(&mut slice), Ok(v));
            assert!(slice.is_empty());
        }
    }

    #[test]
    fn hostile_varints() {
        let mut s: &[u8] = &[];
        assert_eq!(read_varint(&mut s), Err(VarintError::Truncated));
        let mut s: &[u8] = &[0x80, 0x80];
        assert_eq!(read_varint(&mut s), Err(VarintError::Truncated));
        let mut s: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x1f];
        assert_eq!(read_varint(&mut s), Err(VarintError::Overlong));
        let mut s: &[u8] = &[0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(read_varint(&mut s), Err(VarintError::Overlong));
        let mut s: &[u8] = &[0xff; 11];
        assert_eq!(read_varlong(&mut s), Err(VarintError::Overlong));
        let mut s: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(read_varlong(&mut s), Err(VarintError::Overlong));
    }

    #[test]
    fn lengths_match_the_encoder_at_every_width() {
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, (1u64 << shift) + 1] {
                let mut out = [0u8; 10];
                assert_eq!(uvarlong_len(v), put_uvarlong(&mut out, v), "{v}");
            }
        }
        assert_eq!(uvarlong_len(u64::MAX), 10);
        assert_eq!(uvarlong_len(0), 1);
    }

    proptest! {
        #[test]
        fn varint_round_trip(v: i32, tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            push_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            out.extend_from_slice(&tail);
            let mut s = &out[..];
            prop_assert_eq!(read_varint(&mut s), Ok(v));
            prop_assert_eq!(s, &tail[..]);
        }

        #[test]
        fn varlong_round_trip(v: i64) {
            let mut out = [0u8; 10];
            let n = put_varlong(&mut out, v);
            prop_assert_eq!(n, varlong_len(v));
            let mut s = &out[..n];
            prop_assert_eq!(read_varlong(&mut s), Ok(v));
            prop_assert!(s.is_empty());
        }

        #[test]
        fn agrees_with_protocol_primitives(v: i64) {
            let mut theirs = bytes::BytesMut::new();
            crate::protocol::primitives::write_varlong(&mut theirs, v);
            let mut ours = [0u8; 10];
            let n = put_varlong(&mut ours, v);
            prop_assert_eq!(&ours[..n], &theirs[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let mut s = &bytes[..];
            let _ = read_varint(&mut s);
            let mut s = &bytes[..];
            let _ = read_varlong(&mut s);
        }
    }
}
