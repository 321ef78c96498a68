//! CreateTopics (API 19).

use kring::protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, create_topics::CreatableTopicResult,
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;

pub(crate) fn create_topics(cx: &Ctx<'_>, r: &CreateTopicsRequest) -> ResponseKind {
    let mut st = cx.lock();
    let mut seen = std::collections::BTreeSet::new();
    let duplicates: std::collections::BTreeSet<&str> = r
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.as_str()))
        .map(|t| t.name.as_str())
        .collect();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let failed = |code: KafkaCode, message: String| {
                CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code.code())
                    .with_error_message(Some(message))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            };
            if duplicates.contains(t.name.as_str()) {
                return failed(
                    KafkaCode::INVALID_REQUEST,
                    format!("topic {:?} appears more than once", t.name),
                );
            }
            let assignment = if t.assignments.is_empty() {
                None
            } else if t.num_partitions != -1 || t.replication_factor != -1 {
                return failed(
                    KafkaCode::INVALID_REQUEST,
                    "a manual assignment needs partitions and replication factor -1".into(),
                );
            } else {
                let mut a = t.assignments.clone();
                a.sort_by_key(|a| a.partition_index);
                if a.iter()
                    .enumerate()
                    .any(|(i, a)| a.partition_index != i as i32)
                {
                    return failed(
                        KafkaCode::INVALID_REPLICA_ASSIGNMENT,
                        "partitions must be numbered from 0 without gaps".into(),
                    );
                }
                Some(a.into_iter().map(|a| a.broker_ids).collect())
            };
            let known = |k: &str| {
                crate::cluster::state::TOPIC_CONFIG_DEFAULTS
                    .iter()
                    .any(|(d, _)| *d == k)
            };
            if let Some(c) = t.configs.iter().find(|c| !known(&c.name)) {
                return failed(
                    KafkaCode::INVALID_CONFIG,
                    format!("Unknown topic config name: {}", c.name),
                );
            }
            match st.create_topic(
                &t.name,
                t.num_partitions,
                t.replication_factor,
                assignment,
                r.validate_only,
            ) {
                Ok(created) => {
                    if !r.validate_only
                        && let Some(topic) = st.topics.get_mut(&t.name)
                    {
                        for c in &t.configs {
                            if let Some(v) = &c.value {
                                topic.configs.insert(c.name.clone(), v.clone());
                            }
                        }
                    }
                    CreatableTopicResult::default()
                        .with_name(t.name.clone())
                        .with_topic_id(created.id)
                        .with_num_partitions(created.partitions)
                        .with_replication_factor(created.replication)
                        .with_configs(Some(Vec::new()))
                }
                Err(e) => failed(e.code, e.message),
            }
        })
        .collect();
    cx.notify();
    ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(topics))
}
