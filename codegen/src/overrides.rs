//! Versions Apache Kafka added after the schema snapshot in `../shared/kafka-protocol`
//! (taken in October 2024) whose wire format is the same as the version before them, so
//! the snapshot's field definitions describe them as they are; and versions the
//! snapshot marks unstable that Kafka has since declared stable. Each entry says which
//! KIP and Kafka release it comes from. Applied to the parsed schemas before anything is
//! emitted, so the generated code stays the output of `codegen/` alone.
//!
//! Only additions whose fields are all open-ended (`"versions": "N+"`) qualify: a field
//! with a closed range would be wrong in the added version. [`apply`] checks that.

use crate::schema::{Field, Message, Versions};

/// A change to one message's version range.
struct Override {
    /// The schema's message name.
    message: &'static str,
    /// The new highest valid version (the same wire format as the one before it).
    max: i16,
    /// Whether the highest version is stable (clears `latestVersionUnstable`).
    stable: bool,
    /// Where it comes from.
    why: &'static str,
}

const OVERRIDES: &[Override] = &[
    Override {
        message: "ProduceRequest",
        max: 12,
        stable: true,
        why: "KIP-890 (Kafka 4.0): v12 is v11; it tells the broker the producer uses transactions v2 \
              and the partition is added to the transaction implicitly",
    },
    Override {
        message: "ProduceResponse",
        max: 12,
        stable: true,
        why: "KIP-890 (Kafka 4.0): v12 is v11",
    },
    Override {
        message: "TxnOffsetCommitRequest",
        max: 5,
        stable: true,
        why: "KIP-890 (Kafka 4.0): v5 is v4; the group coordinator adds the offsets partition to \
              the transaction implicitly (no AddOffsetsToTxn)",
    },
    Override {
        message: "TxnOffsetCommitResponse",
        max: 5,
        stable: true,
        why: "KIP-890 (Kafka 4.0): v5 is v4",
    },
    Override {
        message: "EndTxnRequest",
        max: 5,
        stable: true,
        why: "KIP-890 (Kafka 4.0 declared v5 stable): the answer carries the bumped producer epoch",
    },
];

/// Applies every override to `messages`; an override naming a message that is not
/// there, lowering a version, or extending a message with a closed field range is an
/// error (the snapshot changed under it).
pub fn apply(messages: &mut [Message]) -> Result<(), String> {
    for o in OVERRIDES {
        let m = messages
            .iter_mut()
            .find(|m| m.name == o.message)
            .ok_or_else(|| format!("override for {}: no such message ({})", o.message, o.why))?;
        let old = m
            .valid
            .max
            .ok_or(format!("{}: open-ended validVersions", m.name))?;
        if o.max < old {
            return Err(format!(
                "override for {}: v{} is below the schema's v{old}",
                o.message, o.max
            ));
        }
        if o.max > old {
            let structs = m.structs.values().map(|s| (s.name.as_str(), &s.fields[..]));
            let closed = std::iter::once((m.name.as_str(), &m.fields[..]))
                .chain(structs)
                .find_map(|(owner, fields)| {
                    closed_field(fields, old).map(|f| format!("{owner}.{f}"))
                });
            if let Some(f) = closed {
                return Err(format!(
                    "override for {}: field {f} has a closed version range, so v{} cannot be v{old}",
                    o.message, o.max
                ));
            }
        }
        m.valid = Versions {
            min: m.valid.min,
            max: Some(o.max),
        };
        if o.stable {
            m.latest_unstable = false;
        }
    }
    Ok(())
}

/// The name of a field whose version range ends at or after `old`: the schema says it
/// will be gone in some later version, which might be the one added.
fn closed_field(fields: &[Field], old: i16) -> Option<&str> {
    fields
        .iter()
        .find(|f| f.versions.max.is_some_and(|max| max >= old))
        .map(|f| f.name.as_str())
}
