//! Waits for the producer's delivery reports off the sending thread: the sender hands
//! over its [`DeliveryFuture`]s in chunks and a waiter thread resolves them in order,
//! counting successes and failures and timing every sampled record from send to ack.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use kring::producer::DeliveryFuture;

/// Futures handed to the waiter at once (one channel message per chunk).
const CHUNK: usize = 256;

/// One record in flight: its delivery future and, if sampled, when it was sent.
type InFlight = (DeliveryFuture, Option<Instant>);

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
    chunk: Vec<InFlight>,
    tx: Option<mpsc::Sender<Vec<InFlight>>>,
    waiter: Option<JoinHandle<Tally>>,
    reported: Arc<AtomicU64>,
}

impl Deliveries {
    pub fn start() -> Self {
        let (tx, rx) = mpsc::channel::<Vec<InFlight>>();
        let reported = Arc::new(AtomicU64::new(0));
        let counter = reported.clone();
        let waiter = std::thread::Builder::new()
            .name("kring-deliveries".into())
            .spawn(move || {
                let mut tally = Tally::default();
                for chunk in rx {
                    for (future, sent) in chunk {
                        let result = future.wait();
                        counter.fetch_add(1, Ordering::Relaxed);
                        tally.count(result, sent);
                    }
                    // Once a chunk, not once a report: a clock read per report is the
                    // harness's cost, not the producer's (the peers read it as rarely).
                    // The last chunk's reading is the last report's time.
                    tally.last_report = Some(Instant::now());
                }
                tally.latencies_ns.sort_unstable();
                tally
            })
            .expect("spawning a thread");
        Deliveries {
            chunk: Vec::with_capacity(CHUNK),
            tx: Some(tx),
            waiter: Some(waiter),
            reported,
        }
    }

    /// How many delivery reports (successes and failures) have arrived so far.
    pub fn reported(&self) -> u64 {
        self.reported.load(Ordering::Relaxed)
    }

    /// Hands over one record's future; `sent` is its send time if it is sampled.
    pub fn push(&mut self, future: DeliveryFuture, sent: Option<Instant>) {
        self.chunk.push((future, sent));
        if self.chunk.len() == CHUNK {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        let full = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK));
        if let Some(tx) = &self.tx {
            // The waiter only ends once `tx` is dropped, so it is alive here.
            let _ = tx.send(full);
        }
    }

    /// Waits for every report handed over and returns the tally.
    pub fn finish(mut self) -> Tally {
        if !self.chunk.is_empty() {
            self.hand_over();
        }
        self.tx = None;
        self.waiter
            .take()
            .and_then(|w| w.join().ok())
            .unwrap_or_default()
    }
}
