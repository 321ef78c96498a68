//! The producer's delivery reports, counted off the sending thread: either the sender
//! hands over its [`DeliveryFuture`]s in chunks and a waiter thread resolves them in
//! order ([`Deliveries`]), or records are sent with a tag and the producer's delivery
//! handler counts each batch's reports as it settles ([`TaggedDeliveries`]); both count
//! successes and failures and time every sampled record from send to ack.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use kring::producer::{DeliveredBatch, DeliveryFuture};

/// Futures handed to the waiter at once (one channel message per chunk).
const CHUNK: usize = 256;

/// Records in flight, handed over together: their delivery futures in send order, and
/// the send times of the sampled ones by their place in the chunk. Emptied chunks go
/// back to the sender and are filled again: the sender runs far ahead of the reports
/// (a full `buffer.memory` of records), and fresh chunks each time were fresh pages,
/// faulted in by the sending thread.
struct Chunk {
    futures: Vec<DeliveryFuture>,
    sampled: Vec<(usize, Instant)>,
}

impl Chunk {
    fn new() -> Self {
        Chunk {
            futures: Vec::with_capacity(CHUNK),
            sampled: Vec::new(),
        }
    }
}

/// What the waiter saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub delivered: u64,
    pub failed: u64,
    pub first_error: Option<String>,
    /// Send-to-ack times of the sampled records, sorted, in nanoseconds.
    pub latencies_ns: Vec<u64>,
    /// When the last report arrived.
    pub last_report: Option<Instant>,
}

impl Tally {
    /// Counts one report; a sampled record (`sent`) is timed now.
    fn count(
        &mut self,
        result: Result<kring::producer::RecordMetadata, kring::Error>,
        sent: Option<Instant>,
    ) {
        match result {
            Ok(_) => {
                self.delivered += 1;
                if let Some(sent) = sent {
                    self.latencies_ns.push(sent.elapsed().as_nanos() as u64);
                }
            }
            Err(e) => {
                self.failed += 1;
                self.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// The sending side: hand each record's future to [`Deliveries::push`].
pub struct Deliveries {
    chunk: Chunk,
    tx: Option<mpsc::Sender<Chunk>>,
    /// Chunks the waiter is done with, to be filled again.
    emptied: mpsc::Receiver<Chunk>,
    waiter: Option<JoinHandle<Tally>>,
    reported: Arc<AtomicU64>,
}

impl Deliveries {
    pub fn start() -> Self {
        let (tx, rx) = mpsc::channel::<Chunk>();
        let (give_back, emptied) = mpsc::channel::<Chunk>();
        let reported = Arc::new(AtomicU64::new(0));
        let counter = reported.clone();
        let waiter = std::thread::Builder::new()
            .name("kring-deliveries".into())
            .spawn(move || {
                let mut tally = Tally::default();
                for mut chunk in rx {
                    let mut sampled = chunk.sampled.drain(..).peekable();
                    let reports = chunk.futures.len() as u64;
                    for (i, future) in chunk.futures.drain(..).enumerate() {
                        let result = future.wait();
                        let sent = sampled.next_if(|(at, _)| *at == i).map(|(_, t)| t);
                        tally.count(result, sent);
                    }
                    drop(sampled);
                    // Counted once a chunk: the progress line needs no finer count, and an
                    // atomic add per report would be the harness's cost.
                    counter.fetch_add(reports, Ordering::Relaxed);
                    // Once a chunk, not once a report: a clock read per report is the
                    // harness's cost, not the producer's (the peers read it as rarely).
                    // The last chunk's reading is the last report's time.
                    tally.last_report = Some(Instant::now());
                    // The sender may have finished: then the chunk is simply dropped.
                    let _ = give_back.send(chunk);
                }
                tally.latencies_ns.sort_unstable();
                tally
            })
            .expect("spawning a thread");
        Deliveries {
            chunk: Chunk::new(),
            tx: Some(tx),
            emptied,
            waiter: Some(waiter),
            reported,
        }
    }

    /// How many delivery reports (successes and failures) have arrived so far, counted a
    /// chunk at a time.
    pub fn reported(&self) -> u64 {
        self.reported.load(Ordering::Relaxed)
    }

    /// Hands over one record's future; `sent` is its send time if it is sampled.
    pub fn push(&mut self, future: DeliveryFuture, sent: Option<Instant>) {
        if let Some(sent) = sent {
            self.chunk.sampled.push((self.chunk.futures.len(), sent));
        }
        self.chunk.futures.push(future);
        if self.chunk.futures.len() == CHUNK {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        let next = self.emptied.try_recv().unwrap_or_else(|_| Chunk::new());
        let full = std::mem::replace(&mut self.chunk, next);
        if let Some(tx) = &self.tx {
            // The waiter only ends once `tx` is dropped, so it is alive here.
            let _ = tx.send(full);
        }
    }

    /// Waits for every report handed over and returns the tally.
    pub fn finish(mut self) -> Tally {
        if !self.chunk.futures.is_empty() {
            self.hand_over();
        }
        self.tx = None;
        self.waiter
            .take()
            .and_then(|w| w.join().ok())
            .unwrap_or_default()
    }
}

/// Delivery reports of records sent with a tag (their index): the producer's delivery
/// handler counts each batch's reports as it settles, on the thread that settles it,
/// and times every sampled record from its send. No future, no waiter thread: the
/// pattern of librdkafka's delivery report callback with each message's opaque, which
/// its peer in `perf/` uses.
pub struct TaggedDeliveries {
    shared: Arc<TaggedShared>,
}

struct TaggedShared {
    /// Times are kept as nanoseconds after this.
    base: Instant,
    delivered: AtomicU64,
    failed: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
    /// Every `every`-th record is timed: record `k × every` was sent `sent[k]` ns after
    /// `base`.
    every: u64,
    sent: Vec<AtomicU64>,
    latencies_ns: std::sync::Mutex<Vec<u64>>,
    /// When the latest report arrived, ns after `base`.
    last_report_ns: AtomicU64,
}

impl TaggedDeliveries {
    /// For records `0..records`, every `every`-th timed.
    pub fn new(records: u64, every: u64) -> Self {
        let every = every.max(1);
        TaggedDeliveries {
            shared: Arc::new(TaggedShared {
                base: Instant::now(),
                delivered: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                first_error: std::sync::Mutex::new(None),
                every,
                sent: (0..records.div_ceil(every))
                    .map(|_| AtomicU64::new(0))
                    .collect(),
                latencies_ns: std::sync::Mutex::new(Vec::new()),
                last_report_ns: AtomicU64::new(0),
            }),
        }
    }

    /// The producer's delivery handler: counts a settled batch's reports.
    pub fn handler(&self) -> impl Fn(&DeliveredBatch<'_>) + Send + Sync + 'static {
        let shared = self.shared.clone();
        move |batch: &DeliveredBatch<'_>| shared.count(batch)
    }

    /// Record `index` (a timed one) is sent now.
    pub fn sent(&self, index: u64, at: Instant) {
        let s = &self.shared;
        if index % s.every == 0
            && let Some(slot) = s.sent.get((index / s.every) as usize)
        {
            slot.store(nanos_between(s.base, at), Ordering::Relaxed);
        }
    }

    /// Reports (successes and failures) so far.
    pub fn reported(&self) -> u64 {
        let s = &self.shared;
        s.delivered.load(Ordering::Relaxed) + s.failed.load(Ordering::Relaxed)
    }

    /// The tally of every report: call once the producer has flushed (a flush returns
    /// only after the handler has been told of every batch it waited for).
    pub fn finish(self) -> Tally {
        let s = &self.shared;
        let mut latencies_ns =
            std::mem::take(&mut *s.latencies_ns.lock().unwrap_or_else(|p| p.into_inner()));
        latencies_ns.sort_unstable();
        let last = s.last_report_ns.load(Ordering::Relaxed);
        Tally {
            delivered: s.delivered.load(Ordering::Relaxed),
            failed: s.failed.load(Ordering::Relaxed),
            first_error: s.first_error.lock().ok().and_then(|e| e.clone()),
            latencies_ns,
            last_report: (last > 0).then(|| s.base + std::time::Duration::from_nanos(last)),
        }
    }
}

impl TaggedShared {
    fn count(&self, batch: &DeliveredBatch<'_>) {
        let now = nanos_between(self.base, Instant::now());
        let mut delivered = 0;
        let mut latencies = Vec::new();
        for d in batch.iter() {
            match d.result {
                Ok(_) => {
                    delivered += 1;
                    if d.tag % self.every == 0
                        && let Some(slot) = self.sent.get((d.tag / self.every) as usize)
                    {
                        latencies.push(now.saturating_sub(slot.load(Ordering::Relaxed)));
                    }
                }
                Err(e) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut first) = self.first_error.lock() {
                        first.get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }
        if !latencies.is_empty()
            && let Ok(mut all) = self.latencies_ns.lock()
        {
            all.extend(latencies);
        }
        self.last_report_ns.fetch_max(now, Ordering::Relaxed);
        self.delivered.fetch_add(delivered, Ordering::Relaxed);
    }
}

fn nanos_between(base: Instant, at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(base).as_nanos()).unwrap_or(u64::MAX)
}
