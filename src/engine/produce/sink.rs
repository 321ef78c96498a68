//! The producer's sink for one broker, sans-IO (franz-go's `sink` is the model): it owns
//! the partitions that broker leads, seals their lingering batches, drains them into
//! Produce requests (one batch per partition per request, as brokers require), and
//! applies the broker's answers. It runs on the worker that owns the broker's socket, so
//! a sealed batch goes from its partition to the socket write on one thread, and a
//! drain touches only this broker's partitions.
//!
//! Outcomes per batch, as the Java client does:
//! - NONE and DUPLICATE_SEQUENCE_NUMBER: acknowledged.
//! - retriable codes and retriable connection errors: back to the head of the partition's queue
//!   (in sequence order) after a backoff, the partition holding new sends until its
//!   in-flight batches have answered; stale-metadata codes also refresh metadata.
//! - OUT_OF_ORDER_SEQUENCE_NUMBER: a retry when an earlier batch of the partition is
//!   being retried; otherwise a real gap, fixed by bumping the epoch.
//! - UNKNOWN_PRODUCER_ID: bump the epoch and resend.
//! - MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE: a batch of several records is split into
//!   one batch per record (the sequence range is unchanged) and resent, so only the
//!   record that is too large fails.
//! - anything else, non-retriable connection errors included (the client was closed,
//!   the runtime is shutting down, no Produce version both sides speak, TLS or SASL
//!   refused, a request that does not encode): the batch fails at once with that
//!   error; with idempotence its sequences are a gap, so the epoch is bumped before
//!   anything more is sent.
//! - a batch past `delivery.timeout.ms` fails; if it was ever sent its fate is unknown,
//!   so with idempotence the epoch is bumped as well.
//!
//! A broker that refuses partitions it does not serve yet (a new topic's, while their
//! leader creates their logs; any, while it loads its logs after a restart) is probed:
//! the retries of those refusals back off exponentially, up to `retry.backoff.max.ms`,
//! which would leave them waiting up to that long after the broker serves them; so once a
//! partition's window opens later than `retry.backoff.ms` after its refusal, the sink
//! may send that partition's retried batch (without idempotence, with what may go beside
//! it) `retry.backoff.ms` after the refusal, as a probe: one probe at a time, at most one
//! every `retry.backoff.ms`, none during an epoch bump, and each to the partition
//! refused longest ago, so that probes go round the partitions waiting. If the broker
//! acknowledges it, the other partitions of its topic on this sink waiting out such a
//! refusal from before the probe go at the next drain (refused again, they back off
//! again); if not, each keeps its own backoff. With one topic waiting on the sink, writes
//! resume within about two `retry.backoff.ms` of the broker serving it (probes take turns
//! by partition and an acknowledgement releases only its own topic, so with several
//! waiting, one may still wait out its own backoff), for one batch per `retry.backoff.ms`
//! in the meantime, where retrying every partition that often would resend all their
//! batches each time.
//!
//! A partition whose leader is now another broker leaves the sink as
//! [`SinkEvent::Moved`]; the driver hands it to that broker's sink, where it waits for
//! its batches still on the wire here before sending more (see `partition.rs`). When the
//! broker's NOT_LEADER_OR_FOLLOWER names the new leader (Produce v10+, KIP-951), the
//! sink passes it on as [`SinkEvent::LeaderHints`], so the driver can update the
//! metadata and the partition moves at its next drain without a Metadata round trip.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::arenas::ArenaPools;
use super::completion::BatchAck;
use super::pace::Pace;
use super::partition::{
    BatchReport, Fate, Outgoing, ProducePartition, ProduceSettings, ProducerId, Verdict,
};
use super::request::{PartitionBatch, ProduceBatches};
use super::wake::{NextDrain, Wake};
use crate::client::{BrokerInfo, LeaderHint};
use crate::engine::connection::RawResponse;
use crate::engine::error::IoError;
use crate::error::Error;
use crate::protocol::messages::ProduceResponse;
use crate::protocol::messages::produce::PartitionProduceResponse;
use crate::protocol::{ApiKey, KafkaCode, VersionRange, decode_response_body, is_stale_metadata};

/// Where partitions are led, as the driver's metadata says.
pub(crate) trait Leaders {
    /// The broker leading `topic`/`partition`, if known and reachable.
    fn leader_of(&self, topic: &str, partition: i32) -> Option<i32>;
}

/// What a drain needs beyond the sink itself.
pub(crate) struct SinkContext<'a> {
    pub settings: &'a ProduceSettings,
    pub pools: &'a ArenaPools,
    /// The idempotent producer's id and epoch.
    pub producer: Option<ProducerId>,
    /// An epoch bump is pending: send only what must be resolved before it.
    pub bumping: bool,
    /// A flush (or close) wants every open batch sealed now.
    pub flushing: bool,
    pub leaders: &'a dyn Leaders,
    /// The Produce versions requests may go at (a transactional producer's protocol
    /// narrows them).
    pub produce_versions: VersionRange,
}

/// What the sink asks of its driver.
#[derive(Debug)]
pub(crate) enum SinkEvent {
    /// The partition's leader is another broker: hand it to that broker's sink.
    Moved(Arc<ProducePartition>),
    /// The topic's metadata is stale (no leader known, or a stale-metadata answer).
    Refresh(Arc<str>),
    /// The idempotent producer's epoch must be bumped before anything more is sent.
    BumpEpoch,
    /// A batch was refused with a code that ends a transactional producer (fenced, not
    /// authorised: see `engine::txn::ends_the_producer`).
    ProducerFenced(KafkaCode),
    /// The broker named the new leaders of partitions it does not lead (KIP-951), and
    /// the brokers they are.
    LeaderHints {
        hints: Vec<LeaderHint>,
        endpoints: Vec<BrokerInfo>,
    },
}

/// One broker's sink.
pub(crate) struct Sink {
    broker: i32,
    addr: Arc<str>,
    partitions: Vec<Arc<ProducePartition>>,
    /// Requests on the wire, by token (in the order they were made): when each was made
    /// and the batches it carries.
    in_flight: BTreeMap<u64, (Instant, Vec<Outgoing>)>,
    /// The broker's pace: whether batches due by their linger wait for its next answer.
    pace: Pace,
    next_token: u64,
    outbox: VecDeque<(u64, ProduceBatches)>,
    events: VecDeque<SinkEvent>,
    wake_at: Option<Instant>,
    /// What became of each batch answered since the driver last took them.
    reports: Vec<(Arc<ProducePartition>, BatchReport)>,
    /// The partition whose retried batch went out as a probe, and when, until it is
    /// answered.
    probe: Option<(Arc<ProducePartition>, Instant)>,
    /// When the last probe went out.
    last_probe: Option<Instant>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("broker", &self.broker)
            .field("partitions", &self.partitions.len())
            .field("requests_in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Sink {
    /// The sink of broker `broker` at `addr`.
    pub fn new(broker: i32, addr: Arc<str>) -> Self {
        Sink {
            broker,
            addr,
            partitions: Vec::new(),
            in_flight: BTreeMap::new(),
            pace: Pace::default(),
            next_token: 0,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            wake_at: None,
            reports: Vec::new(),
            probe: None,
            last_probe: None,
        }
    }

    /// The broker this sink sends to.
    pub fn broker(&self) -> i32 {
        self.broker
    }

    /// Takes a partition over; `waker` wakes this sink's driver.
    pub fn adopt(&mut self, partition: Arc<ProducePartition>, waker: Arc<dyn Wake>) {
        partition.state().adopt(waker);
        if !self.partitions.iter().any(|p| Arc::ptr_eq(p, &partition)) {
            self.partitions.push(partition);
        }
    }

    /// Seals lingering batches, expires old ones, hands moved partitions back, and turns
    /// what may be sent into requests (see [`Sink::poll_request`]).
    ///
    /// Every drain looks at every partition, and [`Sink::poll_timeout`] is then no later
    /// than the linger's end (`ProduceSettings::linger_ends`) of any open batch: the
    /// appending threads rely on both when they
    /// skip waking the sink (`engine::produce::wake`).
    pub fn drain(&mut self, now: Instant, cx: &SinkContext<'_>) {
        let mut outgoing = Vec::new();
        let mut wake_at = None;
        let mut bump = false;
        // Requests are made only for the slots the connection has free: one made
        // earlier would wait in its queue holding just what was sealed then, where one
        // made when a slot frees takes every partition's batch sealed meanwhile (franz-go
        // coalesces the same way). Under load that is the difference between many small
        // requests and a few large ones, which the broker handles far faster.
        let slots = self.free_slots(cx.settings);
        // Batches due by their linger alone wait while the broker is the one holding
        // things up, until the requests made before they were due are answered
        // (`super::pace`): full batches, retries and flushes still use every slot. Not
        // with acks=0 (no answers: a request is done once written). Appenders waiting
        // for memory do not end the wait: it is bounded by those answers, which free
        // memory too, and a broker that is behind is just when appenders wait (256
        // partitions on three nodes: 200 records a batch with the wait, 130 without).
        let oldest = self.oldest_made();
        let behind = cx.settings.acks != 0
            && self
                .pace
                .broker_is_behind(now, self.in_flight.len(), oldest);
        let (broker, events) = (self.broker, &mut self.events);
        // A probe whose request is gone (answered, or failed with the connection).
        if self.in_flight.is_empty() {
            self.probe = None;
        }
        let base = cx.settings.retry_backoff;
        let probe_not_before = self.last_probe.map(|t| t + base);
        // No probe during an epoch bump (its end wakes the sink) or while one is out (its
        // answer does).
        let may_probe = !cx.bumping && self.probe.is_none();
        // The partition to probe: of those due, the one refused longest ago, so that
        // probes go round the partitions waiting rather than retry the same one.
        let mut candidate: Option<(Arc<ProducePartition>, Instant)> = None;
        let mut next_probe = None;
        // Kept in place: a drain runs on every wake-up and should not reallocate the list.
        self.partitions.retain(|p| {
            let leader = cx.leaders.leader_of(&p.topic, p.index);
            let mut s = p.state();
            // Expired batches go before the open one is looked at: one that kept the
            // partition busy (a retry waiting out its backoff, the in-flight limit taken)
            // would otherwise hold it with nothing left to wait for but its own delivery
            // timeout.
            bump |= s.expire(now, cx.settings);
            // Held open only where this sink is to send it (a partition that moved, or
            // whose leader is unknown, seals as before: that is what gets it going).
            // Also while the connection has no slot free, the partition cannot send yet,
            // or the broker is behind and a request made before the batch was due is
            // still out: sealed now, a batch would only wait, while open it keeps filling.
            let waits_for_answer = behind
                && s.due_at(cx.settings)
                    .is_some_and(|due| Pace::may_wait(due, oldest));
            let hold = leader == Some(broker)
                && !cx.bumping
                && (slots == 0 || waits_for_answer || s.busy_sending(now, cx.settings));
            wake_at = earliest(
                wake_at,
                s.seal_if_due(now, cx.flushing, hold, cx.settings, cx.pools),
            );
            // And a batch just sealed at its delivery timeout (held until then).
            bump |= s.expire(now, cx.settings);
            match leader {
                Some(id) if id != broker => {
                    drop(s);
                    events.push_back(SinkEvent::Moved(p.clone()));
                    return false;
                }
                None => {
                    if s.has_sendable() {
                        events.push_back(SinkEvent::Refresh(p.topic.clone()));
                        wake_at = earliest(wake_at, Some(now + cx.settings.retry_backoff));
                    }
                }
                Some(_) if slots > 0 => {
                    if let Some((at, refused)) =
                        may_probe.then(|| s.probe_time(now, base)).flatten()
                    {
                        let at = probe_not_before.map_or(at, |t| at.max(t));
                        if at > now {
                            next_probe = earliest(next_probe, Some(at));
                        } else if candidate.as_ref().is_none_or(|(_, r)| refused < *r) {
                            candidate = Some((p.clone(), refused));
                        }
                    }
                    let retry = s.take_sendable(
                        p,
                        now,
                        cx.producer,
                        cx.bumping,
                        cx.settings,
                        slots,
                        &mut outgoing,
                    );
                    wake_at = earliest(wake_at, retry);
                }
                // Every slot taken: the next answer drains again.
                Some(_) => {}
            }
            // Back when what stays queued runs out of time, should nothing else come.
            wake_at = earliest(wake_at, s.expiry_due(cx.settings));
            true
        });
        if bump {
            self.events.push_back(SinkEvent::BumpEpoch);
        }
        if let Some((p, _)) = candidate {
            let probed =
                p.state()
                    .take_probe(&p, now, cx.producer, cx.settings, slots, &mut outgoing);
            if probed {
                self.probe = Some((p, now));
                self.last_probe = Some(now);
            }
        }
        if self.probe.is_none() {
            // Back for the next probe (one on the wire brings the sink back itself).
            wake_at = earliest(wake_at, next_probe);
        }
        if !outgoing.is_empty() && wake_at.is_none() {
            wake_at = Self::beat(now, cx.settings);
        }
        self.wake_at = wake_at;
        self.build_requests(outgoing, now, cx);
    }

    /// While records flow (this drain sends something) and nothing else would bring the
    /// sink back (no batch open, held, queued or waiting to retry, no refresh or probe
    /// due), it comes back when a batch opened now would have lingered enough: an
    /// appending thread that
    /// opens one before then finds the sink's timer no later than its batch's linger and
    /// does not wake it (`super::wake`). Without it, each linger cycle at a steady rate
    /// began with a sink asleep with no timer: the first record's thread woke it (a write
    /// to the worker's eventfd), and the sink's new timer, earlier than every other timer
    /// of the worker, woke the worker's driver again (tokio writes the eventfd then, even
    /// from the worker itself, and the next `epoll_wait` returns at once). With this timer
    /// armed, the batch's own goes in after it fired (later than the driver's last wake
    /// time: no write), and once records stop the sink wakes once more and finds nothing
    /// to send. A later drain that sends nothing (the answer's, say, before the next
    /// record came) sets the timer afresh, without it: the next batch's thread then wakes
    /// the sink as before. Not while a batch is held for the broker's answers
    /// (`super::pace`) or a retry waits: the sink would then come back every linger while
    /// the broker is behind, where the answer brings it back anyway. None without a
    /// linger (batches are due when opened and wake the sink, unless it waits for an
    /// answer with every slot taken).
    fn beat(now: Instant, settings: &ProduceSettings) -> Option<Instant> {
        (!settings.linger.is_zero()).then(|| settings.linger_ends(now))
    }

    /// Groups batches into requests: one batch per partition per request, each request
    /// under `max_request_size`.
    fn build_requests(&mut self, batches: Vec<Outgoing>, now: Instant, cx: &SinkContext<'_>) {
        let settings = cx.settings;
        if batches.is_empty() {
            return;
        }
        let mut by_round: BTreeMap<usize, Vec<Outgoing>> = BTreeMap::new();
        for b in batches {
            by_round.entry(b.round).or_default().push(b);
        }
        for (_, round) in by_round {
            let mut current: Vec<Outgoing> = Vec::new();
            let mut size = 0;
            for b in round {
                let len = b.batch.len() + b.partition.topic.len() + 16;
                if !current.is_empty() && size + len > settings.max_request_size {
                    self.queue_request(std::mem::take(&mut current), now, cx);
                    size = 0;
                }
                size += len;
                current.push(b);
            }
            if !current.is_empty() {
                self.queue_request(current, now, cx);
            }
        }
    }

    fn queue_request(&mut self, batches: Vec<Outgoing>, now: Instant, cx: &SinkContext<'_>) {
        let settings = cx.settings;
        let mut topics: Vec<(Arc<str>, Vec<PartitionBatch>)> = Vec::new();
        for b in &batches {
            let entry = PartitionBatch {
                partition: b.partition.index,
                batch: b.batch.clone(),
            };
            match topics
                .iter_mut()
                .find(|(t, _)| Arc::ptr_eq(t, &b.partition.topic))
            {
                Some((_, v)) => v.push(entry),
                None => topics.push((b.partition.topic.clone(), vec![entry])),
            }
        }
        let request = ProduceBatches {
            transactional_id: settings.transactional_id.clone(),
            acks: settings.acks,
            timeout_ms: settings.request_timeout.as_millis().min(i32::MAX as u128) as i32,
            topics,
            addr: self.addr.clone(),
            versions: cx.produce_versions,
        };
        let token = self.next_token;
        self.next_token += 1;
        self.in_flight.insert(token, (now, batches));
        self.outbox.push_back((token, request));
    }

    /// When the oldest request on the wire was made.
    fn oldest_made(&self) -> Option<Instant> {
        self.in_flight.first_key_value().map(|(_, (made, _))| *made)
    }

    /// The next request to send; its answer goes to [`Sink::handle_response`] with the
    /// same token.
    pub fn poll_request(&mut self) -> Option<(u64, ProduceBatches)> {
        self.outbox.pop_front()
    }

    /// Applies the answer to request `token` (or the connection's failure).
    pub fn handle_response(
        &mut self,
        token: u64,
        result: Result<RawResponse, IoError>,
        now: Instant,
        settings: &ProduceSettings,
    ) {
        let Some((made, batches)) = self.in_flight.remove(&token) else {
            return;
        };
        match result {
            Ok(_) => self.pace.answered(made, now),
            Err(_) => self.pace.failed(),
        }
        let response = match result {
            Err(e) => Err(verdict_for_io(e)),
            Ok(_) if settings.acks == 0 => Ok(None),
            // An answer that does not decode says nothing of what was written: retried
            // like a lost answer (idempotence deduplicates what landed).
            Ok(raw) => decode_response_body::<ProduceResponse>(raw.body, raw.version)
                .map(Some)
                .map_err(|e| Verdict::Retry {
                    error: Error::Decode(e),
                    stale: true,
                }),
        };
        let mut bump = false;
        let mut fenced = None;
        let mut hints = Vec::new();
        let probe = self
            .probe
            .take_if(|(p, _)| batches.iter().any(|b| Arc::ptr_eq(&b.partition, p)));
        let mut served = None;
        for b in batches {
            let verdict = match &response {
                Err(v) => v.clone(),
                Ok(None) => Verdict::Acked(BatchAck {
                    base_offset: -1,
                    log_append_time: -1,
                }),
                Ok(Some(r)) => match find_partition(r, &b) {
                    Some(p) => {
                        hints.extend(leader_hint(&b, p));
                        verdict_for(&b, p)
                    }
                    None => Verdict::Fatal(Error::Batch(format!(
                        "the broker's answer left out {}-{}",
                        b.partition.topic, b.partition.index
                    ))),
                },
            };
            if let Verdict::Fatal(e) = &verdict
                && settings.transactional_id.is_some()
            {
                fenced = fenced.or(e
                    .code()
                    .filter(|c| crate::engine::txn::ends_the_producer(*c)));
            }
            let partition = b.partition.clone();
            let effects = partition.state().settle(b, verdict, now, settings);
            if let Some((p, sent)) = &probe
                && Arc::ptr_eq(p, &partition)
                && matches!(effects.report.fate, Fate::Acked(_))
            {
                served = Some((partition.topic.clone(), *sent));
            }
            bump |= effects.bump;
            if effects.refresh {
                self.events
                    .push_back(SinkEvent::Refresh(partition.topic.clone()));
            }
            self.reports.push((partition, effects.report));
        }
        if let Some((topic, sent)) = served {
            self.end_unserved_backoffs(&topic, sent);
        }
        if let Some(code) = fenced {
            self.events.push_back(SinkEvent::ProducerFenced(code));
        }
        if bump {
            self.events.push_back(SinkEvent::BumpEpoch);
        }
        if let (false, Ok(Some(r))) = (hints.is_empty(), &response) {
            self.events.push_back(SinkEvent::LeaderHints {
                hints,
                endpoints: endpoints_of(r),
            });
        }
    }

    /// A probe of `topic` sent at `sent` was acknowledged: the broker serves the topic
    /// now, so its partitions waiting out a refusal from before the probe that said it
    /// did not may go at the next drain (a refusal in the probe's own answer stands).
    fn end_unserved_backoffs(&mut self, topic: &str, sent: Instant) {
        for p in self.partitions.iter().filter(|p| *p.topic == *topic) {
            p.state().end_unserved_backoff(sent);
        }
    }

    /// What became of the batches answered since the last call, oldest first.
    pub fn take_reports(&mut self) -> std::vec::Drain<'_, (Arc<ProducePartition>, BatchReport)> {
        self.reports.drain(..)
    }

    /// Records of this sink's partitions not yet settled (appended, queued, on the wire).
    pub fn unsettled_records(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| p.state().unsettled_records())
            .sum()
    }

    /// The next thing the driver must do for the sink.
    pub fn poll_event(&mut self) -> Option<SinkEvent> {
        self.events.pop_front()
    }

    /// When to drain again without being woken: the earliest linger deadline or retry
    /// backoff among this sink's partitions.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.wake_at
    }

    /// Request slots of the connection this sink may still fill.
    fn free_slots(&self, settings: &ProduceSettings) -> usize {
        settings
            .max_requests_in_flight()
            .saturating_sub(self.in_flight.len())
    }

    /// Tells the appending threads how the sink sleeps after a drain: with every request
    /// slot taken it waits for an answer (and drains at each), otherwise until its timer
    /// (`super::wake`). Not with acks=0: a request is done once written, and a write
    /// to a broker that stopped reading has no deadline.
    pub fn publish_sleep(&self, next_drain: &NextDrain, settings: &ProduceSettings) {
        if self.free_slots(settings) == 0 && settings.acks != 0 {
            next_drain.sleeping_for_an_answer();
        } else {
            next_drain.sleeping_until(self.wake_at);
        }
    }

    /// Requests on the wire.
    #[cfg(test)]
    pub fn requests_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The partitions this sink drains.
    #[cfg(test)]
    pub fn partitions(&self) -> &[Arc<ProducePartition>] {
        &self.partitions
    }

    /// Whether any partition of this sink, or any request, is unsettled.
    pub fn has_pending(&self) -> bool {
        !self.in_flight.is_empty() || self.partitions.iter().any(|p| p.state().has_pending())
    }

    /// Fails everything unsent in this sink's partitions with `error` (the producer was
    /// dropped: requests already on the wire still get their answers).
    pub fn fail_unsent(&mut self, error: &Error, now: Instant) {
        for p in &self.partitions {
            p.state().fail_unsent(error, now);
        }
    }

    /// Fails everything, requests on the wire included (the runtime is going away and
    /// no answer will come).
    pub fn fail_all(&mut self, error: &Error, now: Instant) {
        for (_, (_, batches)) in std::mem::take(&mut self.in_flight) {
            for b in batches {
                b.partition.state().fail_all(error, now);
            }
        }
        for p in &self.partitions {
            p.state().fail_all(error, now);
        }
        self.outbox.clear();
    }
}

/// What a connection error means for the batches of the request it failed: a retry
/// (after a metadata refresh) when sending again may succeed, otherwise a final failure
/// with that error (a closed client or an unsupported API fails the same way each time).
fn verdict_for_io(error: IoError) -> Verdict {
    if error.is_retriable() {
        Verdict::Retry {
            error: Error::Io(error),
            stale: true,
        }
    } else {
        Verdict::Fatal(Error::Io(error))
    }
}

fn find_partition<'r>(
    r: &'r ProduceResponse,
    b: &Outgoing,
) -> Option<&'r PartitionProduceResponse> {
    r.responses
        .iter()
        .filter(|t| t.name == *b.partition.topic)
        .flat_map(|t| t.partition_responses.iter())
        .find(|p| p.index == b.partition.index)
}

/// KIP-951: the new leader a NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH) answer
/// names, if it names one.
fn leader_hint(b: &Outgoing, p: &PartitionProduceResponse) -> Option<LeaderHint> {
    let code = KafkaCode(p.error_code);
    if code != KafkaCode::NOT_LEADER_OR_FOLLOWER && code != KafkaCode::FENCED_LEADER_EPOCH {
        return None;
    }
    LeaderHint::new(
        b.partition.topic.clone(),
        b.partition.index,
        p.current_leader.leader_id,
        p.current_leader.leader_epoch,
    )
}

/// The brokers a Produce answer names (v10+), as metadata describes them.
fn endpoints_of(r: &ProduceResponse) -> Vec<BrokerInfo> {
    r.node_endpoints
        .iter()
        .map(|e| BrokerInfo {
            id: e.node_id,
            host: e.host.clone(),
            port: e.port,
            rack: e.rack.clone(),
        })
        .collect()
}

fn verdict_for(b: &Outgoing, p: &PartitionProduceResponse) -> Verdict {
    let code = KafkaCode(p.error_code);
    let error = || {
        Error::broker(
            code,
            ApiKey::Produce,
            Some(&b.partition.topic),
            Some(b.partition.index),
        )
    };
    match code {
        KafkaCode::NONE | KafkaCode::DUPLICATE_SEQUENCE_NUMBER => Verdict::Acked(BatchAck {
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

#[cfg(test)]
mod tests {
    use std::task::Poll;
    use std::time::Duration;

    use super::*;
    use crate::buf::MemoryBudget;
    use crate::engine::produce::completion::{BatchShared, Resolved};
    use crate::engine::produce::failures::DeliveryFailures;
    use crate::engine::produce::partition::{Appended, ProducerAccounts, RecordParts};
    use crate::record::Compression;

    const BROKER: i32 = 1;

    struct LedHere;
    impl Leaders for LedHere {
        fn leader_of(&self, _: &str, _: i32) -> Option<i32> {
            Some(BROKER)
        }
    }

    struct NoWake;
    impl Wake for NoWake {
        fn wake(&self) {}
    }

    fn settings() -> ProduceSettings {
        ProduceSettings {
            acks: -1,
            idempotent: true,
            linger: Duration::ZERO,
            timer_resolution: Duration::ZERO,
            batch_size: 16 * 1024,
            max_request_size: 1 << 20,
            delivery_timeout: Duration::from_secs(120),
            retries: u32::MAX,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            request_timeout: Duration::from_secs(30),
            max_in_flight: 5,
            transactional_id: None,
            transaction_timeout: std::time::Duration::from_secs(60),
            codec: Compression::None,
            report_tagged: None,
        }
    }

    /// A sink with one partition holding `records` records, drained into one request:
    /// the request's token, the batch's completion and the producer's failure tally.
    fn one_request_in_flight(
        records: usize,
    ) -> (Sink, u64, Arc<BatchShared>, Arc<DeliveryFailures>) {
        let (settings, now) = (settings(), Instant::now());
        let pools = ArenaPools::new(16 * 1024, MemoryBudget::new(1 << 20));
        let failures = Arc::new(DeliveryFailures::default());
        let accounts = ProducerAccounts {
            failures: failures.clone(),
            ..Default::default()
        };
        let partition = ProducePartition::new(Arc::from("t"), 0, accounts);
        let shared = append(&partition, records, &settings, &pools, now);
        let mut sink = Sink::new(BROKER, Arc::from("127.0.0.1:9"));
        sink.adopt(partition, Arc::new(NoWake));
        sink.drain(now, &context(&settings, &pools, PRODUCER));
        let (token, _) = sink.poll_request().expect("a request");
        (sink, token, shared.expect("a batch"), failures)
    }

    fn outcome(shared: &BatchShared) -> Option<Result<BatchAck, Error>> {
        match shared.poll_record(0, None) {
            Poll::Ready(Resolved::Done(r)) => Some(r),
            Poll::Ready(Resolved::Moved(_)) => panic!("not split"),
            Poll::Pending => None,
        }
    }

    #[test]
    fn non_retriable_connection_errors_fail_the_batch_at_once() {
        let addr = "127.0.0.1:9".to_string();
        let fatal = [
            IoError::Closed { addr: addr.clone() },
            IoError::UnsupportedApi {
                api: ApiKey::Produce,
                addr: addr.clone(),
            },
            IoError::ShuttingDown,
            IoError::AnswerLost {
                api: ApiKey::Produce,
                addr: addr.clone(),
                reason: "its task panicked".into(),
            },
        ];
        for error in fatal {
            let (mut sink, token, shared, failures) = one_request_in_flight(3);
            let expected = error.to_string();
            sink.handle_response(token, Err(error), Instant::now(), &settings());
            match outcome(&shared) {
                Some(Err(Error::Io(e))) => assert_eq!(e.to_string(), expected),
                other => panic!("{expected}: expected the batch failed with it, got {other:?}"),
            }
            assert!(!sink.has_pending(), "{expected}: nothing left to retry");
            let report = failures.take().expect("the failure is counted");
            assert_eq!((report.records, report.batches), (3, 1));
            assert!(
                matches!(sink.poll_event(), Some(SinkEvent::BumpEpoch)),
                "{expected}: the sequences are a gap, so the epoch is bumped"
            );
        }
    }

    #[test]
    fn retriable_connection_errors_requeue_the_batch() {
        let (mut sink, token, shared, failures) = one_request_in_flight(2);
        let error = IoError::Disconnected {
            addr: "127.0.0.1:9".into(),
            reason: "reset".into(),
        };
        sink.handle_response(token, Err(error), Instant::now(), &settings());
        assert!(outcome(&shared).is_none(), "still pending: it goes again");
        assert!(sink.has_pending());
        assert!(failures.take().is_none());
    }

    /// `response` as the connection hands it over, at v11.
    fn raw_v11(response: &ProduceResponse) -> RawResponse {
        use crate::protocol::Encode;
        let mut body = bytes::BytesMut::new();
        response.encode(&mut body, 11).unwrap();
        RawResponse {
            api: ApiKey::Produce,
            version: 11,
            body: body.freeze(),
            round_trip: std::time::Duration::ZERO,
            correlation_id: 0,
        }
    }

    #[test]
    fn a_not_leader_answer_naming_the_new_leader_is_passed_on() {
        use crate::protocol::messages::produce::{
            LeaderIdAndEpoch, NodeEndpoint, TopicProduceResponse,
        };
        let (mut sink, token, shared, _) = one_request_in_flight(2);
        let response = ProduceResponse::default()
            .with_responses(vec![
                TopicProduceResponse::default()
                    .with_name("t".into())
                    .with_partition_responses(vec![
                        PartitionProduceResponse::default()
                            .with_index(0)
                            .with_error_code(KafkaCode::NOT_LEADER_OR_FOLLOWER.code())
                            .with_current_leader(
                                LeaderIdAndEpoch::default()
                                    .with_leader_id(2)
                                    .with_leader_epoch(4),
                            ),
                    ]),
            ])
            .with_node_endpoints(vec![
                NodeEndpoint::default()
                    .with_node_id(2)
                    .with_host("h2".into())
                    .with_port(9093),
            ]);
        let raw = raw_v11(&response);
        sink.handle_response(token, Ok(raw), Instant::now(), &settings());
        assert!(outcome(&shared).is_none(), "retried, at the new leader");
        let mut hinted = None;
        while let Some(event) = sink.poll_event() {
            if let SinkEvent::LeaderHints { hints, endpoints } = event {
                hinted = Some((hints, endpoints));
            }
        }
        let (hints, endpoints) = hinted.expect("the new leader is passed on");
        assert_eq!(
            hints,
            vec![LeaderHint::new(Arc::from("t"), 0, 2, 4).unwrap()]
        );
        assert_eq!(endpoints.len(), 1);
        assert_eq!(endpoints[0].addr(), "h2:9093");
    }

    #[test]
    fn a_fenced_transactional_producer_is_told_so_at_once() {
        let fenced = |transactional: bool| {
            let (mut sink, token, _shared, _) = one_request_in_flight(2);
            let raw = answer(0, KafkaCode::PRODUCER_FENCED);
            let mut settings = settings();
            if transactional {
                settings.transactional_id = Some("tx".into());
            }
            sink.handle_response(token, Ok(raw), Instant::now(), &settings);
            std::iter::from_fn(|| sink.poll_event())
                .any(|e| matches!(e, SinkEvent::ProducerFenced(KafkaCode::PRODUCER_FENCED)))
        };
        assert!(fenced(true), "a transactional producer learns it is fenced");
        assert!(!fenced(false), "nothing new for a plain producer");
    }

    /// Appends `records` one-byte records to `partition`, stamped `now`: the batch the
    /// last one went into.
    fn append(
        partition: &ProducePartition,
        records: usize,
        settings: &ProduceSettings,
        pools: &ArenaPools,
        now: Instant,
    ) -> Option<Arc<BatchShared>> {
        let mut shared = None;
        for _ in 0..records {
            let record = RecordParts {
                key: None,
                value: Some(b"v"),
                headers: &[],
                timestamp: 1,
            };
            match partition
                .state()
                .append(record, None, &mut None, settings, pools, || now)
            {
                Ok(Appended::Done { shared: s, .. }) => shared = Some(s),
                other => panic!("append: {other:?}"),
            }
        }
        shared
    }

    /// Appends 1,000-byte records to `partition` until a batch of it is sealed full.
    fn fill_until_sealed(
        partition: &ProducePartition,
        settings: &ProduceSettings,
        pools: &ArenaPools,
        now: Instant,
    ) {
        let value = [7u8; 1000];
        while !partition.state().has_sendable() {
            let record = RecordParts {
                key: None,
                value: Some(&value),
                headers: &[],
                timestamp: 1,
            };
            let appended =
                partition
                    .state()
                    .append(record, None, &mut None, settings, pools, || now);
            assert!(matches!(appended, Ok(Appended::Done { .. })));
        }
    }

    /// The partitions a request carries a batch of.
    fn partitions_of(request: &ProduceBatches) -> Vec<i32> {
        request
            .topics
            .iter()
            .flat_map(|(_, batches)| batches.iter().map(|b| b.partition))
            .collect()
    }

    const PRODUCER: Option<ProducerId> = Some(ProducerId { id: 7, epoch: 0 });

    /// A sink of partitions 0..`n` of topic "t" (which wake nobody), and the pools their
    /// batches come from.
    fn sink_of(n: i32) -> (Sink, Vec<Arc<ProducePartition>>, ArenaPools) {
        let pools = ArenaPools::new(16 * 1024, MemoryBudget::new(1 << 20));
        let failures = Arc::new(DeliveryFailures::default());
        let partitions: Vec<_> = (0..n)
            .map(|i| {
                let accounts = ProducerAccounts {
                    failures: failures.clone(),
                    ..Default::default()
                };
                ProducePartition::new(Arc::from("t"), i, accounts)
            })
            .collect();
        let mut sink = Sink::new(BROKER, Arc::from("127.0.0.1:9"));
        for p in &partitions {
            sink.adopt(p.clone(), Arc::new(NoWake));
        }
        (sink, partitions, pools)
    }

    /// A flushing drain's context, every partition led by this sink's broker.
    fn context<'a>(
        settings: &'a ProduceSettings,
        pools: &'a ArenaPools,
        producer: Option<ProducerId>,
    ) -> SinkContext<'a> {
        SinkContext {
            settings,
            pools,
            producer,
            bumping: false,
            flushing: true,
            leaders: &LedHere,
            produce_versions: crate::engine::produce::request::ANY_PRODUCE_VERSION,
        }
    }

    /// A drain's context outside any flush, every partition led by this sink's broker.
    fn draining_context<'a>(
        settings: &'a ProduceSettings,
        pools: &'a ArenaPools,
    ) -> SinkContext<'a> {
        SinkContext {
            flushing: false,
            ..context(settings, pools, None)
        }
    }

    /// Settings whose batches linger (5 ms), not idempotent.
    fn lingering_settings() -> ProduceSettings {
        let mut settings = settings();
        settings.idempotent = false;
        settings.linger = Duration::from_millis(5);
        settings
    }

    /// The broker's answer for partition `index` of "t", with `code`.
    fn answer(index: i32, code: KafkaCode) -> RawResponse {
        answer_each(&[index], code)
    }

    /// The broker's answer for partitions `indexes` of "t", each with `code`.
    fn answer_each(indexes: &[i32], code: KafkaCode) -> RawResponse {
        let codes: Vec<_> = indexes.iter().map(|&i| (i, code)).collect();
        answer_codes(&codes)
    }

    /// The broker's answer for partitions of "t", each with its own code.
    fn answer_codes(codes: &[(i32, KafkaCode)]) -> RawResponse {
        use crate::protocol::messages::produce::TopicProduceResponse;
        let partitions = codes
            .iter()
            .map(|&(i, code)| {
                PartitionProduceResponse::default()
                    .with_index(i)
                    .with_error_code(code.code())
            })
            .collect();
        raw_v11(&ProduceResponse::default().with_responses(vec![
            TopicProduceResponse::default()
                .with_name("t".into())
                .with_partition_responses(partitions),
        ]))
    }

    /// Sends a batch to each of three partitions at `t0` and has the broker refuse them
    /// all with `code` twice (at `t0`, then their retries at `t0 + backoff(0)`): the
    /// sink, the partitions, the pools and the time of the second refusal. Their windows
    /// are then `backoff(1)` long, past `retry.backoff.ms`.
    fn refused_twice(
        settings: &ProduceSettings,
        code: KafkaCode,
        t0: Instant,
    ) -> (Sink, Vec<Arc<ProducePartition>>, ArenaPools, Instant) {
        refused_times(settings, code, t0, 2)
    }

    /// As [`refused_twice`], refused `times` times, each retry sent when its window ends.
    fn refused_times(
        settings: &ProduceSettings,
        code: KafkaCode,
        t0: Instant,
        times: u32,
    ) -> (Sink, Vec<Arc<ProducePartition>>, ArenaPools, Instant) {
        let (mut sink, partitions, pools) = sink_of(3);
        let cx = context(settings, &pools, PRODUCER);
        for p in &partitions {
            append(p, 1, settings, &pools, t0);
        }
        let mut at = t0;
        let mut refused = t0;
        for attempt in 0..times {
            sink.drain(at, &cx);
            let (token, request) = sink.poll_request().expect("all three");
            assert_eq!(partitions_of(&request), vec![0, 1, 2]);
            sink.handle_response(token, Ok(answer_each(&[0, 1, 2], code)), at, settings);
            refused = at;
            at += settings.backoff(attempt);
        }
        (sink, partitions, pools, refused)
    }

    #[test]
    fn a_broker_not_serving_a_topic_yet_is_probed_with_one_batch_and_the_rest_follow_its_ack() {
        let settings = settings();
        let t0 = Instant::now();
        let (mut sink, _partitions, pools, refused) =
            refused_twice(&settings, KafkaCode::NOT_LEADER_OR_FOLLOWER, t0);
        let cx = context(&settings, &pools, PRODUCER);
        let base = settings.retry_backoff;
        sink.drain(refused, &cx);
        assert!(sink.poll_request().is_none(), "all back off");
        assert_eq!(
            sink.poll_timeout(),
            Some(refused + base),
            "back for a probe one retry.backoff.ms after the refusal, not at the window's end ({:?})",
            settings.backoff(1)
        );
        sink.drain(refused + base, &cx);
        let (token, probe) = sink.poll_request().expect("a probe");
        assert_eq!(partitions_of(&probe), vec![0], "one partition's batch");
        assert!(sink.poll_request().is_none());
        // Acknowledged: the broker serves the topic; the others go at once.
        sink.handle_response(
            token,
            Ok(answer(0, KafkaCode::NONE)),
            refused + base,
            &settings,
        );
        sink.drain(refused + base, &cx);
        let (_, rest) = sink.poll_request().expect("the others");
        assert_eq!(partitions_of(&rest), vec![1, 2]);
    }

    #[test]
    fn a_refused_probe_leaves_the_others_to_their_backoff_and_the_next_waits_its_turn() {
        let settings = settings();
        let t0 = Instant::now();
        let (mut sink, _partitions, pools, refused) =
            refused_twice(&settings, KafkaCode::NOT_LEADER_OR_FOLLOWER, t0);
        let cx = context(&settings, &pools, PRODUCER);
        let base = settings.retry_backoff;
        let probed = refused + base;
        sink.drain(probed, &cx);
        let (token, probe) = sink.poll_request().expect("a probe");
        assert_eq!(partitions_of(&probe), vec![0]);
        assert_eq!(
            sink.poll_timeout(),
            Some(refused + settings.backoff(1)),
            "the others' windows; no timer for a probe while one is out"
        );
        let answered = probed + Duration::from_millis(5);
        let refusal = answer(0, KafkaCode::NOT_LEADER_OR_FOLLOWER);
        sink.handle_response(token, Ok(refusal), answered, &settings);
        sink.drain(answered, &cx);
        assert!(
            sink.poll_request().is_none(),
            "nothing goes on a refused probe"
        );
        // The next probe no sooner than retry.backoff.ms after this one; the others'
        // windows (refused + 4/5 of backoff(1)) open before that and they go together.
        let others_from = refused + settings.backoff(1) - settings.backoff(1) / 5;
        assert!(others_from < probed + base);
        assert_eq!(sink.poll_timeout(), Some(probed + base));
        sink.drain(others_from - Duration::from_millis(1), &cx);
        assert!(sink.poll_request().is_none(), "no probe before its turn");
        sink.drain(probed + base, &cx);
        let (_, retry) = sink.poll_request().expect("the others' retries");
        assert_eq!(
            partitions_of(&retry),
            vec![1, 2],
            "partition 0 backs off longer"
        );
        assert!(sink.poll_request().is_none());
    }

    #[test]
    fn probes_go_round_the_partitions_waiting() {
        let settings = settings();
        let t0 = Instant::now();
        // Windows of backoff(2): a probe every retry.backoff.ms fits twice before they open.
        let (mut sink, _partitions, pools, refused) =
            refused_times(&settings, KafkaCode::NOT_LEADER_OR_FOLLOWER, t0, 3);
        let cx = context(&settings, &pools, PRODUCER);
        let base = settings.retry_backoff;
        let mut probed = Vec::new();
        let mut at = refused + base;
        for round in 0..4 {
            sink.drain(at, &cx);
            let (token, probe) = sink.poll_request().expect("a probe");
            probed.extend(partitions_of(&probe));
            let refusal = answer_each(&partitions_of(&probe), KafkaCode::NOT_LEADER_OR_FOLLOWER);
            sink.handle_response(token, Ok(refusal), at, &settings);
            sink.drain(at, &cx);
            assert!(sink.poll_request().is_none());
            at = sink.poll_timeout().expect("back for the next probe");
            // One retry.backoff.ms after this probe (the windows end at refused + 400).
            assert_eq!(at, refused + base * (round + 2));
        }
        assert_eq!(
            probed,
            vec![0, 1, 2, 0],
            "each partition's turn, then round again"
        );
    }

    #[test]
    fn no_probe_and_no_wake_up_for_one_while_the_epoch_is_bumped() {
        let settings = settings();
        let t0 = Instant::now();
        let (mut sink, _partitions, pools, refused) =
            refused_twice(&settings, KafkaCode::NOT_LEADER_OR_FOLLOWER, t0);
        let mut cx = context(&settings, &pools, PRODUCER);
        cx.bumping = true;
        let due = refused + settings.retry_backoff;
        sink.drain(due, &cx);
        assert!(sink.poll_request().is_none(), "no probe during a bump");
        assert!(
            sink.poll_timeout().is_none_or(|at| at > due),
            "a wake-up at a time past would spin the sink: {:?}",
            sink.poll_timeout()
        );
    }

    #[test]
    fn an_acknowledged_probe_releases_only_refusals_from_before_it() {
        let settings = settings();
        let t0 = Instant::now();
        let (mut sink, partitions, pools, refused) =
            refused_twice(&settings, KafkaCode::NOT_LEADER_OR_FOLLOWER, t0);
        let cx = context(&settings, &pools, PRODUCER);
        let due = refused + settings.retry_backoff;
        // Partition 1's backoff ends (as a release would end it): its retry goes in the
        // probe's request, and the broker refuses it there while acknowledging the probe.
        partitions[1].state().end_unserved_backoff(due);
        sink.drain(due, &cx);
        let (token, request) = sink.poll_request().expect("the probe and partition 1");
        assert_eq!(partitions_of(&request), vec![1, 0]);
        assert!(sink.poll_request().is_none());
        let answer = answer_codes(&[(0, KafkaCode::NONE), (1, KafkaCode::NOT_LEADER_OR_FOLLOWER)]);
        let answered = due + Duration::from_millis(5);
        sink.handle_response(token, Ok(answer), answered, &settings);
        sink.drain(answered, &cx);
        let (_, released) = sink.poll_request().expect("partition 2, released");
        assert_eq!(
            partitions_of(&released),
            vec![2],
            "partition 1's refusal came with the probe's answer: it keeps its backoff"
        );
        assert!(sink.poll_request().is_none());
    }

    #[test]
    fn refusals_that_do_not_say_the_partition_is_unserved_are_not_probed() {
        let settings = settings();
        let t0 = Instant::now();
        let (mut sink, _partitions, pools, refused) =
            refused_twice(&settings, KafkaCode::NOT_ENOUGH_REPLICAS, t0);
        let cx = context(&settings, &pools, PRODUCER);
        let window = settings.backoff(1);
        sink.drain(refused + settings.retry_backoff, &cx);
        assert!(sink.poll_request().is_none(), "no probe");
        assert_eq!(sink.poll_timeout(), Some(refused + window));
        sink.drain(refused + window, &cx);
        let (_, retry) = sink
            .poll_request()
            .expect("the retries, at the window's end");
        assert_eq!(partitions_of(&retry), vec![0, 1, 2]);
    }

    #[test]
    fn requests_are_made_when_a_slot_is_free_and_take_what_was_sealed_meanwhile() {
        let mut settings = settings();
        settings.idempotent = false;
        settings.max_in_flight = 1;
        let (mut sink, partitions, pools) = sink_of(3);
        let cx = context(&settings, &pools, None);
        append(&partitions[0], 2, &settings, &pools, Instant::now());
        sink.drain(Instant::now(), &cx);
        let (token, first) = sink.poll_request().expect("a request");
        assert_eq!(partitions_of(&first), vec![0]);
        // Sealed while the only slot is taken: no request yet, however many drains.
        for p in &partitions {
            append(p, 2, &settings, &pools, Instant::now());
        }
        sink.drain(Instant::now(), &cx);
        sink.drain(Instant::now(), &cx);
        assert!(
            sink.poll_request().is_none(),
            "the connection's one slot is taken"
        );
        let acked = answer(0, KafkaCode::NONE);
        sink.handle_response(token, Ok(acked), Instant::now(), &settings);
        sink.drain(Instant::now(), &cx);
        let (_, second) = sink
            .poll_request()
            .expect("a request once the slot is free");
        let mut carried = partitions_of(&second);
        carried.sort_unstable();
        assert_eq!(
            carried,
            vec![0, 1, 2],
            "one request with every partition's batch"
        );
        assert!(sink.poll_request().is_none());
    }

    #[test]
    fn a_sink_with_every_slot_taken_publishes_that_it_waits_for_an_answer() {
        let mut settings = settings();
        settings.idempotent = false;
        settings.max_in_flight = 2;
        let (mut sink, partitions, pools) = sink_of(2);
        let cx = context(&settings, &pools, None);
        let next = NextDrain::new(Instant::now());
        let mut tokens = Vec::new();
        for (i, p) in partitions.iter().enumerate() {
            append(p, 2, &settings, &pools, Instant::now());
            next.draining();
            sink.drain(Instant::now(), &cx);
            sink.publish_sleep(&next, &settings);
            tokens.push(sink.poll_request().expect("a request").0);
            assert_eq!(next.waits_for_an_answer(), i == 1, "after request {i}");
        }
        let acked = answer(0, KafkaCode::NONE);
        sink.handle_response(tokens[0], Ok(acked), Instant::now(), &settings);
        next.draining();
        sink.drain(Instant::now(), &cx);
        sink.publish_sleep(&next, &settings);
        assert!(!next.waits_for_an_answer(), "an answer freed a slot");
    }

    #[test]
    fn with_acks_0_a_sink_with_every_slot_taken_still_publishes_its_timer() {
        let mut settings = settings();
        settings.idempotent = false;
        settings.acks = 0;
        settings.max_in_flight = 1;
        let (mut sink, partitions, pools) = sink_of(1);
        let cx = context(&settings, &pools, None);
        let next = NextDrain::new(Instant::now());
        append(&partitions[0], 2, &settings, &pools, Instant::now());
        sink.drain(Instant::now(), &cx);
        assert!(sink.poll_request().is_some());
        assert_eq!(sink.requests_in_flight(), 1, "the only slot is taken");
        sink.publish_sleep(&next, &settings);
        assert!(
            !next.waits_for_an_answer(),
            "a write with no answer to come has no deadline"
        );
    }

    #[test]
    fn while_records_flow_the_sink_comes_back_a_linger_after_sending_until_a_drain_sends_nothing() {
        let mut settings = lingering_settings();
        settings.timer_resolution = Duration::from_millis(1);
        let (mut sink, partitions, pools) = sink_of(2);
        let cx = draining_context(&settings, &pools);
        let t0 = Instant::now();
        append(&partitions[0], 1, &settings, &pools, t0);
        sink.drain(t0, &cx);
        let due = settings.linger_ends(t0);
        assert_eq!(sink.poll_timeout(), Some(due), "the batch's linger");
        sink.drain(due, &cx);
        sink.poll_request().expect("the batch at its linger");
        let beat = settings.linger_ends(due);
        assert_eq!(
            sink.poll_timeout(),
            Some(beat),
            "no batch open, yet back when one opened now would be due"
        );
        // A batch opened meanwhile is due no earlier: its thread need not wake the sink,
        // which sees it at that drain and waits for its linger.
        let opened = due + Duration::from_micros(300);
        append(&partitions[1], 1, &settings, &pools, opened);
        assert!(settings.linger_ends(opened) >= beat);
        sink.drain(beat, &cx);
        assert!(sink.poll_request().is_none(), "not due yet");
        assert_eq!(sink.poll_timeout(), Some(settings.linger_ends(opened)));
        let sent = settings.linger_ends(opened);
        sink.drain(sent, &cx);
        sink.poll_request().expect("partition 1's batch");
        // Records stopped: at the next beat nothing goes, and the sink sleeps untimed.
        sink.drain(settings.linger_ends(sent), &cx);
        assert!(sink.poll_request().is_none());
        assert_eq!(sink.poll_timeout(), None);
    }

    #[test]
    fn no_beat_while_a_retry_waits_the_sink_comes_back_for_the_retry() {
        let settings = lingering_settings();
        let (mut sink, partitions, pools) = sink_of(2);
        let cx = draining_context(&settings, &pools);
        let t0 = Instant::now();
        append(&partitions[0], 1, &settings, &pools, t0);
        let due = settings.linger_ends(t0);
        sink.drain(due, &cx);
        let (token, _) = sink.poll_request().expect("partition 0's batch");
        let refused = answer(0, KafkaCode::NOT_ENOUGH_REPLICAS);
        sink.handle_response(token, Ok(refused), due, &settings);
        append(&partitions[1], 1, &settings, &pools, due);
        let sent = settings.linger_ends(due);
        sink.drain(sent, &cx);
        let (_, request) = sink.poll_request().expect("partition 1's batch");
        assert_eq!(partitions_of(&request), vec![1]);
        let back = sink.poll_timeout().expect("back for partition 0's retry");
        assert!(
            back > settings.linger_ends(sent),
            "no beat while the retry waits: the sink would come back every linger"
        );
    }

    #[test]
    fn a_batch_expiring_in_its_retry_backoff_no_longer_holds_the_open_batch_behind_it() {
        let mut settings = lingering_settings();
        settings.delivery_timeout = Duration::from_millis(200);
        settings.retry_backoff = Duration::from_millis(500);
        let (mut sink, partitions, pools) = sink_of(1);
        let cx = draining_context(&settings, &pools);
        let t0 = Instant::now();
        let first = append(&partitions[0], 1, &settings, &pools, t0).expect("a batch");
        let due = settings.linger_ends(t0);
        sink.drain(due, &cx);
        let (token, _) = sink.poll_request().expect("the first batch");
        let refused = answer(0, KafkaCode::NOT_ENOUGH_REPLICAS);
        sink.handle_response(token, Ok(refused), due, &settings);
        // A second batch opens while the first waits out its backoff, and is held behind
        // it once its linger is up.
        let t1 = t0 + Duration::from_millis(150);
        let second = append(&partitions[0], 1, &settings, &pools, t1).expect("a batch");
        sink.drain(settings.linger_ends(t1), &cx);
        assert!(sink.poll_request().is_none(), "held behind the retry");
        let expiry = t0 + settings.delivery_timeout;
        assert_eq!(
            sink.poll_timeout(),
            Some(expiry),
            "back when the first expires"
        );
        sink.drain(expiry, &cx);
        assert!(matches!(outcome(&first), Some(Err(Error::Timeout(_)))));
        let (_, request) = sink
            .poll_request()
            .expect("the second batch goes once nothing is ahead of it");
        assert_eq!(partitions_of(&request), vec![0]);
        assert!(outcome(&second).is_none(), "on the wire");
    }

    #[test]
    fn with_no_linger_sending_leaves_no_timer() {
        let mut settings = settings();
        settings.idempotent = false;
        let (mut sink, partitions, pools) = sink_of(1);
        let cx = draining_context(&settings, &pools);
        let t0 = Instant::now();
        append(&partitions[0], 1, &settings, &pools, t0);
        sink.drain(t0, &cx);
        sink.poll_request().expect("due when opened");
        assert_eq!(sink.poll_timeout(), None);
    }

    /// A sink of four partitions (not idempotent, acks=all, linger 5 ms, five requests
    /// in flight) whose first request, partition 0's, was answered `round_trip` after it
    /// was made; then partitions 1 and 2 each send a batch in a request of its own at
    /// `sent`: the sink, its partitions, the pools, the settings, the two tokens and `sent`.
    fn two_requests_out_after_a_round_trip_of(
        round_trip: Duration,
    ) -> (
        Sink,
        Vec<Arc<ProducePartition>>,
        ArenaPools,
        ProduceSettings,
        [u64; 2],
        Instant,
    ) {
        two_requests_out_with_acks(-1, round_trip)
    }

    /// As [`two_requests_out_after_a_round_trip_of`], with `acks`.
    fn two_requests_out_with_acks(
        acks: i16,
        round_trip: Duration,
    ) -> (
        Sink,
        Vec<Arc<ProducePartition>>,
        ArenaPools,
        ProduceSettings,
        [u64; 2],
        Instant,
    ) {
        let mut settings = lingering_settings();
        settings.acks = acks;
        let (mut sink, partitions, pools) = sink_of(4);
        let cx = draining_context(&settings, &pools);
        let t0 = Instant::now();
        append(&partitions[0], 1, &settings, &pools, t0);
        sink.drain(t0 + settings.linger, &cx);
        let (token, _) = sink.poll_request().expect("partition 0's batch");
        let answered = t0 + settings.linger + round_trip;
        sink.handle_response(token, Ok(answer(0, KafkaCode::NONE)), answered, &settings);
        let mut tokens = [0; 2];
        for (i, token) in tokens.iter_mut().enumerate() {
            append(&partitions[i + 1], 1, &settings, &pools, answered);
            sink.drain(answered + settings.linger, &cx);
            let (t, request) = sink.poll_request().expect("a request");
            assert_eq!(partitions_of(&request), vec![i as i32 + 1]);
            *token = t;
        }
        let sent = answered + settings.linger;
        (sink, partitions, pools, settings, tokens, sent)
    }

    /// Appends a record to partition 3 at `at` and drains (not flushing) once its
    /// linger is up.
    fn partition_3_due(
        sink: &mut Sink,
        partitions: &[Arc<ProducePartition>],
        pools: &ArenaPools,
        settings: &ProduceSettings,
        at: Instant,
    ) {
        let cx = draining_context(settings, pools);
        append(&partitions[3], 1, settings, pools, at);
        sink.drain(at + settings.linger, &cx);
    }

    #[test]
    fn while_the_broker_is_behind_a_lingering_batch_waits_for_the_requests_before_it_and_full_ones_do_not()
     {
        let round_trip = Duration::from_millis(1);
        let (mut sink, partitions, pools, settings, tokens, sent) =
            two_requests_out_after_a_round_trip_of(round_trip);
        // Both out for longer than the quickest round trip: the broker is behind.
        let later = sent + round_trip * 3;
        partition_3_due(&mut sink, &partitions, &pools, &settings, later);
        let cx = draining_context(&settings, &pools);
        assert!(
            sink.poll_request().is_none(),
            "partition 3's batch is due by its linger alone: it stays open"
        );
        // Full batches go all the same, each in a slot of its own.
        let full_at = later + settings.linger + round_trip;
        for _ in 0..2 {
            fill_until_sealed(&partitions[0], &settings, &pools, full_at);
            sink.drain(full_at, &cx);
            let (_, request) = sink.poll_request().expect("a full batch");
            assert_eq!(partitions_of(&request), vec![0], "partition 3 still waits");
        }
        // The two requests made before partition 3's batch was due are answered: the
        // two full ones are still out (the broker is still behind), but a request made
        // when the batch was due would have been served by now, so it goes, with what
        // it gathered meanwhile.
        let answered = full_at + round_trip * 2;
        for (token, partition) in tokens.into_iter().zip([1, 2]) {
            let acked = answer(partition, KafkaCode::NONE);
            sink.handle_response(token, Ok(acked), answered, &settings);
        }
        assert_eq!(sink.requests_in_flight(), 2);
        let oldest = sink.oldest_made();
        assert!(
            sink.pace.broker_is_behind(answered, 2, oldest),
            "still behind: the batch goes because the requests before it were answered"
        );
        append(&partitions[3], 2, &settings, &pools, answered);
        sink.drain(answered, &cx);
        let (_, request) = sink.poll_request().expect("partition 3's batch");
        assert_eq!(partitions_of(&request), vec![3]);
        let batch = &request.topics[0].1[0].batch;
        let (parsed, _) = crate::record::RecordBatchRef::parse(batch)
            .expect("a batch")
            .expect("whole");
        assert_eq!(
            parsed.record_count(),
            3,
            "the record due and the two appended while it waited"
        );
    }

    /// Partition 3's batch held while the broker is behind (as in the test above): the
    /// sink, its partitions, the pools, the settings, the two tokens out and the time.
    fn partition_3_held() -> (
        Sink,
        Vec<Arc<ProducePartition>>,
        ArenaPools,
        ProduceSettings,
        [u64; 2],
        Instant,
    ) {
        let round_trip = Duration::from_millis(1);
        let (mut sink, partitions, pools, settings, tokens, sent) =
            two_requests_out_after_a_round_trip_of(round_trip);
        let later = sent + round_trip * 3;
        partition_3_due(&mut sink, &partitions, &pools, &settings, later);
        assert!(
            sink.poll_request().is_none(),
            "held while the broker is behind"
        );
        let now = later + settings.linger;
        (sink, partitions, pools, settings, tokens, now)
    }

    #[test]
    fn a_broken_connection_releases_a_held_batch_and_round_trips_are_learnt_afresh() {
        let (mut sink, partitions, pools, settings, tokens, now) = partition_3_held();
        let cx = draining_context(&settings, &pools);
        // The connection breaks: both requests out fail with it.
        for token in tokens {
            let broken = IoError::Disconnected {
                addr: "127.0.0.1:9".into(),
                reason: "reset".into(),
            };
            sink.handle_response(token, Err(broken), now, &settings);
        }
        sink.drain(now, &cx);
        let (_, request) = sink.poll_request().expect("partition 3's batch");
        assert_eq!(partitions_of(&request), vec![3]);
        assert!(
            sink.poll_request().is_none(),
            "partitions 1 and 2 wait out their backoff"
        );
        // On the next connection two requests are out, for longer than the old
        // connection's quickest round trip (1 ms), before any is answered: the old round
        // trips are forgotten, so the broker does not count as behind and partition 0's
        // lingering batch goes.
        append(&partitions[0], 1, &settings, &pools, now);
        sink.drain(now + settings.linger, &cx);
        sink.poll_request().expect("partition 0's first batch");
        let later = now + settings.linger * 2;
        append(&partitions[0], 1, &settings, &pools, later);
        sink.drain(later + settings.linger, &cx);
        assert_eq!(sink.requests_in_flight(), 3);
        let (_, request) = sink
            .poll_request()
            .expect("partition 0's second batch at its linger");
        assert_eq!(partitions_of(&request), vec![0]);
    }

    #[test]
    fn with_acks_0_a_lingering_batch_never_waits() {
        let round_trip = Duration::from_millis(1);
        let (mut sink, partitions, pools, settings, _tokens, sent) =
            two_requests_out_with_acks(0, round_trip);
        // As in the test above, two out for longer than the quickest round trip; but
        // with acks=0 no answer comes to wait for.
        let later = sent + round_trip * 3;
        assert!(
            sink.pace
                .broker_is_behind(later, sink.requests_in_flight(), sink.oldest_made()),
            "what would count as behind with acks"
        );
        partition_3_due(&mut sink, &partitions, &pools, &settings, later);
        let (_, request) = sink
            .poll_request()
            .expect("partition 3's batch at its linger");
        assert_eq!(partitions_of(&request), vec![3]);
    }

    #[test]
    fn where_the_round_trip_is_longer_than_the_broker_takes_a_lingering_batch_does_not_wait() {
        let round_trip = Duration::from_millis(100);
        let (mut sink, partitions, pools, settings, _tokens, sent) =
            two_requests_out_after_a_round_trip_of(round_trip);
        // Two out, the oldest for less than the quickest round trip.
        let later = sent + round_trip / 4;
        partition_3_due(&mut sink, &partitions, &pools, &settings, later);
        let (_, request) = sink
            .poll_request()
            .expect("partition 3's batch at its linger");
        assert_eq!(partitions_of(&request), vec![3]);
    }

    #[test]
    fn a_batch_filled_while_the_sink_was_not_woken_goes_after_the_answer() {
        use crate::engine::produce::partition::CountingWake;
        let mut settings = settings();
        settings.linger = Duration::from_secs(1);
        let (mut sink, partitions, pools) = sink_of(1);
        let partition = &partitions[0];
        let wakes = Arc::new(CountingWake::default());
        sink.adopt(partition.clone(), wakes.clone());
        let mut cx = context(&settings, &pools, PRODUCER);
        let now = Instant::now();
        append(partition, 1, &settings, &pools, now);
        sink.drain(now, &cx);
        let (token, _) = sink.poll_request().expect("the first batch");
        // Idempotent, nothing acknowledged yet: one batch on the wire. A batch filled
        // meanwhile could not go before the answer, so the sink is not woken for it.
        cx.flushing = false;
        let woken = wakes.count();
        fill_until_sealed(partition, &settings, &pools, now);
        assert_eq!(wakes.count(), woken);
        sink.handle_response(token, Ok(answer(0, KafkaCode::NONE)), now, &settings);
        sink.drain(now, &cx);
        let (_, next) = sink
            .poll_request()
            .expect("the full batch, after the answer");
        assert_eq!(partitions_of(&next), vec![0]);
    }

    #[test]
    fn retries_due_close_together_go_in_one_request() {
        let settings = settings();
        let (mut sink, partitions, pools) = sink_of(2);
        let cx = context(&settings, &pools, PRODUCER);
        // Each partition's batch goes in a request of its own, refused 10 ms apart.
        let t0 = Instant::now();
        let gap = Duration::from_millis(10);
        let mut tokens = Vec::new();
        for (i, p) in partitions.iter().enumerate() {
            let at = t0 + gap * i as u32;
            append(p, 1, &settings, &pools, at);
            sink.drain(at, &cx);
            let (token, request) = sink.poll_request().expect("a request");
            assert_eq!(partitions_of(&request), vec![i as i32]);
            tokens.push((token, at));
        }
        for (i, (token, at)) in tokens.into_iter().enumerate() {
            let refused = answer(i as i32, KafkaCode::NOT_LEADER_OR_FOLLOWER);
            sink.handle_response(token, Ok(refused), at, &settings);
        }
        let backoff = settings.backoff(0);
        assert_eq!(sink.poll_timeout(), None, "no drain since the answers");
        sink.drain(t0 + gap, &cx);
        assert!(sink.poll_request().is_none(), "both are backing off");
        assert_eq!(
            sink.poll_timeout(),
            Some(t0 + backoff),
            "woken when the first backoff ends"
        );
        // Then the second, refused 10 ms later, is within four fifths of its own and
        // goes along.
        sink.drain(t0 + backoff, &cx);
        let (_, retry) = sink.poll_request().expect("the retries");
        assert_eq!(partitions_of(&retry), vec![0, 1], "both in one request");
        assert!(sink.poll_request().is_none());
    }
}
