//! AddPartitionsToTxn (API 24), v0-3 (a client's): adds partitions to the open
//! transaction at its coordinator. v4+ batch transactions for brokers verifying them
//! (KIP-890) and need the cluster-action permission no client has here: answered with
//! CLUSTER_AUTHORIZATION_FAILED as a broker answers a client.

use std::collections::BTreeSet;

use kring::protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    add_partitions_to_txn::{AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult},
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::state::State;
use crate::cluster::txn::{TxnStatus, fenced};

/// The newest version a client sends.
const CLIENT_MAX_VERSION: i16 = 3;

/// The answer for `r`'s partitions, each with `code_of` its code.
fn results(
    r: &AddPartitionsToTxnRequest,
    mut code_of: impl FnMut(&str, i32) -> KafkaCode,
) -> Vec<AddPartitionsToTxnTopicResult> {
    r.v3_and_below_topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code_of(&t.name, p).code())
                        })
                        .collect(),
                )
        })
        .collect()
}

/// The partitions of `r` the cluster does not have.
fn unknown_partitions(st: &State, r: &AddPartitionsToTxnRequest) -> BTreeSet<(String, i32)> {
    r.v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t.name.clone(), p)))
        .filter(|(t, p)| {
            !st.topics
                .get(t)
                .is_some_and(|topic| (0..topic.partitions.len() as i32).contains(p))
        })
        .collect()
}

pub(crate) fn add_partitions_to_txn(cx: &Ctx<'_>, r: &AddPartitionsToTxnRequest) -> ResponseKind {
    let version = cx.request.version;
    if version > CLIENT_MAX_VERSION {
        return ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default()
                .with_error_code(KafkaCode::CLUSTER_AUTHORIZATION_FAILED.code()),
        );
    }
    let mut st = cx.lock();
    let unknown = unknown_partitions(&st, r);
    let outcome = st
        .txn_for(
            cx.broker,
            &r.v3_and_below_transactional_id,
            r.v3_and_below_producer_id,
            r.v3_and_below_producer_epoch,
            fenced(version, 2),
        )
        .map(|txn| {
            if !unknown.is_empty() {
                // Kafka adds none when one is unknown.
                return false;
            }
            for t in &r.v3_and_below_topics {
                for &p in &t.partitions {
                    txn.partitions.insert((t.name.clone(), p));
                }
            }
            txn.status = TxnStatus::Ongoing;
            true
        });
    let topics = match outcome {
        Err(code) => results(r, |_, _| code),
        Ok(true) => results(r, |_, _| KafkaCode::NONE),
        Ok(false) => results(r, |t, p| {
            if unknown.contains(&(t.to_string(), p)) {
                KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                KafkaCode::OPERATION_NOT_ATTEMPTED
            }
        }),
    };
    ResponseKind::AddPartitionsToTxn(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics),
    )
}
