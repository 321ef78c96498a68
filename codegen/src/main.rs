//! kring-codegen: writes `src/protocol/messages/` from Apache Kafka's JSON message
//! schemas and `errors.tsv` (both in `shared/kafka-protocol/`), and kring-mock's
//! `kring-mock/src/generated/error_response.rs` from the same schemas.
//!
//! Usage: `cargo run -p kring-codegen [-- SCHEMA_DIR [OUT_DIR [MOCK_OUT_DIR]]]`. By
//! default the schemas are read from `../shared/kafka-protocol` beside the repository
//! and written into `src/protocol/messages` and `kring-mock/src/generated`. The output is rustfmt-ed, so regenerating is byte-stable and
//! CI can fail on any drift between the schemas, this generator and the committed code.

mod emit;
mod error_response;
mod overrides;
mod schema;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use emit::{BANNER, MessageEmitter, api_variant, snake};
use schema::{Kind, Message, parse_message};

fn main() {
    if let Err(e) = run() {
        eprintln!("kring-codegen: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no repository root")?
        .to_path_buf();
    let mut args = std::env::args().skip(1);
    let schema_dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("../shared/kafka-protocol"));
    let out_dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("src/protocol/messages"));
    let mock_out_dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("kring-mock/src/generated"));

    let mut messages = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(schema_dir.join("messages"))
        .map_err(|e| format!("reading {}: {e}", schema_dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let src = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        messages.push(parse_message(&src, &file)?);
    }
    overrides::apply(&mut messages)?;

    // Group into modules: one per API (request + response), one per header/data type.
    let mut modules: BTreeMap<String, Vec<&Message>> = BTreeMap::new();
    for m in &messages {
        let module = match m.kind {
            Kind::Request => snake(&api_variant(&m.name)),
            Kind::Response => snake(m.name.trim_end_matches("Response")),
            Kind::Header | Kind::Data => snake(&m.name),
        };
        modules.entry(module).or_default().push(m);
    }

    if out_dir.exists() {
        for entry in fs::read_dir(&out_dir).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.extension().is_some_and(|x| x == "rs") {
                fs::remove_file(&path).map_err(|e| e.to_string())?;
            }
        }
    }
    fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;

    let mut written = Vec::new();
    for (module, msgs) in &modules {
        let src = emit_module(module, msgs)?;
        let path = out_dir.join(format!("{module}.rs"));
        fs::write(&path, src).map_err(|e| e.to_string())?;
        written.push(path);
    }
    let mod_rs = out_dir.join("mod.rs");
    fs::write(&mod_rs, emit_mod_rs(&modules, &messages)).map_err(|e| e.to_string())?;
    written.push(mod_rs);
    let codes = out_dir.join("kafka_code.rs");
    fs::write(&codes, emit_kafka_codes(&schema_dir.join("errors.tsv"))?)
        .map_err(|e| e.to_string())?;
    written.push(codes);
    fs::create_dir_all(&mock_out_dir).map_err(|e| e.to_string())?;
    let errors = mock_out_dir.join("error_response.rs");
    fs::write(&errors, error_response::emit(&messages)).map_err(|e| e.to_string())?;
    written.push(errors);

    let status = Command::new("rustfmt")
        .arg("--edition")
        .arg("2024")
        .args(&written)
        .status()
        .map_err(|e| format!("running rustfmt: {e}"))?;
    if !status.success() {
        return Err("rustfmt failed on the generated code".into());
    }
    eprintln!(
        "kring-codegen: wrote {} files to {} and {}",
        written.len(),
        out_dir.display(),
        mock_out_dir.display()
    );
    Ok(())
}

/// Rust names for the schema structs of one module's messages, per message: a struct
/// name used by both the request and the response of one API is prefixed with its
/// message name, so both can live in one module.
pub fn rust_struct_names(msgs: &[&Message]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for m in msgs {
        for name in m.structs.keys() {
            *seen.entry(name.clone()).or_default() += 1;
        }
    }
    msgs.iter()
        .map(|m| {
            let names = m
                .structs
                .keys()
                .map(|name| {
                    let rust = if seen[name] > 1 {
                        format!("{}{}", m.name, name)
                    } else {
                        name.clone()
                    };
                    (name.clone(), rust)
                })
                .collect();
            (m.name.clone(), names)
        })
        .collect()
}

/// Every API's request and response schema, by API key.
pub fn api_pairs(messages: &[Message]) -> BTreeMap<i16, (&Message, &Message)> {
    let requests: BTreeMap<i16, &Message> = messages
        .iter()
        .filter(|m| m.kind == Kind::Request)
        .map(|m| (m.api_key.unwrap(), m))
        .collect();
    let apis: BTreeMap<i16, (&Message, &Message)> = messages
        .iter()
        .filter(|m| m.kind == Kind::Response)
        .map(|m| {
            let key = m.api_key.unwrap();
            (key, (requests[&key], m))
        })
        .collect();
    assert_eq!(requests.len(), apis.len(), "every request has a response");
    apis
}

fn emit_module(module: &str, msgs: &[&Message]) -> Result<String, String> {
    let all_names = rust_struct_names(msgs);
    let mut out = String::new();
    out.push_str(BANNER);
    let titles: Vec<&str> = msgs.iter().map(|m| m.name.as_str()).collect();
    writeln!(out, "//! {}.", titles.join(" and ")).unwrap();
    out.push_str(
        "\n#![allow(clippy::all, unused_imports, unused_mut, unused_variables, unused_parens)]\n\n\
         use bytes::{BufMut, Bytes, BytesMut};\n\n\
         use crate::protocol::primitives::{self as p, DecodeError, EncodeError};\n\
         use crate::protocol::{Decode, Encode, Message, VersionRange};\n\
         #[cfg(any(test, feature = \"arbitrary\"))]\n\
         use crate::protocol::ArbitraryVersion;\n\n",
    );
    for m in msgs {
        let names = &all_names[&m.name];
        let e = MessageEmitter { msg: m, names };
        e.emit_message(&mut out);
        for def in e.struct_defs() {
            e.emit_struct(&mut out, &names[&def.name], &def.about, &def.fields, false);
        }
    }
    writeln!(out, "#[cfg(test)]\nmod tests {{\n    use super::*;\n").unwrap();
    for m in msgs {
        writeln!(
            out,
            "    #[test]\n    fn {s}_round_trips() {{ crate::protocol::testing::check_round_trip::<{n}>(); }}\n\n    #[test]\n    fn {s}_survives_garbage() {{ crate::protocol::testing::check_garbage::<{n}>(); }}\n",
            s = snake(&m.name),
            n = m.name
        )
        .unwrap();
    }
    writeln!(out, "}}").unwrap();
    let _ = module;
    Ok(out)
}

fn emit_mod_rs(modules: &BTreeMap<String, Vec<&Message>>, messages: &[Message]) -> String {
    let mut out = String::new();
    out.push_str(BANNER);
    out.push_str(
        "//! Every Kafka message type, generated from the schemas: one module per API (its\n\
         //! request and response), plus the request/response headers and the embedded data\n\
         //! types (consumer protocol, KRaft records). [`ApiKey`] lists the APIs and their header\n\
         //! versions; [`RequestKind`] and [`ResponseKind`] decode any message by key and version.\n\n\
         #![allow(missing_docs)]\n\n\
         use bytes::{Bytes, BytesMut};\n\n\
         use crate::protocol::primitives::{DecodeError, EncodeError};\n\
         use crate::protocol::{Decode, Encode, Message, VersionRange};\n\n",
    );
    for module in modules.keys() {
        writeln!(out, "pub mod {module};").unwrap();
    }
    writeln!(out, "mod kafka_code;\npub use kafka_code::KafkaCode;\n").unwrap();
    for (module, msgs) in modules {
        let names: Vec<&str> = msgs.iter().map(|m| m.name.as_str()).collect();
        writeln!(out, "pub use {module}::{{{}}};", names.join(", ")).unwrap();
    }

    let apis = api_pairs(messages);

    // ApiKey.
    out.push_str(
        "\n/// A Kafka API, by its key number.\n#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[repr(i16)]\n#[non_exhaustive]\npub enum ApiKey {\n",
    );
    for (key, (req, _)) in &apis {
        writeln!(
            out,
            "    /// {} (key {key}).\n    {} = {key},",
            api_variant(&req.name),
            api_variant(&req.name)
        )
        .unwrap();
    }
    out.push_str("}\n\nimpl ApiKey {\n    /// Every API this crate knows, in key order.\n    pub const ALL: &'static [ApiKey] = &[");
    for (req, _) in apis.values() {
        write!(out, "ApiKey::{}, ", api_variant(&req.name)).unwrap();
    }
    out.push_str("];\n\n    /// The API with this key number, if this crate knows it.\n    pub fn from_i16(key: i16) -> Option<ApiKey> {\n        match key {\n");
    for (key, (req, _)) in &apis {
        writeln!(
            out,
            "            {key} => Some(ApiKey::{}),",
            api_variant(&req.name)
        )
        .unwrap();
    }
    out.push_str("            _ => None,\n        }\n    }\n\n    /// The key number.\n    pub fn key(self) -> i16 {\n        self as i16\n    }\n\n    /// The API's name as Kafka spells it.\n    pub fn name(self) -> &'static str {\n        match self {\n");
    for (req, _) in apis.values() {
        let v = api_variant(&req.name);
        writeln!(out, "            ApiKey::{v} => \"{v}\",").unwrap();
    }
    out.push_str("        }\n    }\n\n    /// The request versions this crate can encode and decode.\n    pub fn versions(self) -> VersionRange {\n        match self {\n");
    for (req, _) in apis.values() {
        writeln!(
            out,
            "            ApiKey::{} => {}::VERSIONS,",
            api_variant(&req.name),
            req.name
        )
        .unwrap();
    }
    out.push_str("        }\n    }\n\n    /// The newest version this crate offers in negotiation (versions the schema marks\n    /// unstable are left out).\n    pub fn max_stable_version(self) -> i16 {\n        match self {\n");
    for (req, _) in apis.values() {
        writeln!(
            out,
            "            ApiKey::{} => {}::MAX_STABLE_VERSION,",
            api_variant(&req.name),
            req.name
        )
        .unwrap();
    }
    out.push_str("        }\n    }\n\n    /// The request header version to use with this request version: v2 for flexible\n    /// versions, v1 otherwise, and v0 for ControlledShutdown v0.\n    pub fn request_header_version(self, version: i16) -> i16 {\n        match self {\n");
    for (req, _) in apis.values() {
        let v = api_variant(&req.name);
        let flex = if req.flexible.is_empty() {
            "false".to_string()
        } else {
            format!("version >= {}", req.flexible.min)
        };
        if v == "ControlledShutdown" {
            writeln!(out, "            ApiKey::{v} if version == 0 => 0,").unwrap();
        }
        writeln!(
            out,
            "            ApiKey::{v} => if {flex} {{ 2 }} else {{ 1 }},"
        )
        .unwrap();
    }
    out.push_str("        }\n    }\n\n    /// The response header version for this request version: v1 for flexible versions,\n    /// v0 otherwise, and always v0 for ApiVersions (so a client can read the answer\n    /// before it knows which versions the broker speaks).\n    pub fn response_header_version(self, version: i16) -> i16 {\n        match self {\n            ApiKey::ApiVersions => 0,\n");
    for (_, resp) in apis.values() {
        let v = api_variant(resp.name.trim_end_matches("Response"));
        if v == "ApiVersions" {
            continue;
        }
        let flex = if resp.flexible.is_empty() {
            "false".to_string()
        } else {
            format!("version >= {}", resp.flexible.min)
        };
        writeln!(
            out,
            "            ApiKey::{v} => if {flex} {{ 1 }} else {{ 0 }},"
        )
        .unwrap();
    }
    out.push_str("        }\n    }\n}\n\n");

    // RequestKind / ResponseKind.
    for (kind, idx) in [("Request", 0usize), ("Response", 1usize)] {
        writeln!(
            out,
            "/// Any {lower} body, for code that handles {lower}s by API key at run time.\n#[derive(Debug, Clone, PartialEq)]\n#[non_exhaustive]\npub enum {kind}Kind {{",
            lower = kind.to_lowercase()
        )
        .unwrap();
        for pair in apis.values() {
            let m = if idx == 0 { pair.0 } else { pair.1 };
            writeln!(
                out,
                "    /// {}.\n    {}({}),",
                m.name,
                api_variant(&pair.0.name),
                m.name
            )
            .unwrap();
        }
        writeln!(out, "}}\n\nimpl {kind}Kind {{").unwrap();
        writeln!(
            out,
            "    /// Decodes a {lower} body of API `key` at `version`.\n    pub fn decode(key: ApiKey, buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {{\n        Ok(match key {{",
            lower = kind.to_lowercase()
        )
        .unwrap();
        for pair in apis.values() {
            let m = if idx == 0 { pair.0 } else { pair.1 };
            let v = api_variant(&pair.0.name);
            writeln!(
                out,
                "            ApiKey::{v} => {kind}Kind::{v}({}::decode(buf, version)?),",
                m.name
            )
            .unwrap();
        }
        out.push_str("        })\n    }\n\n    /// Encodes the body at `version`.\n    pub fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {\n        match self {\n");
        for pair in apis.values() {
            let v = api_variant(&pair.0.name);
            writeln!(
                out,
                "            {kind}Kind::{v}(m) => m.encode(buf, version),"
            )
            .unwrap();
        }
        out.push_str("        }\n    }\n\n    /// The API this body belongs to.\n    pub fn api_key(&self) -> ApiKey {\n        match self {\n");
        for pair in apis.values() {
            let v = api_variant(&pair.0.name);
            writeln!(out, "            {kind}Kind::{v}(_) => ApiKey::{v},").unwrap();
        }
        out.push_str("        }\n    }\n}\n\n");
    }

    // Request/Response trait impls pairing the two.
    for (req, resp) in apis.values() {
        let v = api_variant(&req.name);
        writeln!(
            out,
            "impl crate::protocol::Request for {} {{\n    const API_KEY: ApiKey = ApiKey::{v};\n    type Response = {};\n    fn into_kind(self) -> RequestKind {{ RequestKind::{v}(self) }}\n}}\n",
            req.name, resp.name
        )
        .unwrap();
        writeln!(
            out,
            "impl crate::protocol::Response for {} {{\n    const API_KEY: ApiKey = ApiKey::{v};\n    fn into_kind(self) -> ResponseKind {{ ResponseKind::{v}(self) }}\n}}\n",
            resp.name
        )
        .unwrap();
    }
    out
}

fn emit_kafka_codes(path: &Path) -> Result<String, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 {
            return Err(format!("errors.tsv line {}: too few columns", i + 1));
        }
        let code: i16 = cols[0]
            .parse()
            .map_err(|e| format!("errors.tsv line {}: {e}", i + 1))?;
        let name = cols[1].to_string();
        let retriable = cols[2] == "retriable";
        let desc = cols.get(4).copied().unwrap_or("").to_string();
        rows.push((code, name, retriable, desc));
    }
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out = String::new();
    out.push_str(BANNER);
    out.push_str(
        "//! Every broker error code (`shared/kafka-protocol/errors.tsv`): number, name,\n\
         //! whether it is retriable (its Java exception derives from RetriableException), and\n\
         //! the broker's description.\n\n\
         use std::fmt;\n\n\
         /// A Kafka error code as it travels on the wire. Codes this crate does not know (from a\n\
         /// newer broker) are kept as they are and reported as unknown.\n\
         #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]\n\
         pub struct KafkaCode(pub i16);\n\n\
         #[allow(missing_docs)]\nimpl KafkaCode {\n",
    );
    for (code, name, _, desc) in &rows {
        writeln!(
            out,
            "    #[doc = \"{}\"]\n    pub const {name}: KafkaCode = KafkaCode({code});",
            esc(if desc.is_empty() { "No error." } else { desc })
        )
        .unwrap();
    }
    out.push_str(
        "\n    /// Every code this crate knows.\n    pub const ALL: &'static [KafkaCode] = &[",
    );
    for (_, name, _, _) in &rows {
        write!(out, "KafkaCode::{name}, ").unwrap();
    }
    out.push_str("];\n\n    /// The numeric code.\n    pub fn code(self) -> i16 {\n        self.0\n    }\n\n    /// True for `NONE` (0).\n    pub fn is_ok(self) -> bool {\n        self.0 == 0\n    }\n\n    /// Kafka's name for the code (`NOT_LEADER_OR_FOLLOWER`), or `UNKNOWN_CODE` for a code this crate does not know.\n    pub fn name(self) -> &'static str {\n        match self.0 {\n");
    for (code, name, _, _) in &rows {
        writeln!(out, "            {code} => \"{name}\",").unwrap();
    }
    out.push_str("            _ => \"UNKNOWN_CODE\",\n        }\n    }\n\n    /// Whether a request that failed with this code may succeed if retried.\n    pub fn is_retriable(self) -> bool {\n        matches!(self.0, ");
    let retriable: Vec<String> = rows
        .iter()
        .filter(|r| r.2)
        .map(|r| r.0.to_string())
        .collect();
    out.push_str(&retriable.join(" | "));
    out.push_str(")\n    }\n\n    /// The broker's description of the code.\n    pub fn description(self) -> &'static str {\n        match self.0 {\n");
    for (code, _, _, desc) in &rows {
        writeln!(out, "            {code} => \"{}\",", esc(desc)).unwrap();
    }
    out.push_str("            _ => \"An error code this client does not know.\",\n        }\n    }\n}\n\nimpl From<i16> for KafkaCode {\n    fn from(code: i16) -> Self {\n        KafkaCode(code)\n    }\n}\n\nimpl fmt::Debug for KafkaCode {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        write!(f, \"{}({})\", self.name(), self.0)\n    }\n}\n\nimpl fmt::Display for KafkaCode {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        write!(f, \"{} ({}): {}\", self.name(), self.0, self.description())\n    }\n}\n");
    Ok(out)
}
