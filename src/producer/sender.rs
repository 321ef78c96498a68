//! The sender: one task on a worker that seals lingering batches, gathers ready batches
//! per leader into Produce requests, handles the answers, retries, and keeps the
//! idempotent producer's sequences and epoch (KIP-98, KIP-360).
//!
//! Outcomes per batch, as the Java client does:
//! - NONE and DUPLICATE_SEQUENCE_NUMBER: acknowledged.
//! - retriable codes and connection errors: back to the head of the partition's queue
//!   (in sequence order) after a backoff, the partition holding new sends until its
//!   in-flight batches have answered; stale-metadata codes also refresh metadata.
//! - OUT_OF_ORDER_SEQUENCE_NUMBER: a retry when an earlier batch of the partition is
//!   being retried; otherwise a real gap, fixed by bumping the epoch.
//! - UNKNOWN_PRODUCER_ID: bump the epoch and resend.
//! - MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE: a batch of several records is split into
//!   one batch per record (the sequence range is unchanged) and resent, so only the
//!   record that is too large fails.
//! - anything else: the batch fails; with idempotence its sequences are a gap, so the
//!   epoch is bumped before anything more is sent.
//! - a batch past `delivery.timeout.ms` fails; if it was ever sent its fate is unknown,
//!   so with idempotence the epoch is bumped as well.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::accumulator::{Arena, BatchData, InFlight, PartitionState, QueuedBatch};
use super::arenas::next_class;
use super::record::{BatchAck, BatchShared};
use super::request::{PartitionBatch, ProduceBatches};
use super::{ProducerId, ProducerInner, TopicState};
use crate::client::is_stale_metadata;
use crate::error::{Error, Result};
use crate::io::Broker;
use crate::protocol::messages::{InitProducerIdRequest, ProduceResponse};
use crate::protocol::{ApiKey, KafkaCode, decode_response_body};
use crate::record::{BatchBuilder, BatchOptions, Decompressor, Header, RecordBatchRef};

/// Batch header offsets (record batch v2, `docs/implementation.html`).
const PRODUCER_ID_AT: usize = 43;
const CRC_AT: usize = 17;
const CRC_COVERS_FROM: usize = 21;

/// Most batches of one partition in flight with idempotence (what the broker tracks).
const MAX_IDEMPOTENT_IN_FLIGHT: usize = 5;

/// Obtains a producer id, or bumps the epoch of `current` (InitProducerId v3+).
pub(super) async fn init_producer_id(
    inner: &ProducerInner,
    current: Option<ProducerId>,
) -> Result<ProducerId> {
    let client = inner.client.clone();
    let timeout = inner.config.admin.timeout;
    let backoff = inner.config.admin.retry_backoff;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let runtime = client.runtime().clone();
    runtime.spawn_on(runtime.worker_for(-1), move |_| async move {
        let deadline = Instant::now() + timeout;
        let result = loop {
            let attempt = async {
                let broker = client.any_broker()?;
                broker.connect().await?;
                let version = broker
                    .api_versions()
                    .and_then(|v| v.version_for(ApiKey::InitProducerId))
                    .unwrap_or(0);
                let (id, epoch) = match current {
                    Some(c) if version >= 3 => (c.id, c.epoch),
                    _ => (-1, -1),
                };
                let response = broker
                    .send_version(
                        InitProducerIdRequest::default()
                            .with_transactional_id(None)
                            .with_transaction_timeout_ms(60_000)
                            .with_producer_id(id)
                            .with_producer_epoch(epoch),
                        version,
                    )
                    .await?;
                let code = KafkaCode(response.error_code);
                if !code.is_ok() {
                    return Err(Error::broker(code, ApiKey::InitProducerId, None, None));
                }
                Ok(ProducerId {
                    id: response.producer_id,
                    epoch: response.producer_epoch,
                })
            };
            match attempt.await {
                Ok(id) => break Ok(id),
                Err(e) if e.is_retriable() && Instant::now() + backoff < deadline => {
                    tokio::time::sleep(backoff).await;
                }
                Err(e) => break Err(e),
            }
        };
        let _ = tx.send(result);
    })?;
    rx.await.map_err(|_| Error::ShuttingDown)?
}

/// A batch taken off a partition queue into a request.
struct Outgoing {
    topic: Arc<str>,
    partition: i32,
    part: Arc<Mutex<PartitionState>>,
    batch: Bytes,
    records: i32,
    shared: Arc<BatchShared>,
    created: Instant,
    attempts: u32,
    base_sequence: Option<i32>,
    /// The k-th batch of its partition in this round: goes into request k.
    round: usize,
}

enum Verdict {
    Acked(BatchAck),
    Retry { error: Error, stale: bool },
    OutOfOrder(Error),
    UnknownProducer(Error),
    TooLarge(Error),
    Fatal(Error),
}

/// The sender loop. Ends once the producer is closed and nothing is left.
pub(super) async fn run(inner: Arc<ProducerInner>) {
    loop {
        if inner.bump_needed.load(Ordering::Acquire)
            && inner.in_flight_requests.load(Ordering::Acquire) == 0
        {
            bump_epoch(&inner).await;
        }
        let (next_wake, idle) = drain_round(&inner);
        if inner.closed.load(Ordering::Acquire)
            && idle
            && inner.in_flight_requests.load(Ordering::Acquire) == 0
        {
            break;
        }
        tokio::select! {
            _ = inner.wake.notified() => {}
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(next_wake)) => {}
        }
    }
    // Closed with the client gone or broken: nothing may wait forever.
    fail_everything(&inner, Error::ShuttingDown);
}

fn topics_of(inner: &ProducerInner) -> Vec<Arc<TopicState>> {
    inner
        .topics
        .read()
        .map(|t| t.values().cloned().collect())
        .unwrap_or_default()
}

/// Every partition of every topic the producer has seen.
pub(super) fn all_partitions(inner: &ProducerInner) -> Vec<Arc<Mutex<PartitionState>>> {
    topics_of(inner)
        .iter()
        .flat_map(|t| t.partitions.read().map(|p| p.clone()).unwrap_or_default())
        .collect()
}

fn fail_everything(inner: &ProducerInner, error: Error) {
    for part in all_partitions(inner) {
        if let Ok(mut s) = part.lock() {
            for shared in s.pending() {
                shared.complete(Err(error.clone()));
            }
            s.open = None;
            s.queue.clear();
            s.in_flight.clear();
        }
    }
}

/// Seals, expires and sends what is ready. Returns when to look again, and whether
/// nothing at all is pending.
fn drain_round(inner: &Arc<ProducerInner>) -> (Instant, bool) {
    let now = Instant::now();
    let config = &inner.config.producer;
    let flushing =
        inner.flushing.load(Ordering::Acquire) > 0 || inner.closing.load(Ordering::Acquire);
    let metadata = inner.client.metadata();
    let bumping = inner.bump_needed.load(Ordering::Acquire);
    let producer = inner.producer_id.lock().ok().and_then(|p| *p);
    let per_partition = if inner.idempotent() {
        MAX_IDEMPOTENT_IN_FLIGHT
    } else {
        inner.config.net.max_in_flight
    };
    let mut next = now + Duration::from_millis(250);
    let mut idle = true;
    let mut outgoing: HashMap<i32, Vec<Outgoing>> = HashMap::new();
    let mut refresh: Vec<Arc<str>> = Vec::new();

    for topic in topics_of(inner) {
        let parts = topic
            .partitions
            .read()
            .map(|p| p.clone())
            .unwrap_or_default();
        let topic_meta = metadata.topics.get(&*topic.name);
        for (index, part) in parts.iter().enumerate() {
            let Ok(mut s) = part.lock() else { continue };
            if let Some(open) = &s.open {
                if flushing || now >= open.created + config.linger {
                    // Sealed by time, not by size: a partition that used little of its
                    // arena gets a smaller one next.
                    let (used, arena) = (
                        open.builder.size(),
                        open.builder.size() + open.builder.remaining(),
                    );
                    s.arena_class =
                        next_class(s.arena_class, inner.arenas.largest(), false, used, arena);
                    let spare = inner.spare_arena(&s);
                    s.seal_open(inner.codec, spare);
                } else {
                    next = next.min(open.created + config.linger);
                }
            }
            if s.open.is_some() || !s.queue.is_empty() || !s.in_flight.is_empty() {
                idle = false;
            }
            expire(inner, &mut s, now);
            if bumping || s.queue.is_empty() {
                continue;
            }
            if s.hold_until_drained && !s.in_flight.is_empty() {
                continue;
            }
            if let Some(at) = s.retry_at {
                if at > now {
                    next = next.min(at);
                    continue;
                }
                s.retry_at = None;
            }
            let leader = topic_meta
                .and_then(|m| m.partitions.iter().find(|p| p.id == index as i32))
                .map_or(-1, |p| p.leader);
            if leader < 0 || inner.client.broker(leader).is_none() {
                refresh.push(topic.name.clone());
                next = next.min(now + config.retry_backoff);
                continue;
            }
            s.hold_until_drained = false;
            let limit = if inner.idempotent() && !s.acked_in_epoch {
                1
            } else {
                per_partition
            };
            let mut round = 0;
            while s.in_flight.len() < limit {
                let Some(mut q) = s.queue.pop_front() else {
                    break;
                };
                let bytes = match std::mem::replace(&mut q.data, BatchData::Frozen(Bytes::new())) {
                    BatchData::Frozen(b) => b,
                    BatchData::Sealed(mut sealed) => {
                        if let Some(p) = producer {
                            let seq = s.next_sequence;
                            s.next_sequence = s.next_sequence.wrapping_add(q.records);
                            sealed.set_producer_state(p.id, p.epoch, seq);
                            q.base_sequence = Some(seq);
                        }
                        sealed.into_inner().freeze()
                    }
                };
                s.in_flight.push_back(InFlight {
                    shared: q.shared.clone(),
                });
                outgoing.entry(leader).or_default().push(Outgoing {
                    topic: topic.name.clone(),
                    partition: index as i32,
                    part: part.clone(),
                    batch: bytes,
                    records: q.records,
                    shared: q.shared,
                    created: q.created,
                    attempts: q.attempts,
                    base_sequence: q.base_sequence,
                    round,
                });
                round += 1;
            }
        }
    }

    if !refresh.is_empty() {
        refresh.sort();
        refresh.dedup();
        let client = inner.client.clone();
        tokio::task::spawn_local(async move {
            let names: Vec<&str> = refresh.iter().map(|t| &**t).collect();
            let _ = client.refresh_after_error(&names).await;
        });
    }
    for (leader, batches) in outgoing {
        let Some(broker) = inner.client.broker(leader) else {
            for b in batches {
                settle(
                    inner,
                    b,
                    Verdict::Retry {
                        error: Error::NotConnected(leader),
                        stale: true,
                    },
                );
            }
            continue;
        };
        for request in build_requests(batches, inner.config.producer.max_request_size) {
            inner.in_flight_requests.fetch_add(1, Ordering::AcqRel);
            tokio::task::spawn_local(send_request(inner.clone(), broker.clone(), request));
        }
    }
    (next, idle)
}

/// Fails batches that waited past the delivery timeout without being in flight.
fn expire(inner: &ProducerInner, s: &mut PartitionState, now: Instant) {
    let timeout = inner.config.producer.delivery_timeout;
    let mut kept = std::collections::VecDeque::with_capacity(s.queue.len());
    while let Some(q) = s.queue.pop_front() {
        if now >= q.created + timeout {
            if q.sent && inner.idempotent() {
                inner.bump_needed.store(true, Ordering::Release);
            }
            q.shared.complete(Err(Error::Timeout(format!(
                "delivery.timeout.ms ({timeout:?}) expired after {} attempt(s)",
                q.attempts + u32::from(q.sent)
            ))));
        } else {
            kept.push_back(q);
        }
    }
    s.queue = kept;
}

/// Groups one leader's batches into requests: one batch per partition per request (as
/// brokers require for idempotent batches), each request under `max_request_size`.
fn build_requests(batches: Vec<Outgoing>, max_request_size: usize) -> Vec<Vec<Outgoing>> {
    let mut by_round: BTreeMap<usize, Vec<Outgoing>> = BTreeMap::new();
    for b in batches {
        by_round.entry(b.round).or_default().push(b);
    }
    let mut requests = Vec::new();
    for (_, round) in by_round {
        let mut current: Vec<Outgoing> = Vec::new();
        let mut size = 0;
        for b in round {
            let len = b.batch.len() + b.topic.len() + 16;
            if !current.is_empty() && size + len > max_request_size {
                requests.push(std::mem::take(&mut current));
                size = 0;
            }
            size += len;
            current.push(b);
        }
        if !current.is_empty() {
            requests.push(current);
        }
    }
    requests
}

async fn send_request(inner: Arc<ProducerInner>, broker: Broker, batches: Vec<Outgoing>) {
    let mut topics: Vec<(Arc<str>, Vec<PartitionBatch>)> = Vec::new();
    for b in &batches {
        let entry = PartitionBatch {
            partition: b.partition,
            batch: b.batch.clone(),
        };
        match topics.iter_mut().find(|(t, _)| Arc::ptr_eq(t, &b.topic)) {
            Some((_, v)) => v.push(entry),
            None => topics.push((b.topic.clone(), vec![entry])),
        }
    }
    let acks = inner.acks();
    let request = ProduceBatches {
        transactional_id: inner.config.producer.transactional_id.clone(),
        acks,
        timeout_ms: inner
            .config
            .net
            .request_timeout
            .as_millis()
            .min(i32::MAX as u128) as i32,
        topics,
        addr: Arc::from(broker.addr()),
    };
    let result = broker.send_raw(Box::new(request)).await;
    match result {
        Err(e) => {
            let error = Error::Io(e);
            for b in batches {
                settle(
                    &inner,
                    b,
                    Verdict::Retry {
                        error: error.clone(),
                        stale: true,
                    },
                );
            }
        }
        Ok(raw) if acks == 0 => {
            let _ = raw;
            for b in batches {
                settle(
                    &inner,
                    b,
                    Verdict::Acked(BatchAck {
                        base_offset: -1,
                        log_append_time: -1,
                    }),
                );
            }
        }
        Ok(raw) => match decode_response_body::<ProduceResponse>(raw.body, raw.version) {
            Err(e) => {
                for b in batches {
                    settle(&inner, b, Verdict::Fatal(Error::Decode(e.clone())));
                }
            }
            Ok(response) => {
                for b in batches {
                    let found = response
                        .responses
                        .iter()
                        .filter(|t| t.name == *b.topic)
                        .flat_map(|t| t.partition_responses.iter())
                        .find(|p| p.index == b.partition);
                    let verdict = match found {
                        None => Verdict::Fatal(Error::Batch(format!(
                            "the broker's answer left out {}-{}",
                            b.topic, b.partition
                        ))),
                        Some(p) => verdict_for(&b, p),
                    };
                    settle(&inner, b, verdict);
                }
            }
        },
    }
    inner.in_flight_requests.fetch_sub(1, Ordering::AcqRel);
    inner.wake.notify_one();
}

fn verdict_for(
    b: &Outgoing,
    p: &crate::protocol::messages::produce::PartitionProduceResponse,
) -> Verdict {
    let code = KafkaCode(p.error_code);
    let error = || Error::broker(code, ApiKey::Produce, Some(&b.topic), Some(b.partition));
    match code {
        KafkaCode::NONE => Verdict::Acked(BatchAck {
            base_offset: p.base_offset,
            log_append_time: p.log_append_time_ms,
        }),
        KafkaCode::DUPLICATE_SEQUENCE_NUMBER => Verdict::Acked(BatchAck {
            base_offset: p.base_offset,
            log_append_time: p.log_append_time_ms,
        }),
        KafkaCode::OUT_OF_ORDER_SEQUENCE_NUMBER => Verdict::OutOfOrder(error()),
        KafkaCode::UNKNOWN_PRODUCER_ID => Verdict::UnknownProducer(error()),
        KafkaCode::MESSAGE_TOO_LARGE | KafkaCode::RECORD_LIST_TOO_LARGE => {
            Verdict::TooLarge(error())
        }
        c if c.is_retriable() => Verdict::Retry {
            error: error(),
            stale: is_stale_metadata(c),
        },
        _ => Verdict::Fatal(error()),
    }
}

fn backoff_for(inner: &ProducerInner, attempts: u32) -> Duration {
    let p = &inner.config.producer;
    p.retry_backoff
        .saturating_mul(1u32 << attempts.min(16))
        .min(p.retry_backoff_max)
}

/// Applies a verdict to a batch that came back.
fn settle(inner: &Arc<ProducerInner>, b: Outgoing, verdict: Verdict) {
    let part = b.part.clone();
    let Ok(mut s) = part.lock() else { return };
    s.finish_in_flight(&b.shared);
    let idempotent = inner.idempotent();
    let requeue = |s: &mut PartitionState, b: Outgoing| {
        s.requeue(QueuedBatch {
            data: BatchData::Frozen(b.batch),
            records: b.records,
            shared: b.shared,
            created: b.created,
            attempts: b.attempts + 1,
            base_sequence: b.base_sequence,
            sent: true,
        });
        s.hold_until_drained = true;
    };
    let expired = Instant::now() >= b.created + inner.config.producer.delivery_timeout;
    let out_of_retries = b.attempts >= inner.config.producer.retries;
    match verdict {
        Verdict::Acked(ack) => {
            s.acked_in_epoch = true;
            b.shared.complete(Ok(ack));
        }
        Verdict::Retry { error, .. }
        | Verdict::OutOfOrder(error)
        | Verdict::UnknownProducer(error)
            if expired || out_of_retries =>
        {
            if idempotent {
                inner.bump_needed.store(true, Ordering::Release);
            }
            b.shared.complete(Err(error));
        }
        Verdict::Retry { error, stale } => {
            tracing::debug!(topic = %b.topic, partition = b.partition, %error, "produce retry");
            if stale {
                let client = inner.client.clone();
                let topic = b.topic.clone();
                tokio::task::spawn_local(async move {
                    let _ = client.refresh_after_error(&[&topic]).await;
                });
            }
            s.retry_at = Some(Instant::now() + backoff_for(inner, b.attempts));
            requeue(&mut s, b);
        }
        Verdict::OutOfOrder(error) => {
            // An earlier batch of this partition already came back for a retry: this one
            // is out of order only because of it.
            let earlier_retry = match b.base_sequence {
                Some(seq) => s
                    .queue
                    .iter()
                    .any(|q| q.base_sequence.is_some_and(|x| x < seq)),
                None => false,
            };
            if !earlier_retry && idempotent {
                tracing::warn!(topic = %b.topic, partition = b.partition, %error, "sequence gap: bumping the producer epoch");
                inner.bump_needed.store(true, Ordering::Release);
            }
            requeue(&mut s, b);
        }
        Verdict::UnknownProducer(error) => {
            tracing::warn!(topic = %b.topic, partition = b.partition, %error, "bumping the producer epoch");
            inner.bump_needed.store(true, Ordering::Release);
            requeue(&mut s, b);
        }
        Verdict::TooLarge(error) if b.records > 1 => match split(&b, inner) {
            Ok(parts) => {
                let children: Vec<Arc<BatchShared>> =
                    parts.iter().map(|q| q.shared.clone()).collect();
                b.shared.split_into(children);
                for q in parts.into_iter().rev() {
                    s.requeue(q);
                }
                s.hold_until_drained = true;
            }
            Err(e) => {
                tracing::warn!(%e, "could not split an oversized batch");
                if idempotent {
                    inner.bump_needed.store(true, Ordering::Release);
                }
                b.shared.complete(Err(error));
            }
        },
        Verdict::TooLarge(error) | Verdict::Fatal(error) => {
            if idempotent {
                inner.bump_needed.store(true, Ordering::Release);
            }
            b.shared.complete(Err(error));
        }
    }
}

/// One single-record batch per record of `b`, with the sequences `b` had (so the
/// partition's sequence range does not change).
fn split(b: &Outgoing, inner: &ProducerInner) -> Result<Vec<QueuedBatch>> {
    let batch_err = |e: crate::record::RecordError| Error::Batch(e.to_string());
    let batch = RecordBatchRef::new(&b.batch).map_err(batch_err)?;
    let mut decompressor =
        Decompressor::new(inner.config.producer.max_request_size.max(1 << 20) * 4);
    let mut scratch = Vec::new();
    let records = batch
        .decompress_records(&mut decompressor, &mut scratch)
        .map_err(batch_err)?;
    let mut out = Vec::new();
    for (i, r) in records.enumerate() {
        let r = r.map_err(batch_err)?;
        let headers: Vec<Header<'_>> = r
            .headers()
            .map(|h| {
                let h = h.map_err(batch_err)?;
                Ok(Header {
                    key: h.key_str().map_err(batch_err)?,
                    value: h.value,
                })
            })
            .collect::<Result<_>>()?;
        let size = crate::record::BATCH_HEADER_LEN
            + crate::record::record_encoded_len(0, 0, r.key(), r.value(), &headers);
        let mut options = BatchOptions::default().with_max_size(size);
        if let Some(seq) = b.base_sequence {
            options =
                options.with_producer(batch.producer_id(), batch.producer_epoch(), seq + i as i32);
        }
        let mut builder = BatchBuilder::new(Arena::Heap(Vec::with_capacity(size)), options)
            .map_err(|e| Error::Batch(e.to_string()))?;
        builder
            .append(r.timestamp(), r.key(), r.value(), &headers)
            .map_err(|e| Error::Batch(e.to_string()))?;
        let sealed = builder.seal().map_err(|e| Error::Batch(e.to_string()))?;
        out.push(QueuedBatch {
            data: BatchData::Frozen(sealed.into_inner().freeze()),
            records: 1,
            shared: BatchShared::new(),
            created: b.created,
            attempts: b.attempts,
            base_sequence: b.base_sequence.map(|s| s + i as i32),
            sent: false,
        });
    }
    Ok(out)
}

/// Rewrites a sealed batch's producer id, epoch and base sequence (and its CRC), in a
/// copy: only after an epoch bump, when a sent batch must be resent under the new epoch.
fn restamp(batch: &Bytes, producer: ProducerId, base_sequence: i32) -> Bytes {
    let mut v = batch.to_vec();
    if v.len() >= crate::record::BATCH_HEADER_LEN {
        v[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer.id.to_be_bytes());
        v[PRODUCER_ID_AT + 8..PRODUCER_ID_AT + 10].copy_from_slice(&producer.epoch.to_be_bytes());
        v[PRODUCER_ID_AT + 10..PRODUCER_ID_AT + 14].copy_from_slice(&base_sequence.to_be_bytes());
        let crc = crc32c::crc32c(&v[CRC_COVERS_FROM..]);
        v[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }
    Bytes::from(v)
}

/// Bumps the epoch (nothing is in flight) and renumbers every waiting batch from 0.
async fn bump_epoch(inner: &Arc<ProducerInner>) {
    let current = inner.producer_id.lock().ok().and_then(|p| *p);
    match init_producer_id(inner, current).await {
        Ok(new) => {
            tracing::info!(
                producer_id = new.id,
                epoch = new.epoch,
                "producer epoch bumped"
            );
            if let Ok(mut slot) = inner.producer_id.lock() {
                *slot = Some(new);
            }
            for part in all_partitions(inner) {
                let Ok(mut s) = part.lock() else { continue };
                s.next_sequence = 0;
                let mut next = 0i32;
                for q in s.queue.iter_mut() {
                    if let BatchData::Frozen(bytes) = &q.data {
                        q.data = BatchData::Frozen(restamp(bytes, new, next));
                        q.base_sequence = Some(next);
                        next = next.wrapping_add(q.records);
                    }
                }
                s.next_sequence = next;
                s.hold_until_drained = false;
                s.acked_in_epoch = false;
            }
            inner.bump_needed.store(false, Ordering::Release);
        }
        Err(e) => {
            tracing::warn!(error = %e, "producer epoch bump failed; retrying");
            tokio::time::sleep(inner.config.producer.retry_backoff).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restamp_rewrites_producer_state_and_crc() {
        let options = BatchOptions::default().with_producer(7, 1, 10);
        let mut b = BatchBuilder::new(Vec::with_capacity(1024), options).unwrap();
        b.append(1, Some(b"k"), Some(b"v"), &[]).unwrap();
        let sealed = Bytes::from(b.seal().unwrap().into_inner());
        let stamped = restamp(&sealed, ProducerId { id: 99, epoch: 4 }, 0);
        let batch = RecordBatchRef::new(&stamped).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(
            (
                batch.producer_id(),
                batch.producer_epoch(),
                batch.base_sequence()
            ),
            (99, 4, 0)
        );
        assert_eq!(batch.records().unwrap().count(), 1);
    }
}
