//! Metadata (API 3): brokers, topics and partition leaders; creates topics a
//! request names when auto-creation is on.

use kring::protocol::messages::{
    MetadataRequest, MetadataResponse,
    metadata::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic},
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::state::{State, Topic};

fn metadata_topic(st: &State, name: &str, topic: &Topic) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(name.to_string()))
        .with_topic_id(topic.id)
        .with_partitions(
            topic
                .partitions
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (isr, offline): (Vec<i32>, Vec<i32>) =
                        p.replicas.iter().partition(|&&r| st.is_up(r));
                    MetadataResponsePartition::default()
                        .with_error_code(if p.leader < 0 {
                            KafkaCode::LEADER_NOT_AVAILABLE.code()
                        } else {
                            0
                        })
                        .with_partition_index(i as i32)
                        .with_leader_id(p.leader)
                        .with_leader_epoch(p.leader_epoch)
                        .with_replica_nodes(p.replicas.clone())
                        .with_isr_nodes(isr)
                        .with_offline_replicas(offline)
                })
                .collect(),
        )
}

pub(crate) fn metadata(cx: &Ctx<'_>, r: &MetadataRequest) -> ResponseKind {
    let mut st = cx.lock();
    let all =
        r.topics.is_none() || (cx.request.version == 0 && r.topics.iter().flatten().count() == 0);
    // Auto-creation (v4+ asks per request; older versions always allow it).
    let allow_create =
        st.config.auto_create_topics && (cx.request.version < 4 || r.allow_auto_topic_creation);
    if allow_create && !all {
        let mut created = false;
        for t in r.topics.iter().flatten() {
            if let Some(name) = &t.name {
                if !st.topics.contains_key(name) {
                    created |= st.create_topic(name, -1, -1, None, false).is_ok();
                }
            }
        }
        if created {
            cx.notify();
        }
    }
    let topics = if all {
        st.topics
            .iter()
            .map(|(n, t)| metadata_topic(&st, n, t))
            .collect()
    } else {
        r.topics
            .iter()
            .flatten()
            .map(|t| {
                let found = match &t.name {
                    Some(name) => st.topics.get_key_value(name),
                    None => st.topic_by_id(t.topic_id),
                };
                match found {
                    Some((name, topic)) => metadata_topic(&st, name, topic),
                    None => MetadataResponseTopic::default()
                        .with_error_code(if t.name.is_some() {
                            KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                        } else {
                            KafkaCode::UNKNOWN_TOPIC_ID.code()
                        })
                        .with_name(t.name.clone())
                        .with_topic_id(t.topic_id),
                }
            })
            .collect()
    };
    let brokers = st
        .brokers
        .iter()
        .filter(|(_, b)| b.up)
        .map(|(&id, b)| {
            MetadataResponseBroker::default()
                .with_node_id(id)
                .with_host(b.host.clone())
                .with_port(b.port)
        })
        .collect();
    ResponseKind::Metadata(
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_cluster_id(Some(st.config.cluster_id.clone()))
            .with_controller_id(st.live_brokers().first().copied().unwrap_or(-1))
            .with_topics(topics),
    )
}
