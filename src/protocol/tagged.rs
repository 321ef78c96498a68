//! Tagged fields (KIP-482): the section at the end of every struct in a flexible version,
//! `count` then `count` × (tag, size, value), all unsigned varints but the value.
//!
//! Invariants, because wire data is hostile:
//! - tags are strictly ascending within a section (the order every writer, Java's
//!   included, produces); a repeated or out-of-order tag is an error, never a value
//!   silently replaced;
//! - the fields a struct does not know are kept as their encoding (tag, size, value)
//!   in one boxed slice of exactly their bytes: keeping them never costs more memory
//!   than they took on the wire, however many there are (a map entry per field cost
//!   10–20× that). The box is 16 bytes in every flexible struct and empty (no
//!   allocation, nothing to free) when there are none, as nearly always.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::primitives::{
    DecodeError, DecodeResult, EncodeError, EncodeResult, read_uvarint, take, uvarint_len,
    write_uvarint,
};

/// Unknown tagged fields of a flexible-version struct, kept verbatim so that a
/// decode/encode round trip loses nothing a newer peer sent. Tags are unique and kept in
/// ascending order.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TaggedFields {
    /// The fields, each `tag`, `size` (canonical unsigned varints), `value`, tags
    /// ascending.
    raw: Box<[u8]>,
}

impl TaggedFields {
    /// No fields.
    pub fn new() -> Self {
        TaggedFields::default()
    }

    /// How many fields there are (counted: linear in their number).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The fields, in ascending tag order.
    pub fn iter(&self) -> TaggedFieldsIter<'_> {
        TaggedFieldsIter { rest: &self.raw }
    }

    /// The value of `tag`, if present.
    pub fn get(&self, tag: u32) -> Option<&[u8]> {
        self.iter().find(|(t, _)| *t == tag).map(|(_, v)| v)
    }

    /// Sets the value of `tag`, returning whether it replaced one. Rewrites the encoding
    /// (linear in its size): meant for building values, not for decoding.
    pub fn insert(&mut self, tag: u32, value: &[u8]) -> bool {
        let mut raw = Vec::with_capacity(self.raw.len() + 10 + value.len());
        let mut replaced = false;
        let mut pending = Some(value);
        for (t, v) in self.iter() {
            if t >= tag
                && let Some(new) = pending.take()
            {
                put_field(&mut raw, tag, new);
            }
            if t == tag {
                replaced = true;
            } else {
                put_field(&mut raw, t, v);
            }
        }
        if let Some(new) = pending {
            put_field(&mut raw, tag, new);
        }
        self.raw = raw.into_boxed_slice();
        replaced
    }
}

/// Appends one field: tag, size, value. Sizes beyond `u32` cannot come from decoding;
/// [`write_tagged_fields`] refuses them before writing.
fn put_field(buf: &mut impl BufMut, tag: u32, value: &[u8]) {
    put_uvarint(buf, u64::from(tag));
    put_uvarint(buf, value.len() as u64);
    buf.put_slice(value);
}

fn put_uvarint(buf: &mut impl BufMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

impl fmt::Debug for TaggedFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a TaggedFields {
    type Item = (u32, &'a [u8]);
    type IntoIter = TaggedFieldsIter<'a>;

    fn into_iter(self) -> TaggedFieldsIter<'a> {
        self.iter()
    }
}

/// The fields of a [`TaggedFields`], in ascending tag order.
#[derive(Debug, Clone)]
pub struct TaggedFieldsIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for TaggedFieldsIter<'a> {
    type Item = (u32, &'a [u8]);

    fn next(&mut self) -> Option<(u32, &'a [u8])> {
        // The encoding was written here, so this cannot fail; if it did, the iteration
        // would end rather than panic.
        let tag = u32::try_from(self.uvarint()?).ok()?;
        let size = usize::try_from(self.uvarint()?).ok()?;
        let value = self.rest.get(..size)?;
        self.rest = &self.rest[size..];
        Some((tag, value))
    }
}

impl TaggedFieldsIter<'_> {
    fn uvarint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for (i, &byte) in self.rest.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.rest = &self.rest[i + 1..];
                return Some(value);
            }
        }
        None
    }
}

/// Reads the fields of one tagged-field section, after its count: the generated
/// decoders read the fields they know from each value and hand the others to
/// [`TaggedFieldReader::keep`]. (They read the count themselves and skip all this
/// when it is zero, as it nearly always is.)
pub struct TaggedFieldReader {
    left: u32,
    last_tag: Option<u32>,
    kept: Vec<u8>,
}

impl TaggedFieldReader {
    /// Starts on the `count` fields at the front of `buf`. Every field takes at least
    /// two bytes, so a count the input cannot hold is refused here.
    pub fn new(buf: &Bytes, count: u32) -> DecodeResult<Self> {
        if u64::from(count) * 2 > buf.len() as u64 {
            return Err(DecodeError::LengthExceedsInput {
                length: u64::from(count),
                remaining: buf.len(),
            });
        }
        Ok(TaggedFieldReader {
            left: count,
            last_tag: None,
            kept: Vec::new(),
        })
    }

    /// The next field's tag and value (a zero-copy slice of `buf`), or `None` after
    /// the last.
    pub fn next(&mut self, buf: &mut Bytes) -> DecodeResult<Option<(u32, Bytes)>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let tag = read_uvarint(buf)?;
        let size = read_uvarint(buf)? as usize;
        let value = take(buf, size)?;
        if self.last_tag.is_some_and(|last| tag <= last) {
            return Err(DecodeError::InvalidValue {
                field: "tagged fields",
                reason: "tags not in strictly ascending order",
            });
        }
        self.last_tag = Some(tag);
        Ok(Some((tag, value)))
    }

    /// Keeps a field the struct does not know (one [`TaggedFieldReader::next`] read):
    /// its bytes are copied once, as they were on the wire.
    pub fn keep(&mut self, tag: u32, value: &[u8]) {
        put_field(&mut self.kept, tag, value);
    }

    /// Reads the fields left, keeping them all (for a struct that knows no tags).
    pub fn keep_all(mut self, buf: &mut Bytes) -> DecodeResult<TaggedFields> {
        while let Some((tag, value)) = self.next(buf)? {
            self.keep(tag, &value);
        }
        Ok(self.finish())
    }

    /// The fields kept.
    pub fn finish(self) -> TaggedFields {
        TaggedFields {
            raw: self.kept.into_boxed_slice(),
        }
    }
}

/// Reads a whole tagged-field section, count included, keeping every field verbatim.
pub fn read_unknown_tagged_fields(buf: &mut Bytes) -> DecodeResult<TaggedFields> {
    match read_uvarint(buf)? {
        0 => Ok(TaggedFields::new()),
        count => TaggedFieldReader::new(buf, count)?.keep_all(buf),
    }
}

/// Writes a tagged-field section: the known fields (already encoded, in any order) merged
/// with the unknown ones kept from decoding, in ascending tag order as the protocol
/// requires. A known tag wins over an unknown one with the same number.
pub fn write_tagged_fields(
    buf: &mut BytesMut,
    known: &mut [(u32, Bytes)],
    unknown: &TaggedFields,
) -> EncodeResult<()> {
    if known.is_empty() && unknown.is_empty() {
        buf.put_u8(0);
        return Ok(());
    }
    known.sort_unstable_by_key(|(tag, _)| *tag);
    let is_known = |tag: &u32| known.binary_search_by_key(tag, |(k, _)| *k).is_ok();
    let unknown_count = unknown.iter().filter(|(t, _)| !is_known(t)).count();
    let total = known.len() + unknown_count;
    write_uvarint(
        buf,
        u32::try_from(total).map_err(|_| EncodeError::TooLong {
            what: "tagged fields",
            len: total,
        })?,
    );
    let mut known_iter = known.iter().peekable();
    let mut unknown_iter = unknown.iter().filter(|(t, _)| !is_known(t)).peekable();
    loop {
        let take_known = match (known_iter.peek(), unknown_iter.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((k, _)), Some((u, _))) => k < u,
        };
        let (tag, value) = if take_known {
            match known_iter.next() {
                Some((t, v)) => (*t, &v[..]),
                None => break,
            }
        } else {
            match unknown_iter.next() {
                Some(field) => field,
                None => break,
            }
        };
        if u32::try_from(value.len()).is_err() {
            return Err(EncodeError::TooLong {
                what: "tagged field",
                len: value.len(),
            });
        }
        buf.reserve(uvarint_len(u64::from(tag)) + 5 + value.len());
        put_field(buf, tag, value);
    }
    Ok(())
}

/// A few arbitrary unknown tagged fields, with tags far above any the schemas use.
#[cfg(any(test, feature = "arbitrary"))]
pub fn arbitrary_unknown_tags(
    u: &mut arbitrary::Unstructured<'_>,
) -> arbitrary::Result<TaggedFields> {
    let mut out = TaggedFields::new();
    for _ in 0..u.int_in_range(0..=2usize)? {
        out.insert(
            u.int_in_range(1000..=1100u32)?,
            &super::primitives::arbitrary_bytes(u)?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(fields: &[(u32, &[u8])]) -> Bytes {
        let mut b = BytesMut::new();
        write_uvarint(&mut b, fields.len() as u32);
        for (tag, value) in fields {
            put_field(&mut b, *tag, value);
        }
        b.freeze()
    }

    #[test]
    fn tagged_fields_are_written_in_tag_order() {
        let mut unknown = TaggedFields::new();
        unknown.insert(5, b"u5");
        unknown.insert(1, b"u1");
        let mut known = vec![
            (3, Bytes::from_static(b"k3")),
            (0, Bytes::from_static(b"k0")),
        ];
        let mut b = BytesMut::new();
        write_tagged_fields(&mut b, &mut known, &unknown).unwrap();
        assert_eq!(
            &b[..],
            &[
                4, 0, 2, b'k', b'0', 1, 2, b'u', b'1', 3, 2, b'k', b'3', 5, 2, b'u', b'5'
            ]
        );
        let all = read_unknown_tagged_fields(&mut b.freeze()).unwrap();
        assert_eq!(all.iter().map(|(t, _)| t).collect::<Vec<_>>(), [0, 1, 3, 5]);
    }

    #[test]
    fn a_known_tag_wins_over_an_unknown_one() {
        let mut unknown = TaggedFields::new();
        unknown.insert(3, b"old");
        let mut known = vec![(3, Bytes::from_static(b"new"))];
        let mut b = BytesMut::new();
        write_tagged_fields(&mut b, &mut known, &unknown).unwrap();
        assert_eq!(&b[..], &[1, 3, 3, b'n', b'e', b'w']);
    }

    #[test]
    fn insert_keeps_tags_sorted_and_replaces() {
        let mut t = TaggedFields::new();
        assert!(!t.insert(7, b"a"));
        assert!(!t.insert(2, b"b"));
        assert!(t.insert(7, b"c"));
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [(2, &b"b"[..]), (7, &b"c"[..])]
        );
        assert_eq!(t.get(7), Some(&b"c"[..]));
        assert_eq!(t.get(3), None);
    }

    #[test]
    fn unknown_fields_take_their_wire_size_and_no_more() {
        let fields: Vec<(u32, &[u8])> = (0..1000).map(|i| (200 + i, &b"xy"[..])).collect();
        let input = section(&fields);
        let mut buf = input.clone();
        let kept = read_unknown_tagged_fields(&mut buf).unwrap();
        assert!(buf.is_empty());
        assert_eq!(kept.len(), 1000);
        // Everything but the count, byte for byte.
        assert_eq!(&kept.raw[..], &input[2..]);
        assert_eq!(kept.get(700), Some(&b"xy"[..]));
    }

    #[test]
    fn unknown_fields_around_a_known_one_are_kept_without_it() {
        let input = section(&[(1, b"a"), (2, b"known"), (3, b"c")]);
        let mut buf = input.slice(1..);
        let mut reader = TaggedFieldReader::new(&buf, 3).unwrap();
        while let Some((tag, value)) = reader.next(&mut buf).unwrap() {
            if tag != 2 {
                reader.keep(tag, &value);
            }
        }
        let kept = reader.finish();
        assert_eq!(kept.raw.len(), 6);
        assert_eq!(
            kept.iter().collect::<Vec<_>>(),
            [(1, &b"a"[..]), (3, &b"c"[..])]
        );
    }

    #[test]
    fn repeated_or_descending_tags_are_errors() {
        for fields in [&[(4, &b"a"[..]), (4, b"b")][..], &[(5, b"a"), (4, b"b")]] {
            assert_eq!(
                read_unknown_tagged_fields(&mut section(fields)),
                Err(DecodeError::InvalidValue {
                    field: "tagged fields",
                    reason: "tags not in strictly ascending order",
                })
            );
        }
    }

    #[test]
    fn a_count_the_input_cannot_hold_is_refused() {
        let mut b = BytesMut::new();
        write_uvarint(&mut b, u32::MAX);
        b.put_slice(&[0; 8]);
        assert!(matches!(
            read_unknown_tagged_fields(&mut b.freeze()),
            Err(DecodeError::LengthExceedsInput { .. })
        ));
    }
}
