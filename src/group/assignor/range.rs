//! `range` (Java's `RangeAssignor`): for each topic on its own, the members subscribed
//! to it in Java's member order get consecutive ranges of its partitions; the first
//! `partitions % members` get one more.

use std::collections::{BTreeMap, BTreeSet};

use super::{Member, PartitionCounts, java_member_order, partition_count};
use crate::group::TopicPartition;

/// Each member's partitions, aligned with `members`.
pub(super) fn assign(members: &[&Member], counts: &PartitionCounts) -> Vec<Vec<TopicPartition>> {
    let mut out = vec![Vec::new(); members.len()];
    for (topic, mut subscribers) in subscribers_by_topic(members) {
        let Some(partitions) = partition_count(counts, topic) else {
            continue;
        };
        subscribers.sort_by(|&a, &b| java_member_order(members[a], members[b]));
        let share = partitions / subscribers.len();
        let extra = partitions % subscribers.len();
        for (rank, &member) in subscribers.iter().enumerate() {
            let start = rank * share + rank.min(extra);
            let len = share + usize::from(rank < extra);
            out[member].extend((start..start + len).map(|p| partition(topic, p)));
        }
    }
    out
}

/// For every subscribed topic, the indices of the members subscribed to it.
fn subscribers_by_topic<'a>(members: &[&'a Member]) -> BTreeMap<&'a str, Vec<usize>> {
    let mut by_topic: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, member) in members.iter().enumerate() {
        let topics: BTreeSet<&str> = member
            .subscription
            .topics
            .iter()
            .map(|t| t.as_str())
            .collect();
        for topic in topics {
            by_topic.entry(topic).or_default().push(index);
        }
    }
    by_topic
}

fn partition(topic: &str, index: usize) -> TopicPartition {
    // Indices come from a non-negative i32 count, so they fit.
    TopicPartition::new(topic, i32::try_from(index).unwrap_or(i32::MAX))
}
