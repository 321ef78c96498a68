//! The harness's keyed and latency workloads for `kring perf` (perf/README.md, the peer
//! contract): record keys (`--key-size`), the fixed send schedule of `--rate` with every
//! record timed from send to delivery report, and the wall-clock stamps written into
//! values there and read back by `kring perf consume --e2e` for end-to-end latency.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kring::producer::{DeliveryFuture, Producer, ProducerRecord};

use crate::CliError;
use crate::args::UsageError;
use crate::deliveries::Tally;
use crate::stats::Progress;

/// Bytes of the send-time stamp at the start of a paced record's value.
pub const STAMP_LEN: usize = 19;

/// The longest key `--key-size` makes: the 16 hex digits of a 64-bit number.
pub const MAX_KEY_SIZE: usize = 16;

/// Record `i`'s key: the 16 lowercase hex digits of `i * 0x9E3779B97F4A7C15 mod 2^64`
/// (the contract's keys; a caller takes the first `--key-size` of them).
pub fn key_of(i: u64) -> [u8; MAX_KEY_SIZE] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mixed = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut key = [0u8; MAX_KEY_SIZE];
    for (k, byte) in key.iter_mut().enumerate() {
        *byte = HEX[(mixed >> (60 - 4 * k) & 0xf) as usize];
    }
    key
}

/// Checks `--key-size`.
pub fn check_key_size(size: Option<usize>) -> Result<Option<usize>, UsageError> {
    match size {
        Some(k) if !(1..=MAX_KEY_SIZE).contains(&k) => Err(UsageError::new(format!(
            "--key-size {k}: must be 1 to {MAX_KEY_SIZE}"
        ))),
        other => Ok(other),
    }
}

/// Checks `--rate` (records/s) against the run's other options.
pub fn check_rate(
    rate: Option<f64>,
    transactional: bool,
    values: &[Vec<u8>],
) -> Result<Option<f64>, UsageError> {
    let Some(rate) = rate else { return Ok(None) };
    if !(rate.is_finite() && rate > 0.0) {
        return Err(UsageError::new(format!(
            "--rate {rate}: must be a positive number of records/s"
        )));
    }
    if transactional {
        return Err(UsageError::new(
            "--rate and --transactional-id do not go together",
        ));
    }
    if values.iter().any(|v| v.len() < STAMP_LEN) {
        return Err(UsageError::new(format!(
            "--rate stamps the first {STAMP_LEN} bytes of each value: every payload must be at least that long"
        )));
    }
    Ok(Some(rate))
}

/// Nanoseconds since the Unix epoch, by the wall clock (comparable across processes).
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Writes `ns` as 19 zero-padded decimal digits over the first [`STAMP_LEN`] bytes.
pub fn write_stamp(value: &mut [u8], mut ns: u64) {
    for byte in value[..STAMP_LEN].iter_mut().rev() {
        *byte = b'0' + (ns % 10) as u8;
        ns /= 10;
    }
}

/// The stamp at the start of `value`, if it has one.
pub fn read_stamp(value: &[u8]) -> Option<u64> {
    let digits = value.get(..STAMP_LEN)?;
    digits.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit()
            .then(|| acc.wrapping_mul(10).wrapping_add(u64::from(b - b'0')))
    })
}

/// What a paced run measured.
pub struct PacedRun {
    pub tally: Tally,
    /// Value bytes sent.
    pub bytes: u64,
}

/// Sends `records` records at `rate` records/s (record i no earlier than start + i/rate;
/// a late sender catches up, the schedule is never reset), each value stamped with its
/// send time, each record's send-to-report latency timed. `started` is the clock's start.
pub fn send_paced(
    producer: &Producer,
    topic: &str,
    values: &[Vec<u8>],
    key_size: Option<usize>,
    records: u64,
    rate: f64,
    started: Instant,
) -> Result<PacedRun, CliError> {
    let mut waiter = TimedDeliveries::start()?;
    let mut progress = Progress::new("acked");
    let mut scratch = Vec::new();
    let mut bytes = 0u64;
    for i in 0..records {
        let due = started + Duration::from_secs_f64(i as f64 / rate);
        if due > Instant::now() {
            // What was sent goes to the waiter before the nap, not record by record
            // (which, on the one CPU the harness gives a client, would switch threads
            // twice per record); the waiter is woken only when it must look (see
            // `Outstanding::add`).
            waiter.hand_over();
            wait_until(due);
        }
        let line = &values[(i % values.len() as u64) as usize];
        scratch.clear();
        scratch.extend_from_slice(line);
        let sent = Instant::now();
        write_stamp(&mut scratch, wall_ns());
        let key = key_size.map(|k| (key_of(i), k));
        let mut record = ProducerRecord::new(topic).with_value(scratch.as_slice());
        if let Some((key, k)) = &key {
            record = record.with_key(&key[..*k]);
        }
        let future = producer.send_blocking(record)?;
        waiter.push(future, sent);
        bytes += line.len() as u64;
        if i % 4096 == 0 {
            let reported = waiter.reported();
            progress.update(reported, bytes * reported / (i + 1));
        }
    }
    waiter.hand_over();
    producer.flush_blocking().ok();
    let tally = waiter.finish();
    progress.finish();
    Ok(PacedRun { tally, bytes })
}

/// The shortest wait of the paced sender (perf/README.md, `--rate`): at most 2,000
/// wake-ups a second, whatever the rate, each sending every record that has come due.
const MIN_NAP: Duration = Duration::from_micros(500);

/// Sleeps until `due`, for at least [`MIN_NAP`] (not at all if it has passed).
fn wait_until(due: Instant) {
    let now = Instant::now();
    if due > now {
        std::thread::sleep((due - now).max(MIN_NAP));
    }
}

type Timed = (DeliveryFuture, Instant);

/// Times every record's delivery report as it arrives: a thread that awaits all
/// outstanding reports at once (not one after another, which would charge a record the
/// wait for an earlier one on a slower partition; see [`time_reports`]).
struct TimedDeliveries {
    /// Reports pushed since the last hand-over.
    batch: Vec<Timed>,
    outstanding: Arc<Mutex<Outstanding>>,
    waiter: Option<JoinHandle<Tally>>,
    reported: Arc<AtomicU64>,
}

impl TimedDeliveries {
    fn start() -> Result<Self, CliError> {
        let outstanding = Arc::new(Mutex::new(Outstanding::default()));
        let reported = Arc::new(AtomicU64::new(0));
        let (shared, counter) = (outstanding.clone(), reported.clone());
        let waiter = std::thread::Builder::new()
            .name("kring-timed-deliveries".into())
            .spawn(move || time_reports(&shared, &counter))
            .map_err(|e| CliError::io("starting the delivery waiter", e))?;
        Ok(TimedDeliveries {
            batch: Vec::new(),
            outstanding,
            waiter: Some(waiter),
            reported,
        })
    }

    fn push(&mut self, future: DeliveryFuture, sent: Instant) {
        self.batch.push((future, sent));
    }

    /// Hands the reports pushed since the last time to the waiter, waking it only when
    /// it is not waiting for them anyway (see [`Outstanding::add`]).
    fn hand_over(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        self.update(|o| o.add(batch));
    }

    fn reported(&self) -> u64 {
        self.reported.load(Ordering::Relaxed)
    }

    fn finish(mut self) -> Tally {
        self.hand_over();
        self.close();
        self.waiter
            .take()
            .and_then(|w| w.join().ok())
            .unwrap_or_default()
    }

    /// Tells the waiter no more reports come: it ends once it has taken those it has.
    fn close(&self) {
        self.update(|o| {
            o.closed = true;
            true
        });
    }

    /// Changes what the waiter shares under its lock, then wakes it (out of the lock)
    /// if `change` says it must look.
    fn update(&self, change: impl FnOnce(&mut Outstanding) -> bool) {
        let waker = self
            .outstanding
            .lock()
            .ok()
            .and_then(|mut o| change(&mut o).then(|| o.waker.clone()).flatten());
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A run that ends early (a send failed) still ends the waiter's thread.
impl Drop for TimedDeliveries {
    fn drop(&mut self) {
        if self.waiter.is_some() {
            self.close();
        }
    }
}

/// The reports the waiter has not seen arrive yet, queued by partition in send order,
/// and how to wake it.
#[derive(Default)]
struct Outstanding {
    queues: BTreeMap<i32, VecDeque<Timed>>,
    /// The waker of the waiter's last pass.
    waker: Option<Waker>,
    /// The sender is done: no more reports come.
    closed: bool,
}

impl Outstanding {
    /// Queues `batch`; whether the waiter must be woken to see it. Only for a report
    /// of a partition that had none outstanding: the waiter waits on the oldest report
    /// of every partition, and a partition's reports arrive in send order, so one
    /// queued behind another is looked at when that one arrives, or at the same pass if
    /// both arrived. One wake-up of the waiter a batch, not one a hand-over (a nap of the
    /// sender, 2,000 a second).
    fn add(&mut self, batch: Vec<Timed>) -> bool {
        let mut wake = false;
        for timed in batch {
            let queue = self.queues.entry(timed.0.partition()).or_default();
            wake |= queue.is_empty();
            queue.push_back(timed);
        }
        wake
    }
}

/// The waiter thread: one pass over the outstanding reports at every wake-up (a
/// partition's report arriving, or one of a partition that had none): queue by queue,
/// it takes the reports at the front that have arrived, timed when the pass finds the
/// first of them, and stops at the first still due, whose batch wakes it when settled.
/// Were a later report of a partition to arrive first, it would be timed when the
/// earlier one arrives: counted late, never early. Parks the thread between passes
/// (`kring::client::block_on`).
fn time_reports(outstanding: &Mutex<Outstanding>, counter: &AtomicU64) -> Tally {
    let mut tally = Tally::default();
    kring::client::block_on(std::future::poll_fn(|cx| {
        let Ok(mut o) = outstanding.lock() else {
            return Poll::Ready(());
        };
        match &mut o.waker {
            Some(w) => w.clone_from(cx.waker()),
            None => o.waker = Some(cx.waker().clone()),
        }
        let mut reported = 0;
        for queue in o.queues.values_mut() {
            reported += take_arrived(queue, cx, &mut tally);
        }
        counter.fetch_add(reported, Ordering::Relaxed);
        if o.closed && o.queues.values().all(VecDeque::is_empty) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }));
    tally.latencies_ns.sort_unstable();
    tally
}

/// Takes the reports at the front of `queue` that have arrived into `tally`; how many.
fn take_arrived(queue: &mut VecDeque<Timed>, cx: &mut Context<'_>, tally: &mut Tally) -> u64 {
    let mut now = None;
    let mut taken = 0;
    while let Some((future, _)) = queue.front_mut() {
        let Poll::Ready(result) = Pin::new(future).poll(cx) else {
            break;
        };
        let now = *now.get_or_insert_with(Instant::now);
        if let Some((_, sent)) = queue.pop_front() {
            record_report(tally, result, now, sent);
            taken += 1;
        }
    }
    taken
}

fn record_report(
    tally: &mut Tally,
    result: Result<kring::producer::RecordMetadata, kring::Error>,
    now: Instant,
    sent: Instant,
) {
    tally.last_report = Some(tally.last_report.map_or(now, |t| t.max(now)));
    match result {
        Ok(_) => {
            tally.delivered += 1;
            tally.latencies_ns.push((now - sent).as_nanos() as u64);
        }
        Err(e) => {
            tally.failed += 1;
            tally.first_error.get_or_insert_with(|| e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(p: i32) -> Timed {
        let error = kring::Error::ShuttingDown;
        (DeliveryFuture::ready(p, Err(error)), Instant::now())
    }

    #[test]
    fn every_report_handed_over_is_counted_once_whatever_its_partition() {
        let outstanding = Mutex::new(Outstanding::default());
        let counter = AtomicU64::new(0);
        {
            let mut o = outstanding.lock().unwrap();
            o.add(vec![failed(0), failed(2), failed(0)]);
            o.add(vec![failed(1), failed(2)]);
            o.closed = true;
        }
        let tally = time_reports(&outstanding, &counter);
        assert_eq!((tally.delivered, tally.failed), (0, 5));
        assert_eq!(counter.load(Ordering::Relaxed), 5);
        assert!(tally.first_error.is_some());
    }

    #[test]
    fn the_waiter_is_woken_only_for_a_partition_with_nothing_outstanding() {
        let mut o = Outstanding::default();
        assert!(o.add(vec![failed(0), failed(0)]));
        assert!(!o.add(vec![failed(0)]));
        assert!(o.add(vec![failed(0), failed(1)]));
        assert!(!o.add(vec![failed(1), failed(0)]));
        o.queues.get_mut(&1).unwrap().clear();
        assert!(o.add(vec![failed(1)]));
        assert_eq!(o.queues.values().map(VecDeque::len).sum::<usize>(), 6);
    }

    #[test]
    fn the_waiter_ends_once_closed_with_every_report_taken() {
        let mut waiter = TimedDeliveries::start().unwrap();
        for p in [0, 1, 0] {
            let (future, sent) = failed(p);
            waiter.push(future, sent);
        }
        waiter.hand_over();
        waiter.push(failed(1).0, Instant::now());
        let tally = waiter.finish();
        assert_eq!(tally.failed, 4);
    }

    #[test]
    fn keys_are_the_hex_digits_of_the_mixed_index() {
        assert_eq!(&key_of(0), b"0000000000000000");
        assert_eq!(&key_of(1), b"9e3779b97f4a7c15");
        assert_eq!(
            key_of(2).to_vec(),
            format!("{:016x}", 2u64.wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes()
        );
    }

    #[test]
    fn stamps_round_trip_and_bad_ones_are_refused() {
        let mut value = b"xxxxxxxxxxxxxxxxxxxx tail".to_vec();
        write_stamp(&mut value, 1_764_000_000_123_456_789);
        assert_eq!(&value[..STAMP_LEN], b"1764000000123456789");
        assert_eq!(&value[STAMP_LEN..], b"x tail");
        assert_eq!(read_stamp(&value), Some(1_764_000_000_123_456_789));
        write_stamp(&mut value, 42);
        assert_eq!(read_stamp(&value), Some(42));
        assert_eq!(read_stamp(b"12345"), None);
        assert_eq!(read_stamp(b"123456789012345678x and more"), None);
    }

    #[test]
    fn bad_rates_and_key_sizes_are_refused() {
        let values = vec![vec![b'a'; 100]];
        assert!(check_rate(Some(0.0), false, &values).is_err());
        assert!(check_rate(Some(-5.0), false, &values).is_err());
        assert!(check_rate(Some(f64::NAN), false, &values).is_err());
        assert!(check_rate(Some(100.0), true, &values).is_err());
        assert!(check_rate(Some(100.0), false, &[vec![b'a'; 10]]).is_err());
        assert_eq!(
            check_rate(Some(100.0), false, &values).unwrap(),
            Some(100.0)
        );
        assert!(check_key_size(Some(0)).is_err());
        assert!(check_key_size(Some(17)).is_err());
        assert_eq!(check_key_size(Some(16)).unwrap(), Some(16));
    }
}
