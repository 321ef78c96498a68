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
