//! The deterministic simulation: a producer and a consumer built from kring's engines
//! (connection cores, per-broker producer sinks and partition rules, fetchers, the
//! consumer's partition reader) against a simulated cluster (`cluster.rs`), in one
//! thread, with virtual time and faults drawn from a seed: requests dropped, answers
//! dropped, delayed, reordered, duplicated or split, connections cut mid-request,
//! traffic stalled for seconds (one piece, or a broker's whole network going dark),
//! requests of connections the client closed still reaching the broker late (as TCP
//! delivers what was written before the FIN), a short `delivery.timeout.ms` in some
//! runs, leaders moved (in half the runs a refusal for want of leadership names the
//! new leader, KIP-951, and the producer moves the partition at once), retriable
//! produce errors (with and without the write having happened), partitions refusing
//! writes for seconds at a time (short of in-sync replicas) while records for them keep
//! coming, fetch sessions forgotten. A quarter of the runs produce without idempotence.
//! After each run it checks that nothing acknowledged was lost, nothing was written
//! twice and each partition's order held (with idempotence; without it, that the logs
//! hold only records sent to them), every
//! delivery resolved (every odd record is sent with a tag instead of a future: each was
//! reported to the delivery handler exactly once, at the offset the log holds it at),
//! and the consumer read every offset exactly once. Sinks drain as the producer's
//! driver drains them (`SimSink`): when the appending threads wake them (which they skip
//! when the sink's published timer comes by their batch's linger end, or when it waits
//! for an answer with every request slot taken), when answered,
//! or when their timer fires, up to the timer resolution late. A timer a sink needs
//! and does not set (a retry's backoff, say) leaves records unsent, and the run fails
//! (no progress) where every-step draining hid it. A wake-up wrongly skipped would only
//! delay a batch until that sink next drained (each flush and each wait for room among
//! the queued records wakes every sink), so after every step the run also checks the
//! promise those skips rest on: a sink that published that it waits for an answer has
//! every slot taken, and for each open batch with no sealed batch of its partition
//! ahead of it, the sink is woken, or has published a timer no later than the batch's
//! linger end, or (a batch it saw due and held, or one opened while it waits for an
//! answer) has a request on the wire whose answer brings it back
//! (`World::check_lingers_covered`). Nothing here times a batch's
//! send itself: how long a sink holds a batch that is due (slots, the broker's pace,
//! retries) is the sink's unit tests'.
//!
//! A failing seed prints itself and the run's last events; `KRING_SIM_SEED=<seed> cargo
//! test --lib engine::sim::replay -- --nocapture` runs it again, exactly, and prints its
//! whole trace (also when it passes). `KRING_SIM_SHOW_TIMEOUTS=1` names the seeds whose
//! records ran into `delivery.timeout.ms` (allowed: some seeds cut connections every few
//! hundred milliseconds). Nothing here
//! reads the clock (virtual time starts at one `Instant` and only moves forward by
//! simulated amounts) or iterates a hash map where order could matter.

mod cluster;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use self::cluster::{ProduceFault, Reply, SimCluster, fetch_deadline};
use crate::buf::MemoryBudget;
use crate::client::{BrokerInfo, ClusterMetadata, LeaderHint};
use crate::consumer::reader::{Advance, PartitionReader};
use crate::engine::backoff::SplitMix64;
use crate::engine::connection::{
    Connection, ConnectionConfig, EncodeRequest, Event, RawResponse, TypedRequest,
};
use crate::engine::error::IoError;
use crate::engine::fetch::testing::TestTarget;
use crate::engine::fetch::{FetchSettings, FetchTarget, Fetcher, Next};
use crate::engine::produce::arenas::ArenaPools;
use crate::engine::produce::completion::{
    BatchAck, BatchShared, ReportTagged, Resolved, TagReports, TaggedRecord,
};
use crate::engine::produce::partition::{
    Appended, ProducePartition, ProduceSettings, ProducerAccounts, ProducerId, RecordParts,
};
use crate::engine::produce::queued::QueuedRecords;
use crate::engine::produce::sink::{Leaders, Sink, SinkContext, SinkEvent};
use crate::engine::produce::wake::{NextDrain, Wake};
use crate::error::Error;
use crate::protocol::messages::{
    FetchRequest, FetchResponse, InitProducerIdRequest, InitProducerIdResponse, MetadataRequest,
    MetadataResponse,
};
use crate::protocol::{
    FrameCutter, RequestKind, ResponseKind, decode_request_frame, decode_response_body,
    encode_response_frame_with,
};
use crate::record::{Compression, RecordBatchRef};

/// Seeded randomness.
struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.0.next_u64() % n }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.0.next_f64() < p
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi.saturating_sub(lo) + 1))
    }
}

/// The fault rates of one run, drawn from its seed (some runs are calm, some rough).
#[derive(Debug, Clone)]
struct Faults {
    drop_request: f64,
    drop_response: f64,
    delay: f64,
    reorder: f64,
    duplicate: f64,
    split: f64,
    /// How often a connection is cut, on average.
    cut_every: Option<Duration>,
    /// How often a partition's leader moves, on average.
    move_every: Option<Duration>,
    produce_refuse: f64,
    produce_write_then_time_out: f64,
    /// How often the brokers forget their fetch sessions, on average.
    forget_every: Option<Duration>,
    /// How often a piece on the wire is held for seconds (a network that drops every
    /// packet for a while, then TCP retransmits): longer than the request timeout.
    stall: f64,
    /// How often a broker's network goes dark for seconds, on average: nothing reaches
    /// it or leaves it until then, and what was held goes on after, in order.
    dark_every: Option<Duration>,
    /// How often, on average, a spell of refusing writes for want of in-sync replicas
    /// (one to six seconds) is drawn for a random partition (none if that partition is
    /// short already), while records remain to be appended and in the run's first
    /// seconds (`SPELLS_WITHIN`): its batches retry, back off and may expire while
    /// records for it keep coming.
    short_every: Option<Duration>,
    /// The producer's `delivery.timeout.ms`: some runs give up on records while their
    /// requests are still on the wire, so their fate is unknown.
    delivery_timeout: Duration,
}

impl Faults {
    fn draw(rng: &mut Rng) -> Faults {
        let level = [0.0, 0.005, 0.02, 0.06][rng.below(4) as usize];
        let mut rate = |scale: f64| if rng.chance(0.7) { level * scale } else { 0.0 };
        let (drop_request, drop_response, delay) = (rate(1.0), rate(1.0), rate(4.0));
        let (reorder, duplicate, split) = (rate(0.5), rate(0.3), rate(5.0));
        let (produce_refuse, produce_write_then_time_out) = (rate(3.0), rate(3.0));
        let stall = rate(0.5);
        let mut every = |mean_ms: u64| {
            (level > 0.0 && rng.chance(0.6))
                .then(|| Duration::from_millis(mean_ms / 2 + rng.below(mean_ms)))
        };
        Faults {
            drop_request,
            drop_response,
            delay,
            reorder,
            duplicate,
            split,
            cut_every: every(400),
            move_every: every(600),
            produce_refuse,
            produce_write_then_time_out,
            forget_every: every(800),
            stall,
            dark_every: every(3_000),
            // Drawn apart (`World::new`), so that runs without it go as before.
            short_every: None,
            delivery_timeout: if rng.chance(0.3) {
                rng.millis(3_500, 8_000)
            } else {
                Duration::from_secs(120)
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Producer,
    Consumer,
}

/// What a request on a connection was for.
#[derive(Debug)]
enum Token {
    Produce(u64),
    Fetch,
    Metadata,
    InitProducerId,
}

/// One TCP connection between a client and a broker.
struct Link {
    side: Side,
    broker: i32,
    engine: Connection<Token>,
    to_server: VecDeque<(Instant, Bytes)>,
    /// Answers in transit, in stream order (a reorder fault puts one ahead of the
    /// answer before it); each delivered piece by piece, never interleaved.
    to_client: VecDeque<Answer>,
    server_cutter: FrameCutter,
}

/// The request bytes of a connection the client closed, still on their way to the
/// broker: TCP delivers what was written before the FIN, so a request the client gave up
/// on may still be written, late, with nobody to hear its answer.
struct Orphan {
    broker: i32,
    to_server: VecDeque<(Instant, Bytes)>,
    cutter: FrameCutter,
}

/// One answer frame on its way to the client, in one or more pieces with their times.
struct Answer {
    pieces: VecDeque<(Instant, Bytes)>,
    /// A piece was delivered already: nothing may be put ahead of it any more.
    started: bool,
}

/// A fetch the cluster holds until data arrives or its long poll runs out.
struct Parked {
    link: u64,
    correlation_id: i32,
    version: i16,
    request: FetchRequest,
    deadline: Instant,
}

/// A client's connection to one broker: the current link, and when it may reconnect.
#[derive(Default)]
struct Slot {
    link: Option<u64>,
    retry_at: Option<Instant>,
}

/// A sink's driver as the producer's runs it (`producer::driver::run_sink`): a sink
/// drains only when its partitions' appending threads wake it, an answer of its comes,
/// a partition is handed to it, the producer's epoch bump ends (idempotent runs) or a
/// flush begins (or a record waits for room among the queued records, which hurries the
/// sinks as a flush does), or its timer fires; otherwise it sleeps. The timer fires late
/// by up to the run's timer resolution, as tokio's millisecond wheel does (and then at
/// the next step: steps are at least 100 µs apart). The appending threads read what
/// the sink published ([`NextDrain`]) and skip the wake-up when its timer comes by their
/// batch's linger end, or when it waits for an answer with every request slot taken
/// (`World::check_lingers_covered` fails the run where a sink is neither woken nor timed
/// to drain by an open batch's linger end nor waiting for an answer with every slot
/// taken; a timer the sink needs and does not set leaves records unsent, and fails it
/// too).
///
/// A partition handed over waits in the new sink's inbox, still naming the old sink's
/// waker, until the new sink's next turn adopts it (before its drain), as in the
/// producer. A turn drains twice when it took a leader an answer named (KIP-951), as
/// `drain_turn` does. Not modelled: the driver's next turn coming at once when a
/// wake-up was pending as an answer came (the simulation drains once).
struct SimWake {
    woken: AtomicBool,
    next_drain: NextDrain,
}

impl SimWake {
    fn new(base: Instant) -> SimWake {
        SimWake {
            woken: AtomicBool::new(false),
            next_drain: NextDrain::new(base),
        }
    }

    /// Whether a thread woke the sink since it last drained (and forgets it).
    fn take_woken(&self) -> bool {
        self.woken.swap(false, Ordering::Relaxed)
    }
}

impl Wake for SimWake {
    fn wake(&self) {
        self.woken.store(true, Ordering::Relaxed);
    }

    fn drains_by(&self, deadline: Instant) -> bool {
        self.next_drain.drains_by(deadline)
    }

    fn waits_for_an_answer(&self) -> bool {
        self.next_drain.waits_for_an_answer()
    }
}

/// A sink and its driver's state.
struct SimSink {
    sink: Sink,
    wake: Arc<SimWake>,
    /// When the driver's timer fires (the sink's timer, late by up to the resolution,
    /// then at the first step after that).
    timer: Option<Instant>,
    /// The sink's timer after its last turn (`Sink::publish_sleep` published it, or that
    /// the sink waits for an answer).
    published: Option<Instant>,
    /// When the sink last drained.
    last_drain: Option<Instant>,
    /// Something other than its partitions' threads wants the sink to drain at the next
    /// step (an answer or a send that failed at once, a partition handed over, a bump's
    /// end, a flush or a wait for room).
    stirred: bool,
    /// Partitions handed to the sink and not adopted yet (`SinkHandle::hand_over`): each
    /// still names the sink it came from (whose timer no longer counts it) until this
    /// sink's next turn adopts it.
    inbox: Vec<Arc<ProducePartition>>,
    /// Requests that could not be sent (no connection), settled at the sink's next turn
    /// as the producer's driver settles them: through its answers, before it drains.
    unsent: Vec<(u64, IoError)>,
}

impl SimSink {
    /// Whether the driver takes a turn at `now`: woken, stirred, or its timer fired.
    fn due(&mut self, now: Instant) -> bool {
        let woken = self.wake.take_woken();
        let stirred = std::mem::take(&mut self.stirred);
        woken || stirred || self.timer.is_some_and(|t| t <= now)
    }
}

/// The producer: partitions, one sink per broker, the producer id and its bump.
struct SimProducer {
    settings: ProduceSettings,
    pools: ArenaPools,
    partitions: Vec<Arc<ProducePartition>>,
    sinks: BTreeMap<i32, SimSink>,
    /// Whether every record was appended when last looked: the flush at the end began
    /// then. The sinks send everything they have while it lasts, and while a record
    /// waits for room among the queued records (`Producer::wait_for_room` hurries the
    /// sinks as a flush does); each flush and each wait wakes every sink when it begins.
    all_appended: bool,
    /// The client's view of leaders (from its Metadata answers, and the leaders its
    /// Produce answers name).
    leaders: Vec<Option<i32>>,
    /// The metadata those leaders come from, kept by the client's own rules
    /// (`ClusterMetadata::apply`, `ClusterMetadata::with_leader_hints`).
    metadata: ClusterMetadata,
    identity: Option<ProducerId>,
    bump_needed: bool,
    bump_in_flight: bool,
    metadata_wanted: bool,
    metadata_in_flight: bool,
    /// Records not appended yet: (when, partition, index).
    to_send: VecDeque<(Instant, usize, u32)>,
    /// Records appended and not settled yet, and their limit.
    queued: Arc<QueuedRecords>,
    /// The next record was refused for want of room among the queued records: it
    /// waits for a settling, not for its time.
    waiting_for_room: bool,
    sent: Vec<Sent>,
    /// Records sent with a tag (every odd one, tagged with its index): (partition, index).
    tagged: Vec<(usize, u32)>,
    /// What the delivery handler was told of them.
    reports: Arc<SimReports>,
}

/// The simulation's delivery handler: every report of every tagged record, by tag.
#[derive(Debug, Default)]
struct SimReports(std::sync::Mutex<BTreeMap<u64, Vec<Result<i64, Error>>>>);

impl ReportTagged for SimReports {
    fn report(
        &self,
        _topic: &str,
        _partition: i32,
        outcome: Result<&BatchAck, &Error>,
        records: &[TaggedRecord],
    ) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for r in records {
            let result = outcome.map(|ack| r.at(ack).0).map_err(Clone::clone);
            all.entry(r.tag).or_default().push(result);
        }
    }
}

impl SimReports {
    fn of(&self, tag: u64) -> Vec<Result<i64, Error>> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.get(&tag).cloned().unwrap_or_default()
    }
}

struct Sent {
    partition: usize,
    index: u32,
    shared: Arc<BatchShared>,
    position: usize,
}

struct VecLeaders<'a>(&'a [Option<i32>]);

impl Leaders for VecLeaders<'_> {
    fn leader_of(&self, _topic: &str, partition: i32) -> Option<i32> {
        self.0.get(partition as usize).copied().flatten()
    }
}

/// A partition as the simulated consumer's fetcher sees it: its consumer holds two
/// chunks at most.
type Target = TestTarget;

const TARGET_CAPACITY: usize = 2;

enum FetchSlot {
    Idle,
    InFlight,
}

/// The consumer: one fetcher per broker, one reader per partition.
struct SimConsumer {
    settings: FetchSettings,
    budget: MemoryBudget,
    targets: Vec<Arc<Target>>,
    readers: Vec<PartitionReader>,
    fetchers: BTreeMap<i32, (Fetcher<Target>, FetchSlot, Option<crate::buf::Permit>)>,
    leaders: Vec<Option<i32>>,
    /// Partitions waiting for a leader (handed back by a fetcher).
    homeless: Vec<Arc<Target>>,
    metadata_wanted: bool,
    metadata_in_flight: bool,
    /// What the user read, per partition: (offset, record index).
    seen: Vec<Vec<(i64, u32)>>,
}

/// One run.
struct World {
    now: Instant,
    start: Instant,
    rng: Rng,
    faults: Faults,
    cluster: SimCluster,
    conn_config: Arc<ConnectionConfig>,
    links: BTreeMap<u64, Link>,
    next_link: u64,
    slots: BTreeMap<(Side, i32), Slot>,
    parked: Vec<Parked>,
    orphans: Vec<Orphan>,
    /// Brokers whose network is dark, and until when.
    dark_until: BTreeMap<i32, Instant>,
    /// Partitions short of in-sync replicas, and until when.
    short_until: BTreeMap<usize, Instant>,
    producer: SimProducer,
    consumer: SimConsumer,
    trace: VecDeque<String>,
    /// How many of the last events the trace keeps.
    trace_limit: usize,
}

/// What a run found.
#[derive(Debug, Default)]
struct Report {
    records: usize,
    acked: usize,
    timed_out: usize,
    steps: u64,
}

const STEP_LIMIT: u64 = 400_000;
/// Mixed into the seed for the draw of whether the cluster names leaders (KIP-951).
const NAMES_LEADERS_SALT: u64 = 0x0951_0951_0951_0951;
/// Mixed into the seed for the draw of whether the run's records come far apart.
const SPREAD_SALT: u64 = 0x5bd1_e995_5bd1_e995;
/// Mixed into the seed for the draw of whether partitions run short of in-sync
/// replicas now and then.
const SHORT_SALT: u64 = 0x15_0015_0015_0015;
/// How long into a run partitions may start spells short of in-sync replicas: past
/// the last record of runs whose records come far apart.
const SPELLS_WITHIN: Duration = Duration::from_secs(20);
/// Mixed into the seed for the draw of whether the run's producer is idempotent.
const IDEMPOTENT_SALT: u64 = 0x1de0_1de0_1de0_1de0;
const VIRTUAL_LIMIT: Duration = Duration::from_secs(600);

impl World {
    fn new(seed: u64) -> World {
        let mut rng = Rng(SplitMix64::new(seed));
        let mut faults = Faults::draw(&mut rng);
        let mut apart = Rng(SplitMix64::new(seed ^ SHORT_SALT));
        if apart.chance(1.0 / 3.0) {
            faults.short_every = Some(apart.millis(750, 2_250));
        }
        let partitions = 1 + rng.below(4) as i32;
        let mut cluster = SimCluster::new(3, partitions);
        // Drawn apart from the run's other draws, so that runs without it go as before.
        cluster.names_leaders = SplitMix64::new(seed ^ NAMES_LEADERS_SALT).next_u64() % 2 == 0;
        let start = Instant::now();
        let records = 5 + rng.below(150) as u32;
        let mut at = start + Duration::from_millis(50);
        let mut to_send = VecDeque::new();
        // In an eighth of the runs records come ten times further apart (up to 4.5 s in
        // all), in another eighth forty times (up to 18 s), so that lingering batches
        // meet retries, leader moves and expiry, not just the final flush.
        let spread = match SplitMix64::new(seed ^ SPREAD_SALT).next_u64() % 8 {
            0 => 10,
            4 => 40,
            _ => 1,
        };
        for i in 0..records {
            at += rng.millis(0, 3) * spread;
            to_send.push_back((at, rng.below(partitions as u64) as usize, i));
        }
        let batch_size = 256 + rng.below(4096) as usize;
        // A quarter of the runs without idempotence (at least once: retries may write a
        // record twice and reorder batches of a partition; no producer id, no bump).
        let idempotent = SplitMix64::new(seed ^ IDEMPOTENT_SALT).next_u64() % 4 != 0;
        let reports = Arc::new(SimReports::default());
        let settings = ProduceSettings {
            acks: -1,
            idempotent,
            linger: rng.millis(0, 10),
            // Lingers ending on time, or half of 1 or 2 ms early
            // (`ProduceSettings::linger_ends`); the sinks' timers fire late by up to this
            // (`SimSink`).
            timer_resolution: rng.millis(0, 2),
            batch_size,
            max_request_size: 1 << 20,
            delivery_timeout: faults.delivery_timeout,
            retries: u32::MAX,
            retry_backoff: Duration::from_millis(50),
            retry_backoff_max: Duration::from_millis(500),
            request_timeout: Duration::from_secs(3),
            max_in_flight: 5,
            transactional_id: None,
            transaction_timeout: std::time::Duration::from_secs(60),
            codec: [Compression::None, Compression::Lz4, Compression::Zstd][rng.below(3) as usize],
            // Bytes of lists kept to lend again: none, a list of 64 or so, plenty.
            report_tagged: Some(TagReports::new(
                reports.clone(),
                [0, 2048, 1 << 20][rng.below(3) as usize],
            )),
        };
        let topic: Arc<str> = Arc::from(cluster.topic.as_str());
        // A limit on queued records: none, or one the run's records reach.
        let queued = Arc::new(QueuedRecords::new([0, 8, 32, 1000][rng.below(4) as usize]));
        let accounts = ProducerAccounts {
            failures: Default::default(),
            queued: queued.clone(),
        };
        let producer = SimProducer {
            pools: ArenaPools::new(batch_size, MemoryBudget::new(64 << 20)),
            partitions: (0..partitions)
                .map(|p| ProducePartition::new(topic.clone(), p, accounts.clone()))
                .collect(),
            queued,
            waiting_for_room: false,
            settings,
            sinks: BTreeMap::new(),
            all_appended: false,
            leaders: vec![None; partitions as usize],
            metadata: ClusterMetadata::default(),
            identity: None,
            bump_needed: false,
            bump_in_flight: false,
            metadata_wanted: true,
            metadata_in_flight: false,
            to_send,
            sent: Vec::new(),
            tagged: Vec::new(),
            reports,
        };
        let targets: Vec<Arc<Target>> = (0..partitions)
            .map(|p| TestTarget::new(&topic, p, 0, TARGET_CAPACITY))
            .collect();
        let consumer = SimConsumer {
            settings: FetchSettings {
                max_wait: Duration::from_millis(500),
                min_bytes: 1,
                max_bytes: 1 << 20,
                partition_max_bytes: 1024 + rng.below(8192) as i32,
                isolation_level: 0,
                error_backoff: Duration::from_millis(100),
                error_backoff_max: Duration::from_secs(1),
                rack_id: String::new(),
                read_replica_max_age: Duration::from_secs(300),
            },
            budget: MemoryBudget::new(64 << 20),
            readers: (0..partitions)
                .map(|_| {
                    PartitionReader::new(
                        0,
                        false,
                        true,
                        crate::record::DEFAULT_MAX_DECOMPRESSED,
                        crate::buf::MemoryBudget::unlimited(),
                    )
                })
                .collect(),
            homeless: targets.clone(),
            targets,
            fetchers: BTreeMap::new(),
            leaders: vec![None; partitions as usize],
            metadata_wanted: true,
            metadata_in_flight: false,
            seen: vec![Vec::new(); partitions as usize],
        };
        World {
            now: start,
            start,
            rng,
            faults,
            cluster,
            conn_config: Arc::new(ConnectionConfig {
                client_id: "sim".into(),
                connect_timeout: Duration::from_secs(2),
                request_timeout: Duration::from_secs(3),
                max_in_flight: 5,
                reconnect_backoff: Duration::from_millis(50),
                drain_timeout: Duration::from_secs(1),
                read_chunk_size: 4096,
                ..ConnectionConfig::default()
            }),
            links: BTreeMap::new(),
            next_link: 0,
            slots: BTreeMap::new(),
            parked: Vec::new(),
            orphans: Vec::new(),
            dark_until: BTreeMap::new(),
            short_until: BTreeMap::new(),
            producer,
            consumer,
            trace: VecDeque::new(),
            trace_limit: 300,
        }
    }

    fn log(&mut self, what: impl FnOnce() -> String) {
        if self.trace.len() >= self.trace_limit {
            self.trace.pop_front();
        }
        let at = (self.now - self.start).as_micros();
        self.trace.push_back(format!("{at:>10}µs {}", what()));
    }

    // ------------------------------------------------------------------ network

    /// Hands `request` to `side`'s connection to `broker`, connecting if needed; an error
    /// when that connection is in reconnect backoff.
    fn send(
        &mut self,
        side: Side,
        broker: i32,
        request: Box<dyn EncodeRequest>,
        token: Token,
    ) -> Result<(), (Token, IoError)> {
        let addr = format!("sim:{broker}");
        let slot = self.slots.entry((side, broker)).or_default();
        let link_id = match slot.link {
            Some(id) => id,
            None => {
                if let Some(at) = slot.retry_at
                    && self.now < at
                {
                    return Err((
                        token,
                        IoError::NotConnected {
                            addr,
                            retry_in: at - self.now,
                        },
                    ));
                }
                let id = self.next_link;
                self.next_link += 1;
                slot.link = Some(id);
                let engine = Connection::new(
                    Arc::from(addr.as_str()),
                    self.conn_config.clone(),
                    self.now + self.conn_config.connect_timeout,
                );
                self.links.insert(
                    id,
                    Link {
                        side,
                        broker,
                        engine,
                        to_server: VecDeque::new(),
                        to_client: VecDeque::new(),
                        server_cutter: FrameCutter::new(100 << 20, 4096),
                    },
                );
                id
            }
        };
        let now = self.now;
        if let Some(link) = self.links.get_mut(&link_id) {
            link.engine.send(request, token, now);
        }
        Ok(())
    }

    fn latency(&mut self) -> Duration {
        let base = Duration::from_micros(50 + self.rng.below(400));
        if self.rng.chance(self.faults.stall) {
            base + self.rng.millis(1_000, 10_000)
        } else if self.rng.chance(self.faults.delay) {
            base + self.rng.millis(10, 800)
        } else {
            base
        }
    }

    /// When a piece sent now between a client and `broker` arrives: after the network's
    /// latency, and not before the broker's network comes back from dark.
    fn arrival(&mut self, broker: i32) -> Instant {
        let at = self.now + self.latency();
        match self.dark_until.get(&broker) {
            Some(&until) if until > self.now => at.max(until + self.latency()),
            _ => at,
        }
    }

    /// Moves what the engines want written onto the wire.
    fn transmit(&mut self) {
        let ids: Vec<u64> = self.links.keys().copied().collect();
        for id in ids {
            let mut out = Vec::new();
            let Some(link) = self.links.get_mut(&id) else {
                continue;
            };
            if !link.engine.poll_transmit(&mut out) {
                continue;
            }
            link.engine.handle_transmitted(self.now);
            let mut bytes = BytesMut::new();
            for segment in out {
                bytes.extend_from_slice(&segment);
            }
            let broker = link.broker;
            let at = self.arrival(broker);
            if let Some(link) = self.links.get_mut(&id) {
                link.to_server.push_back((at, bytes.freeze()));
            }
        }
    }

    /// Delivers what is due, both ways.
    fn deliver(&mut self) {
        self.serve_orphans();
        let ids: Vec<u64> = self.links.keys().copied().collect();
        for id in ids {
            while let Some(link) = self.links.get_mut(&id) {
                let Some((_, bytes)) = link.to_server.pop_front_if(|(at, _)| *at <= self.now)
                else {
                    break;
                };
                link.server_cutter.extend(&bytes);
                self.serve(id);
            }
            let now = self.now;
            let Some(link) = self.links.get_mut(&id) else {
                continue;
            };
            while let Some(answer) = link.to_client.front_mut() {
                while answer.pieces.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, bytes)) = answer.pieces.pop_front() {
                        answer.started = true;
                        link.engine.handle_bytes(&bytes, now);
                    }
                }
                if !answer.pieces.is_empty() {
                    break;
                }
                link.to_client.pop_front();
            }
        }
    }

    /// The broker side of link `id`: every whole request frame is answered.
    fn serve(&mut self, id: u64) {
        loop {
            let Some(link) = self.links.get_mut(&id) else {
                return;
            };
            let broker = link.broker;
            let frame = match link.server_cutter.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => panic!("the client sent a malformed frame: {e}"),
            };
            let (header, request) =
                decode_request_frame(frame).unwrap_or_else(|e| panic!("undecodable request: {e}"));
            if self.rng.chance(self.faults.drop_request) {
                self.log(|| format!("link {id}: request {} dropped", header.correlation_id));
                continue;
            }
            let fault = if self.rng.chance(self.faults.produce_refuse) {
                ProduceFault::RefuseRetriable
            } else if self.rng.chance(self.faults.produce_write_then_time_out) {
                ProduceFault::WriteThenTimeOut
            } else {
                ProduceFault::None
            };
            let version = header.request_api_version;
            let api = request.api_key();
            let reply = self.cluster_handles(broker, version, request, fault);
            match reply {
                None => panic!("the simulation does not answer {api:?}"),
                Some(Reply::Park(request)) => {
                    let deadline = fetch_deadline(self.now, &request);
                    self.parked.push(Parked {
                        link: id,
                        correlation_id: header.correlation_id,
                        version,
                        request,
                        deadline,
                    });
                }
                Some(Reply::Respond(response)) => {
                    if fault != ProduceFault::None && api == crate::protocol::ApiKey::Produce {
                        self.log(|| format!("link {id}: produce answered with fault {fault:?}"));
                    }
                    self.respond(id, header.correlation_id, version, response);
                }
            }
        }
    }

    /// The broker side of closed connections: requests that arrive now are handled as
    /// any other, and their answers go nowhere.
    fn serve_orphans(&mut self) {
        let now = self.now;
        let mut i = 0;
        while i < self.orphans.len() {
            let orphan = &mut self.orphans[i];
            while let Some((_, bytes)) = orphan.to_server.pop_front_if(|(at, _)| *at <= now) {
                orphan.cutter.extend(&bytes);
            }
            let broker = orphan.broker;
            let mut frames = Vec::new();
            while let Ok(Some(frame)) = orphan.cutter.next_frame() {
                frames.push(frame);
            }
            if orphan.to_server.is_empty() {
                self.orphans.remove(i);
            } else {
                i += 1;
            }
            for frame in frames {
                let (header, request) = decode_request_frame(frame)
                    .unwrap_or_else(|e| panic!("undecodable request: {e}"));
                self.log(|| {
                    format!(
                        "broker {broker}: request {} of a closed connection arrives",
                        header.correlation_id
                    )
                });
                let version = header.request_api_version;
                let _ = self.cluster_handles(broker, version, request, ProduceFault::None);
            }
        }
    }

    /// The cluster's broker `broker` handles `request`; what it did goes to the trace.
    fn cluster_handles(
        &mut self,
        broker: i32,
        version: i16,
        request: RequestKind,
        fault: ProduceFault,
    ) -> Option<Reply> {
        let reply = self.cluster.handle(broker, version, request, fault);
        for e in std::mem::take(&mut self.cluster.events) {
            self.log(|| e);
        }
        reply
    }

    /// Sends an answer back on link `id`, through the answer faults.
    fn respond(&mut self, id: u64, correlation_id: i32, version: i16, response: ResponseKind) {
        let mut buf = BytesMut::new();
        encode_response_frame_with(&mut buf, response.api_key(), version, correlation_id, |b| {
            response.encode(b, version)
        })
        .unwrap_or_else(|e| panic!("encoding a simulated answer: {e}"));
        let bytes = buf.freeze();
        if self.rng.chance(self.faults.drop_response) {
            self.log(|| format!("link {id}: answer {correlation_id} dropped"));
            return;
        }
        let reorder = self.rng.chance(self.faults.reorder);
        let duplicate = self.rng.chance(self.faults.duplicate);
        let split = self.rng.chance(self.faults.split) && bytes.len() > 2;
        let cut_at = 1 + self.rng.below(bytes.len() as u64 - 1) as usize;
        // Frames, each in one or two pieces: the answer, and its duplicate.
        let mut frames = vec![if split {
            vec![bytes.slice(..cut_at), bytes.slice(cut_at..)]
        } else {
            vec![bytes.clone()]
        }];
        if duplicate {
            self.log(|| format!("link {id}: answer {correlation_id} duplicated"));
            frames.push(vec![bytes]);
        }
        let Some(broker) = self.links.get(&id).map(|l| l.broker) else {
            return;
        };
        let mut at = self.arrival(broker);
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        // A stream: never before what was sent earlier.
        if let Some(last) = link.to_client.back().and_then(|a| a.pieces.back()) {
            at = at.max(last.0);
        }
        let reorder = reorder && link.to_client.back().is_some_and(|a| !a.started);
        for pieces in frames {
            let mut answer = Answer {
                pieces: VecDeque::new(),
                started: false,
            };
            for piece in pieces {
                answer.pieces.push_back((at, piece));
                at += Duration::from_micros(1);
            }
            if reorder {
                // Ahead of the whole answer before it.
                let before = link.to_client.len().saturating_sub(1);
                link.to_client.insert(before, answer);
            } else {
                link.to_client.push_back(answer);
            }
        }
        if reorder {
            self.log(|| format!("link {id}: answer {correlation_id} reordered"));
        }
    }

    /// Answers parked fetches whose data arrived or whose long poll ran out.
    fn wake_parked(&mut self) {
        let parked = std::mem::take(&mut self.parked);
        for p in parked {
            let Some(link) = self.links.get(&p.link) else {
                continue;
            };
            let broker = link.broker;
            let expired = self.now >= p.deadline;
            if !expired && !self.cluster.fetch_ready(broker, &p.request) {
                self.parked.push(p);
                continue;
            }
            match self.cluster.fetch(broker, p.version, p.request, true) {
                Reply::Respond(r) => self.respond(p.link, p.correlation_id, p.version, r),
                Reply::Park(_) => unreachable!("an expired fetch is answered"),
            }
        }
    }

    /// Cuts link `id`: bytes in transit are lost, the client sees the connection close.
    fn cut(&mut self, id: u64) {
        let now = self.now;
        if !self.links.contains_key(&id) {
            return;
        }
        self.log(|| format!("link {id} cut"));
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        link.to_server.clear();
        link.to_client.clear();
        link.engine.handle_eof(now);
        self.parked.retain(|p| p.link != id);
    }

    // ------------------------------------------------------------------ faults

    /// Whether a fault that comes about every `mean` is due now (a step covers the
    /// virtual time since the previous one).
    fn due(&mut self, mean: Option<Duration>, elapsed: Duration) -> bool {
        mean.is_some_and(|m| self.rng.chance(elapsed.as_secs_f64() / m.as_secs_f64()))
    }

    fn inject_faults(&mut self, elapsed: Duration) {
        if self.due(self.faults.cut_every, elapsed) && !self.links.is_empty() {
            let ids: Vec<u64> = self.links.keys().copied().collect();
            let id = ids[self.rng.below(ids.len() as u64) as usize];
            self.cut(id);
        }
        if self.due(self.faults.move_every, elapsed) {
            let p = self.rng.below(self.cluster.partition_count() as u64) as usize;
            let to =
                self.cluster.brokers[self.rng.below(self.cluster.brokers.len() as u64) as usize];
            self.log(|| format!("partition {p}: leader moves to {to}"));
            self.cluster.move_leader(p, to);
        }
        if self.due(self.faults.dark_every, elapsed) {
            let count = self.cluster.brokers.len() as u64;
            let broker = self.cluster.brokers[self.rng.below(count) as usize];
            let dark = self.rng.millis(1_000, 6_000);
            self.log(|| format!("broker {broker}: network dark for {dark:?}"));
            self.dark_until.insert(broker, self.now + dark);
        }
        if self.due(self.faults.forget_every, elapsed) {
            self.log(|| "fetch sessions forgotten".into());
            self.cluster.forget_sessions();
        }
        self.short_spells(elapsed);
    }

    /// Starts and ends the spells of partitions short of in-sync replicas.
    fn short_spells(&mut self, elapsed: Duration) {
        // Spells start only while records remain to be appended and within the run's
        // first seconds, one at a time per partition, so that they meet open batches and
        // end: a producer waiting for room among its queued records would otherwise meet
        // them for as long as records waited.
        if !self.producer.to_send.is_empty()
            && self.now - self.start < SPELLS_WITHIN
            && self.due(self.faults.short_every, elapsed)
        {
            let p = self.rng.below(self.cluster.partition_count() as u64) as usize;
            let spell = self.rng.millis(1_000, 6_000);
            if !self.short_until.contains_key(&p) {
                self.log(|| format!("partition {p}: short of in-sync replicas for {spell:?}"));
                self.cluster.set_short_of_replicas(p, true);
                self.short_until.insert(p, self.now + spell);
            }
        }
        let now = self.now;
        while let Some((&p, _)) = self.short_until.iter().find(|&(_, &until)| until <= now) {
            self.short_until.remove(&p);
            self.log(|| format!("partition {p}: in-sync replicas back"));
            self.cluster.set_short_of_replicas(p, false);
        }
    }

    // ------------------------------------------------------------------ events

    fn handle_events(&mut self) {
        let ids: Vec<u64> = self.links.keys().copied().collect();
        for id in ids {
            while let Some(link) = self.links.get_mut(&id) {
                let (side, broker) = (link.side, link.broker);
                let Some(event) = link.engine.poll_event() else {
                    break;
                };
                match event {
                    // The simulated cluster runs no SASL.
                    Event::Ready(_) | Event::ReauthenticationNeeded => {}
                    Event::Response(token, result) => self.on_answer(side, broker, token, result),
                    Event::Broken(error) => {
                        self.log(|| format!("link {id} ({side:?} → {broker}) broken: {error}"));
                        self.drop_link(id);
                    }
                    Event::Closed => self.drop_link(id),
                }
            }
        }
    }

    fn drop_link(&mut self, id: u64) {
        if let Some(link) = self.links.remove(&id) {
            if !link.to_server.is_empty() {
                self.orphans.push(Orphan {
                    broker: link.broker,
                    to_server: link.to_server,
                    cutter: link.server_cutter,
                });
            }
            let slot = self.slots.entry((link.side, link.broker)).or_default();
            if slot.link == Some(id) {
                slot.link = None;
                slot.retry_at = Some(self.now + self.conn_config.reconnect_backoff);
            }
        }
        self.parked.retain(|p| p.link != id);
    }

    fn on_answer(
        &mut self,
        side: Side,
        broker: i32,
        token: Token,
        result: Result<RawResponse, IoError>,
    ) {
        match (side, token) {
            (Side::Producer, Token::Produce(t)) => {
                let what = match &result {
                    Err(e) => format!("failed: {e}"),
                    Ok(raw) => decode_response_body::<crate::protocol::messages::ProduceResponse>(
                        raw.body.clone(),
                        raw.version,
                    )
                    .map(|r| {
                        r.responses
                            .iter()
                            .flat_map(|t| t.partition_responses.iter())
                            .map(|p| {
                                format!(
                                    "p{} code {} offset {}",
                                    p.index, p.error_code, p.base_offset
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_else(|e| format!("undecodable: {e}")),
                };
                self.log(|| format!("sink {broker}: request {t} answered: {what}"));
                let now = self.now;
                let settings = self.producer.settings.clone();
                if let Some(s) = self.producer.sinks.get_mut(&broker) {
                    s.sink.handle_response(t, result, now, &settings);
                    s.stirred = true;
                }
            }
            (Side::Producer, Token::Metadata) => {
                self.producer.metadata_in_flight = false;
                match decode::<MetadataResponse>(result) {
                    Some(m) => {
                        self.take_leaders(&m);
                        self.producer.metadata_wanted = false;
                    }
                    None => self.producer.metadata_wanted = true,
                }
            }
            (Side::Producer, Token::InitProducerId) => {
                self.producer.bump_in_flight = false;
                if let Some(r) = decode::<InitProducerIdResponse>(result)
                    && r.error_code == 0
                {
                    self.adopt_identity(ProducerId {
                        id: r.producer_id,
                        epoch: r.producer_epoch,
                    });
                }
            }
            (Side::Consumer, Token::Metadata) => {
                self.consumer.metadata_in_flight = false;
                if let Some(m) = decode::<MetadataResponse>(result) {
                    self.consumer.leaders = leaders_of(&m, self.consumer.targets.len());
                }
            }
            (Side::Consumer, Token::Fetch) => self.on_fetch_answer(broker, result),
            (side, token) => panic!("{side:?} got an answer to {token:?}"),
        }
    }

    fn on_fetch_answer(&mut self, broker: i32, result: Result<RawResponse, IoError>) {
        let now = self.now;
        let Some((fetcher, slot, permit)) = self.consumer.fetchers.get_mut(&broker) else {
            return;
        };
        *slot = FetchSlot::Idle;
        let permit = permit.take();
        let version = result.as_ref().map_or(12, |r| r.version);
        let response = result
            .ok()
            .and_then(|raw| decode_response_body::<FetchResponse>(raw.body, raw.version).ok());
        match (response, permit) {
            (Some(r), Some(permit)) => {
                let outcome = fetcher.handle_response(r, version, permit, now);
                assert!(
                    outcome.reset.is_empty(),
                    "offset out of range: the consumer skipped ahead"
                );
                if !outcome.moved.is_empty() {
                    self.consumer.metadata_wanted = true;
                }
                self.consumer.homeless.extend(outcome.moved);
                // The simulated cluster never names a read replica; were one named,
                // the partition would find its broker again like a moved one.
                self.consumer.homeless.extend(outcome.redirected);
                self.consumer.homeless.extend(outcome.fallback);
            }
            _ => {
                let back = fetcher.handle_failure();
                self.consumer.metadata_wanted = true;
                self.consumer.homeless.extend(back);
            }
        }
    }

    // ------------------------------------------------------------------ producer

    /// The producer's first identity, or the one an epoch bump moved it to (every
    /// waiting batch restamped).
    fn adopt_identity(&mut self, id: ProducerId) {
        self.log(|| format!("producer id {} epoch {}", id.id, id.epoch));
        let bumped = self.producer.identity.is_some();
        self.producer.identity = Some(id);
        if bumped {
            for p in &self.producer.partitions {
                p.state().restamp(id, self.now);
            }
        }
        self.producer.bump_needed = false;
        self.stir_all_sinks();
    }

    /// What `Sinks::wake_all` does in the producer (a bump's end, a flush begun).
    fn stir_all_sinks(&mut self) {
        for s in self.producer.sinks.values_mut() {
            s.stirred = true;
        }
    }

    fn drive_producer(&mut self) {
        let now = self.now;
        if self.producer.metadata_wanted && !self.producer.metadata_in_flight {
            let broker = self.any_broker();
            self.producer.metadata_in_flight = true;
            if let Err((_, e)) = self.send(
                Side::Producer,
                broker,
                typed(MetadataRequest::default()),
                Token::Metadata,
            ) {
                self.log(|| format!("producer metadata: {e}"));
                self.producer.metadata_in_flight = false;
            }
        }
        if self.producer.leaders.iter().all(Option::is_none) {
            return;
        }
        let requests_in_flight: usize = self
            .producer
            .sinks
            .values()
            .map(|s| s.sink.requests_in_flight())
            .sum();
        let wants_id = self.producer.settings.idempotent
            && (self.producer.identity.is_none() || self.producer.bump_needed);
        let resolved = self
            .producer
            .partitions
            .iter()
            .all(|p| p.state().ready_for_bump());
        if wants_id && !self.producer.bump_in_flight && requests_in_flight == 0 && resolved {
            // As the producer's driver does: the next epoch by itself, a new id only
            // when there is none yet or the epochs ran out.
            if let Some(next) = self.producer.identity.and_then(ProducerId::next_epoch) {
                self.adopt_identity(next);
                return;
            }
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(-1)
                .with_producer_epoch(-1);
            let broker = self.any_broker();
            self.producer.bump_in_flight = true;
            if self
                .send(
                    Side::Producer,
                    broker,
                    typed(request),
                    Token::InitProducerId,
                )
                .is_err()
            {
                self.producer.bump_in_flight = false;
            }
        }
        if self.producer.settings.idempotent && self.producer.identity.is_none() {
            return;
        }
        self.route_unowned();
        let began_waiting = self.append_due();
        let all_appended = self.producer.to_send.is_empty();
        if began_waiting || (all_appended && !self.producer.all_appended) {
            self.stir_all_sinks();
        }
        self.producer.all_appended = all_appended;
        let brokers: Vec<i32> = self.producer.sinks.keys().copied().collect();
        for broker in brokers {
            let due = self
                .producer
                .sinks
                .get_mut(&broker)
                .is_some_and(|s| s.due(now));
            if !due {
                continue;
            }
            self.sink_turn(broker);
        }
    }

    /// A sink's turn as `run_sink` and `drain_turn` take it: requests that could not be
    /// sent settled first (as answers are), then marked draining before the drain looks
    /// at any partition, the partitions handed over adopted, a drain (and at once a
    /// second when it took a leader its answers named, so that partitions that moved
    /// leave now), and the timer published after.
    fn sink_turn(&mut self, broker: i32) {
        let late = self.late_timer();
        let (now, settings) = (self.now, &self.producer.settings);
        let Some(s) = self.producer.sinks.get_mut(&broker) else {
            return;
        };
        for (token, error) in std::mem::take(&mut s.unsent) {
            s.sink.handle_response(token, Err(error), now, settings);
        }
        s.wake.next_drain.draining();
        s.last_drain = Some(now);
        for handed in std::mem::take(&mut s.inbox) {
            let wake: Arc<dyn Wake> = s.wake.clone();
            s.sink.adopt(handed, wake);
        }
        if self.drain_sink(broker) {
            self.drain_sink(broker);
        }
        if let Some(s) = self.producer.sinks.get_mut(&broker) {
            let timer = s.sink.poll_timeout();
            s.sink
                .publish_sleep(&s.wake.next_drain, &self.producer.settings);
            s.published = timer;
            s.timer = timer.map(|t| t + late);
        }
    }

    /// One drain of a sink, its requests sent and its events acted on; whether it took a
    /// leader its answers named (the driver then drains again).
    fn drain_sink(&mut self, broker: i32) -> bool {
        let now = self.now;
        let p = &mut self.producer;
        let leaders = VecLeaders(&p.leaders);
        let cx = SinkContext {
            settings: &p.settings,
            pools: &p.pools,
            producer: p.identity,
            bumping: p.bump_needed,
            flushing: p.all_appended || p.waiting_for_room,
            leaders: &leaders,
            produce_versions: crate::engine::produce::request::ANY_PRODUCE_VERSION,
        };
        let Some(s) = p.sinks.get_mut(&broker) else {
            return false;
        };
        s.sink.drain(now, &cx);
        let mut requests = Vec::new();
        while let Some(r) = s.sink.poll_request() {
            requests.push(r);
        }
        let mut events = Vec::new();
        while let Some(e) = s.sink.poll_event() {
            events.push(e);
        }
        for (token, request) in requests {
            let what = describe_batches(&request);
            self.log(|| format!("sink {broker}: request {token} carries {what}"));
            let sent = self.send(
                Side::Producer,
                broker,
                Box::new(request),
                Token::Produce(token),
            );
            if let Err((_, e)) = sent
                && let Some(s) = self.producer.sinks.get_mut(&broker)
            {
                s.unsent.push((token, e));
                s.stirred = true;
            }
        }
        let mut moved = false;
        for e in events {
            match e {
                SinkEvent::Moved(p) => {
                    self.log(|| format!("partition {} leaves sink {broker}", p.index));
                    self.hand_over(p);
                }
                SinkEvent::Refresh(_) => self.producer.metadata_wanted = true,
                SinkEvent::BumpEpoch => {
                    self.log(|| "epoch bump wanted".into());
                    self.producer.bump_needed = true;
                }
                SinkEvent::LeaderHints { hints, endpoints } => {
                    moved |= self.apply_leader_hints(&hints, &endpoints);
                }
                // The simulated producer is not transactional.
                SinkEvent::ProducerFenced(code) => {
                    panic!("a fenced transactional producer in the simulation: {code}")
                }
            }
        }
        moved
    }

    /// A Metadata answer, merged as the client merges it (`ClusterMetadata::apply`: a
    /// partition whose answer carries an older leader epoch than known keeps the newer
    /// placement, KIP-320).
    fn take_leaders(&mut self, m: &MetadataResponse) {
        let p = &mut self.producer;
        p.metadata = ClusterMetadata::apply(&p.metadata, m, false);
        p.leaders = leaders_in(&p.metadata, &self.cluster.topic, p.partitions.len());
    }

    /// The leaders a Produce answer named, taken as the client takes them
    /// (`ClusterMetadata::with_leader_hints`: a newer leader epoch than known, of a
    /// broker known or described in the answer). Whether any was taken.
    fn apply_leader_hints(&mut self, hints: &[LeaderHint], endpoints: &[BrokerInfo]) -> bool {
        let p = &mut self.producer;
        let Some(next) = p.metadata.with_leader_hints(hints, endpoints) else {
            return false;
        };
        p.metadata = next;
        p.leaders = leaders_in(&p.metadata, &self.cluster.topic, p.partitions.len());
        let leaders = format!("{:?}", p.leaders);
        self.log(|| format!("leaders named by an answer taken: {leaders}"));
        true
    }

    /// How late a sink's timer fires: up to the timer resolution.
    fn late_timer(&mut self) -> Duration {
        let resolution = self.producer.settings.timer_resolution.as_nanos() as u64;
        Duration::from_nanos(self.rng.below(resolution + 1))
    }

    fn any_broker(&mut self) -> i32 {
        self.cluster.brokers[self.rng.below(self.cluster.brokers.len() as u64) as usize]
    }

    /// Hands a partition to the sink of its leader (or of broker 1 while unknown).
    fn hand_over(&mut self, p: Arc<ProducePartition>) {
        let leader = self.producer.leaders[p.index as usize].unwrap_or(1);
        let base = self.start;
        let s = self
            .producer
            .sinks
            .entry(leader)
            .or_insert_with(|| SimSink {
                sink: Sink::new(leader, Arc::from(format!("sim:{leader}").as_str())),
                wake: Arc::new(SimWake::new(base)),
                timer: None,
                published: None,
                last_drain: None,
                stirred: false,
                inbox: Vec::new(),
                unsent: Vec::new(),
            });
        // Handed over: `SinkHandle::hand_over` wakes the sink, whose next turn adopts it.
        s.stirred = true;
        s.inbox.push(p);
    }

    /// At the start, every partition goes to its leader's sink.
    fn route_unowned(&mut self) {
        if !self.producer.sinks.is_empty() {
            return;
        }
        for p in self.producer.partitions.clone() {
            self.hand_over(p);
        }
    }

    /// Appends the records due; whether a record began to wait for room among the
    /// queued records (a wait that was not already under way before this step, or one
    /// after appending others: each is a `Producer::wait_for_room` of its own, which
    /// hurries the sinks).
    fn append_due(&mut self) -> bool {
        let was_waiting = self.producer.waiting_for_room;
        self.producer.waiting_for_room = false;
        let mut appended_any = false;
        while let Some(&(at, partition, index)) = self.producer.to_send.front() {
            if at > self.now {
                break;
            }
            let value = index.to_be_bytes();
            let now = self.now;
            let p = &self.producer;
            let appended = p.partitions[partition].state().append(
                RecordParts {
                    key: None,
                    value: Some(&value),
                    headers: &[],
                    timestamp: 1,
                },
                // Every odd record is sent with a tag, its index.
                (index % 2 == 1).then_some(u64::from(index)),
                &mut None,
                &p.settings,
                &p.pools,
                || now,
            );
            if let Ok(Appended::NeedRoom) = appended {
                self.producer.waiting_for_room = true;
                return appended_any || !was_waiting;
            }
            self.producer.to_send.pop_front();
            appended_any = true;
            let limit = self.producer.queued.limit();
            assert!(
                limit == 0 || self.producer.queued.queued() <= limit,
                "{} records queued past the limit of {limit}",
                self.producer.queued.queued()
            );
            match appended {
                Ok(Appended::NeedRoom) => unreachable!("handled above"),
                Ok(Appended::Done {
                    shared,
                    index: position,
                }) => self.producer.sent.push(Sent {
                    partition,
                    index,
                    shared,
                    position,
                }),
                Ok(Appended::NeedArena(_)) => panic!("the simulation's arena budget ran out"),
                Ok(Appended::Tagged) => self.producer.tagged.push((partition, index)),
                Err(e) => panic!("append failed: {e}"),
            }
        }
        false
    }

    // ------------------------------------------------------------------ consumer

    fn drive_consumer(&mut self) {
        let now = self.now;
        if self.consumer.metadata_wanted && !self.consumer.metadata_in_flight {
            let broker = self.any_broker();
            self.consumer.metadata_in_flight = true;
            self.consumer.metadata_wanted = false;
            let request = typed(MetadataRequest::default());
            if self
                .send(Side::Consumer, broker, request, Token::Metadata)
                .is_err()
            {
                self.consumer.metadata_in_flight = false;
                self.consumer.metadata_wanted = true;
            }
        }
        // Partitions handed back go to their leader's fetcher once a metadata answer
        // newer than the hand-back says where that is.
        if !self.consumer.metadata_in_flight && !self.consumer.metadata_wanted {
            for t in std::mem::take(&mut self.consumer.homeless) {
                match self.consumer.leaders[t.partition() as usize] {
                    Some(leader) => {
                        let settings = self.consumer.settings.clone();
                        self.consumer
                            .fetchers
                            .entry(leader)
                            .or_insert_with(|| (Fetcher::new(settings), FetchSlot::Idle, None))
                            .0
                            .add(t);
                    }
                    None => {
                        self.consumer.homeless.push(t);
                        self.consumer.metadata_wanted = true;
                    }
                }
            }
        }
        let brokers: Vec<i32> = self.consumer.fetchers.keys().copied().collect();
        let topic_id = self.cluster.topic_id;
        for broker in brokers {
            let capacity = self.consumer.budget.capacity();
            let Some((fetcher, slot, permit)) = self.consumer.fetchers.get_mut(&broker) else {
                continue;
            };
            if !matches!(slot, FetchSlot::Idle) {
                continue;
            }
            let Next::Fetch {
                max_bytes,
                short_poll,
            } = fetcher.poll_next(now, capacity)
            else {
                continue;
            };
            let Ok(acquired) = self.consumer.budget.try_acquire(max_bytes) else {
                continue;
            };
            let version = crate::protocol::ApiKey::Fetch.max_stable_version();
            let request = fetcher.build_request(version, max_bytes, short_poll, &|_| topic_id);
            *slot = FetchSlot::InFlight;
            *permit = Some(acquired);
            let typed = Box::new(TypedRequest {
                request,
                version: Some(version),
                addr: Arc::from("sim"),
                timeout: None,
            });
            if let Err((_, e)) = self.send(Side::Consumer, broker, typed, Token::Fetch) {
                self.on_fetch_answer(broker, Err(e));
            }
        }
        self.read_some();
    }

    /// The user reads: a chunk now and then from each partition.
    fn read_some(&mut self) {
        for p in 0..self.consumer.targets.len() {
            if !self.rng.chance(0.5) {
                continue;
            }
            let chunk = self.consumer.targets[p].queue().pop_front();
            let Some(chunk) = chunk else { continue };
            let reader = &mut self.consumer.readers[p];
            reader.push_chunk(chunk);
            loop {
                match reader.advance() {
                    Advance::NeedChunk => break,
                    Advance::Error(e) => panic!("partition {p}: the reader failed: {e}"),
                    Advance::Ready => {
                        let batch = match reader.take_ready() {
                            Some(Ok(b)) => b,
                            Some(Err(e)) => panic!("partition {p}: {e}"),
                            None => break,
                        };
                        for r in batch.records() {
                            let r = r.unwrap_or_else(|e| panic!("partition {p}: {e}"));
                            let index = value_index(r.value());
                            self.consumer.seen[p].push((r.offset(), index));
                        }
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------------ time

    /// The next moment anything happens.
    fn next_time(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
        };
        for link in self.links.values() {
            at(link.to_server.front().map(|(t, _)| *t));
            at(link
                .to_client
                .front()
                .and_then(|a| a.pieces.front())
                .map(|p| p.0));
            at(link.engine.poll_timeout());
        }
        for p in &self.parked {
            at(Some(p.deadline));
        }
        for &until in self.short_until.values() {
            at(Some(until));
        }
        for o in &self.orphans {
            at(o.to_server.front().map(|(t, _)| *t));
        }
        for s in self.producer.sinks.values() {
            at(s.timer);
            if s.stirred || s.wake.woken.load(Ordering::Relaxed) {
                at(Some(self.now));
            }
        }
        if !self.producer.waiting_for_room {
            at(self.producer.to_send.front().map(|(t, _, _)| *t));
        }
        for slot in self.slots.values() {
            at(slot.retry_at.filter(|t| *t > self.now));
        }
        next
    }

    /// Time moves to the next thing that happens; by a millisecond while the user has
    /// fetched data to read (or nothing is scheduled: fetchers poll each step).
    fn next_step(&self) -> Instant {
        let reading = self.consumer.targets.iter().any(|t| !t.queue().is_empty());
        let tick = self.now + Duration::from_millis(1);
        let floor = self.now + Duration::from_micros(100);
        match self.next_time() {
            Some(t) if reading => t.max(floor).min(tick),
            Some(t) => t.max(floor),
            None => tick,
        }
    }

    fn done(&self) -> bool {
        let deliveries_done = self.producer.to_send.is_empty()
            && self.producer.sent.iter().all(|s| resolved(s).is_some())
            && self
                .producer
                .tagged
                .iter()
                .all(|&(_, i)| !self.producer.reports.of(u64::from(i)).is_empty());
        let read_all = (0..self.cluster.partition_count())
            .all(|p| self.consumer.readers[p].position() >= self.cluster.log_end(p));
        deliveries_done && read_all
    }

    fn run(&mut self) -> Result<Report, String> {
        let mut steps = 0u64;
        let mut previous = self.now;
        while !self.done() {
            steps += 1;
            if steps > STEP_LIMIT || self.now - self.start > VIRTUAL_LIMIT {
                return Err(format!(
                    "no progress: {steps} steps, {:?} virtual; {}",
                    self.now - self.start,
                    self.progress()
                ));
            }
            self.deliver();
            self.wake_parked();
            let now = self.now;
            for link in self.links.values_mut() {
                if link.engine.poll_timeout().is_some_and(|t| t <= now) {
                    link.engine.handle_timeout(now);
                }
            }
            self.handle_events();
            self.inject_faults(self.now - previous);
            previous = self.now;
            self.handle_events();
            self.drive_producer();
            self.drive_consumer();
            self.transmit();
            self.handle_events();
            self.check_lingers_covered()?;
            self.now = self.next_step();
        }
        self.verify()?;
        let (mut acked, mut timed_out) = (0, 0);
        for s in &self.producer.sent {
            match resolved(s) {
                Some(Ok(_)) => acked += 1,
                Some(Err(_)) => timed_out += 1,
                None => {}
            }
        }
        Ok(Report {
            records: self.producer.sent.len(),
            acked,
            timed_out,
            steps,
        })
    }

    fn progress(&self) -> String {
        let unresolved = self
            .producer
            .sent
            .iter()
            .filter(|s| resolved(s).is_none())
            .count();
        let positions: Vec<(i64, i64)> = (0..self.cluster.partition_count())
            .map(|p| (self.consumer.readers[p].position(), self.cluster.log_end(p)))
            .collect();
        format!(
            "{unresolved} deliveries unresolved, {} not sent; consumer (position, end): {positions:?}; idempotent {}, bump {} id {:?}",
            self.producer.to_send.len(),
            self.producer.settings.idempotent,
            self.producer.bump_needed,
            self.producer.identity
        )
    }

    // ------------------------------------------------------------------ invariants

    /// The promise the appending threads' skipped wake-ups rest on
    /// (`engine::produce::wake`), checked after every step for each open batch of each
    /// sink not about to drain anyway (woken or stirred; a sink with partitions in its
    /// inbox always is, so every open batch is checked), unless sealed batches of its
    /// partition are queued or on the wire ahead of it (their sending and retries
    /// decide when it can go):
    /// - a batch whose linger had not ended when the sink last drained (or opened since)
    ///   must be seen by a drain by its linger's end: the timer the sink published is no
    ///   later than that;
    /// - a batch the sink saw due and held (`PartitionState::seal_if_due`) waits for an
    ///   answer: a request of the sink is on the wire (its slots were taken, or the
    ///   broker is behind: `engine::produce::pace`). Held with nothing ahead of it and
    ///   nothing on the wire, it would wait for its own delivery timeout;
    /// - a sink that published that it waits for an answer (`Sink::publish_sleep`) has
    ///   every request slot taken (checked for the sink, whatever its partitions hold):
    ///   with one free, a batch sealed full or due would wait for that answer in vain.
    ///
    /// A sink that broke any would leave a batch waiting past its linger until a flush, a
    /// wait for room or another partition's batch woke it.
    fn check_lingers_covered(&self) -> Result<(), String> {
        let settings = &self.producer.settings;
        for (broker, s) in &self.producer.sinks {
            if s.stirred || s.wake.woken.load(Ordering::Relaxed) {
                continue;
            }
            if !s.inbox.is_empty() {
                return Err(format!(
                    "sink {broker} has partitions handed to it and will not take a turn"
                ));
            }
            let waits = s.wake.next_drain.waits_for_an_answer();
            let max = settings.max_requests_in_flight();
            if waits && s.sink.requests_in_flight() < max {
                return Err(format!(
                    "at {:?}: sink {broker} waits for an answer with {} of {max} request \
                     slot(s) taken",
                    self.now - self.start,
                    s.sink.requests_in_flight(),
                ));
            }
            for p in s.sink.partitions() {
                let state = p.state();
                let Some(due) = state.due_at(settings) else {
                    continue;
                };
                if state.has_sealed() {
                    continue;
                }
                let seen_due = s.last_drain.is_some_and(|t| due <= t);
                // Waiting for an answer, every slot taken (checked above).
                let covered = if seen_due || waits {
                    s.sink.requests_in_flight() > 0
                } else {
                    s.wake.next_drain.drains_by(due)
                };
                if covered {
                    continue;
                }
                let since = |t: Option<Instant>| t.map(|t| t - self.start);
                return Err(format!(
                    "at {:?}: partition {}'s open batch is due at {:?}; sink {broker} last \
                     drained at {:?}, published the timer {:?} (waiting for an answer: {}), \
                     has {} request(s) on the wire and is not woken",
                    self.now - self.start,
                    p.index,
                    due - self.start,
                    since(s.last_drain),
                    since(s.published),
                    s.wake.next_drain.waits_for_an_answer(),
                    s.sink.requests_in_flight(),
                ));
            }
        }
        Ok(())
    }

    fn verify(&self) -> Result<(), String> {
        for p in 0..self.cluster.partition_count() {
            let log = log_of(&self.cluster, p)?;
            self.verify_log_contents(p, &log)?;
            // The consumer read every offset exactly once, as written.
            if self.consumer.seen[p] != log {
                return Err(format!(
                    "partition {p}: the consumer read {:?}, the log holds {:?}",
                    first_difference(&self.consumer.seen[p], &log),
                    log.len()
                ));
            }
            let errors = self.consumer.targets[p].errors();
            if let Some(e) = errors.first() {
                return Err(format!("partition {p}: the consumer was told: {e}"));
            }
        }
        for s in &self.producer.sent {
            match resolved(s) {
                None => return Err(format!("record {} never resolved", s.index)),
                Some(Ok(offset)) => {
                    let log = log_of(&self.cluster, s.partition)?;
                    let at = log.iter().find(|(o, _)| *o == offset).map(|(_, i)| *i);
                    if at != Some(s.index) {
                        return Err(format!(
                            "record {} acknowledged at {}-{offset}, where the log holds {at:?}",
                            s.index, s.partition
                        ));
                    }
                }
                Some(Err(Error::Timeout(_))) => {}
                Some(Err(e)) => return Err(format!("record {} failed: {e}", s.index)),
            }
        }
        self.verify_tagged()?;
        // Every record settled gave its count back, once.
        match self.producer.queued.queued() {
            0 => Ok(()),
            n => Err(format!(
                "{n} records still counted as queued after all settled"
            )),
        }
    }

    /// With idempotence nothing is written twice and each partition's order holds.
    /// Without it (at least once) retries may write a batch again and put it behind a
    /// later one, but never split or reorder a batch: the log holds only records sent to
    /// its partition, in order within each batch.
    fn verify_log_contents(&self, partition: usize, log: &[(i64, u32)]) -> Result<(), String> {
        if self.producer.settings.idempotent {
            return match log.windows(2).find(|w| w[1].1 <= w[0].1) {
                Some(w) => Err(format!(
                    "partition {partition}: record {} at offset {} after record {} at {} (duplicate or reordered)",
                    w[1].1, w[1].0, w[0].1, w[0].0
                )),
                None => Ok(()),
            };
        }
        let sent = self.sent_to(partition);
        if let Some((offset, index)) = log.iter().find(|(_, index)| !sent.contains(index)) {
            return Err(format!(
                "partition {partition}: offset {offset} holds record {index}, never sent to it"
            ));
        }
        for batch in batches_of(&self.cluster, partition)? {
            if let Some(w) = batch.windows(2).find(|w| w[1].1 <= w[0].1) {
                return Err(format!(
                    "partition {partition}: record {} at offset {} after record {} at {} in one batch",
                    w[1].1, w[1].0, w[0].1, w[0].0
                ));
            }
        }
        Ok(())
    }

    /// The indices of every record appended to `partition`, with a future or a tag.
    fn sent_to(&self, partition: usize) -> BTreeSet<u32> {
        let p = &self.producer;
        let futures = p.sent.iter().filter(|s| s.partition == partition);
        let tagged = p.tagged.iter().filter(|&&(q, _)| q == partition);
        futures
            .map(|s| s.index)
            .chain(tagged.map(|&(_, i)| i))
            .collect()
    }

    /// Every tagged record was reported once, at the offset the log holds it at.
    fn verify_tagged(&self) -> Result<(), String> {
        for &(partition, index) in &self.producer.tagged {
            let reports = self.producer.reports.of(u64::from(index));
            match reports.as_slice() {
                [Ok(offset)] => {
                    let log = log_of(&self.cluster, partition)?;
                    let at = log.iter().find(|(o, _)| o == offset).map(|(_, i)| *i);
                    if at != Some(index) {
                        return Err(format!(
                            "tagged record {index} reported at {partition}-{offset}, where the log holds {at:?}"
                        ));
                    }
                }
                [Err(Error::Timeout(_))] => {}
                [Err(e)] => return Err(format!("tagged record {index} failed: {e}")),
                other => {
                    return Err(format!(
                        "tagged record {index} reported {} times: {other:?}",
                        other.len()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The outcome of one record: the offset it was acknowledged at, or its error.
fn resolved(s: &Sent) -> Option<Result<i64, Error>> {
    let mut shared = s.shared.clone();
    let mut index = s.position;
    loop {
        match shared.poll_record(index, None) {
            std::task::Poll::Pending => return None,
            std::task::Poll::Ready(Resolved::Done(r)) => {
                return Some(r.map(|ack| ack.base_offset + index as i64));
            }
            std::task::Poll::Ready(Resolved::Moved(next)) => {
                shared = next;
                index = 0;
            }
        }
    }
}

fn value_index(value: Option<&[u8]>) -> u32 {
    value
        .and_then(|v| v.try_into().ok())
        .map(u32::from_be_bytes)
        .unwrap_or(u32::MAX)
}

/// (offset, record index) of every record in a partition's log.
fn log_of(cluster: &SimCluster, partition: usize) -> Result<Vec<(i64, u32)>, String> {
    Ok(batches_of(cluster, partition)?.concat())
}

/// (offset, record index) of every record in a partition's log, batch by batch.
fn batches_of(cluster: &SimCluster, partition: usize) -> Result<Vec<Vec<(i64, u32)>>, String> {
    let mut decompressor = crate::record::Decompressor::default();
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    for bytes in cluster.log(partition) {
        let batch = RecordBatchRef::new(bytes).map_err(|e| e.to_string())?;
        let records = batch
            .decompress_records(&mut decompressor, &mut scratch)
            .map_err(|e| e.to_string())?;
        let mut one = Vec::new();
        for r in records {
            let r = r.map_err(|e| e.to_string())?;
            one.push((r.offset(), value_index(r.value())));
        }
        out.push(one);
    }
    Ok(out)
}

fn first_difference(a: &[(i64, u32)], b: &[(i64, u32)]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("at #{i}: read {:?}, logged {:?}", a[i], b[i]),
        None => format!("read {} records, logged {}", a.len(), b.len()),
    }
}

/// Each partition's leader in the metadata's view of `topic`.
fn leaders_in(m: &ClusterMetadata, topic: &str, partitions: usize) -> Vec<Option<i32>> {
    (0..partitions)
        .map(|i| {
            m.partition(topic, i as i32)
                .filter(|p| p.leader >= 0)
                .map(|p| p.leader)
        })
        .collect()
}

fn leaders_of(m: &MetadataResponse, partitions: usize) -> Vec<Option<i32>> {
    let mut leaders = vec![None; partitions];
    for t in &m.topics {
        for p in &t.partitions {
            if let Some(slot) = leaders.get_mut(p.partition_index as usize) {
                *slot = (p.leader_id >= 0).then_some(p.leader_id);
            }
        }
    }
    leaders
}

/// "p0 seq 4+3, p2 seq 0+1" for the trace.
fn describe_batches(request: &crate::engine::produce::request::ProduceBatches) -> String {
    request
        .topics
        .iter()
        .flat_map(|(_, parts)| parts.iter())
        .map(|p| match RecordBatchRef::new(&p.batch) {
            Ok(b) => format!(
                "p{} epoch {} seq {}+{}",
                p.partition,
                b.producer_epoch(),
                b.base_sequence(),
                b.record_count()
            ),
            Err(e) => format!("p{} ({e})", p.partition),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn typed<R: crate::protocol::Request + Send + 'static>(request: R) -> Box<dyn EncodeRequest> {
    Box::new(TypedRequest {
        request,
        version: None,
        addr: Arc::from("sim"),
        timeout: None,
    })
}

fn decode<R: crate::protocol::Response>(result: Result<RawResponse, IoError>) -> Option<R> {
    let raw = result.ok()?;
    decode_response_body::<R>(raw.body, raw.version).ok()
}

/// Runs one seed; the error says what broke, with the run's last events (all of
/// them, and in full, with `full_trace`).
fn run_seed(seed: u64) -> Result<Report, String> {
    run_traced(seed, false)
}

fn run_traced(seed: u64, full_trace: bool) -> Result<Report, String> {
    let mut world = World::new(seed);
    if full_trace {
        world.trace_limit = usize::MAX;
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.run()));
    let failure = match outcome {
        Ok(Ok(report)) => {
            if full_trace {
                eprintln!(
                    "faults: {:?}; idempotent: {}",
                    world.faults, world.producer.settings.idempotent
                );
                for line in &world.trace {
                    eprintln!("  {line}");
                }
            }
            return Ok(report);
        }
        Ok(Err(e)) => e,
        Err(panic) => panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into()),
    };
    let keep = if full_trace { usize::MAX } else { 40 };
    let trace: Vec<String> = world.trace.iter().rev().take(keep).rev().cloned().collect();
    Err(format!(
        "seed {seed} failed: {failure}\nfaults: {:?}; idempotent: {}\nlast events:\n  {}\nreplay: KRING_SIM_SEED={seed} cargo test --lib engine::sim::replay -- --nocapture",
        world.faults,
        world.producer.settings.idempotent,
        trace.join("\n  ")
    ))
}

/// Runs `count` seeds from `first`; panics with every failure found.
fn run_seeds(first: u64, count: u64) {
    let mut failures = Vec::new();
    let mut totals = Report::default();
    for seed in first..first + count {
        match run_seed(seed) {
            Ok(r) => {
                if r.timed_out > 0 && std::env::var("KRING_SIM_SHOW_TIMEOUTS").is_ok() {
                    eprintln!(
                        "seed {seed}: {} of {} records timed out",
                        r.timed_out, r.records
                    );
                }
                totals.records += r.records;
                totals.acked += r.acked;
                totals.timed_out += r.timed_out;
                totals.steps += r.steps;
            }
            Err(e) => {
                failures.push(e);
                if failures.len() >= 3 {
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!(
        "seeds {first}..{}: {} records, {} acknowledged, {} timed out, {} steps",
        first + count,
        totals.records,
        totals.acked,
        totals.timed_out,
        totals.steps
    );
}

/// Seeds per test: four tests run in parallel, 20,000 seeds in all (`KRING_SIM_SEEDS`
/// changes it).
const SEEDS_PER_TEST: u64 = 5_000;

fn seeds_per_test() -> u64 {
    std::env::var("KRING_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS_PER_TEST)
}

#[test]
fn seeds_a() {
    run_seeds(0, seeds_per_test());
}

#[test]
fn seeds_b() {
    run_seeds(1_000_000, seeds_per_test());
}

#[test]
fn seeds_c() {
    run_seeds(2_000_000, seeds_per_test());
}

#[test]
fn seeds_d() {
    run_seeds(3_000_000, seeds_per_test());
}

/// Replays the seed in `KRING_SIM_SEED` (nothing without it).
#[test]
fn replay() {
    let Some(seed) = std::env::var("KRING_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    else {
        return;
    };
    match run_traced(seed, true) {
        Ok(r) => eprintln!("seed {seed}: {r:?}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_same_seed_runs_the_same_way() {
    let a = run_seed(42).map(|r| (r.records, r.acked, r.steps));
    let b = run_seed(42).map(|r| (r.records, r.acked, r.steps));
    assert_eq!(a, b);
}
