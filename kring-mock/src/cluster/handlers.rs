//! The fake cluster's answers to the data-path and admin APIs: Metadata, CreateTopics,
//! DeleteTopics, Produce, Fetch (with long polling), ListOffsets,
//! OffsetForLeaderEpoch, DeleteRecords, FindCoordinator and InitProducerId. Each
//! follows the broker's checks in Kafka's order: topic known, partition known, this
//! broker the leader, the leader epoch current, then the operation.

use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::Ctx;
use super::state::{Appended, Log, Partition, State, Topic};
use crate::error_response;
use crate::responses::list_offsets_partition;
use kring::protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, FetchRequest, FetchResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse,
    create_topics::CreatableTopicResult,
    delete_records::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult},
    delete_topics::DeletableTopicResult,
    fetch::{self, FetchableTopicResponse, PartitionData},
    find_coordinator::Coordinator,
    list_offsets::ListOffsetsTopicResponse,
    metadata::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic},
    offset_for_leader_epoch::{EpochEndOffset, OffsetForLeaderTopicResult},
    produce::{self, PartitionProduceResponse, TopicProduceResponse},
};
use kring::protocol::{KafkaCode, Request, ResponseKind, Uuid};

/// The longest a Fetch waits for data, whatever it asks.
const MAX_FETCH_WAIT: Duration = Duration::from_secs(30);

/// Looks up a partition this broker must lead: the partition, or the error to answer.
fn led_partition<'a>(
    st: &'a State,
    broker: i32,
    topic: Option<&'a Topic>,
    partition: i32,
    current_epoch: i32,
) -> Result<&'a Partition, KafkaCode> {
    let p = topic
        .and_then(|t| {
            usize::try_from(partition)
                .ok()
                .and_then(|i| t.partitions.get(i))
        })
        .ok_or(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION)?;
    if p.leader != broker || !st.is_up(broker) {
        return Err(KafkaCode::NOT_LEADER_OR_FOLLOWER);
    }
    check_epoch(current_epoch, p.leader_epoch)?;
    Ok(p)
}

/// KIP-320: a client's view of the leader epoch must be the current one (-1 skips it).
fn check_epoch(asked: i32, current: i32) -> Result<(), KafkaCode> {
    match asked {
        a if a < 0 || a == current => Ok(()),
        a if a < current => Err(KafkaCode::FENCED_LEADER_EPOCH),
        _ => Err(KafkaCode::UNKNOWN_LEADER_EPOCH),
    }
}

fn partition_mut<'a>(st: &'a mut State, topic: &str, partition: i32) -> Option<&'a mut Partition> {
    st.topics.get_mut(topic).and_then(|t| {
        usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get_mut(i))
    })
}

// ------------------------------------------------------------------ Metadata

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

// ------------------------------------------------------------------ topics admin

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
            match st.create_topic(
                &t.name,
                t.num_partitions,
                t.replication_factor,
                assignment,
                r.validate_only,
            ) {
                Ok(created) => CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_topic_id(created.id)
                    .with_num_partitions(created.partitions)
                    .with_replication_factor(created.replication)
                    .with_configs(Some(Vec::new())),
                Err(e) => failed(e.code, e.message),
            }
        })
        .collect();
    cx.notify();
    ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(topics))
}

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

// ------------------------------------------------------------------ Produce

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

// ------------------------------------------------------------------ Fetch

/// One pass over a Fetch request: the response and the record bytes in it, and
/// whether any partition failed (which answers at once).
fn fetch_once(
    st: &State,
    broker: i32,
    version: i16,
    r: &FetchRequest,
) -> (FetchResponse, usize, bool) {
    let max_bytes = if version >= 3 {
        usize::try_from(r.max_bytes).unwrap_or(0)
    } else {
        usize::MAX
    };
    let mut total = 0usize;
    let mut any_error = false;
    let mut endpoints = std::collections::BTreeSet::new();
    let responses = r
        .topics
        .iter()
        .map(|t| {
            let (name, topic) = if version >= 13 {
                match st.topic_by_id(t.topic_id) {
                    Some((n, topic)) => (Some(n.as_str()), Some(topic)),
                    None => (None, None),
                }
            } else {
                (Some(t.topic.as_str()), st.topics.get(&t.topic))
            };
            let partitions = t
                .partitions
                .iter()
                .map(|fp| {
                    let mut out = PartitionData::default()
                        .with_partition_index(fp.partition)
                        .with_high_watermark(-1);
                    if name.is_none() {
                        out.error_code = KafkaCode::UNKNOWN_TOPIC_ID.code();
                        any_error = true;
                        return out;
                    }
                    let p = match led_partition(
                        st,
                        broker,
                        topic,
                        fp.partition,
                        fp.current_leader_epoch,
                    ) {
                        Ok(p) => p,
                        Err(code) => {
                            out.error_code = code.code();
                            any_error = true;
                            if code == KafkaCode::NOT_LEADER_OR_FOLLOWER {
                                if let Some(p) = topic.and_then(|t| {
                                    usize::try_from(fp.partition)
                                        .ok()
                                        .and_then(|i| t.partitions.get(i))
                                }) {
                                    out.current_leader = fetch::LeaderIdAndEpoch::default()
                                        .with_leader_id(p.leader)
                                        .with_leader_epoch(p.leader_epoch);
                                    if p.leader >= 0 {
                                        endpoints.insert(p.leader);
                                    }
                                }
                            }
                            return out;
                        }
                    };
                    let log = &p.log;
                    out.high_watermark = log.high_watermark;
                    out.last_stable_offset = log.high_watermark;
                    out.log_start_offset = log.log_start;
                    if fp.fetch_offset < log.log_start || fp.fetch_offset > log.high_watermark {
                        out.error_code = KafkaCode::OFFSET_OUT_OF_RANGE.code();
                        any_error = true;
                        return out;
                    }
                    let limit = usize::try_from(fp.partition_max_bytes).unwrap_or(0);
                    let mut records = BytesMut::new();
                    for b in &log.batches[log.batch_index(fp.fetch_offset)..] {
                        let size = b.bytes.len();
                        // KIP-74: the first batch of the response goes out whatever its
                        // size, so a consumer can always make progress.
                        let first = total == 0 && records.is_empty();
                        if !first && (records.len() + size > limit || total + size > max_bytes) {
                            break;
                        }
                        records.extend_from_slice(&b.bytes);
                        total += size;
                    }
                    out.records = Some(records.freeze());
                    out
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    let node_endpoints = endpoints
        .into_iter()
        .filter_map(|id| {
            st.brokers.get(&id).map(|b| {
                fetch::NodeEndpoint::default()
                    .with_node_id(id)
                    .with_host(b.host.clone())
                    .with_port(b.port)
            })
        })
        .collect();
    (
        FetchResponse::default()
            .with_responses(responses)
            .with_node_endpoints(node_endpoints),
        total,
        any_error,
    )
}

pub(crate) fn fetch(cx: &Ctx<'_>, r: &FetchRequest) -> ResponseKind {
    if r.session_id != 0 {
        // No fetch sessions are ever created here (KIP-227: session id 0 in every
        // answer means "full fetches only"), so no id can be valid.
        return ResponseKind::Fetch(
            FetchResponse::default().with_error_code(KafkaCode::FETCH_SESSION_ID_NOT_FOUND.code()),
        );
    }
    let wait = Duration::from_millis(r.max_wait_ms.max(0) as u64).min(MAX_FETCH_WAIT);
    let deadline = Instant::now() + wait;
    let min_bytes = usize::try_from(r.min_bytes).unwrap_or(0);
    let mut st = cx.lock();
    loop {
        let (response, bytes, any_error) = fetch_once(&st, cx.broker, cx.request.version, r);
        if bytes >= min_bytes || any_error || Instant::now() >= deadline || cx.aborted(&st) {
            return ResponseKind::Fetch(response);
        }
        st = cx.wait(st, deadline);
    }
}

// ------------------------------------------------------------------ offsets

pub(crate) fn list_offsets(cx: &Ctx<'_>, r: &ListOffsetsRequest) -> ResponseKind {
    let st = cx.lock();
    let version = cx.request.version;
    let topics = r
        .topics
        .iter()
        .map(|t| {
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|lp| {
                            let p = match led_partition(
                                &st,
                                cx.broker,
                                st.topics.get(&t.name),
                                lp.partition_index,
                                lp.current_leader_epoch,
                            ) {
                                Ok(p) => p,
                                Err(code) => {
                                    return list_offsets_partition(
                                        lp.partition_index,
                                        code,
                                        None,
                                        version,
                                    );
                                }
                            };
                            let log = &p.log;
                            let found = match lp.timestamp {
                                -2 | -4 => Some((log.log_start, -1, p.leader_epoch)),
                                -1 => Some((log.high_watermark, -1, p.leader_epoch)),
                                -3 => log.max_timestamp(),
                                ts if ts >= 0 => log.offset_for_timestamp(ts),
                                _ => None,
                            };
                            list_offsets_partition(
                                lp.partition_index,
                                KafkaCode::NONE,
                                found,
                                version,
                            )
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
}

pub(crate) fn offset_for_leader_epoch(
    cx: &Ctx<'_>,
    r: &OffsetForLeaderEpochRequest,
) -> ResponseKind {
    let st = cx.lock();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|op| {
                            let mut out = EpochEndOffset::default()
                                .with_partition(op.partition)
                                .with_leader_epoch(-1)
                                .with_end_offset(-1);
                            match led_partition(
                                &st,
                                cx.broker,
                                st.topics.get(&t.topic),
                                op.partition,
                                op.current_leader_epoch,
                            ) {
                                Ok(p) => {
                                    let (epoch, end) =
                                        p.log.end_offset_for_epoch(op.leader_epoch, p.leader_epoch);
                                    out.leader_epoch = epoch;
                                    out.end_offset = end;
                                }
                                Err(code) => out.error_code = code.code(),
                            }
                            out
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics))
}

pub(crate) fn delete_records(cx: &Ctx<'_>, r: &DeleteRecordsRequest) -> ResponseKind {
    let mut st = cx.lock();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|dp| {
                            let mut out = DeleteRecordsPartitionResult::default()
                                .with_partition_index(dp.partition_index)
                                .with_low_watermark(-1);
                            if let Err(code) = led_partition(
                                &st,
                                cx.broker,
                                st.topics.get(&t.name),
                                dp.partition_index,
                                -1,
                            ) {
                                out.error_code = code.code();
                                return out;
                            }
                            let Some(p) = partition_mut(&mut st, &t.name, dp.partition_index)
                            else {
                                out.error_code = KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                                return out;
                            };
                            let offset = if dp.offset == -1 {
                                p.log.high_watermark
                            } else {
                                dp.offset
                            };
                            if offset < 0 || offset > p.log.high_watermark {
                                out.error_code = KafkaCode::OFFSET_OUT_OF_RANGE.code();
                                return out;
                            }
                            p.log.delete_before(offset);
                            out.low_watermark = p.log.log_start;
                            out
                        })
                        .collect(),
                )
        })
        .collect();
    drop(st);
    cx.notify();
    ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics))
}

// ------------------------------------------------------------------ coordinators, producer ids

pub(crate) fn find_coordinator(cx: &Ctx<'_>, r: &FindCoordinatorRequest) -> ResponseKind {
    let st = cx.lock();
    let lookup = |key: &str| -> Result<(i32, String, i32), KafkaCode> {
        if !matches!(r.key_type, 0 | 1) {
            return Err(KafkaCode::INVALID_REQUEST);
        }
        let id = st
            .coordinator(key)
            .ok_or(KafkaCode::COORDINATOR_NOT_AVAILABLE)?;
        let b = &st.brokers[&id];
        Ok((id, b.host.clone(), b.port))
    };
    let message = |code: KafkaCode| Some(code.name().to_string());
    if cx.request.version >= 4 {
        let coordinators = r
            .coordinator_keys
            .iter()
            .map(|k| match lookup(k) {
                Ok((node_id, host, port)) => Coordinator::default()
                    .with_key(k.clone())
                    .with_node_id(node_id)
                    .with_host(host)
                    .with_port(port)
                    .with_error_message(None),
                Err(code) => Coordinator::default()
                    .with_key(k.clone())
                    .with_node_id(-1)
                    .with_host(String::new())
                    .with_port(-1)
                    .with_error_code(code.code())
                    .with_error_message(message(code)),
            })
            .collect();
        return ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_coordinators(coordinators),
        );
    }
    ResponseKind::FindCoordinator(match lookup(&r.key) {
        Ok((node_id, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(node_id)
            .with_host(host)
            .with_port(port)
            .with_error_message(None),
        Err(code) => FindCoordinatorResponse::default()
            .with_error_code(code.code())
            .with_error_message(message(code))
            .with_node_id(-1)
            .with_host(String::new())
            .with_port(-1),
    })
}

pub(crate) fn init_producer_id(cx: &Ctx<'_>, r: &InitProducerIdRequest) -> ResponseKind {
    let mut st = cx.lock();
    let fail = |code: KafkaCode| {
        ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code.code())
                .with_producer_id(-1)
                .with_producer_epoch(-1),
        )
    };
    let (producer_id, producer_epoch) = match &r.transactional_id {
        // As Kafka's TransactionCoordinator: an empty id is not "no id".
        Some(txn) if txn.is_empty() => return fail(KafkaCode::INVALID_REQUEST),
        Some(txn) => {
            if st.coordinator(txn) != Some(cx.broker) {
                return fail(KafkaCode::NOT_COORDINATOR);
            }
            match st.transactional_ids.get(txn).copied() {
                Some((pid, epoch)) if epoch < i16::MAX - 1 => (pid, epoch + 1),
                _ => (st.allocate_producer_id(), 0),
            }
        }
        // KIP-360: an idempotent producer may ask to bump its epoch.
        None if r.producer_id >= 0 && r.producer_epoch >= 0 && r.producer_epoch < i16::MAX - 1 => {
            (r.producer_id, r.producer_epoch + 1)
        }
        None => (st.allocate_producer_id(), 0),
    };
    if let Some(txn) = &r.transactional_id {
        st.transactional_ids
            .insert(txn.clone(), (producer_id, producer_epoch));
    }
    ResponseKind::InitProducerId(
        InitProducerIdResponse::default()
            .with_producer_id(producer_id)
            .with_producer_epoch(producer_epoch),
    )
}
