//! `roundrobin` (Java's `RoundRobinAssignor`): every partition of every subscribed
//! topic, topics sorted and partitions in order, dealt out in turn to the members in
//! Java's member order, skipping members not subscribed to the partition's topic.

use std::collections::{BTreeSet, HashSet};

use super::{Member, PartitionCounts, java_member_order, partition_count};
use crate::group::TopicPartition;

/// Each member's partitions, aligned with `members`.
pub(super) fn assign(members: &[&Member], counts: &PartitionCounts) -> Vec<Vec<TopicPartition>> {
    let mut out = vec![Vec::new(); members.len()];
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| java_member_order(members[a], members[b]));
    let topic_sets: Vec<HashSet<&str>> = members
        .iter()
        .map(|m| m.subscription.topics.iter().map(|t| t.as_str()).collect())
        .collect();
    let topics: BTreeSet<&str> = topic_sets.iter().flatten().copied().collect();
    let mut turn = 0;
    for topic in topics {
        let Some(partitions) = partition_count(counts, topic) else {
            continue;
        };
        for p in 0..partitions {
            // Some member subscribes to `topic` (it came from a subscription), so this
            // finds one within a lap.
            while !topic_sets[order[turn % order.len()]].contains(topic) {
                turn += 1;
            }
            let member = order[turn % order.len()];
            turn += 1;
            out[member].push(TopicPartition::new(
                topic,
                i32::try_from(p).unwrap_or(i32::MAX),
            ));
        }
    }
    out
}
