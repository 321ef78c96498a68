//! The fetcher: one task per broker (on a worker) that sends one Fetch for every
//! partition consumed from that broker, keeps a KIP-227 incremental fetch session, and
//! hands each partition its slice of the response, zero-copy.
//!
//! Invariants:
//! - The whole response is one buffer; a partition's records are a `Bytes` slice of it.
//!   The response's size is charged to the consumer's memory budget until the last slice
//!   of it is dropped, and the fetcher waits for budget before the next Fetch: memory
//!   for queued fetch data is bounded and the fetcher is backpressured.
//! - The fetcher keeps each partition's fetch position: after a response it moves to the
//!   end of the last complete batch, so the next Fetch is in flight while users read the
//!   current one (prefetch). A batch cut at the end of a response is fetched again whole.
//! - In an incremental session a partition is sent only when its fetch position changed;
//!   session errors fall back to a full fetch. Paused partitions leave the session.
//! - Errors that mean the leader moved hand the partition back to the consumer, which
//!   finds the new leader; OFFSET_OUT_OF_RANGE applies the reset policy.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::buf::{MemoryBudget, Permit};
use crate::client::is_stale_metadata;
use crate::config::{IsolationLevel, OffsetReset};
use crate::error::Error;
use crate::io::Broker;
use crate::protocol::messages::fetch::{FetchPartition, FetchTopic, ForgottenTopic};
use crate::protocol::messages::{FetchRequest, FetchResponse};
use crate::protocol::{ApiKey, KafkaCode, Uuid};
use crate::record::RecordBatchRef;

use super::ConsumerInner;

/// A partition's fetched data, a slice of one response.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub records: Bytes,
    pub aborted: Vec<(i64, i64)>,
    /// Keeps the response's memory charged until every slice of it is gone.
    pub _permit: Arc<Permit>,
}

/// What a partition consumer receives.
#[derive(Debug)]
pub(crate) enum Delivery {
    Chunk(Chunk),
    /// The position moved (the reset policy after OFFSET_OUT_OF_RANGE).
    Reset(i64),
    Error(Error),
}

/// State shared by a partition consumer and whichever fetcher serves it.
#[derive(Debug)]
pub(crate) struct PartitionShared {
    pub topic: Arc<str>,
    pub partition: i32,
    /// The next offset to fetch.
    pub fetch_position: AtomicI64,
    pub high_watermark: AtomicI64,
    pub paused: AtomicBool,
    pub closed: AtomicBool,
    pub tx: mpsc::Sender<Delivery>,
    /// A separate error channel, when the user asked for one.
    pub errors: std::sync::Mutex<Option<mpsc::Sender<super::ConsumerError>>>,
    /// Wakes the serving fetcher when the consumer has taken a chunk (room again), or
    /// was paused, resumed or closed.
    pub wake: std::sync::Mutex<Option<Arc<tokio::sync::Notify>>>,
}

impl PartitionShared {
    /// Tells the fetcher serving this partition that something changed.
    pub fn wake_fetcher(&self) {
        if let Some(w) = self.wake.lock().ok().and_then(|w| w.clone()) {
            w.notify_one();
        }
    }
}

impl PartitionShared {
    /// Reports an error: on the user's error channel if there is one with room, else inline.
    pub fn report(&self, error: Error) {
        let e = super::ConsumerError {
            topic: self.topic.to_string(),
            partition: self.partition,
            error,
        };
        let channel = self.errors.lock().ok().and_then(|c| c.clone());
        let e = match channel {
            Some(tx) => match tx.try_send(e) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(e) | mpsc::error::TrySendError::Closed(e)) => e,
            },
            None => e,
        };
        let _ = self.tx.try_send(Delivery::Error(e.error));
    }
}

pub(crate) enum Command {
    Add(Arc<PartitionShared>),
}

/// Session state (KIP-227).
#[derive(Debug, Default)]
struct Session {
    id: i32,
    epoch: i32,
    /// What the broker's session holds: (topic, partition) → fetch offset sent.
    sent: HashMap<(Arc<str>, i32), i64>,
}

impl Session {
    fn reset(&mut self) {
        *self = Session::default();
    }
}

fn key(p: &PartitionShared) -> (Arc<str>, i32) {
    (p.topic.clone(), p.partition)
}

/// The fetcher loop for one broker. Ends when the consumer is gone and no partition
/// remains.
pub(crate) async fn run(
    consumer: Weak<ConsumerInner>,
    broker: Broker,
    mut commands: mpsc::Receiver<Command>,
    budget: MemoryBudget,
) {
    let mut partitions: Vec<Arc<PartitionShared>> = Vec::new();
    let mut session = Session::default();
    // Whether the last turn already gave full consumers a moment to make room.
    let mut waited_for_room = false;
    let wake = Arc::new(tokio::sync::Notify::new());
    let adopt = |p: &Arc<PartitionShared>| {
        if let Ok(mut w) = p.wake.lock() {
            *w = Some(wake.clone());
        }
    };
    loop {
        // Take new partitions; with none, wait for one.
        while let Ok(Command::Add(p)) = commands.try_recv() {
            adopt(&p);
            partitions.push(p);
        }
        partitions.retain(|p| !p.closed.load(Ordering::Acquire) && !p.tx.is_closed());
        if partitions.is_empty() {
            session.reset();
            match commands.recv().await {
                Some(Command::Add(p)) => {
                    adopt(&p);
                    partitions.push(p);
                    continue;
                }
                None => return,
            }
        }
        let Some(inner) = consumer.upgrade() else {
            return;
        };
        let config = inner.config.clone();
        // Only partitions whose consumer has room take part (prefetch, bounded).
        let active: Vec<Arc<PartitionShared>> = partitions
            .iter()
            .filter(|p| !p.paused.load(Ordering::Acquire) && p.tx.capacity() > 0)
            .cloned()
            .collect();
        let states: Vec<FetchState> = partitions.iter().map(|p| FetchState::of(p)).collect();
        let short_poll = nothing_worth_fetching(&states);
        if active.is_empty() || (short_poll && !waited_for_room) {
            drop(inner);
            // Every consumer is full or paused: wait until one takes a chunk. Or only
            // caught-up partitions could be fetched while others wait for room: give
            // those a moment first, then fetch with a short poll (below), so the
            // caught-up ones still see new data soon if the others stay full.
            let pause = if active.is_empty() {
                Duration::from_millis(100)
            } else {
                SHORT_POLL
            };
            // Only a pause that ran out counts: a wake-up (a consumer took a chunk, maybe
            // of a caught-up partition) means looking again, still without a short poll.
            waited_for_room = false;
            tokio::select! {
                c = commands.recv() => match c {
                    Some(Command::Add(p)) => {
                        adopt(&p);
                        partitions.push(p);
                    }
                    None => return,
                },
                _ = wake.notified() => {}
                _ = tokio::time::sleep(pause) => waited_for_room = !active.is_empty(),
            }
            continue;
        }
        waited_for_room = false;
        // Reserve what this fetch can bring back (each active partition's maximum, capped
        // by the request maximum), not always the request maximum: fetchers of several
        // brokers share the budget and must be able to fetch at the same time.
        let max_bytes = (active.len() * config.consumer.max_partition_fetch_bytes.max(1) as usize)
            .min(config.consumer.fetch_max_bytes.max(1) as usize)
            .min(budget.capacity());
        let permit = match budget.acquire(max_bytes).await {
            Ok(p) => p,
            Err(_) => return,
        };
        let version = broker
            .api_versions()
            .and_then(|v| v.version_for(ApiKey::Fetch))
            .unwrap_or(12);
        let mut request = build_request(&inner, &active, &mut session, version)
            .with_max_bytes(i32::try_from(max_bytes).unwrap_or(i32::MAX));
        if short_poll {
            request.max_wait_ms = request.max_wait_ms.min(SHORT_POLL.as_millis() as i32);
        }
        let response = broker.send_version(request, version).await;
        let metadata = inner.client.metadata();
        let ids: HashMap<Uuid, Arc<str>> = active
            .iter()
            .filter_map(|p| {
                metadata
                    .topics
                    .get(&*p.topic)
                    .map(|t| (t.id, p.topic.clone()))
            })
            .collect();
        drop(metadata);
        let response = match response {
            Ok(r) => r,
            Err(e) => {
                session.reset();
                tracing::debug!(broker = broker.addr(), error = %e, "fetch failed");
                // The connection broke or timed out: partitions find their leader again.
                let moved: Vec<_> = std::mem::take(&mut partitions);
                drop(permit);
                inner.reroute(moved, Duration::from_millis(100));
                return;
            }
        };
        let code = KafkaCode(response.error_code);
        if code == KafkaCode::FETCH_SESSION_ID_NOT_FOUND
            || code == KafkaCode::INVALID_FETCH_SESSION_EPOCH
        {
            session.reset();
            continue;
        }
        if !code.is_ok() {
            tracing::warn!(broker = broker.addr(), %code, "fetch error");
            session.reset();
            drop(permit);
            tokio::time::sleep(config.admin.retry_backoff).await;
            continue;
        }
        if response.session_id != 0 || session.id != 0 {
            session.id = response.session_id;
            session.epoch = if session.id == 0 {
                0
            } else {
                session.epoch.wrapping_add(1).max(1)
            };
        }
        let used: usize = response
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.records.as_ref().map_or(0, Bytes::len))
            .sum();
        let mut permit = permit;
        permit.shrink_to(used.max(1));
        let permit = Arc::new(permit);
        let mut moved = Vec::new();
        let mut reset = Vec::new();
        handle_response(
            response, version, &ids, &active, &permit, &mut moved, &mut reset,
        );
        if !moved.is_empty() {
            let gone: HashSet<(Arc<str>, i32)> = moved
                .iter()
                .map(|p: &Arc<PartitionShared>| key(p))
                .collect();
            partitions.retain(|p| !gone.contains(&key(p)));
            for k in &gone {
                session.sent.remove(k);
            }
            inner.reroute(moved, config.metadata.refresh_backoff);
        }
        for p in reset {
            session.sent.remove(&key(&p));
            if let Err(e) = inner.reset_offset(&p).await {
                p.report(e);
            }
        }
    }
}

/// What the fetch loop needs to know of one partition to decide whether to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FetchState {
    paused: bool,
    /// Its consumer has room for another chunk.
    has_room: bool,
    fetch_position: i64,
    /// -1 until a fetch reported it.
    high_watermark: i64,
}

impl FetchState {
    fn of(p: &PartitionShared) -> Self {
        FetchState {
            paused: p.paused.load(Ordering::Acquire),
            has_room: p.tx.capacity() > 0,
            fetch_position: p.fetch_position.load(Ordering::Acquire),
            high_watermark: p.high_watermark.load(Ordering::Acquire),
        }
    }
}

/// How long a fetcher whose only fetchable partitions are caught up waits for others to
/// make room, and the longest the broker may hold such a fetch.
const SHORT_POLL: Duration = Duration::from_millis(20);

/// Whether a fetch now would only long-poll while other partitions wait for room.
///
/// When every partition that could take part has already reached the end of its log,
/// the broker holds the fetch for fetch_max_wait. With others left out only because
/// their consumer hasn't taken what was fetched, that long poll (one fetch in flight per
/// broker) would keep them from being fetched as soon as their consumers catch up, and
/// the whole read would crawl at one fetch per fetch_max_wait. The fetcher then waits up
/// to [`SHORT_POLL`] for room and, failing that, fetches with a poll no longer than
/// that: the caught-up partitions still see new data within tens of milliseconds while
/// a slow consumer keeps the others full.
fn nothing_worth_fetching(states: &[FetchState]) -> bool {
    let waiting_for_room = states.iter().any(|s| !s.paused && !s.has_room);
    let mut active = states.iter().filter(|s| !s.paused && s.has_room).peekable();
    waiting_for_room
        && active.peek().is_some()
        && active.all(|s| s.high_watermark >= 0 && s.fetch_position >= s.high_watermark)
}

fn build_request(
    inner: &ConsumerInner,
    active: &[Arc<PartitionShared>],
    session: &mut Session,
    version: i16,
) -> FetchRequest {
    let c = &inner.config.consumer;
    let metadata = inner.client.metadata();
    let sessions = version >= 7;
    let full = !sessions || session.id == 0;
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut current: HashMap<(Arc<str>, i32), i64> = HashMap::new();
    for p in active {
        let offset = p.fetch_position.load(Ordering::Acquire);
        current.insert(key(p), offset);
        if !full && session.sent.get(&key(p)) == Some(&offset) {
            continue;
        }
        let topic_id = metadata.topics.get(&*p.topic).map_or(Uuid::ZERO, |t| t.id);
        let part = FetchPartition::default()
            .with_partition(p.partition)
            .with_current_leader_epoch(-1)
            .with_fetch_offset(offset)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(c.max_partition_fetch_bytes);
        match topics.iter_mut().find(|t| t.topic == *p.topic) {
            Some(t) => t.partitions.push(part),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(if version < 13 {
                        p.topic.to_string()
                    } else {
                        String::new()
                    })
                    .with_topic_id(if version >= 13 { topic_id } else { Uuid::ZERO })
                    .with_partitions(vec![part]),
            ),
        }
    }
    let mut forgotten: Vec<ForgottenTopic> = Vec::new();
    if !full {
        for (t, partition) in session.sent.keys() {
            if current.contains_key(&(t.clone(), *partition)) {
                continue;
            }
            let topic_id = metadata.topics.get(&**t).map_or(Uuid::ZERO, |m| m.id);
            match forgotten.iter_mut().find(|f| f.topic == **t) {
                Some(f) => f.partitions.push(*partition),
                None => forgotten.push(
                    ForgottenTopic::default()
                        .with_topic(if version < 13 {
                            t.to_string()
                        } else {
                            String::new()
                        })
                        .with_topic_id(if version >= 13 { topic_id } else { Uuid::ZERO })
                        .with_partitions(vec![*partition]),
                ),
            }
        }
    }
    session.sent = current;
    let (id, epoch) = if !sessions {
        (0, -1)
    } else if full {
        (0, 0)
    } else {
        (session.id, session.epoch)
    };
    let mut request = FetchRequest::default()
        .with_max_wait_ms(c.fetch_max_wait.as_millis().min(i32::MAX as u128) as i32)
        .with_min_bytes(c.fetch_min_bytes)
        .with_max_bytes(c.fetch_max_bytes)
        .with_isolation_level(match c.isolation_level {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        })
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten);
    if sessions {
        request = request.with_session_id(id).with_session_epoch(epoch);
    }
    if version <= 14 {
        request = request.with_replica_id(-1);
    }
    request
}

#[allow(clippy::too_many_arguments)]
fn handle_response(
    response: FetchResponse,
    version: i16,
    ids: &HashMap<Uuid, Arc<str>>,
    active: &[Arc<PartitionShared>],
    permit: &Arc<Permit>,
    moved: &mut Vec<Arc<PartitionShared>>,
    reset: &mut Vec<Arc<PartitionShared>>,
) {
    for topic in response.responses {
        let name: Option<Arc<str>> = if version >= 13 {
            ids.get(&topic.topic_id).cloned()
        } else {
            Some(Arc::from(topic.topic.as_str()))
        };
        let Some(name) = name else { continue };
        for data in topic.partitions {
            let Some(p) = active
                .iter()
                .find(|p| *p.topic == *name && p.partition == data.partition_index)
            else {
                continue;
            };
            let code = KafkaCode(data.error_code);
            if code == KafkaCode::OFFSET_OUT_OF_RANGE {
                reset.push(p.clone());
                continue;
            }
            if is_stale_metadata(code) || code == KafkaCode::NOT_LEADER_OR_FOLLOWER {
                moved.push(p.clone());
                continue;
            }
            if !code.is_ok() {
                p.report(Error::broker(
                    code,
                    ApiKey::Fetch,
                    Some(&p.topic),
                    Some(p.partition),
                ));
                continue;
            }
            p.high_watermark
                .store(data.high_watermark, Ordering::Release);
            let records = data.records.unwrap_or_default();
            if records.is_empty() {
                continue;
            }
            // Advance past the last complete batch; a cut batch is fetched again.
            let start = p.fetch_position.load(Ordering::Acquire);
            let mut next = start;
            let mut rest: &[u8] = &records;
            loop {
                match RecordBatchRef::parse(rest) {
                    Ok(Some((batch, tail))) => {
                        next = next.max(batch.next_offset());
                        rest = tail;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        p.report(Error::Batch(format!(
                            "{}-{} at offset {next}: {e}",
                            p.topic, p.partition
                        )));
                        break;
                    }
                }
            }
            if next == start {
                continue;
            }
            let complete = records.len() - rest.len();
            let chunk = Chunk {
                records: records.slice(..complete),
                aborted: data
                    .aborted_transactions
                    .unwrap_or_default()
                    .iter()
                    .map(|a| (a.producer_id, a.first_offset))
                    .collect(),
                _permit: permit.clone(),
            };
            match p.tx.try_send(Delivery::Chunk(chunk)) {
                Ok(()) => p.fetch_position.store(next, Ordering::Release),
                Err(_) => {
                    // No room (or gone): fetched again later from the same position.
                }
            }
        }
    }
}

/// Where a partition starts or resets to, resolved with ListOffsets at its leader.
pub(crate) fn reset_timestamp(policy: OffsetReset) -> Option<i64> {
    match policy {
        OffsetReset::Earliest => Some(-2),
        OffsetReset::Latest => Some(-1),
        OffsetReset::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(paused: bool, has_room: bool, position: i64, high_watermark: i64) -> FetchState {
        FetchState {
            paused,
            has_room,
            fetch_position: position,
            high_watermark,
        }
    }

    #[test]
    fn caught_up_partitions_do_not_long_poll_while_others_wait_for_room() {
        // One partition at its end, two full: wait for room instead of a long poll.
        let full = state(false, false, 10, 500);
        let at_end = state(false, true, 700, 700);
        assert!(nothing_worth_fetching(&[full, full, at_end]));
        // One with data to fetch: fetch (the broker answers at once).
        let behind = state(false, true, 10, 500);
        assert!(!nothing_worth_fetching(&[full, behind, at_end]));
        // Everything caught up and nothing waiting: the long poll is what we want.
        assert!(!nothing_worth_fetching(&[at_end, at_end]));
        // High watermark not known yet: fetch.
        assert!(!nothing_worth_fetching(&[full, state(false, true, 0, -1)]));
        // Paused partitions neither wait for room nor take part.
        let paused_full = state(true, false, 10, 500);
        assert!(!nothing_worth_fetching(&[paused_full, at_end]));
        // Nothing active at all is the caller's other case.
        assert!(!nothing_worth_fetching(&[full]));
    }
}
