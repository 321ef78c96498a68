//! Kafka's wire primitives, sans-IO: fixed-width integers, varints, strings, bytes,
//! arrays, UUIDs and tagged fields, in both the classic and the compact ("flexible",
//! KIP-482) forms.
//!
//! Invariants every reader here keeps, because wire data is hostile:
//! - a read never panics: running out of input is [`DecodeError::Truncated`];
//! - no length read from the wire is trusted before it is checked against the bytes
//!   that remain, so nothing allocates more than the input could hold;
//! - negative lengths other than the null marker `-1` are rejected;
//! - byte fields are zero-copy slices (`Bytes::split_to`) of the input buffer;
//! - an array's length is refused when its elements, at their least wire size
//!   (computed per version by the generator), could not fit in the input; its decoder
//!   then reserves no more bytes of memory than remain ([`array_capacity`]) and grows
//!   only as elements decode ([`grow_array`]), so memory follows decoded data, not a
//!   claimed count.
//!
//! Tagged-field sections are in [`super::tagged`] (re-exported here for the generated
//! code).
//!
//! The encoding rules are those of `shared/kafka-protocol/docs/protocol.html`
//! ("Protocol Primitive Types").

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};

#[cfg(any(test, feature = "arbitrary"))]
pub use super::tagged::arbitrary_unknown_tags;
pub use super::tagged::{
    TaggedFieldReader, TaggedFields, read_unknown_tagged_fields, write_tagged_fields,
};

/// Errors from decoding wire data. Decoding never panics; every malformed input ends here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before the value did.
    #[error("truncated input: needed {needed} bytes, {remaining} remain")]
    Truncated {
        /// Bytes the value needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length prefix was negative and not the null marker.
    #[error("invalid negative length {0}")]
    NegativeLength(i64),
    /// A length prefix claims more elements or bytes than the input holds.
    #[error("length {length} exceeds the {remaining} bytes that remain")]
    LengthExceedsInput {
        /// The claimed length.
        length: u64,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A varint ran past its maximum encoded width.
    #[error("varint longer than {0} bytes")]
    VarintTooLong(usize),
    /// A string was not valid UTF-8.
    #[error("string field {0} is not valid UTF-8")]
    InvalidUtf8(&'static str),
    /// A null was read where the field is not nullable at this version.
    #[error("null value for non-nullable field {0}")]
    UnexpectedNull(&'static str),
    /// The message type has no such version.
    #[error("{what} has no version {version}")]
    UnsupportedVersion {
        /// The message or API.
        what: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// An API key this crate does not know.
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    /// A frame or value larger than the configured cap.
    #[error("{what} of {size} bytes exceeds the cap of {max} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its claimed size.
        size: u64,
        /// The cap.
        max: u64,
    },
    /// A value that decoded but is not valid for its field.
    #[error("invalid value for {field}: {reason}")]
    InvalidValue {
        /// The field.
        field: &'static str,
        /// Why it is invalid.
        reason: &'static str,
    },
}

/// Errors from encoding a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The message type has no such version.
    #[error("{what} has no version {version}")]
    UnsupportedVersion {
        /// The message or API.
        what: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// A null value for a field that is not nullable at this version.
    #[error("field {field} is not nullable at version {version}")]
    NullNotAllowed {
        /// The field.
        field: &'static str,
        /// The version being encoded.
        version: i16,
    },
    /// A field that this version cannot carry holds a non-default value and the schema
    /// says it must not be silently dropped (it is not "ignorable").
    #[error("field {field} is set but version {version} cannot carry it")]
    FieldNotInVersion {
        /// The field.
        field: &'static str,
        /// The version being encoded.
        version: i16,
    },
    /// Bytes handed over as an encoded message are not one.
    #[error("{what} is malformed: {reason}")]
    Malformed {
        /// What was handed over.
        what: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A string, byte field or array longer than its length prefix can express.
    #[error("{what} is {len} long, more than its length prefix can express")]
    TooLong {
        /// What was too long.
        what: &'static str,
        /// Its length.
        len: usize,
    },
}

/// A 128-bit UUID as Kafka sends it (topic ids, KIP-516): 16 raw bytes, big-endian.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero UUID, which Kafka uses for "no topic id".
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// Whether this is the all-zero UUID.
    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Result alias for decoding.
pub type DecodeResult<T> = Result<T, DecodeError>;
/// Result alias for encoding.
pub type EncodeResult<T> = Result<T, EncodeError>;

#[inline]
fn ensure(buf: &Bytes, needed: usize) -> DecodeResult<()> {
    if buf.remaining() < needed {
        Err(DecodeError::Truncated {
            needed,
            remaining: buf.remaining(),
        })
    } else {
        Ok(())
    }
}

macro_rules! fixed_readers {
    ($($name:ident => $ty:ty, $get:ident;)*) => {$(
        #[doc = concat!("Reads a big-endian `", stringify!($ty), "`.")]
        #[inline]
        pub fn $name(buf: &mut Bytes) -> DecodeResult<$ty> {
            ensure(buf, std::mem::size_of::<$ty>())?;
            Ok(buf.$get())
        }
    )*};
}

fixed_readers! {
    read_i8 => i8, get_i8;
    read_i16 => i16, get_i16;
    read_i32 => i32, get_i32;
    read_i64 => i64, get_i64;
    read_u16 => u16, get_u16;
    read_u32 => u32, get_u32;
    read_f64 => f64, get_f64;
}

/// Reads a boolean (one byte; any non-zero value is true, as in the Java client).
#[inline]
pub fn read_bool(buf: &mut Bytes) -> DecodeResult<bool> {
    Ok(read_i8(buf)? != 0)
}

/// Reads an unsigned LEB128 varint of at most 5 bytes (32 bits).
#[inline]
pub fn read_uvarint(buf: &mut Bytes) -> DecodeResult<u32> {
    let v = read_uvarlong_max(buf, 5)?;
    u32::try_from(v).map_err(|_| DecodeError::VarintTooLong(5))
}

/// Reads an unsigned LEB128 varint of at most 10 bytes (64 bits).
#[inline]
pub fn read_uvarlong(buf: &mut Bytes) -> DecodeResult<u64> {
    read_uvarlong_max(buf, 10)
}

#[inline]
fn read_uvarlong_max(buf: &mut Bytes, max_len: usize) -> DecodeResult<u64> {
    let mut value: u64 = 0;
    for i in 0..max_len {
        ensure(buf, 1)?;
        let byte = buf.get_u8();
        let shift = 7 * i as u32;
        // The last permitted byte may only carry the bits that still fit in 64.
        if shift == 63 && byte > 1 {
            return Err(DecodeError::VarintTooLong(max_len));
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::VarintTooLong(max_len))
}

/// Reads a zigzag-encoded signed varint (32 bits).
#[inline]
pub fn read_varint(buf: &mut Bytes) -> DecodeResult<i32> {
    let v = read_uvarint(buf)?;
    Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
}

/// Reads a zigzag-encoded signed varlong (64 bits).
#[inline]
pub fn read_varlong(buf: &mut Bytes) -> DecodeResult<i64> {
    let v = read_uvarlong(buf)?;
    Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
}

/// Reads a 16-byte UUID.
#[inline]
pub fn read_uuid(buf: &mut Bytes) -> DecodeResult<Uuid> {
    ensure(buf, 16)?;
    let mut out = [0u8; 16];
    buf.copy_to_slice(&mut out);
    Ok(Uuid(out))
}

/// Splits off exactly `len` bytes without copying.
#[inline]
pub fn take(buf: &mut Bytes, len: usize) -> DecodeResult<Bytes> {
    ensure(buf, len)?;
    Ok(buf.split_to(len))
}

/// Reads a length prefix: classic `int16`/`int32` (−1 is null) or compact unsigned
/// varint N+1 (0 is null). Returns `None` for null. The length is checked against the
/// remaining input (times `min_unit`, the least bytes one unit occupies), so a caller
/// may allocate for it.
#[inline]
fn read_length(
    buf: &mut Bytes,
    compact: bool,
    classic_i16: bool,
    min_unit: usize,
) -> DecodeResult<Option<usize>> {
    let len: i64 = if compact {
        i64::from(read_uvarint(buf)?) - 1
    } else if classic_i16 {
        i64::from(read_i16(buf)?)
    } else {
        i64::from(read_i32(buf)?)
    };
    if len == -1 {
        return Ok(None);
    }
    if len < 0 {
        return Err(DecodeError::NegativeLength(len));
    }
    let len = len as u64;
    let remaining = buf.remaining();
    if len.saturating_mul(min_unit.max(1) as u64) > remaining as u64 {
        return Err(DecodeError::LengthExceedsInput {
            length: len,
            remaining,
        });
    }
    Ok(Some(len as usize))
}

/// Reads a nullable string (classic `int16` length, or compact).
pub fn read_nullable_string(
    buf: &mut Bytes,
    compact: bool,
    field: &'static str,
) -> DecodeResult<Option<String>> {
    match read_length(buf, compact, true, 1)? {
        None => Ok(None),
        Some(len) => {
            // `len` is checked against the input: the copy is at most what remains.
            let s = match std::str::from_utf8(&buf[..len]) {
                Ok(s) => s.to_owned(),
                Err(_) => return Err(DecodeError::InvalidUtf8(field)),
            };
            buf.advance(len);
            Ok(Some(s))
        }
    }
}

/// Reads a non-nullable string; a null on the wire is an error naming `field`.
pub fn read_string(buf: &mut Bytes, compact: bool, field: &'static str) -> DecodeResult<String> {
    read_nullable_string(buf, compact, field)?.ok_or(DecodeError::UnexpectedNull(field))
}

/// Reads nullable bytes (classic `int32` length, or compact), zero-copy.
pub fn read_nullable_bytes(buf: &mut Bytes, compact: bool) -> DecodeResult<Option<Bytes>> {
    Ok(read_length(buf, compact, false, 1)?.map(|len| buf.split_to(len)))
}

/// Reads non-nullable bytes; a null on the wire is an error naming `field`.
pub fn read_bytes(buf: &mut Bytes, compact: bool, field: &'static str) -> DecodeResult<Bytes> {
    read_nullable_bytes(buf, compact)?.ok_or(DecodeError::UnexpectedNull(field))
}

/// The elements of `T` to reserve for an array whose length [`read_array_len`] read as
/// `n` (so at most one per least element size of the input), with `remaining` bytes
/// left: no more than the bytes that remain would hold in memory. An element in memory
/// is often much larger than its least wire size (a 250-byte struct for 37 bytes), so
/// the count alone could reserve many times the input; with this bound, what a claimed
/// count reserves beyond decoded data is at most the input's own size. The generated
/// decoders grow the vector with [`grow_array`] as elements decode.
#[inline]
pub fn array_capacity<T>(n: usize, remaining: usize) -> usize {
    n.min(remaining / std::mem::size_of::<T>().max(1))
}

/// Doubles a full vector's room (at least 4 elements) as an array's elements decode,
/// never past `n`, its length.
#[cold]
pub fn grow_array<T>(items: &mut Vec<T>, n: usize) {
    let len = items.len();
    items.reserve_exact(len.max(4).min(n.saturating_sub(len)).max(1));
}

/// Reads an array length (classic `int32` or compact); `None` is a null array.
/// `min_elem_size` is the least number of bytes one element occupies on the wire, so
/// a hostile length is rejected before anything is allocated for it.
pub fn read_array_len(
    buf: &mut Bytes,
    compact: bool,
    min_elem_size: usize,
) -> DecodeResult<Option<usize>> {
    read_length(buf, compact, false, min_elem_size)
}

/// Writes an unsigned varint.
#[inline]
pub fn write_uvarint(buf: &mut BytesMut, value: u32) {
    write_uvarlong(buf, u64::from(value));
}

/// Writes an unsigned varlong.
#[inline]
pub fn write_uvarlong(buf: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// Writes a zigzag signed varint.
#[inline]
pub fn write_varint(buf: &mut BytesMut, value: i32) {
    write_uvarint(buf, ((value << 1) ^ (value >> 31)) as u32);
}

/// Writes a zigzag signed varlong.
#[inline]
pub fn write_varlong(buf: &mut BytesMut, value: i64) {
    write_uvarlong(buf, ((value << 1) ^ (value >> 63)) as u64);
}

/// The encoded size of an unsigned varint.
#[inline]
pub fn uvarint_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// The encoded size of a zigzag signed varlong.
#[inline]
pub fn varlong_len(value: i64) -> usize {
    uvarint_len(((value << 1) ^ (value >> 63)) as u64)
}

/// Writes a UUID.
#[inline]
pub fn write_uuid(buf: &mut BytesMut, value: &Uuid) {
    buf.put_slice(&value.0);
}

/// Writes a boolean.
#[inline]
pub fn write_bool(buf: &mut BytesMut, value: bool) {
    buf.put_i8(i8::from(value));
}

fn write_length(
    buf: &mut BytesMut,
    len: Option<usize>,
    compact: bool,
    classic_i16: bool,
    what: &'static str,
) -> EncodeResult<()> {
    match (len, compact) {
        (None, true) => write_uvarint(buf, 0),
        (None, false) if classic_i16 => buf.put_i16(-1),
        (None, false) => buf.put_i32(-1),
        (Some(n), true) => {
            let v = u32::try_from(n)
                .ok()
                .and_then(|n| n.checked_add(1))
                .ok_or(EncodeError::TooLong { what, len: n })?;
            write_uvarint(buf, v);
        }
        (Some(n), false) if classic_i16 => {
            let v = i16::try_from(n).map_err(|_| EncodeError::TooLong { what, len: n })?;
            buf.put_i16(v);
        }
        (Some(n), false) => {
            let v = i32::try_from(n).map_err(|_| EncodeError::TooLong { what, len: n })?;
            buf.put_i32(v);
        }
    }
    Ok(())
}

/// Writes a nullable string.
pub fn write_nullable_string(
    buf: &mut BytesMut,
    value: Option<&str>,
    compact: bool,
    what: &'static str,
) -> EncodeResult<()> {
    write_length(buf, value.map(str::len), compact, true, what)?;
    if let Some(s) = value {
        buf.put_slice(s.as_bytes());
    }
    Ok(())
}

/// Writes a non-null string.
pub fn write_string(
    buf: &mut BytesMut,
    value: &str,
    compact: bool,
    what: &'static str,
) -> EncodeResult<()> {
    write_nullable_string(buf, Some(value), compact, what)
}

/// Writes nullable bytes.
pub fn write_nullable_bytes(
    buf: &mut BytesMut,
    value: Option<&[u8]>,
    compact: bool,
    what: &'static str,
) -> EncodeResult<()> {
    write_length(buf, value.map(<[u8]>::len), compact, false, what)?;
    if let Some(b) = value {
        buf.put_slice(b);
    }
    Ok(())
}

/// Writes non-null bytes.
pub fn write_bytes(
    buf: &mut BytesMut,
    value: &[u8],
    compact: bool,
    what: &'static str,
) -> EncodeResult<()> {
    write_nullable_bytes(buf, Some(value), compact, what)
}

/// Writes an array length (`None` for a null array).
pub fn write_array_len(
    buf: &mut BytesMut,
    len: Option<usize>,
    compact: bool,
    what: &'static str,
) -> EncodeResult<()> {
    write_length(buf, len, compact, false, what)
}

/// Encode into a fresh buffer: used for tagged field values, whose size prefix comes first.
pub fn encode_to_bytes(f: impl FnOnce(&mut BytesMut) -> EncodeResult<()>) -> EncodeResult<Bytes> {
    let mut tmp = BytesMut::new();
    f(&mut tmp)?;
    Ok(tmp.freeze())
}

/// A short arbitrary UTF-8 string (property tests and fuzzing).
#[cfg(any(test, feature = "arbitrary"))]
pub fn arbitrary_string(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<String> {
    let len = u.int_in_range(0..=12usize)?;
    let mut s = String::with_capacity(len);
    for _ in 0..len {
        s.push(u.arbitrary::<char>()?);
    }
    Ok(s)
}

/// Short arbitrary bytes (property tests and fuzzing).
#[cfg(any(test, feature = "arbitrary"))]
pub fn arbitrary_bytes(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<Bytes> {
    let len = u.int_in_range(0..=24usize)?;
    Ok(Bytes::copy_from_slice(u.bytes(len.min(u.len()))?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(f: impl FnOnce(&mut BytesMut)) -> Bytes {
        let mut b = BytesMut::new();
        f(&mut b);
        b.freeze()
    }

    #[test]
    fn varint_known_vectors() {
        // Values and encodings from the protobuf/Kafka zigzag examples.
        for (v, bytes) in [
            (0i32, &[0x00][..]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ] {
            let b = enc(|b| write_varint(b, v));
            assert_eq!(&b[..], bytes, "encoding {v}");
            assert_eq!(read_varint(&mut b.clone()).unwrap(), v);
        }
    }

    #[test]
    fn overlong_varints_are_errors() {
        let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(read_uvarint(&mut b), Err(DecodeError::VarintTooLong(5)));
        let mut b = Bytes::from_static(&[0xff; 11]);
        assert_eq!(read_uvarlong(&mut b), Err(DecodeError::VarintTooLong(10)));
        // 10th byte may only hold the top bit of a u64.
        let mut b =
            Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]);
        assert_eq!(read_uvarlong(&mut b), Err(DecodeError::VarintTooLong(10)));
        let mut b = Bytes::from_static(&[0x80]);
        assert!(matches!(
            read_uvarint(&mut b),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn hostile_lengths_are_rejected_before_allocation() {
        // int32 array length of 2^31-1 with 4 bytes left.
        let mut b = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert!(matches!(
            read_array_len(&mut b, false, 4),
            Err(DecodeError::LengthExceedsInput { .. })
        ));
        let mut b = Bytes::from_static(&[0xff, 0xfe]);
        assert_eq!(
            read_nullable_string(&mut b, false, "s"),
            Err(DecodeError::NegativeLength(-2))
        );
        let mut b = Bytes::from_static(&[0xff, 0xff]);
        assert_eq!(read_nullable_string(&mut b, false, "s"), Ok(None));
        let mut b = Bytes::from_static(&[0x00]);
        assert_eq!(
            read_string(&mut b, true, "s"),
            Err(DecodeError::UnexpectedNull("s"))
        );
        let mut b = Bytes::from_static(&[0x00, 0x02, 0xff, 0xfe]);
        assert_eq!(
            read_string(&mut b, false, "s"),
            Err(DecodeError::InvalidUtf8("s"))
        );
    }

    #[test]
    fn arrays_reserve_by_the_input_not_by_the_claimed_count() {
        // 1,000 claimed 24-byte elements over 100 bytes: room for 4.
        assert_eq!(array_capacity::<String>(1000, 100), 4);
        assert_eq!(array_capacity::<u32>(10, 1 << 20), 10);
        assert_eq!(array_capacity::<()>(7, 0), 0);
        // Growth doubles, but never past the array's length.
        let mut items: Vec<u64> = Vec::with_capacity(3);
        items.extend([1, 2, 3]);
        grow_array(&mut items, 5);
        assert_eq!(items.capacity(), 5);
        items.extend([4, 5]);
        assert_eq!(items.capacity(), 5);
    }

    #[test]
    fn uvarint_len_matches_encoding() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            assert_eq!(uvarint_len(v), enc(|b| write_uvarlong(b, v)).len(), "{v}");
        }
    }

    proptest! {
        #[test]
        fn varlong_round_trip(v in any::<i64>()) {
            let b = enc(|b| write_varlong(b, v));
            prop_assert_eq!(b.len(), varlong_len(v));
            prop_assert_eq!(read_varlong(&mut b.clone()).unwrap(), v);
        }

        #[test]
        fn uvarint_round_trip(v in any::<u32>()) {
            let b = enc(|b| write_uvarint(b, v));
            prop_assert_eq!(read_uvarint(&mut b.clone()).unwrap(), v);
        }

        #[test]
        fn strings_round_trip(s in ".{0,40}", compact in any::<bool>(), null in any::<bool>()) {
            let v = if null { None } else { Some(s.as_str()) };
            let b = enc(|b| write_nullable_string(b, v, compact, "s").unwrap());
            let mut r = b.clone();
            let got = read_nullable_string(&mut r, compact, "s").unwrap();
            prop_assert_eq!(got.as_deref(), v);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn bytes_round_trip(s in proptest::collection::vec(any::<u8>(), 0..64), compact in any::<bool>()) {
            let b = enc(|b| write_bytes(b, &s, compact, "b").unwrap());
            let mut r = b.clone();
            prop_assert_eq!(&read_bytes(&mut r, compact, "b").unwrap()[..], &s[..]);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn readers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let b = Bytes::from(data);
            let _ = read_varlong(&mut b.clone());
            let _ = read_nullable_string(&mut b.clone(), true, "s");
            let _ = read_nullable_string(&mut b.clone(), false, "s");
            let _ = read_nullable_bytes(&mut b.clone(), false);
            let _ = read_array_len(&mut b.clone(), true, 1);
            let _ = read_unknown_tagged_fields(&mut b.clone());
            let _ = read_uuid(&mut b.clone());
        }
    }
}
