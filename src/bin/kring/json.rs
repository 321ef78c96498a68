//! A small JSON writer for `--json` output: values are built as [`Json`] trees and
//! printed compactly on one line, with strings escaped per RFC 8259.

use std::fmt::{self, Write};

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    /// Keys in the order given.
    Obj(Vec<(&'static str, Json)>),
}

impl From<bool> for Json {
    fn from(v: bool) -> Self {
        Json::Bool(v)
    }
}

macro_rules! ints {
    ($($t:ty)*) => { $(impl From<$t> for Json { fn from(v: $t) -> Self { Json::Int(v as i64) } })* };
}
ints!(i8 i16 i32 i64 u8 u16 u32 usize);

impl From<&str> for Json {
    fn from(v: &str) -> Self {
        Json::Str(v.to_string())
    }
}

impl From<String> for Json {
    fn from(v: String) -> Self {
        Json::Str(v)
    }
}

impl From<&String> for Json {
    fn from(v: &String) -> Self {
        Json::Str(v.clone())
    }
}

impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(v: Option<T>) -> Self {
        v.map_or(Json::Null, Into::into)
    }
}

impl<T: Into<Json>> From<Vec<T>> for Json {
    fn from(v: Vec<T>) -> Self {
        Json::Arr(v.into_iter().map(Into::into).collect())
    }
}

/// `obj!{"key" => value, ...}`: a JSON object, keys in order.
macro_rules! obj {
    ($($k:literal => $v:expr),* $(,)?) => {
        $crate::json::Json::Obj(vec![$(($k, $crate::json::Json::from($v))),*])
    };
}
pub(crate) use obj;

fn escape(s: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            Json::Str(s) => escape(s, f),
            Json::Arr(items) => {
                f.write_char('[')?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_char(']')
            }
            Json::Obj(fields) => {
                f.write_char('{')?;
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    escape(k, f)?;
                    write!(f, ":{v}")?;
                }
                f.write_char('}')
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_compact_escaped_json() {
        let v = obj! {
            "name" => "a\"b\\c\n\u{1}",
            "n" => -3i32,
            "none" => None::<i32>,
            "list" => vec![1i64, 2],
            "ok" => true,
        };
        assert_eq!(
            v.to_string(),
            r#"{"name":"a\"b\\c\n\u0001","n":-3,"none":null,"list":[1,2],"ok":true}"#
        );
        assert_eq!(Json::Arr(vec![]).to_string(), "[]");
    }
}
