//! Reading Kafka's JSON message schemas (`shared/kafka-protocol/messages/*.json`) into
//! a small model the emitter works from. The schemas are JSON with `//` comments.

use std::collections::BTreeMap;

use serde_json::Value;

/// An inclusive version range; `max == None` means "and every later version".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    pub min: i16,
    pub max: Option<i16>,
}

impl Versions {
    pub const NONE: Versions = Versions {
        min: i16::MAX,
        max: Some(-1),
    };

    pub fn parse(text: &str) -> Result<Versions, String> {
        let text = text.trim();
        if text == "none" {
            return Ok(Versions::NONE);
        }
        let num = |s: &str| {
            s.trim()
                .parse::<i16>()
                .map_err(|e| format!("bad version {s:?}: {e}"))
        };
        if let Some(min) = text.strip_suffix('+') {
            return Ok(Versions {
                min: num(min)?,
                max: None,
            });
        }
        if let Some((a, b)) = text.split_once('-') {
            return Ok(Versions {
                min: num(a)?,
                max: Some(num(b)?),
            });
        }
        let v = num(text)?;
        Ok(Versions {
            min: v,
            max: Some(v),
        })
    }

    pub fn is_empty(&self) -> bool {
        matches!(self.max, Some(m) if m < self.min)
    }

    pub fn contains(&self, v: i16) -> bool {
        v >= self.min && self.max.is_none_or(|m| v <= m)
    }

    pub fn intersect(&self, other: &Versions) -> Versions {
        let min = self.min.max(other.min);
        let max = match (self.max, other.max) {
            (None, m) | (m, None) => m,
            (Some(a), Some(b)) => Some(a.min(b)),
        };
        Versions { min, max }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    Bool,
    Int8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Float64,
    String,
    Bytes,
    Records,
    Uuid,
    Struct(String),
    Array(Box<Type>),
}

impl Type {
    fn parse(text: &str) -> Type {
        if let Some(inner) = text.strip_prefix("[]") {
            return Type::Array(Box::new(Type::parse(inner)));
        }
        match text {
            "bool" => Type::Bool,
            "int8" => Type::Int8,
            "int16" => Type::Int16,
            "uint16" => Type::Uint16,
            "int32" => Type::Int32,
            "uint32" => Type::Uint32,
            "int64" => Type::Int64,
            "float64" => Type::Float64,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "records" => Type::Records,
            "uuid" => Type::Uuid,
            other => Type::Struct(other.to_string()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub ty: Type,
    pub versions: Versions,
    pub nullable: Versions,
    pub tag: Option<u32>,
    pub tagged_versions: Versions,
    pub default: Option<String>,
    pub ignorable: bool,
    pub about: String,
    /// A per-field override of the message's flexible versions (RequestHeader.ClientId).
    pub flexible_override: Option<Versions>,
    /// What the field names (`topicName`, `groupId`, `brokerId`, ...), if the schema says.
    pub entity_type: Option<String>,
}

#[derive(Debug, Clone)]
pub struct StructDef {
    pub name: String,
    pub about: String,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Response,
    Header,
    Data,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub name: String,
    pub kind: Kind,
    pub api_key: Option<i16>,
    pub valid: Versions,
    pub flexible: Versions,
    pub latest_unstable: bool,
    pub fields: Vec<Field>,
    /// Every struct the message defines (nested and common), by schema name.
    pub structs: BTreeMap<String, StructDef>,
}

/// Removes `//` comments that are outside string literals.
pub fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut in_string = false;
    let mut chars = src.chars().peekable();
    let mut in_comment = false;
    while let Some(c) = chars.next() {
        if in_comment {
            if c == '\n' {
                in_comment = false;
                out.push('\n');
            }
            continue;
        }
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '/' && chars.peek() == Some(&'/') {
            chars.next();
            in_comment = true;
        } else {
            out.push(c);
        }
    }
    out
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn parse_fields(
    list: &Value,
    context: &str,
    structs: &mut BTreeMap<String, StructDef>,
) -> Result<Vec<Field>, String> {
    let Some(items) = list.as_array() else {
        return Ok(Vec::new());
    };
    let mut fields = Vec::new();
    for item in items {
        let name = str_field(item, "name").ok_or(format!("{context}: field without name"))?;
        let ty_text = str_field(item, "type").ok_or(format!("{context}.{name}: no type"))?;
        let ty = Type::parse(ty_text);
        let versions = Versions::parse(
            str_field(item, "versions").ok_or(format!("{context}.{name}: no versions"))?,
        )?;
        let nullable = match str_field(item, "nullableVersions") {
            Some(t) => Versions::parse(t)?,
            None => Versions::NONE,
        };
        let tag = item.get("tag").and_then(Value::as_u64).map(|t| t as u32);
        let tagged_versions = match str_field(item, "taggedVersions") {
            Some(t) => Versions::parse(t)?,
            None => Versions::NONE,
        };
        let default = item.get("default").map(|d| match d {
            Value::String(s) => s.trim().to_string(),
            other => other.to_string(),
        });
        let flexible_override = match str_field(item, "flexibleVersions") {
            Some(t) => Some(Versions::parse(t)?),
            None => None,
        };
        if let Some(sub) = item.get("fields") {
            let struct_name = match &ty {
                Type::Struct(n) => n.clone(),
                Type::Array(inner) => match inner.as_ref() {
                    Type::Struct(n) => n.clone(),
                    _ => return Err(format!("{context}.{name}: fields on a non-struct")),
                },
                _ => return Err(format!("{context}.{name}: fields on a non-struct")),
            };
            let sub_fields = parse_fields(sub, &format!("{context}.{name}"), structs)?;
            let about = str_field(item, "about").unwrap_or_default().to_string();
            if structs.contains_key(&struct_name) {
                return Err(format!("{context}: struct {struct_name} defined twice"));
            }
            structs.insert(
                struct_name.clone(),
                StructDef {
                    name: struct_name,
                    about,
                    fields: sub_fields,
                },
            );
        }
        fields.push(Field {
            name: name.to_string(),
            ty,
            versions,
            nullable,
            tag,
            tagged_versions,
            default,
            ignorable: item.get("ignorable").and_then(Value::as_bool) == Some(true),
            about: str_field(item, "about").unwrap_or_default().to_string(),
            flexible_override,
            entity_type: str_field(item, "entityType").map(str::to_string),
        });
    }
    Ok(fields)
}

pub fn parse_message(src: &str, file: &str) -> Result<Message, String> {
    let json: Value =
        serde_json::from_str(&strip_comments(src)).map_err(|e| format!("{file}: {e}"))?;
    let name = str_field(&json, "name").ok_or(format!("{file}: no name"))?;
    let kind = match str_field(&json, "type") {
        Some("request") => Kind::Request,
        Some("response") => Kind::Response,
        Some("header") => Kind::Header,
        Some("data") => Kind::Data,
        other => return Err(format!("{file}: unknown message type {other:?}")),
    };
    let mut structs = BTreeMap::new();
    if let Some(common) = json.get("commonStructs").and_then(Value::as_array) {
        for cs in common {
            let cname = str_field(cs, "name").ok_or(format!("{file}: common struct name"))?;
            let fields = parse_fields(
                cs.get("fields").unwrap_or(&Value::Null),
                &format!("{file}:{cname}"),
                &mut structs,
            )?;
            structs.insert(
                cname.to_string(),
                StructDef {
                    name: cname.to_string(),
                    about: String::new(),
                    fields,
                },
            );
        }
    }
    let fields = parse_fields(
        json.get("fields").unwrap_or(&Value::Null),
        file,
        &mut structs,
    )?;
    Ok(Message {
        name: name.to_string(),
        kind,
        api_key: json.get("apiKey").and_then(Value::as_i64).map(|k| k as i16),
        valid: Versions::parse(str_field(&json, "validVersions").ok_or("no validVersions")?)?,
        flexible: Versions::parse(str_field(&json, "flexibleVersions").unwrap_or("none"))?,
        latest_unstable: json.get("latestVersionUnstable").and_then(Value::as_bool) == Some(true),
        fields,
        structs,
    })
}
