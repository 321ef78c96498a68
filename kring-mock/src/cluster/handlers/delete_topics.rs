//! DeleteTopics (API 20).

use kring::protocol::messages::{
    DeleteTopicsRequest, DeleteTopicsResponse, delete_topics::DeletableTopicResult,
};
use kring::protocol::{KafkaCode, ResponseKind, Uuid};

use crate::cluster::Ctx;

pub(crate) fn delete_topics(cx: &Ctx<'_>, r: &DeleteTopicsRequest) -> ResponseKind {
    let mut st = cx.lock();
    let asked: Vec<(Option<String>, Uuid)> = r
        .topic_names
        .iter()
        .map(|n| (Some(n.clone()), Uuid::ZERO))
        .chain(r.topics.iter().map(|t| (t.name.clone(), t.topic_id)))
        .collect();
    let responses = asked
        .into_iter()
        .map(|(name, id)| {
            let found = match &name {
                Some(n) => st.topics.get_key_value(n).map(|(n, t)| (n.clone(), t.id)),
                None => st.topic_by_id(id).map(|(n, t)| (n.clone(), t.id)),
            };
            let Some((found, found_id)) = found else {
                return DeletableTopicResult::default()
                    .with_name(name)
                    .with_topic_id(id)
                    .with_error_code(if id.is_zero() {
                        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                    } else {
                        KafkaCode::UNKNOWN_TOPIC_ID.code()
                    });
            };
            st.topics.remove(&found);
            for g in st.groups.values_mut() {
                g.offsets.retain(|(t, _), _| *t != found);
            }
            DeletableTopicResult::default()
                .with_name(Some(found))
                .with_topic_id(found_id)
        })
        .collect();
    cx.notify();
    ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(responses))
}
