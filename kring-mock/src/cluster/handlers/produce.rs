//! Produce (API 0): appends batches to the partition logs (idempotent producers
//! checked by sequence), after the leader and epoch checks; a transactional batch
//! needs its producer's transaction open with the partition added, at the current
//! epoch (see [`crate::cluster::txn`]).

use kring::protocol::messages::{
    ProduceRequest, ProduceResponse,
    produce::{self, PartitionProduceResponse, TopicProduceResponse},
};
use kring::protocol::{KafkaCode, Request, ResponseKind};

use super::{led_partition, partition_mut};
use crate::cluster::Ctx;
use crate::cluster::state::{Appended, Log};
use crate::error_response;

pub(crate) fn produce(cx: &Ctx<'_>, r: &ProduceRequest) -> ResponseKind {
    if !matches!(r.acks, -1..=1) {
        return error_response(
            &r.clone().into_kind(),
            cx.request.version,
            KafkaCode::INVALID_REQUIRED_ACKS,
        )
        .unwrap_or_else(|| ResponseKind::Produce(ProduceResponse::default()));
    }
    let mut st = cx.lock();
    let max_message = st.config.max_message_bytes;
    let mut endpoints = std::collections::BTreeSet::new();
    let responses = r
        .topic_data
        .iter()
        .map(|t| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_partition_responses(
                    t.partition_data
                        .iter()
                        .map(|pd| {
                            let mut out = PartitionProduceResponse::default()
                                .with_index(pd.index)
                                .with_base_offset(-1);
                            match led_partition(
                                &st,
                                cx.broker,
                                st.topics.get(&t.name),
                                pd.index,
                                -1,
                            ) {
                                Ok(_) => {}
                                Err(code) => {
                                    out.error_code = code.code();
                                    if code == KafkaCode::NOT_LEADER_OR_FOLLOWER {
                                        // KIP-951: say who leads now.
                                        if let Some(p) = partition_mut(&mut st, &t.name, pd.index) {
                                            out.current_leader =
                                                produce::LeaderIdAndEpoch::default()
                                                    .with_leader_id(p.leader)
                                                    .with_leader_epoch(p.leader_epoch);
                                            if p.leader >= 0 {
                                                endpoints.insert(p.leader);
                                            }
                                        }
                                    }
                                    return out;
                                }
                            }
                            let records = pd.records.as_deref().unwrap_or_default();
                            let checked = match Log::validate(records, max_message) {
                                Ok(c) => c,
                                Err(code) => {
                                    out.error_code = code.code();
                                    return out;
                                }
                            };
                            // Transactional batches: the producer's transaction must be
                            // open with this partition in it, at its current epoch.
                            if let Some(code) = checked
                                .iter()
                                .filter_map(|b| b.transactional())
                                .find_map(|(pid, epoch)| {
                                    st.check_transactional_produce(&t.name, pd.index, pid, epoch)
                                        .err()
                                })
                            {
                                out.error_code = code.code();
                                return out;
                            }
                            let Some(p) = partition_mut(&mut st, &t.name, pd.index) else {
                                out.error_code = KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                                return out;
                            };
                            let appended = match p.log.check_sequences(&checked) {
                                Ok(Some(offset)) => Appended::Duplicate(offset),
                                Ok(None) => Appended::At(p.log.append(&checked, p.leader_epoch)),
                                Err(code) => {
                                    out.error_code = code.code();
                                    out.log_start_offset = p.log.log_start;
                                    return out;
                                }
                            };
                            out.base_offset = match appended {
                                Appended::At(o) | Appended::Duplicate(o) => o,
                            };
                            out.log_start_offset = p.log.log_start;
                            out
                        })
                        .collect(),
                )
        })
        .collect();
    let node_endpoints = endpoints
        .into_iter()
        .filter_map(|id| {
            st.brokers.get(&id).map(|b| {
                produce::NodeEndpoint::default()
                    .with_node_id(id)
                    .with_host(b.host.clone())
                    .with_port(b.port)
            })
        })
        .collect();
    drop(st);
    cx.notify();
    ResponseKind::Produce(
        ProduceResponse::default()
            .with_responses(responses)
            .with_node_endpoints(node_endpoints),
    )
}
