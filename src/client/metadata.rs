//! The cluster metadata snapshot, sans-IO: built from Metadata responses, read by
//! everything that routes requests. A snapshot is immutable; a refresh builds a new one
//! and swaps it in, so readers never see a half-applied update.

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

    /// A topic's partition, if known.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionInfo> {
        let t = self.topics.get(topic)?;
        t.partitions
            .get(usize::try_from(partition).ok()?)
            .filter(|p| p.id == partition)
            .or_else(|| t.partitions.iter().find(|p| p.id == partition))
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
}
