//! Fetch (API 1), with long polling up to `max_wait_ms` (capped at 30 s). A
//! read_committed fetch returns the batches below the last stable offset and the
//! aborted transactions among them, as a broker reads its transaction index.
//! Follower fetching (KIP-392): for a partition with a preferred read replica, the
//! leader answers a v11+ Fetch that names a rack with that replica and no records (as
//! the broker's `ReplicaManager` skips the read), and the replica serves it.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use kring::protocol::messages::{
    FetchRequest, FetchResponse,
    fetch::{self, FetchableTopicResponse, PartitionData},
};
use kring::protocol::{KafkaCode, ResponseKind};

use super::served_partition;
use crate::cluster::Ctx;
use crate::cluster::state::State;

/// The longest a Fetch waits for data, whatever it asks.
const MAX_FETCH_WAIT: Duration = Duration::from_secs(30);

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
                    let p = match served_partition(
                        st,
                        broker,
                        topic,
                        fp.partition,
                        fp.current_leader_epoch,
                        version >= 11,
                    ) {
                        Ok(p) => p,
                        Err(code) => {
                            out.error_code = code.code();
                            any_error = true;
                            // KIP-951: say who leads now.
                            if code == KafkaCode::NOT_LEADER_OR_FOLLOWER
                                || code == KafkaCode::FENCED_LEADER_EPOCH
                            {
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
                    out.last_stable_offset = log.last_stable_offset();
                    out.log_start_offset = log.log_start;
                    if version >= 12
                        && let Some(diverging) = diverging_epoch(p, fp)
                    {
                        out.diverging_epoch = diverging;
                        any_error = true;
                        return out;
                    }
                    if fp.fetch_offset < log.log_start || fp.fetch_offset > log.high_watermark {
                        out.error_code = KafkaCode::OFFSET_OUT_OF_RANGE.code();
                        any_error = true;
                        return out;
                    }
                    if let Some(replica) = redirect_to(st, p, broker, version, r) {
                        out.preferred_read_replica = replica;
                        out.records = Some(bytes::Bytes::new());
                        // Answered at once, as a broker does.
                        any_error = true;
                        return out;
                    }
                    let limit = usize::try_from(fp.partition_max_bytes).unwrap_or(0);
                    // read_committed (v4+) sees only what is below the last stable
                    // offset, with the aborted transactions in that range (KIP-98).
                    let read_committed = version >= 4 && r.isolation_level == 1;
                    let visible_end = if read_committed {
                        log.last_stable_offset()
                    } else {
                        log.high_watermark
                    };
                    let mut records = BytesMut::new();
                    let mut end = fp.fetch_offset;
                    for b in &log.batches[log.batch_index(fp.fetch_offset)..] {
                        if b.base_offset >= visible_end {
                            break;
                        }
                        let size = b.bytes.len();
                        // KIP-74: the first batch of the response goes out whatever its
                        // size, so a consumer can always make progress.
                        let first = total == 0 && records.is_empty();
                        if !first && (records.len() + size > limit || total + size > max_bytes) {
                            break;
                        }
                        records.extend_from_slice(&b.bytes);
                        total += size;
                        end = b.next_offset;
                    }
                    if read_committed {
                        out.aborted_transactions = Some(
                            log.aborted_between(fp.fetch_offset, end)
                                .into_iter()
                                .map(|a| {
                                    fetch::AbortedTransaction::default()
                                        .with_producer_id(a.producer_id)
                                        .with_first_offset(a.first_offset)
                                })
                                .collect(),
                        );
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

/// The preferred read replica the leader names to this Fetch (KIP-392): only to a
/// consumer that gives its rack (v11+), and only a follower that is up.
fn redirect_to(
    st: &State,
    p: &crate::cluster::state::Partition,
    broker: i32,
    version: i16,
    r: &FetchRequest,
) -> Option<i32> {
    let replica = p.preferred_read_replica?;
    (version >= 11
        && !r.rack_id.is_empty()
        && p.leader == broker
        && replica != broker
        && st.is_up(replica))
    .then_some(replica)
}

/// KIP-320 (Fetch v12+): when the log holds no batch of the last fetched epoch up to
/// the fetch offset (its epoch ended earlier, or the records were truncated), the end
/// of that epoch in this log, which the consumer truncates to, as a broker answers it
/// before reading the log.
fn diverging_epoch(
    p: &crate::cluster::state::Partition,
    fp: &fetch::FetchPartition,
) -> Option<fetch::EpochEndOffset> {
    if fp.last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end) = p
        .log
        .end_offset_for_epoch(fp.last_fetched_epoch, p.leader_epoch);
    (epoch < fp.last_fetched_epoch || end < fp.fetch_offset).then(|| {
        fetch::EpochEndOffset::default()
            .with_epoch(epoch)
            .with_end_offset(end)
    })
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
