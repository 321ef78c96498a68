//! Tagged fields (KIP-482): the section at the end of every struct in a flexible version,
//! `count` then `count` × (tag, size, value), all unsigned varints but the value.
//!
//! Invariants, because wire data is hostile:
//! - tags are strictly ascending within a section (the order every writer, Java's
//!   included, produces); a repeated or out-of-order tag is an error, never a value
//!   silently replaced;
//! - the fields a struct does not know are kept as their wire encoding in one [`Bytes`]:
//!   a zero-copy slice of the input when they lie side by side there (the usual case),
//!   else one copy of exactly their bytes. Keeping them never costs more memory than they
//!   took on the wire, however many there are (a map entry per field cost 10–20× that).

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::primitives::{
    DecodeError, DecodeResult, EncodeError, EncodeResult, read_uvarint, take, uvarint_len,
    write_uvarint,
};

/// Unknown tagged fields of a flexible-version struct, kept verbatim so that a
/// decode/encode round trip loses nothing a newer peer sent. Tags are unique and kept in
/// ascending order.
#[derive(Clone, Default)]
pub struct TaggedFields {
    /// The fields, each `tag`, `size`, `value` as on the wire, tags ascending.
    raw: Bytes,
}

impl TaggedFields {
    /// No fields.
    pub const fn new() -> Self {
        TaggedFields { raw: Bytes::new() }
    }

    /// How many fields there are (counted: linear in their number).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The fields, in ascending tag order; values are zero-copy slices.
    pub fn iter(&self) -> TaggedFieldsIter {
        TaggedFieldsIter {
            rest: self.raw.clone(),
        }
    }

    /// The value of `tag`, if present.
    pub fn get(&self, tag: u32) -> Option<Bytes> {
        self.iter().find(|(t, _)| *t == tag).map(|(_, v)| v)
    }

    /// Sets the value of `tag`, returning the one it replaces. Rewrites the encoding
    /// (linear in its size): meant for building values, not for decoding.
    pub fn insert(&mut self, tag: u32, value: Bytes) -> Option<Bytes> {
        let mut raw = BytesMut::with_capacity(self.raw.len() + 10 + value.len());
        let mut old = None;
        let mut pending = Some(value);
        for (t, v) in self.iter() {
            if t >= tag
                && let Some(new) = pending.take()
            {
                put_field(&mut raw, tag, &new);
            }
            if t == tag {
                old = Some(v);
            } else {
                put_field(&mut raw, t, &v);
            }
        }
        if let Some(new) = pending {
            put_field(&mut raw, tag, &new);
        }
        self.raw = raw.freeze();
        old
    }
}

/// Writes one field: tag, size, value. Sizes beyond `u32` cannot come from decoding;
/// [`write_tagged_fields`] refuses them before writing.
fn put_field(buf: &mut BytesMut, tag: u32, value: &[u8]) {
    write_uvarint(buf, tag);
    write_uvarint(buf, u32::try_from(value.len()).unwrap_or(u32::MAX));
    buf.put_slice(value);
}

impl PartialEq for TaggedFields {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl fmt::Debug for TaggedFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a TaggedFields {
    type Item = (u32, Bytes);
    type IntoIter = TaggedFieldsIter;

    fn into_iter(self) -> TaggedFieldsIter {
        self.iter()
    }
}

/// The fields of a [`TaggedFields`], in ascending tag order.
#[derive(Debug, Clone)]
pub struct TaggedFieldsIter {
    rest: Bytes,
}

impl Iterator for TaggedFieldsIter {
    type Item = (u32, Bytes);

    fn next(&mut self) -> Option<(u32, Bytes)> {
        // The encoding was checked when it was read or written, so this cannot fail;
        // if it did, the iteration would end rather than panic.
        read_field(&mut self.rest).ok()
    }
}

/// Reads one field's tag and value.
fn read_field(buf: &mut Bytes) -> DecodeResult<(u32, Bytes)> {
    let tag = read_uvarint(buf)?;
    let size = read_uvarint(buf)? as usize;
    Ok((tag, take(buf, size)?))
}

/// Where the unknown fields read so far are.
enum Kept {
    /// None yet.
    Nothing,
    /// Side by side in the section, at these offsets.
    Run { start: usize, end: usize },
    /// Copied, because a known field lay between two of them.
    Copied(BytesMut),
}

/// Reads the fields of one tagged-field section, after its count: the generated
/// decoders read the fields they know from each value and hand the others to
/// [`TaggedFieldReader::keep`]. (They read the count themselves and skip all this
/// when it is zero, as it nearly always is.)
pub struct TaggedFieldReader {
    left: u32,
    last_tag: Option<u32>,
    /// The input from the section's first field on (a reference, not a copy).
    section: Bytes,
    /// Offsets in `section` of the field last read.
    field: (usize, usize),
    kept: Kept,
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
            section: buf.clone(),
            field: (0, 0),
            kept: Kept::Nothing,
        })
    }

    /// Reads the fields left, keeping them all (for a struct that knows no tags).
    pub fn keep_all(mut self, buf: &mut Bytes) -> DecodeResult<TaggedFields> {
        while self.next(buf)?.is_some() {
            self.keep();
        }
        Ok(self.finish())
    }

    /// The next field's tag and value, or `None` after the last.
    pub fn next(&mut self, buf: &mut Bytes) -> DecodeResult<Option<(u32, Bytes)>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let start = self.section.len() - buf.len();
        let (tag, value) = read_field(buf)?;
        if self.last_tag.is_some_and(|last| tag <= last) {
            return Err(DecodeError::InvalidValue {
                field: "tagged fields",
                reason: "tags not in strictly ascending order",
            });
        }
        self.last_tag = Some(tag);
        self.field = (start, self.section.len() - buf.len());
        Ok(Some((tag, value)))
    }

    /// Keeps the field last read (one the struct does not know) for
    /// [`TaggedFieldReader::finish`].
    pub fn keep(&mut self) {
        let (start, end) = self.field;
        self.kept = match std::mem::replace(&mut self.kept, Kept::Nothing) {
            Kept::Nothing => Kept::Run { start, end },
            Kept::Run { start: s, end: e } if e == start => Kept::Run { start: s, end },
            Kept::Run { start: s, end: e } => {
                let mut copied = BytesMut::with_capacity(e - s + end - start);
                copied.put_slice(&self.section[s..e]);
                copied.put_slice(&self.section[start..end]);
                Kept::Copied(copied)
            }
            Kept::Copied(mut copied) => {
                copied.put_slice(&self.section[start..end]);
                Kept::Copied(copied)
            }
        };
    }

    /// The fields kept.
    pub fn finish(self) -> TaggedFields {
        let raw = match self.kept {
            Kept::Nothing => Bytes::new(),
            Kept::Run { start, end } => self.section.slice(start..end),
            Kept::Copied(copied) => copied.freeze(),
        };
        TaggedFields { raw }
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
                Some((t, v)) => (*t, v.clone()),
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
        put_field(buf, tag, &value);
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
            super::primitives::arbitrary_bytes(u)?,
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
        unknown.insert(5, Bytes::from_static(b"u5"));
        unknown.insert(1, Bytes::from_static(b"u1"));
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
        unknown.insert(3, Bytes::from_static(b"old"));
        let mut known = vec![(3, Bytes::from_static(b"new"))];
        let mut b = BytesMut::new();
        write_tagged_fields(&mut b, &mut known, &unknown).unwrap();
        assert_eq!(&b[..], &[1, 3, 3, b'n', b'e', b'w']);
    }

    #[test]
    fn insert_keeps_tags_sorted_and_replaces() {
        let mut t = TaggedFields::new();
        assert_eq!(t.insert(7, Bytes::from_static(b"a")), None);
        assert_eq!(t.insert(2, Bytes::from_static(b"b")), None);
        assert_eq!(
            t.insert(7, Bytes::from_static(b"c")),
            Some(Bytes::from_static(b"a"))
        );
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [
                (2, Bytes::from_static(b"b")),
                (7, Bytes::from_static(b"c"))
            ]
        );
        assert_eq!(t.get(7), Some(Bytes::from_static(b"c")));
        assert_eq!(t.get(3), None);
    }

    #[test]
    fn side_by_side_unknown_fields_are_a_slice_of_the_input() {
        let input = section(&[(10, b"xy"), (11, b""), (12, b"z")]);
        let mut buf = input.clone();
        let kept = read_unknown_tagged_fields(&mut buf).unwrap();
        assert!(buf.is_empty());
        assert_eq!(kept.len(), 3);
        // No copy: the kept bytes are the input's own.
        assert_eq!(kept.raw.as_ptr(), input[1..].as_ptr());
        assert_eq!(kept.get(10), Some(Bytes::from_static(b"xy")));
    }

    #[test]
    fn unknown_fields_around_a_known_one_are_copied_without_it() {
        let input = section(&[(1, b"a"), (2, b"known"), (3, b"c")]);
        let mut buf = input.slice(1..);
        let mut reader = TaggedFieldReader::new(&buf, 3).unwrap();
        while let Some((tag, _)) = reader.next(&mut buf).unwrap() {
            if tag != 2 {
                reader.keep();
            }
        }
        let kept = reader.finish();
        assert_eq!(kept.raw.len(), 6);
        assert_eq!(
            kept.iter().collect::<Vec<_>>(),
            [(1, Bytes::from_static(b"a")), (3, Bytes::from_static(b"c"))]
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
