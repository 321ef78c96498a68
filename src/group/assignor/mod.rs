//! The classic protocol's client-side assignors: pure, deterministic functions from a
//! group (members with their subscriptions, owned partitions and generations) and the
//! topics' partition counts to each member's partitions. The leader runs one per
//! rebalance; nothing here does I/O or reads the clock.
//!
//! Names are those of `partition.assignment.strategy` (the config layer maps Java class
//! names to them): `range` and `roundrobin` give exactly what Java's `RangeAssignor` and
//! `RoundRobinAssignor` give (checked against Java in the tests); `sticky` and
//! `cooperative-sticky` follow Java's `StickyAssignor` and `CooperativeStickyAssignor`
//! (KIP-54, KIP-429): as balanced as the subscriptions allow, keeping as many current
//! owners as that balance permits, but not always the same partitions as Java.
//!
//! Invariants of every result: each member of the input has an entry; each partition
//! of a subscribed, known topic goes to at most one member, and only to a member
//! subscribed to its topic (exactly one, except that `cooperative-sticky` withholds a
//! partition another member still owns until the next rebalance); each list is sorted.
//! Subscribed topics absent from the partition counts are left out, as Java leaves out
//! topics without metadata (a topic being created or deleted).
//!
//! Not built yet: KIP-881 rack-aware placement (racks are read but not used).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::TopicPartition;
use super::protocol::{GroupProtocolError, Subscription};

mod range;
mod roundrobin;
mod sticky;

#[cfg(test)]
mod tests;

/// One member of the group, as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Member {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its static membership id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// What it sent in its protocol metadata.
    pub subscription: Subscription,
}

/// Partition counts per topic, from the leader's metadata.
pub(crate) type PartitionCounts = BTreeMap<String, i32>;

/// Each member's partitions, by member id.
pub(crate) type GroupAssignment = BTreeMap<String, Vec<TopicPartition>>;

/// Why an assignment could not be computed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum AssignError {
    /// Two members share a member id.
    #[error("member id {0:?} appears twice in the group")]
    DuplicateMember(String),
    /// The metadata gave a topic a negative partition count.
    #[error("topic {topic:?} has a negative partition count {count}")]
    NegativePartitionCount {
        /// The topic.
        topic: String,
        /// Its count.
        count: i32,
    },
    /// A member's sticky user data does not decode.
    #[error("member {member:?} sent sticky assignor user data that does not decode: {source}")]
    BadUserData {
        /// The member.
        member: String,
        /// Why it does not decode.
        #[source]
        source: GroupProtocolError,
    },
}

/// One of the four assignors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assignor {
    /// Java's `RangeAssignor`: per topic, consecutive ranges in member order.
    Range,
    /// Java's `RoundRobinAssignor`: all partitions dealt out in turn.
    RoundRobin,
    /// Java's `StickyAssignor` (eager): balanced, keeps previous assignments, which
    /// members report in their user data.
    Sticky,
    /// Java's `CooperativeStickyAssignor` (KIP-429): sticky, moving partitions over two
    /// rebalances, owned partitions read from the subscription.
    CooperativeSticky,
}

impl Assignor {
    /// The assignor named as in `partition.assignment.strategy` after the config layer
    /// normalised it (`range`, `roundrobin`, `sticky`, `cooperative-sticky`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "range" => Self::Range,
            "roundrobin" => Self::RoundRobin,
            "sticky" => Self::Sticky,
            "cooperative-sticky" => Self::CooperativeSticky,
            _ => return None,
        })
    }

    /// Its protocol name in JoinGroup (the same as Java's).
    pub fn name(self) -> &'static str {
        match self {
            Self::Range => "range",
            Self::RoundRobin => "roundrobin",
            Self::Sticky => "sticky",
            Self::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// Whether members keep their partitions across a rebalance (KIP-429's
    /// COOPERATIVE protocol) instead of revoking everything first (EAGER).
    pub fn is_cooperative(self) -> bool {
        self == Self::CooperativeSticky
    }

    /// Assigns `counts`' partitions to `members`. The result depends only on the
    /// inputs, not on the order of `members`.
    pub fn assign(
        self,
        members: &[Member],
        counts: &PartitionCounts,
    ) -> Result<GroupAssignment, AssignError> {
        check_counts(counts)?;
        let members = sorted_by_member_id(members)?;
        let lists = match self {
            Self::Range => range::assign(&members, counts),
            Self::RoundRobin => roundrobin::assign(&members, counts),
            Self::Sticky => sticky::assign_eager(&members, counts)?,
            Self::CooperativeSticky => sticky::assign_cooperative(&members, counts),
        };
        Ok(members
            .iter()
            .zip(lists)
            .map(|(member, mut partitions)| {
                partitions.sort();
                (member.member_id.clone(), partitions)
            })
            .collect())
    }
}

fn check_counts(counts: &PartitionCounts) -> Result<(), AssignError> {
    match counts.iter().find(|(_, count)| **count < 0) {
        Some((topic, count)) => Err(AssignError::NegativePartitionCount {
            topic: topic.clone(),
            count: *count,
        }),
        None => Ok(()),
    }
}

fn sorted_by_member_id(members: &[Member]) -> Result<Vec<&Member>, AssignError> {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    match sorted.windows(2).find(|w| w[0].member_id == w[1].member_id) {
        Some(w) => Err(AssignError::DuplicateMember(w[0].member_id.clone())),
        None => Ok(sorted),
    }
}

/// The order Java's `MemberInfo` sorts members in for range and round robin: static
/// members first by instance id, then dynamic ones by member id. (Java compares UTF-16
/// code units, Rust code points; they differ only beyond the Basic Multilingual Plane.)
fn java_member_order(a: &Member, b: &Member) -> Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// The partition count of `topic` if it is known, as a usize.
fn partition_count(counts: &PartitionCounts, topic: &str) -> Option<usize> {
    counts
        .get(topic)
        .and_then(|&count| usize::try_from(count).ok())
}
