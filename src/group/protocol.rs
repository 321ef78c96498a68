//! The classic consumer protocol's embedded formats: the `Subscription` a member puts
//! in JoinGroup's protocol metadata and the `Assignment` the leader hands out through
//! SyncGroup, plus the StickyAssignor's user data.
//!
//! Byte-compatible with the Java client's `ConsumerProtocol`
//! (`org.apache.kafka.clients.consumer.internals`): an `i16` version, then the body of
//! `ConsumerProtocolSubscription.json` / `ConsumerProtocolAssignment.json` at that
//! version (the generated types in `protocol::messages` do the body). As in Java:
//! topics are written sorted; owned partitions sorted and grouped by topic; assigned
//! partitions grouped by topic in the order they first appear; a version above the
//! newest known one is read as the newest (later versions only append fields, so
//! their extra bytes are ignored); a generation of -1 and an empty rack mean "none".
//! At a known version, bytes left over after the body are an error.
//!
//! All decoding is bounded by the input: the generated decoders check every length
//! against the bytes that remain before reserving, and so does the user data decoder.

use bytes::{BufMut, Bytes, BytesMut};

use super::TopicPartition;
use crate::protocol::messages::consumer_protocol_assignment as wire_assignment;
use crate::protocol::messages::consumer_protocol_subscription as wire_subscription;
use crate::protocol::primitives as p;
use crate::protocol::{Decode, DecodeError, Encode, EncodeError, Message};

/// Newest Subscription version this code writes and reads.
pub(crate) const SUBSCRIPTION_VERSION: i16 =
    wire_subscription::ConsumerProtocolSubscription::VERSIONS.max;
/// Newest Assignment version this code writes and reads.
pub(crate) const ASSIGNMENT_VERSION: i16 =
    wire_assignment::ConsumerProtocolAssignment::VERSIONS.max;

/// What went wrong with a consumer protocol payload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum GroupProtocolError {
    /// The payload did not decode.
    #[error("consumer protocol {what} does not decode: {source}")]
    Decode {
        /// Which payload ("subscription", "assignment", "sticky user data").
        what: &'static str,
        /// The decoding failure.
        #[source]
        source: DecodeError,
    },
    /// The payload's version is negative.
    #[error("consumer protocol {what} has invalid version {version}")]
    BadVersion {
        /// Which payload.
        what: &'static str,
        /// The version read.
        version: i16,
    },
    /// Bytes remained after the body at a version whose layout is fully known.
    #[error("consumer protocol {what} v{version} has {extra} bytes after its end")]
    TrailingBytes {
        /// Which payload.
        what: &'static str,
        /// The version read.
        version: i16,
        /// How many bytes were left.
        extra: usize,
    },
    /// A value could not be encoded (too long a string, unknown version).
    #[error("consumer protocol {what} does not encode: {source}")]
    Encode {
        /// Which payload.
        what: &'static str,
        /// The encoding failure.
        #[source]
        source: EncodeError,
    },
}

/// A member's subscription (JoinGroup protocol metadata).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Subscription {
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Assignor-specific data (the sticky assignor's previous assignment).
    pub user_data: Option<Bytes>,
    /// Partitions the member owns now (v1+; what cooperative assignors rely on).
    pub owned_partitions: Vec<TopicPartition>,
    /// The generation those partitions were owned in (v2+, KIP-792).
    pub generation_id: Option<i32>,
    /// The member's rack (v3+, KIP-881).
    pub rack_id: Option<String>,
}

/// What the leader assigns one member (a SyncGroup assignment).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Assignment {
    /// The member's partitions.
    pub partitions: Vec<TopicPartition>,
    /// Assignor-specific data (none of kring's assignors sets any).
    pub user_data: Option<Bytes>,
}

/// Encodes `subscription` at `version` with its version prefix, as Java does.
pub(crate) fn encode_subscription(
    subscription: &Subscription,
    version: i16,
) -> Result<Bytes, GroupProtocolError> {
    const WHAT: &str = "subscription";
    let mut topics = subscription.topics.clone();
    topics.sort();
    let mut owned = subscription.owned_partitions.clone();
    owned.sort();
    let owned_partitions = group_by_topic(&owned)
        .into_iter()
        .map(|(topic, partitions)| wire_subscription::TopicPartition { topic, partitions })
        .collect();
    let body = wire_subscription::ConsumerProtocolSubscription {
        topics,
        user_data: subscription.user_data.clone(),
        owned_partitions,
        generation_id: subscription.generation_id.unwrap_or(-1),
        rack_id: subscription.rack_id.clone(),
    };
    // Fields a lower version cannot carry are dropped, as Java's serializer does.
    with_version_prefix(WHAT, version, |buf| body.encode(buf, version))
}

/// Decodes a version-prefixed subscription.
pub(crate) fn decode_subscription(bytes: &Bytes) -> Result<Subscription, GroupProtocolError> {
    const WHAT: &str = "subscription";
    let (version, mut buf) = read_version(WHAT, bytes)?;
    let readable = version.min(SUBSCRIPTION_VERSION);
    let body = wire_subscription::ConsumerProtocolSubscription::decode(&mut buf, readable)
        .map_err(|source| GroupProtocolError::Decode { what: WHAT, source })?;
    check_consumed(WHAT, version, SUBSCRIPTION_VERSION, &buf)?;
    Ok(Subscription {
        topics: body.topics,
        user_data: body.user_data,
        owned_partitions: flatten(
            body.owned_partitions
                .into_iter()
                .map(|t| (t.topic, t.partitions)),
        ),
        generation_id: (readable >= 2 && body.generation_id != -1).then_some(body.generation_id),
        rack_id: body.rack_id.filter(|rack| !rack.is_empty()),
    })
}

/// Encodes `assignment` at `version` with its version prefix, as Java does.
pub(crate) fn encode_assignment(
    assignment: &Assignment,
    version: i16,
) -> Result<Bytes, GroupProtocolError> {
    const WHAT: &str = "assignment";
    let assigned_partitions = group_by_topic(&assignment.partitions)
        .into_iter()
        .map(|(topic, partitions)| wire_assignment::TopicPartition { topic, partitions })
        .collect();
    let body = wire_assignment::ConsumerProtocolAssignment {
        assigned_partitions,
        user_data: assignment.user_data.clone(),
    };
    with_version_prefix(WHAT, version, |buf| body.encode(buf, version))
}

/// Decodes a version-prefixed assignment.
pub(crate) fn decode_assignment(bytes: &Bytes) -> Result<Assignment, GroupProtocolError> {
    const WHAT: &str = "assignment";
    let (version, mut buf) = read_version(WHAT, bytes)?;
    let readable = version.min(ASSIGNMENT_VERSION);
    let body = wire_assignment::ConsumerProtocolAssignment::decode(&mut buf, readable)
        .map_err(|source| GroupProtocolError::Decode { what: WHAT, source })?;
    check_consumed(WHAT, version, ASSIGNMENT_VERSION, &buf)?;
    Ok(Assignment {
        partitions: flatten(
            body.assigned_partitions
                .into_iter()
                .map(|t| (t.topic, t.partitions)),
        ),
        user_data: body.user_data,
    })
}

/// What the StickyAssignor's user data says: the member's previous assignment and the
/// generation it was made in.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct StickyUserData {
    /// Partitions the member was assigned last.
    pub partitions: Vec<TopicPartition>,
    /// The generation of that assignment (absent in the v0 layout).
    pub generation: Option<i32>,
}

/// Encodes the StickyAssignor's user data in its v1 layout (Java's
/// `StickyAssignor.serializeTopicPartitionAssignment`): an array of (topic `string`,
/// partitions `[int32]`), then the generation `int32`; topics grouped in the order they
/// first appear. No version prefix: the layout is recognised by its length.
pub(crate) fn encode_sticky_user_data(
    partitions: &[TopicPartition],
    generation: i32,
) -> Result<Bytes, GroupProtocolError> {
    const WHAT: &str = "sticky user data";
    let groups = group_by_topic(partitions);
    p::encode_to_bytes(|buf| {
        p::write_array_len(buf, Some(groups.len()), false, "previous_assignment")?;
        for (topic, partitions) in &groups {
            p::write_string(buf, topic, false, "topic")?;
            p::write_array_len(buf, Some(partitions.len()), false, "partitions")?;
            for partition in partitions {
                buf.put_i32(*partition);
            }
        }
        buf.put_i32(generation);
        Ok(())
    })
    .map_err(|source| GroupProtocolError::Encode { what: WHAT, source })
}

/// Decodes the StickyAssignor's user data: v1 (with the generation) when four bytes
/// follow the assignment, otherwise v0, which is how Java tells them apart (it tries
/// v1, then v0). Anything else after the assignment is an error.
pub(crate) fn decode_sticky_user_data(bytes: &Bytes) -> Result<StickyUserData, GroupProtocolError> {
    const WHAT: &str = "sticky user data";
    let mut buf = bytes.clone();
    let decode = |source| GroupProtocolError::Decode { what: WHAT, source };
    // Each topic entry holds at least a string length (2) and an array length (4).
    let topics = p::read_array_len(&mut buf, false, 6)
        .map_err(decode)?
        .ok_or(decode(DecodeError::UnexpectedNull("previous_assignment")))?;
    let mut groups = Vec::with_capacity(topics);
    for _ in 0..topics {
        let topic = p::read_string(&mut buf, false, "topic").map_err(decode)?;
        let count = p::read_array_len(&mut buf, false, 4)
            .map_err(decode)?
            .ok_or(decode(DecodeError::UnexpectedNull("partitions")))?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(p::read_i32(&mut buf).map_err(decode)?);
        }
        groups.push((topic, partitions));
    }
    let generation = match buf.len() {
        0 => None,
        4 => Some(p::read_i32(&mut buf).map_err(decode)?),
        extra => {
            return Err(GroupProtocolError::TrailingBytes {
                what: WHAT,
                version: 1,
                extra,
            });
        }
    };
    Ok(StickyUserData {
        partitions: flatten(groups.into_iter()),
        generation,
    })
}

fn with_version_prefix(
    what: &'static str,
    version: i16,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<Bytes, GroupProtocolError> {
    p::encode_to_bytes(|buf| {
        buf.put_i16(version);
        body(buf)
    })
    .map_err(|source| GroupProtocolError::Encode { what, source })
}

fn read_version(what: &'static str, bytes: &Bytes) -> Result<(i16, Bytes), GroupProtocolError> {
    let mut buf = bytes.clone();
    let version =
        p::read_i16(&mut buf).map_err(|source| GroupProtocolError::Decode { what, source })?;
    if version < 0 {
        return Err(GroupProtocolError::BadVersion { what, version });
    }
    Ok((version, buf))
}

fn check_consumed(
    what: &'static str,
    version: i16,
    newest: i16,
    rest: &Bytes,
) -> Result<(), GroupProtocolError> {
    if version <= newest && !rest.is_empty() {
        return Err(GroupProtocolError::TrailingBytes {
            what,
            version,
            extra: rest.len(),
        });
    }
    Ok(())
}

/// Groups partitions by topic, topics in the order they first appear.
fn group_by_topic(partitions: &[TopicPartition]) -> Vec<(String, Vec<i32>)> {
    let mut index = std::collections::HashMap::<&str, usize>::new();
    let mut groups: Vec<(String, Vec<i32>)> = Vec::new();
    for tp in partitions {
        let slot = *index.entry(tp.topic.as_str()).or_insert_with(|| {
            groups.push((tp.topic.clone(), Vec::new()));
            groups.len() - 1
        });
        groups[slot].1.push(tp.partition);
    }
    groups
}

fn flatten(groups: impl Iterator<Item = (String, Vec<i32>)>) -> Vec<TopicPartition> {
    let mut out = Vec::new();
    for (topic, partitions) in groups {
        out.extend(
            partitions
                .into_iter()
                .map(|partition| TopicPartition::new(topic.clone(), partition)),
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
