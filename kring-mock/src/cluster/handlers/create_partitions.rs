//! CreatePartitions (API 37): grows topics; fewer partitions than today is
//! INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.

use kring::protocol::ResponseKind;
use kring::protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse,
    create_partitions::CreatePartitionsTopicResult,
};

use crate::cluster::Ctx;

pub(crate) fn create_partitions(cx: &Ctx<'_>, r: &CreatePartitionsRequest) -> ResponseKind {
    let mut st = cx.lock();
    let results = r
        .topics
        .iter()
        .map(|t| {
            let assignment = t
                .assignments
                .as_ref()
                .map(|a| a.iter().map(|a| a.broker_ids.clone()).collect());
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            match st.add_partitions(&t.name, t.count, assignment, r.validate_only) {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(e.code.code())
                    .with_error_message(Some(e.message)),
            }
        })
        .collect();
    drop(st);
    cx.notify();
    ResponseKind::CreatePartitions(CreatePartitionsResponse::default().with_results(results))
}
