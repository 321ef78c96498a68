//! The output format of `kring consume`, kcat-style: a template with `%` tokens for
//! the parts of a record, compiled once and rendered into a byte buffer per record.
//!
//! Tokens: `%t` topic, `%p` partition, `%o` offset, `%T` timestamp (ms), `%k` key,
//! `%K` key length (-1 for null), `%s` value, `%S` value length (-1 for null), `%h`
//! headers as `key=value` joined by `,` (a null value prints the key alone), `%%` a
//! percent sign. Escapes `\n \t \r \0 \\ \xNN` are undone first. Keys, values and
//! headers are written as raw bytes, so `%K`/`%S` make the output parseable even when
//! they hold delimiters.

use crate::args::{UsageError, unescape};

/// One piece of a compiled format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Timestamp,
    Key,
    KeyLength,
    Value,
    ValueLength,
    Headers,
}

/// The parts of a record a format can print.
pub struct RecordView<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// Header keys and values, in order.
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

/// A compiled output format.
#[derive(Debug, Clone)]
pub struct Format {
    pieces: Vec<Piece>,
    wants_headers: bool,
}

impl Format {
    /// Compiles `template` (after undoing its escapes).
    pub fn parse(template: &str) -> Result<Format, UsageError> {
        let bytes = unescape("--format", template)?;
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut it = bytes.iter().copied();
        while let Some(b) = it.next() {
            if b != b'%' {
                literal.push(b);
                continue;
            }
            let piece = match it.next() {
                Some(b'%') => {
                    literal.push(b'%');
                    continue;
                }
                Some(b't') => Piece::Topic,
                Some(b'p') => Piece::Partition,
                Some(b'o') => Piece::Offset,
                Some(b'T') => Piece::Timestamp,
                Some(b'k') => Piece::Key,
                Some(b'K') => Piece::KeyLength,
                Some(b's') => Piece::Value,
                Some(b'S') => Piece::ValueLength,
                Some(b'h') => Piece::Headers,
                Some(other) => {
                    return Err(UsageError::new(format!(
                        "--format {template:?}: unknown token %{}",
                        other as char
                    )));
                }
                None => {
                    return Err(UsageError::new(format!(
                        "--format {template:?}: ends in a lone %"
                    )));
                }
            };
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            pieces.push(piece);
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        let wants_headers = pieces.contains(&Piece::Headers);
        Ok(Format {
            pieces,
            wants_headers,
        })
    }

    /// Whether the format prints headers (so they need decoding at all).
    pub fn wants_headers(&self) -> bool {
        self.wants_headers
    }

    /// Appends `record` rendered to `out`.
    pub fn render(&self, record: &RecordView<'_>, out: &mut Vec<u8>) {
        use std::io::Write;
        for piece in &self.pieces {
            // Writing into a Vec cannot fail.
            let _ = match piece {
                Piece::Literal(l) => {
                    out.extend_from_slice(l);
                    Ok(())
                }
                Piece::Topic => {
                    out.extend_from_slice(record.topic.as_bytes());
                    Ok(())
                }
                Piece::Partition => write!(out, "{}", record.partition),
                Piece::Offset => write!(out, "{}", record.offset),
                Piece::Timestamp => write!(out, "{}", record.timestamp),
                Piece::Key => {
                    out.extend_from_slice(record.key.unwrap_or_default());
                    Ok(())
                }
                Piece::KeyLength => write!(out, "{}", length(record.key)),
                Piece::Value => {
                    out.extend_from_slice(record.value.unwrap_or_default());
                    Ok(())
                }
                Piece::ValueLength => write!(out, "{}", length(record.value)),
                Piece::Headers => {
                    for (i, (k, v)) in record.headers.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(k);
                        if let Some(v) = v {
                            out.push(b'=');
                            out.extend_from_slice(v);
                        }
                    }
                    Ok(())
                }
            };
        }
    }
}

fn length(bytes: Option<&[u8]>) -> i64 {
    bytes.map_or(-1, |b| b.len() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_token() {
        let headers: Vec<(&[u8], Option<&[u8]>)> = vec![(b"a", Some(b"1")), (b"b", None)];
        let record = RecordView {
            topic: "orders",
            partition: 2,
            offset: 41,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(b"v\n1"),
            headers: &headers,
        };
        let f = Format::parse("%t/%p@%o %T [%K:%k] [%S:%s] {%h} 100%%\\n").unwrap();
        assert!(f.wants_headers());
        let mut out = Vec::new();
        f.render(&record, &mut out);
        assert_eq!(
            out,
            b"orders/2@41 1700000000000 [-1:] [3:v\n1] {a=1,b} 100%\n".to_vec()
        );
        let plain = Format::parse("%s\\n").unwrap();
        assert!(!plain.wants_headers());
    }

    #[test]
    fn rejects_unknown_tokens() {
        assert!(Format::parse("%q").is_err());
        assert!(Format::parse("value %").is_err());
        assert!(Format::parse("\\q").is_err());
    }
}
