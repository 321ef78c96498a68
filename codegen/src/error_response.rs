//! Writes kring-mock's `error_response`: for every API, the response a broker would send
//! if the whole request failed with one error code, derived from the request and
//! response schemas.
//!
//! Rules, in order, for each field of a response struct (tagged fields are left at
//! their defaults, so that they stay off the wire):
//! 1. An int16 field named `ErrorCode` (or `…ErrorCode`) gets the code. The top-level
//!    error code of the two APIs in [`TOP_LEVEL_ERROR`] follows that table instead.
//! 2. An `ErrorMessage` string gets the code's name in the structs [`MESSAGES`] lists,
//!    and stays null elsewhere.
//! 3. An array of structs that carry an error code (directly or deeper down) mirrors a
//!    request array: the request array of the same name, or the one(s) [`MIRRORS`]
//!    names where the schemas' names differ; [`NOT_MIRRORED`] lists the few a group
//!    error leaves empty. One response entry is built per request entry, by these same
//!    rules, with the request entry as its source.
//! 4. "Unknown" numbers (offsets, watermarks, epochs, node/producer/controller ids,
//!    ports, partition counts, replication factors: see [`unknown`]) whose schema
//!    default is 0 get -1, as a broker answers when it has nothing to say; those with
//!    another default keep it. They are never copied from the request.
//! 5. Key fields are copied from the source (the request, or the request entry being
//!    mirrored): a field of the same name that the schema marks with an `entityType`,
//!    of a kind in [`KEY_ENTITIES`], or is one of [`KEY_NAMES`]; a request `Partition` fills a response
//!    `PartitionIndex`; [`ECHOED`] lists the few non-key fields a response echoes.
//!
//! Everything else keeps its schema default. A field is set only in the versions that
//! have it (the encoder refuses a value in a field its version cannot carry).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;

use crate::emit::{BANNER, MessageEmitter, api_variant, cond, ident, snake};
use crate::schema::{Field, Message, Type};

/// What the top-level `ErrorCode` of a response gets, where it is not simply the code.
#[derive(Clone, Copy)]
enum TopLevel {
    /// The code only when no mirrored entry carries it (Fetch: a partition error goes
    /// with its partition; the top-level code, v7+, is for errors of the whole fetch
    /// session).
    IfNoEntries,
    /// Never (Metadata: the top-level code, v13+, is KIP-1102's "rebootstrap"
    /// signal; errors go with the topics).
    Never,
}

/// Top-level error codes that are not simply the code (see [`TopLevel`]).
const TOP_LEVEL_ERROR: &[(&str, TopLevel)] = &[
    ("FetchResponse", TopLevel::IfNoEntries),
    ("MetadataResponse", TopLevel::Never),
];

/// A request array a response array mirrors: its name, and for an array of plain
/// values the response entry field that receives each value.
type MirrorSource = (&'static str, Option<&'static str>);

/// Response arrays whose request array has another name (or several), which the
/// schemas alone do not tell: (response struct, response field) → request fields. A
/// request array of plain values (strings, ints) names the response entry's field
/// that receives each value.
const MIRRORS: &[(&str, &str, &[MirrorSource])] = &[
    ("ProduceResponse", "Responses", &[("TopicData", None)]),
    (
        "TopicProduceResponse",
        "PartitionResponses",
        &[("PartitionData", None)],
    ),
    ("FetchResponse", "Responses", &[("Topics", None)]),
    (
        "FindCoordinatorResponse",
        "Coordinators",
        &[("CoordinatorKeys", Some("Key"))],
    ),
    (
        "DescribeGroupsResponse",
        "Groups",
        &[("Groups", Some("GroupId"))],
    ),
    (
        "DeleteTopicsResponse",
        "Responses",
        &[("TopicNames", Some("Name")), ("Topics", None)],
    ),
    (
        "OffsetFetchResponseTopic",
        "Partitions",
        &[("PartitionIndexes", Some("PartitionIndex"))],
    ),
    (
        "OffsetFetchResponseTopics",
        "Partitions",
        &[("PartitionIndexes", Some("PartitionIndex"))],
    ),
];

/// Response arrays left empty although the request has entries for them: Java's
/// `getErrorResponse` answers these requests with a group-level error only.
const NOT_MIRRORED: &[(&str, &str)] = &[
    ("LeaveGroupResponse", "Members"),
    ("OffsetFetchResponseGroup", "Topics"),
];

/// Response structs whose `ErrorMessage` carries the code's name; elsewhere it stays
/// null, which clients read as "the code's own description" (as Java's
/// `getErrorResponse` does for these APIs).
const MESSAGES: &[&str] = &[
    "FindCoordinatorResponse",
    "Coordinator",
    "CreatableTopicResult",
];

/// Field names that identify an entry (copied from the request entry it mirrors).
const KEY_NAMES: &[&str] = &[
    "Name",
    "Topic",
    "TopicName",
    "TopicId",
    "PartitionIndex",
    "Partition",
    "Index",
    "GroupId",
    "MemberId",
    "GroupInstanceId",
    "Key",
    "TransactionalId",
    "ResourceType",
    "ResourceName",
];

/// Non-key fields a response echoes from its request: (response struct, field).
/// SyncGroup v5+ echoes the protocol type and name (KIP-559).
const ECHOED: &[(&str, &str)] = &[
    ("SyncGroupResponse", "ProtocolType"),
    ("SyncGroupResponse", "ProtocolName"),
];

/// Whether `f` is a number a broker answers -1 for when it knows nothing (rule 4):
/// `Some(true)` to set -1, `Some(false)` for such a number whose schema default is not
/// 0 (kept, and never copied from the request), `None` for any other field.
fn unknown(f: &Field) -> Option<bool> {
    let numeric = matches!(f.ty, Type::Int16 | Type::Int32 | Type::Int64);
    let named = ["Offset", "Watermark", "Epoch"]
        .iter()
        .any(|s| f.name.ends_with(s))
        || [
            "ControllerId",
            "NodeId",
            "LeaderId",
            "ProducerId",
            "GenerationId",
            "Port",
            "NumPartitions",
            "ReplicationFactor",
        ]
        .contains(&f.name.as_str());
    if !numeric || !named || KEY_NAMES.contains(&f.name.as_str()) {
        return None;
    }
    Some(matches!(f.default.as_deref(), None | Some("0") | Some("")))
}

/// The `entityType`s whose fields identify an entry (names of things, not the ids a
/// broker hands out such as producer ids).
const KEY_ENTITIES: &[&str] = &["topicName", "groupId", "transactionalId"];

fn is_error_code(f: &Field) -> bool {
    f.ty == Type::Int16 && f.name.ends_with("ErrorCode")
}

fn is_tagged(f: &Field) -> bool {
    f.tag.is_some()
}

/// One message and the names its module gives its structs.
struct Side<'a> {
    msg: &'a Message,
    module: String,
    names: &'a BTreeMap<String, String>,
}

impl Side<'_> {
    fn emitter(&self) -> MessageEmitter<'_> {
        MessageEmitter {
            msg: self.msg,
            names: self.names,
        }
    }

    fn fields<'f>(&'f self, schema_struct: Option<&str>) -> &'f [Field] {
        match schema_struct {
            None => &self.msg.fields,
            Some(name) => &self.msg.structs[name].fields,
        }
    }

    fn present<'f>(&'f self, fields: &'f [Field]) -> impl Iterator<Item = &'f Field> + 'f {
        let e = self.emitter();
        fields.iter().filter(move |f| e.is_present(f))
    }

    /// The struct's path inside a generated function, which imports the module as `api`.
    fn local_path(&self, schema_struct: Option<&str>) -> String {
        match schema_struct {
            None => format!("api::{}", self.msg.name),
            Some(name) => format!("api::{}", self.names[name]),
        }
    }

    fn rust_path(&self, schema_struct: Option<&str>) -> String {
        match schema_struct {
            None => format!("m::{}::{}", self.module, self.msg.name),
            Some(name) => format!("m::{}::{}", self.module, self.names[name]),
        }
    }

    fn optional(&self, f: &Field) -> bool {
        self.emitter().is_optional(f)
    }

    /// Whether entries of this struct carry an error code, directly or deeper down.
    fn carries_error(&self, schema_struct: &str) -> bool {
        self.present(self.fields(Some(schema_struct)))
            .filter(|f| !is_tagged(f))
            .any(|f| {
                is_error_code(f)
                    || matches!(&f.ty, Type::Array(inner) if matches!(inner.as_ref(),
                        Type::Struct(s) if self.carries_error(s)))
            })
    }
}

fn element_struct(ty: &Type) -> Option<&str> {
    match ty {
        Type::Array(inner) => match inner.as_ref() {
            Type::Struct(s) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// Where a response struct's values come from.
enum Source<'a> {
    /// A request struct (the request itself, or an entry of one of its arrays), bound
    /// to the variable `var`.
    Struct { var: String, fields: &'a [Field] },
    /// A plain value of a request array, bound to `var`, for the field `target`.
    Value {
        var: String,
        ty: Type,
        target: String,
    },
}

struct Gen<'a> {
    req: Side<'a>,
    resp: Side<'a>,
    /// Functions building one mirrored entry each, by name (kept out of line so the
    /// generated code stays shallow enough for rustfmt).
    helpers: &'a RefCell<BTreeMap<String, String>>,
}

impl Gen<'_> {
    /// An expression building the response struct `schema_struct` (None: the top level)
    /// from `source`, at nesting `depth`.
    fn build(&self, schema_struct: Option<&str>, source: &Source<'_>, depth: usize) -> String {
        let out = format!("o{depth}");
        let struct_key = schema_struct.unwrap_or(&self.resp.msg.name).to_string();
        let mut body = String::new();
        let mut top_level_policy = None;
        for f in self.resp.present(self.resp.fields(schema_struct)) {
            if is_tagged(f) {
                continue;
            }
            let id = ident(&f.name);
            let opt = self.resp.optional(f);
            let wrap = |e: String| if opt { format!("Some({e})") } else { e };
            // Only in the versions that have the field: the encoder refuses a value set
            // in a field its version cannot carry.
            let gate = cond(&f.versions, &self.resp.msg.valid);
            let mut body = Gated {
                body: &mut body,
                gate: gate.as_deref(),
            };
            if is_error_code(f) {
                let policy = TOP_LEVEL_ERROR
                    .iter()
                    .find(|(s, _)| schema_struct.is_none() && *s == struct_key)
                    .map(|(_, p)| *p);
                match policy {
                    Some(p) => top_level_policy = Some((id, p, gate.clone())),
                    None => body.push(format!("{out}.{id} = e;")),
                }
                continue;
            }
            if f.name == "ErrorMessage" && f.ty == Type::String {
                if !MESSAGES.contains(&struct_key.as_str()) {
                    continue;
                }
                body.push(format!(
                    "{out}.{id} = {};",
                    wrap("code.name().to_string()".into())
                ));
                continue;
            }
            if let Some(elem) = element_struct(&f.ty) {
                if let Some(expr) = self.mirror(&struct_key, f, elem, source, depth) {
                    body.push(format!("{out}.{id} = {};", wrap(expr)));
                }
                continue;
            }
            match unknown(f) {
                Some(true) => {
                    body.push(format!("{out}.{id} = -1;"));
                    continue;
                }
                Some(false) => continue,
                None => {}
            }
            if let Some(expr) = self.key(&struct_key, f, opt, source) {
                body.push(format!("{out}.{id} = {expr};"));
            }
        }
        if let Some((id, policy, gate)) = top_level_policy {
            match policy {
                TopLevel::Never => {}
                TopLevel::IfNoEntries => {
                    let entries = self.entries(schema_struct, &out);
                    Gated {
                        body: &mut body,
                        gate: gate.as_deref(),
                    }
                    .push(format!("{out}.{id} = if {entries} {{ 0 }} else {{ e }};"));
                }
            }
        }
        let path = self.resp.local_path(schema_struct);
        if body.is_empty() {
            format!("{path}::default()")
        } else {
            format!("let mut {out} = {path}::default();\n{body}{out}")
        }
    }

    /// An expression: whether the built response `var` (of `schema_struct`) has any
    /// mirrored entry that carries an error code.
    fn entries(&self, schema_struct: Option<&str>, var: &str) -> String {
        let mut parts = Vec::new();
        for f in self.resp.present(self.resp.fields(schema_struct)) {
            let Some(elem) = element_struct(&f.ty) else {
                continue;
            };
            if is_tagged(f) || !self.resp.carries_error(elem) {
                continue;
            }
            let id = ident(&f.name);
            let iter = if self.resp.optional(f) {
                format!("{var}.{id}.iter().flatten()")
            } else {
                format!("{var}.{id}.iter()")
            };
            let direct = self
                .resp
                .present(self.resp.fields(Some(elem)))
                .any(|g| is_error_code(g) && !is_tagged(g));
            if direct {
                parts.push(format!("{iter}.next().is_some()"));
            } else {
                let x = format!("{var}_{}", snake(&f.name));
                let inner = self.entries(Some(elem), &x);
                parts.push(format!("{iter}.any(|{x}| {inner})"));
            }
        }
        if parts.is_empty() {
            "false".into()
        } else {
            parts.join(" || ")
        }
    }

    /// The expression for a response array of `elem` structs mirroring request
    /// entries, if the source has a request array it mirrors.
    fn mirror(
        &self,
        struct_key: &str,
        f: &Field,
        elem: &str,
        source: &Source<'_>,
        depth: usize,
    ) -> Option<String> {
        let Source::Struct { var, fields } = source else {
            return None;
        };
        if !self.resp.carries_error(elem) || NOT_MIRRORED.contains(&(struct_key, f.name.as_str())) {
            return None;
        }
        let specs: Vec<(&str, Option<&str>)> = match MIRRORS
            .iter()
            .find(|(s, name, _)| *s == struct_key && *name == f.name)
        {
            Some((_, _, specs)) => specs.to_vec(),
            None => vec![(f.name.as_str(), None)],
        };
        let mut parts = Vec::new();
        for (request_field, target) in specs {
            let Some(rf) = self
                .req
                .present(fields)
                .find(|r| r.name == request_field && !is_tagged(r))
            else {
                continue;
            };
            let Type::Array(inner) = &rf.ty else {
                continue;
            };
            let x = format!("x{depth}");
            let iter = if self.req.optional(rf) {
                format!("{var}.{}.iter().flatten()", ident(&rf.name))
            } else {
                format!("{var}.{}.iter()", ident(&rf.name))
            };
            let (entry, param) = match (inner.as_ref(), target) {
                (Type::Struct(rs), None) => (
                    self.build(
                        Some(elem),
                        &Source::Struct {
                            var: "x".into(),
                            fields: self.req.fields(Some(rs)),
                        },
                        1,
                    ),
                    self.req.rust_path(Some(rs)),
                ),
                (ty, Some(target)) if !matches!(ty, Type::Struct(_)) => (
                    self.build(
                        Some(elem),
                        &Source::Value {
                            var: "x".into(),
                            ty: ty.clone(),
                            target: target.to_string(),
                        },
                        1,
                    ),
                    plain_type(ty).to_string(),
                ),
                _ => panic!(
                    "{struct_key}.{}: request {request_field} does not fit its MIRRORS entry",
                    f.name
                ),
            };
            let name = format!(
                "{}_from_{}",
                snake(&self.resp.names[elem]),
                snake(request_field)
            );
            let helper = function(
                &name,
                &self.resp.module,
                &format!("x: &{param}"),
                &self.resp.rust_path(Some(elem)),
                &entry,
            );
            let mut helpers = self.helpers.borrow_mut();
            let name = match helpers.get(&name).cloned() {
                Some(existing) if existing != helper => {
                    let name = format!("{}_{name}", self.resp.module);
                    helpers.insert(
                        name.clone(),
                        function(
                            &name,
                            &self.resp.module,
                            &format!("x: &{param}"),
                            &self.resp.rust_path(Some(elem)),
                            &entry,
                        ),
                    );
                    name
                }
                _ => {
                    helpers.insert(name.clone(), helper);
                    name
                }
            };
            let entry = format!("{name}({x}, version, code)");
            parts.push(format!("{iter}.map(|{x}| {entry})"));
        }
        if parts.is_empty() {
            return None;
        }
        let first = parts.remove(0);
        let chained = parts
            .into_iter()
            .fold(first, |acc, p| format!("{acc}.chain({p})"));
        Some(format!("{chained}.collect()"))
    }

    /// The expression copying key field `f` from the source, if it has one.
    fn key(&self, struct_key: &str, f: &Field, opt: bool, source: &Source<'_>) -> Option<String> {
        match source {
            Source::Value { var, ty, target } => {
                if *target != f.name {
                    return None;
                }
                assert_eq!(
                    *ty, f.ty,
                    "{struct_key}.{}: plain value of another type",
                    f.name
                );
                Some(convert(var, ty, false, opt, true))
            }
            Source::Struct { var, fields } => {
                let echoed = ECHOED.contains(&(struct_key, f.name.as_str()));
                let rf = self.req.present(fields).find(|r| {
                    !is_tagged(r)
                        && (r.name == f.name
                            || (r.name == "Partition" && f.name == "PartitionIndex"))
                })?;
                let is_key = echoed
                    || KEY_NAMES.contains(&f.name.as_str())
                    || (rf.name == f.name
                        && rf
                            .entity_type
                            .as_deref()
                            .is_some_and(|t| KEY_ENTITIES.contains(&t)));
                if !is_key || rf.ty != f.ty || matches!(f.ty, Type::Array(_) | Type::Struct(_)) {
                    return None;
                }
                let from_opt = self.req.optional(rf);
                let mut expr = convert(
                    &format!("{var}.{}", ident(&rf.name)),
                    &f.ty,
                    from_opt,
                    opt,
                    false,
                );
                // A request name that may be null (by topic id) going into a response
                // name that may not be at every version the request's may: an empty
                // name, which encodes where null would not.
                if from_opt && opt && f.ty == Type::String && !covers(f, rf) {
                    expr = format!("{expr}.or_else(|| Some(String::new()))");
                }
                Some(expr)
            }
        }
    }
}

/// Statements appended to a struct's body, each under its field's version condition.
struct Gated<'a> {
    body: &'a mut String,
    gate: Option<&'a str>,
}

impl Gated<'_> {
    fn push(&mut self, statement: String) {
        match self.gate {
            None => writeln!(self.body, "{statement}").unwrap(),
            Some(c) => writeln!(self.body, "if {c} {{ {statement} }}").unwrap(),
        }
    }
}

/// A generated function building one response struct from `param`.
fn function(name: &str, module: &str, param: &str, ret: &str, body: &str) -> String {
    format!(
        "fn {name}({param}, version: i16, code: KafkaCode) -> {ret} {{\n\
         use m::{module} as api;\n\
         let e = code.code();\n\
         {body}\n}}\n\n"
    )
}

/// The Rust type of a plain (non-struct) request array element.
fn plain_type(ty: &Type) -> &'static str {
    match ty {
        Type::String => "String",
        Type::Int8 => "i8",
        Type::Int16 => "i16",
        Type::Int32 => "i32",
        Type::Int64 => "i64",
        Type::Uuid => "kring::protocol::Uuid",
        other => panic!("no plain type for {other:?}"),
    }
}

/// Whether `resp`'s nullable versions include every version in which `req` is nullable.
fn covers(resp: &Field, req: &Field) -> bool {
    let req_null = req.nullable.intersect(&req.versions);
    if req_null.is_empty() {
        return true;
    }
    let resp_null = resp.nullable.intersect(&resp.versions);
    !resp_null.is_empty()
        && resp_null.min <= req_null.min
        && match (resp_null.max, req_null.max) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => a >= b,
        }
}

/// Converts the value `expr` of type `ty` from (maybe) optional to (maybe) optional.
/// `by_ref`: `expr` is a reference (an element of a request array of plain values).
fn convert(expr: &str, ty: &Type, from_opt: bool, to_opt: bool, by_ref: bool) -> String {
    let copy = matches!(
        ty,
        Type::Bool
            | Type::Int8
            | Type::Int16
            | Type::Uint16
            | Type::Int32
            | Type::Uint32
            | Type::Int64
            | Type::Float64
            | Type::Uuid
    );
    let value = match (copy, by_ref) {
        (true, true) => format!("*{expr}"),
        (true, false) => expr.to_string(),
        (false, _) => format!("{expr}.clone()"),
    };
    match (from_opt, to_opt) {
        (false, false) | (true, true) => value,
        (false, true) => format!("Some({value})"),
        (true, false) => format!("{value}.unwrap_or_default()"),
    }
}

/// The whole `error_response.rs` for kring-mock.
pub fn emit(messages: &[Message]) -> String {
    let apis = crate::api_pairs(messages);

    let mut out = String::new();
    out.push_str(BANNER);
    out.push_str(
        "//! The error response to any request: what a broker answers when the whole\n\
         //! request fails with one error code. Generated from the request and response\n\
         //! schemas by the rules in `codegen/src/error_response.rs`: every error code field\n\
         //! gets the code, response arrays mirror the request's entries with their keys\n\
         //! copied, and offsets, epochs and ids a broker would not know are -1.\n\n\
         #![allow(clippy::all, unused_variables)]\n\n\
         use kring::protocol::messages as m;\n\
         use kring::protocol::{KafkaCode, RequestKind, ResponseKind};\n\n\
         /// The response to `request` (received at `version`) that fails it with `code`:\n\
         /// `code` in every error code field, one entry per entry of the request (its keys\n\
         /// copied: topic names and ids, partition indexes, group ids, ...), -1 for the\n\
         /// offsets, epochs and ids a broker would not know, schema defaults elsewhere.\n\
         /// Only the fields `version` has are set, so the answer encodes at `version`.\n\
         /// `None` for an API this version of kring does not know.\n\
         pub fn error_response(request: &RequestKind, version: i16, code: KafkaCode) -> Option<ResponseKind> {\n\
         Some(match request {\n",
    );
    let helpers = RefCell::new(BTreeMap::new());
    let mut all_names = BTreeMap::new();
    for (req, resp) in apis.values() {
        all_names.extend(crate::rust_struct_names(&[*req, *resp]));
    }
    for (req, resp) in apis.values() {
        let module = snake(&api_variant(&req.name));
        let g = Gen {
            req: Side {
                msg: req,
                module: module.clone(),
                names: &all_names[&req.name],
            },
            resp: Side {
                msg: resp,
                module,
                names: &all_names[&resp.name],
            },
            helpers: &helpers,
        };
        let body = g.build(
            None,
            &Source::Struct {
                var: "r".into(),
                fields: &req.fields,
            },
            0,
        );
        let name = snake(&api_variant(&req.name));
        helpers.borrow_mut().insert(
            name.clone(),
            function(
                &name,
                &name,
                &format!("r: &{}", g.req.rust_path(None)),
                &g.resp.rust_path(None),
                &body,
            ),
        );
        let v = api_variant(&req.name);
        writeln!(
            out,
            "RequestKind::{v}(r) => ResponseKind::{v}({name}(r, version, code)),"
        )
        .unwrap();
    }
    out.push_str("_ => return None,\n})\n}\n\n");
    for helper in helpers.into_inner().into_values() {
        out.push_str(&helper);
    }
    out
}
