//! The cluster metadata snapshot, sans-IO: built from Metadata responses, read by
//! everything that routes requests. A snapshot is immutable; a refresh builds a new one
//! and swaps it in, so readers never see a half-applied update.
//!
//! Leader epochs (KIP-320) only move forward: a Metadata answer from a broker that has
//! not heard of a leader change yet (a lower epoch than the one cached) does not replace
//! what is known, and neither does a stale leader hint (KIP-951). A topic recreated
//! under the same name (a new topic id) starts its epochs afresh.

use std::collections::{BTreeMap, HashMap};

use crate::protocol::messages::MetadataResponse;
use crate::protocol::{KafkaCode, Uuid};

/// A broker as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Node id.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// Rack, if configured.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition's placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition index.
    pub id: i32,
    /// Leader node id, -1 when there is none.
    pub leader: i32,
    /// Leader epoch, -1 when unknown.
    pub leader_epoch: i32,
    /// All replicas.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Offline replicas.
    pub offline: Vec<i32>,
    /// The partition-level error the broker reported.
    pub error: KafkaCode,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Name.
    pub name: String,
    /// Topic id (KIP-516), zero when unknown.
    pub id: Uuid,
    /// Whether it is internal (`__consumer_offsets`).
    pub internal: bool,
    /// The topic-level error the broker reported (UNKNOWN_TOPIC_OR_PARTITION, ...).
    pub error: KafkaCode,
    /// Partitions, by index.
    pub partitions: Vec<PartitionInfo>,
}

/// An immutable view of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// Counts snapshots: each refresh makes one with a higher generation, so caches
    /// derived from a snapshot can tell whether it is still current.
    pub generation: u64,
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The active controller, -1 if unknown.
    pub controller_id: i32,
    /// Live brokers by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// Topics by name.
    pub topics: HashMap<String, TopicInfo>,
}

impl ClusterMetadata {
    /// A new snapshot: brokers and controller from `response`; topics from `response`
    /// merged over those of `previous` (a refresh of some topics keeps the others). A
    /// topic the broker reports as unknown is dropped from the cache.
    pub(crate) fn apply(
        previous: &ClusterMetadata,
        response: &MetadataResponse,
        all_topics: bool,
    ) -> Self {
        let brokers = response
            .brokers
            .iter()
            .map(|b| {
                (
                    b.node_id,
                    BrokerInfo {
                        id: b.node_id,
                        host: b.host.clone(),
                        port: b.port,
                        rack: b.rack.clone(),
                    },
                )
            })
            .collect();
        let mut topics = if all_topics {
            HashMap::new()
        } else {
            previous.topics.clone()
        };
        for t in &response.topics {
            let Some(name) = t.name.clone() else { continue };
            let error = KafkaCode(t.error_code);
            if error == KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
                || error == KafkaCode::INVALID_TOPIC_EXCEPTION
            {
                topics.remove(&name);
                continue;
            }
            let mut partitions: Vec<PartitionInfo> = t
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    id: p.partition_index,
                    leader: p.leader_id,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.clone(),
                    isr: p.isr_nodes.clone(),
                    offline: p.offline_replicas.clone(),
                    error: KafkaCode(p.error_code),
                })
                .collect();
            partitions.sort_by_key(|p| p.id);
            if error != KafkaCode::NONE && partitions.is_empty() {
                // LEADER_NOT_AVAILABLE for a topic being created: keep what we knew.
                continue;
            }
            if let Some(old) = previous
                .topics
                .get(&name)
                .filter(|o| same_topic(o.id, t.topic_id))
            {
                keep_newer_epochs(&mut partitions, &old.partitions);
            }
            topics.insert(
                name.clone(),
                TopicInfo {
                    name,
                    id: t.topic_id,
                    internal: t.is_internal,
                    error,
                    partitions,
                },
            );
        }
        ClusterMetadata {
            generation: previous.generation + 1,
            cluster_id: response.cluster_id.clone(),
            controller_id: response.controller_id,
            brokers,
            topics,
        }
    }

    /// A new snapshot with leader hints applied (KIP-951: a Produce or Fetch answer
    /// naming the partition's new leader), and the brokers they name that were not
    /// known. A hint whose epoch is not newer than the cached one is ignored. `None`
    /// when no hint changes anything.
    pub(crate) fn with_leader_hints(
        &self,
        hints: &[LeaderHint],
        endpoints: &[BrokerInfo],
    ) -> Option<Self> {
        let mut next: Option<ClusterMetadata> = None;
        for h in hints {
            let newer = self
                .partition(&h.topic, h.partition)
                .is_some_and(|p| h.is_newer_than(p));
            let known =
                self.brokers.contains_key(&h.leader) || endpoints.iter().any(|b| b.id == h.leader);
            if !newer || !known {
                continue;
            }
            let m = next.get_or_insert_with(|| self.clone());
            if let Some(p) = m
                .topics
                .get_mut(&*h.topic)
                .and_then(|t| t.partitions.iter_mut().find(|p| p.id == h.partition))
            {
                p.leader = h.leader;
                p.leader_epoch = h.leader_epoch;
                p.error = KafkaCode::NONE;
            }
            if let Some(b) = endpoints.iter().find(|b| b.id == h.leader) {
                m.brokers.entry(b.id).or_insert_with(|| b.clone());
            }
        }
        let mut m = next?;
        m.generation = self.generation + 1;
        Some(m)
    }

    /// A topic's partition, if known.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionInfo> {
        let t = self.topics.get(topic)?;
        t.partitions
            .get(usize::try_from(partition).ok()?)
            .filter(|p| p.id == partition)
            .or_else(|| t.partitions.iter().find(|p| p.id == partition))
    }
}

/// A broker's word on who leads a partition now (KIP-951's `current_leader`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    /// The topic.
    pub topic: std::sync::Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The new leader's node id.
    pub leader: i32,
    /// The new leader's epoch.
    pub leader_epoch: i32,
}

impl LeaderHint {
    /// A hint from a response's `current_leader`, if it names a leader and an epoch.
    pub(crate) fn new(
        topic: std::sync::Arc<str>,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
    ) -> Option<Self> {
        (leader >= 0 && leader_epoch >= 0).then_some(LeaderHint {
            topic,
            partition,
            leader,
            leader_epoch,
        })
    }

    fn is_newer_than(&self, p: &PartitionInfo) -> bool {
        self.leader_epoch > p.leader_epoch
    }
}

/// Whether two topic ids name the same topic (zero: unknown, taken as the same).
fn same_topic(a: Uuid, b: Uuid) -> bool {
    a == b || a == Uuid::ZERO || b == Uuid::ZERO
}

/// KIP-320: a partition whose answer carries a lower leader epoch than the one cached
/// came from a broker that is behind; the cached placement stays.
fn keep_newer_epochs(partitions: &mut [PartitionInfo], old: &[PartitionInfo]) {
    for p in partitions.iter_mut() {
        let Some(o) = old.iter().find(|o| o.id == p.id) else {
            continue;
        };
        if p.leader_epoch >= 0 && o.leader_epoch > p.leader_epoch {
            tracing::debug!(
                partition = p.id,
                cached = o.leader_epoch,
                answered = p.leader_epoch,
                "stale partition metadata ignored"
            );
            *p = o.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::metadata::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };

    fn response(topics: Vec<MetadataResponseTopic>) -> MetadataResponse {
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(1)
                    .with_host("h1".into())
                    .with_port(9092),
                MetadataResponseBroker::default()
                    .with_node_id(2)
                    .with_host("h2".into())
                    .with_port(9093),
            ])
            .with_controller_id(2)
            .with_topics(topics)
    }

    fn topic_with_epochs(name: &str, placement: &[(i32, i32)]) -> MetadataResponseTopic {
        let mut t = topic(name, &placement.iter().map(|p| p.0).collect::<Vec<_>>());
        for p in &mut t.partitions {
            p.leader_epoch = placement[p.partition_index as usize].1;
        }
        t
    }

    fn topic(name: &str, leaders: &[i32]) -> MetadataResponseTopic {
        MetadataResponseTopic::default()
            .with_name(Some(name.into()))
            .with_partitions(
                leaders
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(i, &l)| {
                        MetadataResponsePartition::default()
                            .with_partition_index(i as i32)
                            .with_leader_id(l)
                            .with_replica_nodes(vec![1, 2])
                            .with_isr_nodes(vec![l])
                    })
                    .collect(),
            )
    }

    #[test]
    fn partial_refresh_merges_and_unknown_topics_drop() {
        let m1 = ClusterMetadata::apply(
            &ClusterMetadata::default(),
            &response(vec![topic("a", &[1, 2]), topic("b", &[2])]),
            true,
        );
        assert_eq!(m1.brokers[&2].addr(), "h2:9093");
        assert_eq!(m1.controller_id, 2);
        let a1 = m1.partition("a", 1).unwrap();
        assert_eq!((a1.id, a1.leader), (1, 2), "partitions sorted by index");
        let m2 = ClusterMetadata::apply(
            &m1,
            &response(vec![
                topic("a", &[2, 2]),
                MetadataResponseTopic::default()
                    .with_name(Some("b".into()))
                    .with_error_code(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code()),
            ]),
            false,
        );
        assert_eq!(m2.partition("a", 0).unwrap().leader, 2);
        assert!(!m2.topics.contains_key("b"));
        assert!(m2.partition("a", 7).is_none());
    }

    #[test]
    fn an_older_leader_epoch_does_not_replace_a_newer_one() {
        let m1 = ClusterMetadata::apply(
            &ClusterMetadata::default(),
            &response(vec![topic_with_epochs("a", &[(2, 5), (1, 3)])]),
            true,
        );
        // A broker that is behind answers partition 0 with epoch 4 (leader 1); partition
        // 1 moved forward, to epoch 4.
        let m2 = ClusterMetadata::apply(
            &m1,
            &response(vec![topic_with_epochs("a", &[(1, 4), (2, 4)])]),
            true,
        );
        let p0 = m2.partition("a", 0).unwrap();
        assert_eq!(
            (p0.leader, p0.leader_epoch),
            (2, 5),
            "the stale answer is ignored"
        );
        let p1 = m2.partition("a", 1).unwrap();
        assert_eq!((p1.leader, p1.leader_epoch), (2, 4));
        // A recreated topic (a new id) starts again.
        let mut recreated = topic_with_epochs("a", &[(1, 0), (1, 0)]);
        recreated.topic_id = Uuid([7; 16]);
        let mut old = topic_with_epochs("a", &[(2, 5), (1, 3)]);
        old.topic_id = Uuid([6; 16]);
        let m3 = ClusterMetadata::apply(&ClusterMetadata::default(), &response(vec![old]), true);
        let m4 = ClusterMetadata::apply(&m3, &response(vec![recreated]), true);
        assert_eq!(m4.partition("a", 0).unwrap().leader_epoch, 0);
    }

    #[test]
    fn leader_hints_move_partitions_forward_only() {
        let m1 = ClusterMetadata::apply(
            &ClusterMetadata::default(),
            &response(vec![topic_with_epochs("a", &[(1, 5)])]),
            true,
        );
        let hint = |leader, epoch| LeaderHint::new("a".into(), 0, leader, epoch).unwrap();
        assert!(
            m1.with_leader_hints(&[hint(2, 5)], &[]).is_none(),
            "same epoch"
        );
        assert!(
            m1.with_leader_hints(&[hint(3, 6)], &[]).is_none(),
            "unknown broker"
        );
        let b3 = BrokerInfo {
            id: 3,
            host: "h3".into(),
            port: 9094,
            rack: None,
        };
        let m2 = m1
            .with_leader_hints(&[hint(3, 6)], std::slice::from_ref(&b3))
            .unwrap();
        let p = m2.partition("a", 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (3, 6));
        assert_eq!(m2.brokers[&3], b3);
        assert_eq!(m2.generation, m1.generation + 1);
        assert!(LeaderHint::new("a".into(), 0, -1, 6).is_none());
    }
}
