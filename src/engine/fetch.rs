//! The fetcher's decisions for one broker, sans-IO: which partitions take part in the
//! next Fetch and with how much memory, the KIP-227 incremental session, when to wait
//! instead (consumers full, only caught-up partitions, backoff after an error), and what
//! each partition gets from a response. The driver (`consumer::fetcher`) reserves the
//! memory, sends the request on the broker's worker and runs what this returns.
//!
//! Invariants:
//! - The whole response is one buffer; a partition's records are a `Bytes` slice of it,
//!   delivered with the spans of its complete batches (each header parsed once, here).
//!   The response's size stays charged to the consumer's memory budget until the last
//!   slice is dropped.
//! - A partition's fetch position moves to the end of its last complete batch only when
//!   its consumer accepted the chunk, so the next Fetch is in flight while users read
//!   this one (prefetch); a batch cut at the end of a response is fetched again whole.
//! - In an incremental session a partition is sent only when its fetch position
//!   changed; partitions that left are listed as forgotten; session errors fall back to
//!   a full fetch.
//! - Errors that mean the leader moved hand the partition back to the driver, with the
//!   new leader when the broker named it (KIP-951's `current_leader`);
//!   OFFSET_OUT_OF_RANGE hands it back for the reset policy.
//! - Leader epochs (KIP-320): each partition is fetched with the leader epoch it was
//!   attached under and, from v12, the epoch of the last batch fetched before its
//!   position. FENCED_LEADER_EPOCH (our epoch is old) hands it back like a moved leader;
//!   UNKNOWN_LEADER_EPOCH (the broker is behind) backs it off and fetches it again; a
//!   `diverging_epoch` (the log was truncated below what we fetched) hands it back for
//!   [`epochs::judge`].
//! - A partition whose fetch failed (an error code, OFFSET_OUT_OF_RANGE, a malformed
//!   batch at its position) is left out of fetches for a backoff that doubles from
//!   `retry.backoff.ms` to `retry.backoff.max.ms` while the same position keeps failing;
//!   a new position (a reset) or a clean answer ends it. Other partitions are fetched
//!   meanwhile.
//! - Follower fetching (KIP-392, [`replica`]): every Fetch carries the consumer's rack
//!   (v11+). An answer naming another broker as the partition's preferred read replica
//!   hands the partition back to be fetched there; a read replica's fetcher hands it back
//!   to the leader when the replica's age runs out, when its fetch fails, or when it
//!   answers an error [`replica::falls_back`] names (never resetting the position on
//!   its OFFSET_OUT_OF_RANGE).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::buf::Permit;
use crate::client::{BrokerInfo, LeaderHint};
use crate::error::Error;
use crate::protocol::messages::fetch::{FetchPartition, FetchTopic, ForgottenTopic};
use crate::protocol::messages::{FetchRequest, FetchResponse};
use crate::protocol::{ApiKey, KafkaCode, Uuid, is_stale_metadata};
use crate::record::{BatchRef, BatchSpan};

pub(crate) mod epochs;
pub(crate) mod replica;
use epochs::EpochEnd;
use replica::ReadReplica;

/// A partition's fetched data: a slice of one response, with its complete batches.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub records: Bytes,
    /// The complete batches in `records`, in order.
    pub batches: VecDeque<BatchSpan>,
    /// Aborted transactions (producer id, first offset) for read_committed.
    pub aborted: Vec<(i64, i64)>,
    /// Keeps the response's memory charged until every slice of it is gone.
    pub _permit: Arc<Permit>,
}

/// A partition as the fetcher sees it: the consumer side shares its position, pause
/// and room with the fetcher through this.
pub(crate) trait FetchTarget {
    fn topic(&self) -> &Arc<str>;
    fn partition(&self) -> i32;
    /// The next offset to fetch.
    fn fetch_position(&self) -> i64;
    /// The leader epoch of the last batch fetched before the position (-1 when unknown:
    /// nothing fetched yet, a reset, a legacy message).
    fn fetch_epoch(&self) -> i32;
    /// Moves the position, with the leader epoch of what lies just before it.
    fn set_fetch_position(&self, offset: i64, epoch: i32);
    /// The leader epoch the partition is fetched under (from metadata when it was
    /// attached to this broker; -1 when unknown, which the broker does not check).
    fn current_leader_epoch(&self) -> i32;
    /// -1 until a fetch reported it.
    fn high_watermark(&self) -> i64;
    fn set_high_watermark(&self, offset: i64);
    fn paused(&self) -> bool;
    /// Whether its consumer can take another chunk now.
    fn has_room(&self) -> bool;
    /// Whether its consumer is gone.
    fn is_closed(&self) -> bool;
    /// Hands a chunk to the consumer; false when it has no room after all.
    fn deliver(&self, chunk: Chunk) -> bool;
    /// Reports an error to the consumer.
    fn report(&self, error: Error);
    /// The replica it is read from instead of its leader (KIP-392), if any.
    fn read_replica(&self) -> Option<ReadReplica>;
    /// Remembers (or, with `None`, forgets) its read replica; the fetcher changes it
    /// only by [`replica`]'s rules.
    fn set_read_replica(&self, replica: Option<ReadReplica>);
}

/// The consumer settings the fetcher needs.
#[derive(Debug, Clone)]
pub(crate) struct FetchSettings {
    pub max_wait: Duration,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    /// The wait after a Fetch failed as a whole, and a partition's first wait after
    /// its fetch failed (`retry.backoff.ms`).
    pub error_backoff: Duration,
    /// The longest a failing partition waits (`retry.backoff.max.ms`).
    pub error_backoff_max: Duration,
    /// The consumer's rack (`client.rack`), sent as `rack_id` (v11+); empty for none.
    pub rack_id: String,
    /// How long a preferred read replica is used before the leader is asked again
    /// (`metadata.max.age.ms`, as the Java client).
    pub read_replica_max_age: Duration,
}

/// A partition's backoff after its fetch failed at `position`.
#[derive(Debug, Clone, Copy)]
struct PartitionBackoff {
    /// The fetch position that failed: the backoff holds only while it stays.
    position: i64,
    until: Instant,
    /// The wait it got, doubled at its next failure at the same position.
    delay: Duration,
}

/// How long a fetcher whose only fetchable partitions are caught up waits for others to
/// make room, and the longest the broker may hold such a fetch.
pub(crate) const SHORT_POLL: Duration = Duration::from_millis(20);

/// How long after a partition joins a fetcher its fetches still poll short (at most
/// [`SHORT_POLL`]). Kafka answers a connection's requests one at a time, so a partition
/// that joins while a long poll is in flight waits for it: up to `fetch.max.wait.ms` on
/// quiet partitions. Partitions join one by one as consumers start (each after a leader
/// lookup and often a ListOffsets), so without this every partition but the first waited
/// a whole long poll on a fresh topic, and records written meanwhile reached the
/// consumer that much late. While partitions keep joining no fetch polls long; once
/// none has joined for this long, long polls resume.
pub(crate) const JOIN_SETTLE: Duration = Duration::from_millis(200);

/// How often a fetcher whose consumers are all full or paused looks again without a
/// wake-up.
const FULL_RECHECK: Duration = Duration::from_millis(100);

/// Top-level Fetch errors that only end the fetch session (KIP-227).
fn is_session_error(code: KafkaCode) -> bool {
    code == KafkaCode::FETCH_SESSION_ID_NOT_FOUND
        || code == KafkaCode::INVALID_FETCH_SESSION_EPOCH
        || code == KafkaCode::FETCH_SESSION_TOPIC_ID_ERROR
}

/// What the driver should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Reserve `max_bytes` of the memory budget, then send
    /// [`Fetcher::build_request`]'s request; with `short_poll` the broker may hold it
    /// only briefly.
    Fetch { max_bytes: usize, short_poll: bool },
    /// Nothing worth fetching: wait for a wake-up or until `until`.
    Wait { until: Instant },
    /// No partitions left.
    Idle,
}

/// Partitions handed back by a response.
#[derive(Debug)]
pub(crate) struct FetchOutcome<P> {
    /// Their leader moved (or is unknown), or our leader epoch is old: find it again.
    pub moved: Vec<Arc<P>>,
    /// OFFSET_OUT_OF_RANGE: apply the reset policy.
    pub reset: Vec<Arc<P>>,
    /// The leader's log diverges below their fetch position (Fetch v12+'s
    /// `diverging_epoch`): judge it with [`epochs::judge`].
    pub diverged: Vec<(Arc<P>, EpochEnd)>,
    /// Who leads the moved partitions now, where the broker said (KIP-951).
    pub hints: Vec<LeaderHint>,
    /// The brokers the hints name (Fetch v16+'s `node_endpoints`).
    pub endpoints: Vec<BrokerInfo>,
    /// The answer named another broker as their preferred read replica (KIP-392,
    /// already set on them): fetch them there.
    pub redirected: Vec<Arc<P>>,
    /// Fetched from a read replica that could not serve them (see
    /// [`replica::falls_back`]; the replica already forgotten): back to their leader.
    pub fallback: Vec<Arc<P>>,
}

impl<P> FetchOutcome<P> {
    fn new() -> Self {
        FetchOutcome {
            redirected: Vec::new(),
            fallback: Vec::new(),
            moved: Vec::new(),
            reset: Vec::new(),
            diverged: Vec::new(),
            hints: Vec::new(),
            endpoints: Vec::new(),
        }
    }
}

/// Session state (KIP-227).
#[derive(Debug, Default)]
struct Session {
    id: i32,
    epoch: i32,
    /// What the broker's session holds: (topic, partition) → fetch offset sent.
    sent: HashMap<(Arc<str>, i32), i64>,
    /// Whether it names topics by id (begun at v13+): a broker refuses an incremental
    /// fetch that names them the other way (FETCH_SESSION_TOPIC_ID_ERROR), so a change
    /// of version across 13 begins a new session.
    by_id: bool,
}

/// One broker's fetcher.
pub(crate) struct Fetcher<P> {
    settings: FetchSettings,
    /// The broker's id (-1 when unknown): a partition whose read replica is this broker
    /// is fetched from a follower here.
    node: i32,
    partitions: Vec<Arc<P>>,
    session: Session,
    /// Until when caught-up partitions wait for others to make room.
    room_wait_until: Option<Instant>,
    retry_at: Option<Instant>,
    /// The partitions of the request in flight, and its topic ids (v13+).
    requested: Vec<Arc<P>>,
    topic_names: HashMap<Uuid, Arc<str>>,
    /// Partitions whose fetch failed, waiting before they are fetched again.
    backoff: HashMap<(Arc<str>, i32), PartitionBackoff>,
    /// The time of the last `poll_next`, for `build_request`.
    now: Option<Instant>,
    /// A partition joined since the last `poll_next`.
    joined: bool,
    /// Until when fetches poll short because partitions joined ([`JOIN_SETTLE`]).
    settle_until: Option<Instant>,
}

fn key<P: FetchTarget>(p: &P) -> (Arc<str>, i32) {
    (p.topic().clone(), p.partition())
}

/// What the fetch loop needs to know of one partition to decide whether to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FetchState {
    paused: bool,
    has_room: bool,
    /// Waiting after its fetch failed.
    backing_off: bool,
    fetch_position: i64,
    high_watermark: i64,
}

impl FetchState {
    fn of<P: FetchTarget>(p: &P, backing_off: bool) -> Self {
        FetchState {
            paused: p.paused(),
            has_room: p.has_room(),
            backing_off,
            fetch_position: p.fetch_position(),
            high_watermark: p.high_watermark(),
        }
    }

    fn active(&self) -> bool {
        !self.paused && self.has_room && !self.backing_off
    }
}

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
    let mut active = states.iter().filter(|s| s.active()).peekable();
    waiting_for_room
        && active.peek().is_some()
        && active.all(|s| s.high_watermark >= 0 && s.fetch_position >= s.high_watermark)
}

impl<P: FetchTarget> Fetcher<P> {
    /// A fetcher whose broker id is not known (-1): every partition is fetched from
    /// its leader here (tests, the simulation, fuzzing).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn new(settings: FetchSettings) -> Self {
        Self::for_broker(settings, -1)
    }

    /// The fetcher of broker `node`.
    pub fn for_broker(settings: FetchSettings, node: i32) -> Self {
        Fetcher {
            settings,
            node,
            partitions: Vec::new(),
            session: Session::default(),
            room_wait_until: None,
            retry_at: None,
            requested: Vec::new(),
            topic_names: HashMap::new(),
            backoff: HashMap::new(),
            now: None,
            joined: false,
            settle_until: None,
        }
    }

    /// Whether `p` waits after a failed fetch at `now`: its backoff has not run out
    /// and its position is still the one that failed.
    fn backing_off(&self, p: &P, now: Instant) -> bool {
        self.backoff
            .get(&key(p))
            .is_some_and(|b| now < b.until && b.position == p.fetch_position())
    }

    /// The earliest end of a backoff that still holds.
    fn next_backoff_end(&self, now: Instant) -> Option<Instant> {
        self.partitions
            .iter()
            .filter(|p| self.backing_off(p, now))
            .filter_map(|p| self.backoff.get(&key(&**p)).map(|b| b.until))
            .min()
    }

    /// `p`'s fetch failed at `now`: it waits `retry.backoff.ms`, doubling (to
    /// `retry.backoff.max.ms`) while the same position keeps failing.
    fn back_off(&mut self, p: &P, now: Instant) {
        let position = p.fetch_position();
        let s = &self.settings;
        let delay = match self.backoff.get(&key(p)) {
            Some(b) if b.position == position => b
                .delay
                .saturating_mul(2)
                .min(s.error_backoff_max.max(s.error_backoff)),
            _ => s.error_backoff,
        };
        self.backoff.insert(
            key(p),
            PartitionBackoff {
                position,
                until: now + delay,
                delay,
            },
        );
    }

    /// Starts fetching for a partition.
    pub fn add(&mut self, partition: Arc<P>) {
        self.partitions.push(partition);
        self.joined = true;
    }

    /// Whether a fetch built now polls short because partitions joined a moment ago.
    fn settling(&self) -> bool {
        matches!((self.now, self.settle_until), (Some(now), Some(until)) if now < until)
    }

    /// Whether `p` is fetched here from a follower, its read replica.
    fn reads_from_replica(&self, p: &P) -> bool {
        self.node >= 0 && p.read_replica().is_some_and(|r| r.broker == self.node)
    }

    /// Hands back the partitions read here from a follower whose read replica's age ran
    /// out at `now` (the replica forgotten): they go back to their leader, which may
    /// name a replica again. Call it before [`Fetcher::poll_next`], never while a Fetch
    /// is in flight.
    pub fn poll_expired(&mut self, now: Instant) -> Vec<Arc<P>> {
        let (expired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.partitions)
            .into_iter()
            .partition(|p| {
                self.reads_from_replica(p) && p.read_replica().is_some_and(|r| !r.is_current(now))
            });
        self.partitions = kept;
        for p in &expired {
            p.set_read_replica(None);
            self.backoff.remove(&key(&**p));
        }
        expired
    }

    /// The earliest end of a read replica's age among the partitions read here from a
    /// follower.
    fn next_expiry(&self) -> Option<Instant> {
        self.partitions
            .iter()
            .filter(|p| self.reads_from_replica(p))
            .filter_map(|p| p.read_replica().map(|r| r.until))
            .min()
    }

    /// Decides what to do now. `budget` is the memory budget's capacity (a fetch never
    /// reserves more). A wait ends no later than a read replica's age (then
    /// [`Fetcher::poll_expired`] hands the partition back).
    pub fn poll_next(&mut self, now: Instant, budget: usize) -> Next {
        match (self.decide(now, budget), self.next_expiry()) {
            (Next::Wait { until }, Some(expiry)) => Next::Wait {
                until: until.min(expiry.max(now)),
            },
            (next, _) => next,
        }
    }

    fn decide(&mut self, now: Instant, budget: usize) -> Next {
        self.partitions.retain(|p| !p.is_closed());
        if !self.backoff.is_empty() {
            let partitions = &self.partitions;
            self.backoff
                .retain(|k, _| partitions.iter().any(|p| key(&**p) == *k));
        }
        self.now = Some(now);
        if std::mem::take(&mut self.joined) {
            self.settle_until = Some(now + JOIN_SETTLE);
        }
        if self.partitions.is_empty() {
            self.session = Session::default();
            self.backoff.clear();
            return Next::Idle;
        }
        if let Some(at) = self.retry_at {
            if now < at {
                return Next::Wait { until: at };
            }
            self.retry_at = None;
        }
        let states: Vec<FetchState> = self
            .partitions
            .iter()
            .map(|p| FetchState::of(&**p, self.backing_off(p, now)))
            .collect();
        let active = states.iter().filter(|s| s.active()).count();
        if active == 0 {
            self.room_wait_until = None;
            // Full or paused consumers are looked at again now and then; partitions
            // that only back off, when their backoff ends.
            let recheck = states
                .iter()
                .any(|s| !s.backing_off && (s.paused || !s.has_room))
                .then(|| now + FULL_RECHECK);
            let until = match (recheck, self.next_backoff_end(now)) {
                (Some(r), Some(b)) => r.min(b),
                (Some(t), None) | (None, Some(t)) => t,
                (None, None) => now + FULL_RECHECK,
            };
            return Next::Wait { until };
        }
        let short_poll = nothing_worth_fetching(&states);
        if short_poll {
            // Give the full ones a moment to make room before a short poll.
            match self.room_wait_until {
                None => {
                    let until = now + SHORT_POLL;
                    self.room_wait_until = Some(until);
                    return Next::Wait { until };
                }
                Some(until) if now < until => return Next::Wait { until },
                Some(_) => {}
            }
        }
        self.room_wait_until = None;
        // Reserve what this fetch can bring back (each active partition's maximum, capped
        // by the request maximum), not always the request maximum: fetchers of several
        // brokers share the budget and must be able to fetch at the same time.
        let max_bytes = (active * self.settings.partition_max_bytes.max(1) as usize)
            .min(self.settings.max_bytes.max(1) as usize)
            .min(budget.max(1));
        Next::Fetch {
            max_bytes,
            short_poll,
        }
    }

    /// The Fetch request for the partitions whose consumers have room, at `version`,
    /// within `max_bytes`. `topic_id` names a topic's id (v13+ fetch by id).
    pub fn build_request(
        &mut self,
        version: i16,
        max_bytes: usize,
        short_poll: bool,
        topic_id: &dyn Fn(&str) -> Uuid,
    ) -> FetchRequest {
        let now = self.now;
        self.requested = self
            .partitions
            .iter()
            .filter(|p| !p.paused() && p.has_room())
            .filter(|p| !now.is_some_and(|now| self.backing_off(p, now)))
            .cloned()
            .collect();
        let s = &self.settings;
        self.topic_names.clear();
        let sessions = version >= 7;
        let by_id = version >= 13;
        let full = !sessions || self.session.id == 0 || self.session.by_id != by_id;
        if full {
            self.session = Session {
                by_id,
                ..Session::default()
            };
        }
        let mut topics: Vec<FetchTopic> = Vec::new();
        let mut current: HashMap<(Arc<str>, i32), i64> = HashMap::new();
        for p in &self.requested {
            let offset = p.fetch_position();
            let k = key(&**p);
            current.insert(k.clone(), offset);
            if by_id && !self.topic_names.values().any(|t| t == p.topic()) {
                // Known even when the session leaves the partition out of this request:
                // the answer may still carry its data.
                self.topic_names
                    .insert(topic_id(p.topic()), p.topic().clone());
            }
            if !full && self.session.sent.get(&k) == Some(&offset) {
                continue;
            }
            let mut part = FetchPartition::default()
                .with_partition(p.partition())
                .with_current_leader_epoch(p.current_leader_epoch())
                .with_fetch_offset(offset)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(s.partition_max_bytes);
            if version >= 12 {
                // The broker checks it against its log and answers `diverging_epoch`
                // when the log was truncated below the position.
                part.last_fetched_epoch = p.fetch_epoch();
            }
            let id = if by_id {
                topic_id(p.topic())
            } else {
                Uuid::ZERO
            };
            match topics.iter_mut().find(|t| {
                if by_id {
                    t.topic_id == id
                } else {
                    t.topic == **p.topic()
                }
            }) {
                Some(t) => t.partitions.push(part),
                None => {
                    topics.push(topic_entry(p.topic(), id, by_id).with_partitions(vec![part]));
                }
            }
        }
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        if !full {
            for (t, partition) in self.session.sent.keys() {
                if current.contains_key(&(t.clone(), *partition)) {
                    continue;
                }
                let id = topic_id(t);
                match forgotten
                    .iter_mut()
                    .find(|f| f.topic == **t || (by_id && f.topic_id == id))
                {
                    Some(f) => f.partitions.push(*partition),
                    None => {
                        let (name, id) = if by_id {
                            (String::new(), id)
                        } else {
                            (t.to_string(), Uuid::ZERO)
                        };
                        forgotten.push(
                            ForgottenTopic::default()
                                .with_topic(name)
                                .with_topic_id(id)
                                .with_partitions(vec![*partition]),
                        );
                    }
                }
            }
        }
        self.session.sent = current;
        let max_wait = if short_poll || self.settling() {
            s.max_wait.min(SHORT_POLL)
        } else {
            s.max_wait
        };
        let mut request = FetchRequest::default()
            .with_max_wait_ms(max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(s.min_bytes)
            .with_max_bytes(i32::try_from(max_bytes).unwrap_or(i32::MAX))
            .with_isolation_level(s.isolation_level)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten);
        if sessions {
            let (id, epoch) = if full {
                (0, 0)
            } else {
                (self.session.id, self.session.epoch)
            };
            request = request.with_session_id(id).with_session_epoch(epoch);
        }
        if version <= 14 {
            request = request.with_replica_id(-1);
        }
        if version >= 11 {
            request = request.with_rack_id(s.rack_id.clone());
        }
        request
    }

    /// The Fetch failed as a whole (the connection broke or timed out): every partition
    /// goes back to find its leader again (those read here from a follower forget it).
    pub fn handle_failure(&mut self) -> Vec<Arc<P>> {
        self.session = Session::default();
        self.requested.clear();
        self.backoff.clear();
        let partitions = std::mem::take(&mut self.partitions);
        for p in &partitions {
            if self.reads_from_replica(p) {
                p.set_read_replica(None);
            }
        }
        partitions
    }

    /// Applies a response: chunks to the consumers, positions, the session. `permit` is
    /// the memory reserved for it; it shrinks to what the response holds.
    pub fn handle_response(
        &mut self,
        response: FetchResponse,
        version: i16,
        mut permit: Permit,
        now: Instant,
    ) -> FetchOutcome<P> {
        let mut outcome = FetchOutcome::new();
        let code = KafkaCode(response.error_code);
        let incremental = self.session.id != 0;
        if incremental && is_session_error(code) {
            // The broker lost or refused the session: a full fetch at once begins
            // another. (After a full fetch the same answer backs off below: a broker
            // repeating it must not be asked in a loop.)
            self.session = Session::default();
            return outcome;
        }
        if !code.is_ok() {
            tracing::warn!(%code, "fetch error");
            self.session = Session::default();
            self.retry_at = Some(now + self.settings.error_backoff);
            return outcome;
        }
        if response.session_id != 0 || self.session.id != 0 {
            self.session.id = response.session_id;
            self.session.epoch = if self.session.id == 0 {
                0
            } else {
                self.session.epoch.wrapping_add(1).max(1)
            };
        }
        let used: usize = response
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.records.as_ref().map_or(0, Bytes::len))
            .sum();
        permit.shrink_to(used.max(1));
        let permit = Arc::new(permit);
        let response_endpoints = response.node_endpoints;
        for topic in response.responses {
            let name = if version >= 13 {
                self.topic_names.get(&topic.topic_id).cloned()
            } else {
                Some(Arc::from(topic.topic.as_str()))
            };
            let Some(name) = name else { continue };
            for data in topic.partitions {
                let Some(p) = self
                    .requested
                    .iter()
                    .find(|p| **p.topic() == *name && p.partition() == data.partition_index)
                    .cloned()
                else {
                    continue;
                };
                let code = KafkaCode(data.error_code);
                if self.reads_from_replica(&p) && replica::falls_back(code) {
                    tracing::debug!(topic = %p.topic(), partition = p.partition(), broker = self.node, %code, "read replica failed: back to the leader");
                    p.set_read_replica(None);
                    outcome.fallback.push(p);
                    continue;
                }
                let preferred = data.preferred_read_replica;
                if self.apply_partition(&p, data, &permit, &mut outcome) {
                    self.backoff.remove(&key(&*p));
                } else {
                    self.back_off(&p, now);
                }
                if code.is_ok() && self.redirects(&p, preferred, now) {
                    outcome.redirected.push(p);
                }
            }
        }
        let diverged = outcome.diverged.iter().map(|(p, _)| p);
        for p in outcome
            .moved
            .iter()
            .chain(outcome.reset.iter())
            .chain(outcome.fallback.iter())
            .chain(diverged)
        {
            self.session.sent.remove(&key(&**p));
        }
        if !outcome.hints.is_empty() {
            outcome.endpoints = endpoints_of(&response_endpoints);
        }
        // Redirected partitions stay in the session's record, so the next request
        // lists them as forgotten.
        let gone: Vec<Arc<P>> = outcome
            .moved
            .iter()
            .chain(outcome.fallback.iter())
            .chain(outcome.redirected.iter())
            .cloned()
            .collect();
        self.partitions
            .retain(|p| !gone.iter().any(|m| Arc::ptr_eq(m, p)));
        for p in &gone {
            self.backoff.remove(&key(&**p));
        }
        outcome
    }

    /// Applies a clean answer's `preferred_read_replica` (KIP-392) to `p`: true when it
    /// is to be fetched from another broker now.
    fn redirects(&self, p: &P, preferred_read_replica: i32, now: Instant) -> bool {
        if preferred_read_replica < 0 || preferred_read_replica == self.node {
            return false;
        }
        let current = p.read_replica();
        let next = replica::after_answer(
            current,
            self.node,
            preferred_read_replica,
            now,
            self.settings.read_replica_max_age,
        );
        if next != current {
            tracing::debug!(topic = %p.topic(), partition = p.partition(), from = self.node, replica = preferred_read_replica, "preferred read replica");
            p.set_read_replica(next);
        }
        next.is_some_and(|r| r.broker != self.node)
    }

    /// Applies one partition's answer; false when it failed (an error code,
    /// OFFSET_OUT_OF_RANGE, a malformed batch and nothing before it), so that it
    /// backs off.
    fn apply_partition(
        &self,
        p: &Arc<P>,
        data: crate::protocol::messages::fetch::PartitionData,
        permit: &Arc<Permit>,
        outcome: &mut FetchOutcome<P>,
    ) -> bool {
        let code = KafkaCode(data.error_code);
        if code == KafkaCode::OFFSET_OUT_OF_RANGE {
            // The reset policy moves the position (which ends the backoff at once), or,
            // with reset none, reports the error: the refetch then waits.
            outcome.reset.push(p.clone());
            return false;
        }
        if code == KafkaCode::UNKNOWN_LEADER_EPOCH {
            // KIP-320: the broker has not caught up with the leader epoch our metadata
            // names; it will. Fetched again after the backoff, not an error to report.
            tracing::debug!(topic = %p.topic(), partition = p.partition(), epoch = p.current_leader_epoch(), "broker behind our leader epoch");
            return false;
        }
        if is_stale_metadata(code) {
            let leader = &data.current_leader;
            if let Some(hint) = LeaderHint::new(
                p.topic().clone(),
                p.partition(),
                leader.leader_id,
                leader.leader_epoch,
            ) {
                outcome.hints.push(hint);
            }
            outcome.moved.push(p.clone());
            return true;
        }
        if !code.is_ok() {
            p.report(Error::broker(
                code,
                ApiKey::Fetch,
                Some(p.topic()),
                Some(p.partition()),
            ));
            return false;
        }
        p.set_high_watermark(data.high_watermark);
        let diverging = &data.diverging_epoch;
        if diverging.epoch >= 0 || diverging.end_offset >= 0 {
            outcome.diverged.push((
                p.clone(),
                EpochEnd {
                    leader_epoch: diverging.epoch,
                    end_offset: diverging.end_offset,
                },
            ));
            return false;
        }
        let records = data.records.unwrap_or_default();
        if records.is_empty() {
            return true;
        }
        let start = p.fetch_position();
        let mut malformed = false;
        let (batches, complete) = complete_batches(&records, |e| {
            malformed = true;
            p.report(Error::Batch(format!(
                "{}-{} at offset {start} or after: {e}",
                p.topic(),
                p.partition()
            )));
        });
        let Some(last) = batches.back() else {
            return !malformed;
        };
        let next = last.next_offset();
        if next <= start {
            return !malformed;
        }
        let epoch = leader_epoch_of(&records, last);
        let chunk = Chunk {
            records: records.slice(..complete),
            batches,
            aborted: data
                .aborted_transactions
                .unwrap_or_default()
                .iter()
                .map(|a| (a.producer_id, a.first_offset))
                .collect(),
            _permit: permit.clone(),
        };
        // No room after all (or gone): fetched again later from the same position.
        if p.deliver(chunk) {
            p.set_fetch_position(next, epoch);
        }
        true
    }
}

/// The partition leader epoch of a v2 batch (-1 for a legacy message): read from its
/// header once per chunk, for the position after it.
fn leader_epoch_of(records: &Bytes, span: &BatchSpan) -> i32 {
    match BatchRef::from_span(records, *span) {
        Some(BatchRef::V2(b)) => b.partition_leader_epoch(),
        _ => -1,
    }
}

/// The brokers a response names (KIP-951), as metadata describes them.
fn endpoints_of(endpoints: &[crate::protocol::messages::fetch::NodeEndpoint]) -> Vec<BrokerInfo> {
    endpoints
        .iter()
        .map(|e| BrokerInfo {
            id: e.node_id,
            host: e.host.clone(),
            port: e.port,
            rack: e.rack.clone(),
        })
        .collect()
}

fn topic_entry(name: &str, id: Uuid, by_id: bool) -> FetchTopic {
    if by_id {
        FetchTopic::default()
            .with_topic(String::new())
            .with_topic_id(id)
    } else {
        FetchTopic::default()
            .with_topic(name.to_string())
            .with_topic_id(Uuid::ZERO)
    }
}

/// The complete batches (v2, or legacy v0/v1 messages from old segments) at the
/// front of `records` and the bytes they cover: each header parsed here, once. A
/// batch cut at the end is left for the next fetch; a
/// malformed one is reported and ends the chunk.
pub(crate) fn complete_batches(
    records: &Bytes,
    report: impl FnOnce(crate::record::RecordError),
) -> (VecDeque<BatchSpan>, usize) {
    let mut batches = VecDeque::new();
    let mut rest: &[u8] = records;
    loop {
        match BatchRef::parse(rest) {
            Ok(Some((batch, tail))) => {
                if let Some(span) = batch.span_in(records) {
                    batches.push_back(span);
                }
                rest = tail;
            }
            Ok(None) => break,
            Err(e) => {
                report(e);
                break;
            }
        }
    }
    (batches, records.len() - rest.len())
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
