//! librdkafka's peer in `perf/run`: the peer contract of `perf/README.md` (arguments,
//! payload file, one-line JSON result) through the `rdkafka` crate.
//!
//! ```text
//! rdkafka-perf produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
//!     --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
//!     --linger-ms L --batch-size BYTES [--transactional-id ID --txn-records N] \
//!     [--key-size K] [--rate R] [--property NAME=VALUE ...]
//! rdkafka-perf consume --bootstrap HOST:PORT --topic T --records N [--group G] [--e2e] \
//!     [--property NAME=VALUE ...]
//! ```
//!
//! - produce: a `BaseProducer`; the sending thread calls `poll(0)` after every 64 sends
//!   and `poll(1 ms)` while the queue is full (the pattern of `perf/rdkafka-produce` and
//!   of librdkafka's own `rdkafka_performance`), so delivery callbacks run on the sending
//!   thread. The delivery opaque is the record's index; every `SAMPLE`-th record's
//!   send→delivery latency is kept. With `--transactional-id ID --txn-records N`:
//!   `init_transactions` before the clock starts, then `begin_transaction`, N sends, a
//!   flush (served in 1 ms steps, see `flush_in_steps`) and `commit_transaction`, again
//!   and again; the clock stops at the end of the last commit.
//! - `--key-size K`: record i's key is the first K of the 16 hex digits of
//!   `i * 0x9E3779B97F4A7C15` (`key_of`), partitioned by librdkafka's default
//!   partitioner (consistent_random: CRC32 of the key).
//! - `--rate R`: record i is sent no earlier than start + i/R (`produce_paced`), its value
//!   a copy of its payload line with the wall-clock send time over the first 19 bytes;
//!   every record's latency is kept. Between sends the thread serves every queued event
//!   and then parks until the next due time or until librdkafka wakes it (`Wakeup`: the
//!   main queue's non-empty callback), so delivery reports are timed when they arrive.
//! - consume: a `BaseConsumer` with every partition `assign`ed at `Offset::Beginning`
//!   (no group membership, no commits), `poll`ed until N records are read; every value's
//!   bytes are touched. With `--group G`: `subscribe`d as the one member of the fresh
//!   group G instead (`auto.offset.reset` earliest, no commits), clocked from the first
//!   assignment (the rebalance callback), like the Java consumer perf-test. With
//!   `--e2e`: `ready` on stderr after `assign`, just before the first poll; for every
//!   record the wall clock when `poll` returns it minus the stamp in its value.
//!
//! `rdkafka-perf member ...` is perf/rebalance's group member (src/member.rs).
//!
//! The result line carries an extra field, `"version"`: librdkafka's version string.

mod member;

use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use std::sync::Mutex;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// Every `SAMPLE`-th record's delivery latency is measured (the contract asks for at
/// least every 100th); with `--rate`, every record's.
const SAMPLE_SHIFT: u32 = 4;
const SAMPLE: usize = 1 << SAMPLE_SHIFT;

/// Bytes of the send-time stamp at the start of a paced record's value (`--rate`).
const STAMP_LEN: usize = 19;

/// The longest key `--key-size` makes: the 16 hex digits of a 64-bit number.
const MAX_KEY_SIZE: usize = 16;

/// Longest wait for a single step (metadata, a delivery, the next record) before giving up.
const STALL: Duration = Duration::from_secs(60);

/// Prints `msg` to stderr and exits non-zero: the contract's failure.
fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("rdkafka-perf: {msg}");
    std::process::exit(1)
}

/// `--property` settings on top of the contract's.
trait ExtendWith {
    fn extend_with(&mut self, properties: &[(String, String)]) -> &mut Self;
}

impl ExtendWith for ClientConfig {
    fn extend_with(&mut self, properties: &[(String, String)]) -> &mut Self {
        for (k, v) in properties {
            self.set(k, v);
        }
        self
    }
}

/// The command line, as the contract defines it.
struct Args {
    op: String,
    bootstrap: String,
    topic: String,
    records: usize,
    payload_file: Option<String>,
    acks: String,
    idempotence: String,
    compression: String,
    linger_ms: u64,
    batch_size: u64,
    /// `--property NAME=VALUE`: client properties (security settings) set as given.
    properties: Vec<(String, String)>,
    /// `--group G`: consume as a member of group G (subscribe) instead of `assign`.
    group: Option<String>,
    /// `--transactional-id ID`: produce in transactions (with `txn_records`).
    transactional_id: Option<String>,
    /// `--txn-records N`: records per transaction.
    txn_records: usize,
    /// `--key-size K`: keyed records (`key_of`), K bytes of key.
    key_size: Option<usize>,
    /// `--rate R`: records/s on a fixed schedule, values stamped, every latency kept.
    rate: Option<f64>,
    /// `--e2e`: consume stamped values and report end-to-end latency.
    e2e: bool,
}

impl Args {
    fn parse() -> Args {
        let mut it = std::env::args().skip(1);
        let op = it.next().unwrap_or_default();
        if op != "produce" && op != "consume" {
            fail(
                "usage: rdkafka-perf produce|consume --bootstrap HOST:PORT --topic T --records N ... (perf/README.md)",
            );
        }
        let mut a = Args {
            op,
            bootstrap: String::new(),
            topic: String::new(),
            records: 0,
            payload_file: None,
            acks: "1".into(),
            idempotence: "false".into(),
            compression: "none".into(),
            linger_ms: 5,
            batch_size: 1_000_000,
            properties: Vec::new(),
            group: None,
            transactional_id: None,
            txn_records: 0,
            key_size: None,
            rate: None,
            e2e: false,
        };
        while let Some(flag) = it.next() {
            if flag == "--e2e" {
                a.e2e = true;
                continue;
            }
            let v = it
                .next()
                .unwrap_or_else(|| fail(format!("{flag} needs a value")));
            let num = |v: &str| -> u64 {
                v.parse()
                    .unwrap_or_else(|_| fail(format!("{flag} {v}: not a number")))
            };
            match flag.as_str() {
                "--bootstrap" => a.bootstrap = v,
                "--topic" => a.topic = v,
                "--records" => a.records = num(&v) as usize,
                "--payload-file" => a.payload_file = Some(v),
                "--acks" if ["0", "1", "all"].contains(&v.as_str()) => a.acks = v,
                "--idempotence" if v == "true" || v == "false" => a.idempotence = v,
                "--compression"
                    if ["none", "gzip", "snappy", "lz4", "zstd"].contains(&v.as_str()) =>
                {
                    a.compression = v
                }
                "--linger-ms" => a.linger_ms = num(&v),
                "--batch-size" => a.batch_size = num(&v),
                "--group" if !v.is_empty() => a.group = Some(v),
                "--transactional-id" if !v.is_empty() => a.transactional_id = Some(v),
                "--txn-records" if num(&v) > 0 => a.txn_records = num(&v) as usize,
                "--key-size" => match v.parse::<usize>() {
                    Ok(k) if (1..=MAX_KEY_SIZE).contains(&k) => a.key_size = Some(k),
                    _ => fail(format!("--key-size {v}: must be 1 to {MAX_KEY_SIZE}")),
                },
                "--rate" => match v.parse::<f64>() {
                    Ok(r) if r.is_finite() && r > 0.0 => a.rate = Some(r),
                    _ => fail(format!(
                        "--rate {v}: must be a positive number of records/s"
                    )),
                },
                "--property" => match v.split_once('=') {
                    Some((k, val)) => a.properties.push((k.to_string(), val.to_string())),
                    None => fail(format!("--property {v}: expected NAME=VALUE")),
                },
                _ => fail(format!("unknown argument or bad value: {flag} {v}")),
            }
        }
        if a.bootstrap.is_empty() || a.topic.is_empty() || a.records == 0 {
            fail("--bootstrap, --topic and --records (> 0) are required");
        }
        if a.op == "produce" && a.payload_file.is_none() {
            fail("produce needs --payload-file");
        }
        if a.transactional_id.is_some() != (a.txn_records > 0) {
            fail("--transactional-id and --txn-records go together");
        }
        if a.op == "consume" && a.transactional_id.is_some() {
            fail("--transactional-id is for produce");
        }
        if a.rate.is_some() && a.transactional_id.is_some() {
            fail("--rate and --transactional-id do not go together");
        }
        if a.op == "consume" && (a.key_size.is_some() || a.rate.is_some()) {
            fail("--key-size and --rate are for produce");
        }
        if a.op == "produce" && a.e2e {
            fail("--e2e is for consume");
        }
        if a.e2e && a.group.is_some() {
            fail("--e2e and --group do not go together");
        }
        a
    }
}

/// Progress on stderr, at most once per second.
struct Progress {
    op: &'static str,
    last: Instant,
}

impl Progress {
    fn new(op: &'static str) -> Progress {
        Progress {
            op,
            last: Instant::now(),
        }
    }

    fn tick(&mut self, done: u64, total: usize) {
        if self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            eprintln!("rdkafka-perf: {} {done}/{total}", self.op);
        }
    }
}

/// The contract's result line (plus `version`): `fields` are latencies in ms (null when
/// not measured).
fn report(
    op: &str,
    records: usize,
    bytes: u64,
    elapsed: Duration,
    fields: &[(String, Option<f64>)],
) {
    let mut line = format!(
        "{{\"client\":\"librdkafka\",\"op\":\"{op}\",\"records\":{records},\"bytes\":{bytes},\"elapsed_s\":{:.6}",
        elapsed.as_secs_f64()
    );
    for (name, value) in fields {
        match value {
            Some(v) => write!(line, ",\"{name}\":{v:.3}"),
            None => write!(line, ",\"{name}\":null"),
        }
        .unwrap_or_default();
    }
    let version = rdkafka::util::get_rdkafka_version().1;
    println!("{line},\"version\":\"{version}\"}}");
}

/// Index of the nearest-rank `num/den` quantile among `n` sorted samples:
/// `ceil(q * n) - 1`, in integers so that `q * n` is exact.
fn rank(n: usize, num: usize, den: usize) -> usize {
    (n * num).div_ceil(den).clamp(1, n) - 1
}

/// The contract's percentiles (p50, p99, p99.9, max), in ms, of sorted ns samples,
/// under the field names `{prefix}p50_ms` etc.
fn percentiles<T: Copy + Into<i128>>(prefix: &str, sorted: &[T]) -> Vec<(String, Option<f64>)> {
    [
        ("p50", 1, 2),
        ("p99", 99, 100),
        ("p999", 999, 1000),
        ("max", 1, 1),
    ]
    .iter()
    .map(|&(name, num, den)| {
        let value =
            (!sorted.is_empty()).then(|| sorted[rank(sorted.len(), num, den)].into() as f64 / 1e6);
        (format!("{prefix}{name}_ms"), value)
    })
    .collect()
}

/// Record `i`'s key: the 16 lowercase hex digits of `i * 0x9E3779B97F4A7C15 mod 2^64`
/// (the contract's keys; the caller takes the first `--key-size` of them).
fn key_of(i: usize) -> [u8; MAX_KEY_SIZE] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mixed = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut key = [0u8; MAX_KEY_SIZE];
    for (k, byte) in key.iter_mut().enumerate() {
        *byte = HEX[(mixed >> (60 - 4 * k) & 0xf) as usize];
    }
    key
}

/// Nanoseconds since the Unix epoch, by the wall clock (comparable across processes).
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Writes `ns` as 19 zero-padded decimal digits over the first [`STAMP_LEN`] bytes.
fn write_stamp(value: &mut [u8], mut ns: u64) {
    for byte in value[..STAMP_LEN].iter_mut().rev() {
        *byte = b'0' + (ns % 10) as u8;
        ns /= 10;
    }
}

/// The stamp at the start of `value`, if it has one (19 ASCII digits).
fn read_stamp(value: &[u8]) -> Option<u64> {
    let digits = value.get(..STAMP_LEN)?;
    digits.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit()
            .then(|| acc.wrapping_mul(10).wrapping_add(u64::from(b - b'0')))
    })
}

/// The producer's context: counts delivery reports and turns sampled send times into
/// latencies, on the thread that polls (the sending thread).
struct Delivery {
    /// Origin of every timestamp below.
    base: Instant,
    /// Every `1 << shift`-th record is timed: slot `i >> shift` holds record i's send
    /// time (ns since `base`) until its report arrives, then its latency (ns).
    shift: u32,
    samples: Vec<AtomicU64>,
    delivered: AtomicU64,
    /// ns since `base` of the last delivery report (the `records`-th).
    last_report: AtomicU64,
    /// How many reports there will be.
    records: u64,
    failed: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
    /// Whether librdkafka's statistics have shown the idempotent producer holding its
    /// producer id (`"idemp_state": "Assigned"`, see `wait_for_pid`).
    pid_assigned: AtomicBool,
}

impl Delivery {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

impl ClientContext for Delivery {
    /// Statistics (on only for `wait_for_pid`): only the idempotence state is read, by a
    /// plain search (the crate would otherwise parse the whole JSON document).
    fn stats_raw(&self, statistics: &[u8]) {
        const ASSIGNED: &[u8] = b"\"idemp_state\": \"Assigned\"";
        if !self.pid_assigned.load(Ordering::Relaxed)
            && statistics.windows(ASSIGNED.len()).any(|w| w == ASSIGNED)
        {
            self.pid_assigned.store(true, Ordering::Relaxed);
        }
    }
}

impl ProducerContext for Delivery {
    type DeliveryOpaque = usize;

    /// Reads the clock only for a sampled record and for the last report, as the Go
    /// peers do (a clock read per report would be the harness's cost, not the client's).
    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let sampled = index & ((1 << self.shift) - 1) == 0;
        match result {
            Ok(_) => {
                if sampled {
                    let slot = &self.samples[index >> self.shift];
                    slot.store(
                        self.now().saturating_sub(slot.load(Ordering::Relaxed)),
                        Ordering::Relaxed,
                    );
                }
                self.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = self.first_error.lock() {
                    first.get_or_insert_with(|| e.to_string());
                }
            }
        }
        // Reports are served on one thread (the one that polls), so the two counts are
        // not moving under this sum.
        let reported = self.delivered.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed);
        if reported == self.records {
            self.last_report.store(self.now(), Ordering::Relaxed);
        }
    }
}

/// The payload file's lines: record i's value is line `i mod K`.
fn payloads(path: &str) -> (Vec<u8>, Vec<(usize, usize)>) {
    let text = std::fs::read(path).unwrap_or_else(|e| fail(format!("{path}: {e}")));
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        if b == b'\n' {
            lines.push((start, i));
            start = i + 1;
        }
    }
    if start < text.len() {
        lines.push((start, text.len()));
    }
    if lines.is_empty() {
        fail(format!("{path}: no payload lines"));
    }
    (text, lines)
}

/// Serves delivery reports in 1 ms steps until every record is reported, with
/// librdkafka's flush each time (`rd_kafka_flush` with no wait: linger cut short). The
/// crate's `flush` and `commit_transaction` wait in 100 ms steps of `poll` (and `poll`
/// returns only at the end of its step), which would add up to 100 ms per transaction
/// (the commit's own flush then finds nothing left).
fn flush_in_steps(producer: &BaseProducer<Delivery>, progress: &mut Progress, records: usize) {
    let ctx = producer.context();
    let mut waited = Instant::now();
    let mut seen = ctx.delivered.load(Ordering::Relaxed) + ctx.failed.load(Ordering::Relaxed);
    loop {
        match producer.flush(Duration::from_millis(1)) {
            Ok(()) => return,
            Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut)) => {}
            Err(e) => fail(format!("flush: {e}")),
        }
        let reported = ctx.delivered.load(Ordering::Relaxed) + ctx.failed.load(Ordering::Relaxed);
        if reported != seen {
            seen = reported;
            waited = Instant::now();
        } else if waited.elapsed() > STALL {
            fail(format!(
                "{} records still undelivered after {STALL:?} without a report",
                producer.in_flight_count()
            ));
        }
        progress.tick(ctx.delivered.load(Ordering::Relaxed), records);
    }
}

/// Ends a transaction: its records flushed and reported, then committed.
fn commit(producer: &BaseProducer<Delivery>, progress: &mut Progress, records: usize) {
    flush_in_steps(producer, progress, records);
    let ctx = producer.context();
    let failed = ctx.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = ctx.first_error.lock().ok().and_then(|e| e.clone());
        fail(format!(
            "{failed} records failed in a transaction, not committed; first error: {}",
            first.unwrap_or_default()
        ));
    }
    producer
        .commit_transaction(STALL)
        .unwrap_or_else(|e| fail(format!("commit_transaction: {e}")));
}

/// Hands `record` to librdkafka; while its queue is full, serves delivery reports for a
/// millisecond and retries.
#[inline]
fn send<'a>(producer: &BaseProducer<Delivery>, mut record: BaseRecord<'a, [u8], [u8], usize>) {
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                producer.poll(Duration::from_millis(1));
            }
            Err((e, _)) => fail(format!("send: {e}")),
        }
    }
}

fn produce(a: &Args) {
    let (text, lines) = payloads(a.payload_file.as_deref().unwrap_or_default());
    if a.rate.is_some() && lines.iter().any(|(start, end)| end - start < STAMP_LEN) {
        fail(format!(
            "--rate stamps the first {STAMP_LEN} bytes of each value: every payload line must be at least that long"
        ));
    }
    // With --rate every record is timed, else every SAMPLE-th.
    let shift = if a.rate.is_some() { 0 } else { SAMPLE_SHIFT };
    let mut config = ClientConfig::new();
    if let Some(id) = &a.transactional_id {
        config.set("transactional.id", id);
    }
    // An idempotent producer outside transactions: statistics once a second, for
    // `wait_for_pid` (for 256 partitions a document of some hundred kB a second).
    let await_pid = a.idempotence == "true" && a.transactional_id.is_none();
    if await_pid {
        config.set("statistics.interval.ms", PID_STATS_INTERVAL_MS.to_string());
    }
    let producer: BaseProducer<Delivery> = config
        .set("bootstrap.servers", &a.bootstrap)
        .set("acks", &a.acks)
        .set("enable.idempotence", &a.idempotence)
        .set("compression.codec", &a.compression)
        .set("linger.ms", a.linger_ms.to_string())
        .set("batch.size", a.batch_size.to_string())
        // The producer's memory budget, far above what one linger window or the
        // broker's in-flight requests hold, so it never limits throughput (a full queue
        // means the broker is behind): 32 MiB of record bytes, the Java producer's
        // default buffer.memory; the message-count limit (default 100,000, which caps
        // 100 B records at 10 MB) is lifted so that only bytes count.
        .set("queue.buffering.max.kbytes", "32768")
        .set("queue.buffering.max.messages", "10000000")
        .extend_with(&a.properties)
        .create_with_context(Delivery {
            base: Instant::now(),
            shift,
            samples: (0..a.records.div_ceil(1 << shift))
                .map(|_| AtomicU64::new(0))
                .collect(),
            delivered: AtomicU64::new(0),
            last_report: AtomicU64::new(0),
            records: a.records as u64,
            failed: AtomicU64::new(0),
            first_error: std::sync::Mutex::new(None),
            pid_assigned: AtomicBool::new(false),
        })
        .unwrap_or_else(|e| fail(format!("producer: {e}")));

    // Set-up outside the timed part: the connection, the topic's metadata and, for an
    // idempotent producer, its producer id (`init_transactions` or `wait_for_pid`).
    let metadata = producer
        .client()
        .fetch_metadata(Some(&a.topic), STALL)
        .unwrap_or_else(|e| fail(format!("metadata for {}: {e}", a.topic)));
    if metadata
        .topics()
        .first()
        .is_none_or(|t| t.error().is_some())
    {
        fail(format!("topic {} not found", a.topic));
    }
    let txn = a.transactional_id.is_some();
    if txn {
        producer
            .init_transactions(STALL)
            .unwrap_or_else(|e| fail(format!("init_transactions: {e}")));
    } else if await_pid {
        wait_for_pid(&producer);
    }

    let ctx = producer.context();
    let mut progress = Progress::new("produce");
    let (t0, bytes) = match a.rate {
        Some(rate) => produce_paced(&producer, a, &text, &lines, rate, &mut progress),
        None => {
            let mut bytes = 0u64;
            let t0 = ctx.now();
            for i in 0..a.records {
                if txn && i % a.txn_records == 0 {
                    producer
                        .begin_transaction()
                        .unwrap_or_else(|e| fail(format!("begin_transaction: {e}")));
                }
                let (start, end) = lines[i % lines.len()];
                let value = &text[start..end];
                bytes += value.len() as u64;
                if i % SAMPLE == 0 {
                    ctx.samples[i / SAMPLE].store(ctx.now(), Ordering::Relaxed);
                }
                let key;
                let mut record = BaseRecord::with_opaque_to(&a.topic, i).payload(value);
                if let Some(k) = a.key_size {
                    key = key_of(i);
                    record = record.key(&key[..k]);
                }
                send(&producer, record);
                if i % 64 == 0 {
                    producer.poll(Duration::ZERO);
                    progress.tick(ctx.delivered.load(Ordering::Relaxed), a.records);
                }
                if txn && ((i + 1) % a.txn_records == 0 || i + 1 == a.records) {
                    commit(&producer, &mut progress, a.records);
                }
            }
            (t0, bytes)
        }
    };
    let committed = txn.then(|| ctx.now());
    // Wait for every report in 1 ms steps (the crate's `flush` polls in 100 ms steps).
    let mut waited = Instant::now();
    let mut seen = 0;
    while producer.in_flight_count() > 0 {
        producer.poll(Duration::from_millis(1));
        let delivered = ctx.delivered.load(Ordering::Relaxed) + ctx.failed.load(Ordering::Relaxed);
        if delivered != seen {
            seen = delivered;
            waited = Instant::now();
        } else if waited.elapsed() > STALL {
            fail(format!(
                "{} records still undelivered after {STALL:?} without a report",
                producer.in_flight_count()
            ));
        }
        progress.tick(ctx.delivered.load(Ordering::Relaxed), a.records);
    }
    let end = committed.unwrap_or_else(|| ctx.last_report.load(Ordering::Relaxed));
    let elapsed = Duration::from_nanos(end - t0);

    let failed = ctx.failed.load(Ordering::Relaxed);
    let delivered = ctx.delivered.load(Ordering::Relaxed);
    if failed > 0 || delivered != a.records as u64 {
        let first = ctx.first_error.lock().ok().and_then(|e| e.clone());
        fail(format!(
            "{failed} of {} records failed, {delivered} delivered; first error: {}",
            a.records,
            first.unwrap_or_default()
        ));
    }
    let mut latencies: Vec<u64> = ctx
        .samples
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .collect();
    latencies.sort_unstable();
    report(
        "produce",
        a.records,
        bytes,
        elapsed,
        &percentiles("", &latencies),
    );
}

/// How often (ms) an idempotent producer outside transactions emits statistics, for
/// `wait_for_pid`; the first document comes this long after the producer is made.
const PID_STATS_INTERVAL_MS: u64 = 1000;

/// Waits until the idempotent producer has its producer id, so that the clock does not
/// run while it has none (records wait for it unsent). librdkafka requests the id at
/// start, but when no broker connection is up at that moment (the bootstrap connection
/// is dropped once the first metadata names the brokers) it tries again only 500 ms
/// later: a 500 ms stall, well after the topic's metadata is in, in about half the runs
/// here (librdkafka 2.10, `debug=eos`: "No brokers available for Idempotent producer").
/// The crate has no call for the idempotence state; librdkafka's statistics carry it.
fn wait_for_pid(producer: &BaseProducer<Delivery>) {
    let ctx = producer.context();
    let wakeup = Wakeup::new(producer);
    let start = Instant::now();
    loop {
        wakeup.serve();
        if ctx.pid_assigned.load(Ordering::Relaxed) {
            return;
        }
        if start.elapsed() > STALL {
            fail(format!("no producer id after {STALL:?}"));
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// Wakes the thread that made it whenever librdkafka puts an event (a delivery report)
/// on the producer's empty main queue: librdkafka's queue callback
/// (`rd_kafka_queue_cb_event_enable`, as the crate's `StreamConsumer` uses it), called
/// on librdkafka's thread, unparks the sender. So the sender can sleep until a record's
/// due time with `park_timeout` (µs-precise) and still serve each report as it arrives:
/// librdkafka's own waits (and the crate's `poll(timeout)`, which returns only at its
/// deadline and busy-polls its last millisecond) count in whole milliseconds.
struct Wakeup<'a> {
    producer: &'a BaseProducer<Delivery>,
    queue: *mut rdkafka_sys::rd_kafka_queue_t,
    /// The callback's opaque (never read here); it outlives the callback, which `drop`
    /// disables.
    _thread: Box<Thread>,
}

/// The main queue's non-empty callback: `opaque` is the `Thread` of a [`Wakeup`].
unsafe extern "C" fn unpark(_: *mut rdkafka_sys::rd_kafka_t, opaque: *mut c_void) {
    // SAFETY: `opaque` is `Wakeup::_thread`, alive until the callback is disabled.
    let thread = unsafe { &*(opaque as *const Thread) };
    thread.unpark();
}

impl<'a> Wakeup<'a> {
    fn new(producer: &'a BaseProducer<Delivery>) -> Wakeup<'a> {
        let thread = Box::new(std::thread::current());
        // SAFETY: the client handle is valid while `producer` is (which outlives `self`);
        // the queue handle returned is ours to destroy (in `drop`).
        let queue = unsafe { rdkafka_sys::rd_kafka_queue_get_main(producer.client().native_ptr()) };
        if queue.is_null() {
            fail("librdkafka has no main queue");
        }
        // SAFETY: `queue` is valid; the opaque points into a box that stays put and
        // lives until the callback is disabled in `drop`. `unpark` only wakes a thread
        // (no librdkafka calls, nothing that blocks), as librdkafka requires.
        unsafe {
            rdkafka_sys::rd_kafka_queue_cb_event_enable(
                queue,
                Some(unpark),
                &*thread as *const Thread as *mut c_void,
            );
        }
        Wakeup {
            producer,
            queue,
            _thread: thread,
        }
    }

    /// Serves every event queued now (`poll(0)` serves one), so that the next one
    /// arrives at an empty queue and wakes the thread.
    fn serve(&self) {
        for _ in 0..1024 {
            // SAFETY: `queue` is valid until `drop`.
            if unsafe { rdkafka_sys::rd_kafka_queue_length(self.queue) } == 0 {
                return;
            }
            self.producer.poll(Duration::ZERO);
        }
    }

    /// Serves delivery reports as they arrive until `due` (ns on the context's clock).
    fn wait_until(&self, due: u64) {
        loop {
            self.serve();
            let now = self.producer.context().now();
            if now >= due {
                return;
            }
            // Returns early when `unpark` ran since the last park (an event may be
            // waiting), or spuriously; either way the loop serves and checks again.
            std::thread::park_timeout(Duration::from_nanos(due - now));
        }
    }
}

impl Drop for Wakeup<'_> {
    fn drop(&mut self) {
        // SAFETY: `queue` is valid. Disabling takes the queue's lock, under which
        // librdkafka calls the callback, so no call runs or follows once this returns
        // and `_thread` can go.
        unsafe {
            rdkafka_sys::rd_kafka_queue_cb_event_enable(self.queue, None, std::ptr::null_mut());
            rdkafka_sys::rd_kafka_queue_destroy(self.queue);
        }
    }
}

/// `produce --rate R`: record i is handed to librdkafka no earlier than start + i/R (the
/// schedule is never reset: a sender that fell behind sends at once until it has
/// caught up), its value its payload line with the first 19 bytes replaced by the
/// wall-clock send time (a scratch copy: librdkafka copies the payload on `send`), and
/// every record's send→delivery latency kept. Returns the clock's start (the first
/// send) and the value bytes sent.
fn produce_paced(
    producer: &BaseProducer<Delivery>,
    a: &Args,
    text: &[u8],
    lines: &[(usize, usize)],
    rate: f64,
    progress: &mut Progress,
) -> (u64, u64) {
    let ctx = producer.context();
    let wakeup = Wakeup::new(producer);
    let ns_per_record = 1e9 / rate;
    let mut scratch = Vec::new();
    let mut bytes = 0u64;
    let t0 = ctx.now();
    for i in 0..a.records {
        wakeup.wait_until(t0 + (i as f64 * ns_per_record) as u64);
        let (start, end) = lines[i % lines.len()];
        scratch.clear();
        scratch.extend_from_slice(&text[start..end]);
        bytes += scratch.len() as u64;
        ctx.samples[i].store(ctx.now(), Ordering::Relaxed);
        write_stamp(&mut scratch, wall_ns());
        let key;
        let mut record = BaseRecord::with_opaque_to(&a.topic, i).payload(scratch.as_slice());
        if let Some(k) = a.key_size {
            key = key_of(i);
            record = record.key(&key[..k]);
        }
        send(producer, record);
        if i % 4096 == 0 {
            progress.tick(ctx.delivered.load(Ordering::Relaxed), a.records);
        }
    }
    wakeup.serve();
    (t0, bytes)
}

/// Remembers when partitions were first assigned (group mode's clock start).
#[derive(Default)]
struct FirstAssignment(Mutex<Option<Instant>>);

impl ClientContext for FirstAssignment {}

impl ConsumerContext for FirstAssignment {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            if tpl.count() > 0 {
                let mut first = self.0.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert_with(Instant::now);
            }
        }
    }
}

fn consume(a: &Args) {
    let consumer: BaseConsumer<FirstAssignment> = ClientConfig::new()
        .set("bootstrap.servers", &a.bootstrap)
        // librdkafka's assign() needs a consumer group handle, which it creates only when
        // group.id is set (without one, assign fails with "Local: Unknown group"). Without
        // --group the group is never joined (assign, not subscribe); nothing is committed.
        .set(
            "group.id",
            a.group
                .clone()
                .unwrap_or_else(|| format!("rdkafka-perf-{}", std::process::id())),
        )
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        // librdkafka's default (1000 ms) idles a partition's fetcher for a whole second
        // whenever its prefetch queue is full, which a fast reader then empties long
        // before the second is up.
        .set("fetch.queue.backoff.ms", "10")
        .extend_with(&a.properties)
        .create_with_context(FirstAssignment::default())
        .unwrap_or_else(|e| fail(format!("consumer: {e}")));

    // Set-up outside the timed part: the connection and the topic's partitions.
    let metadata = consumer
        .fetch_metadata(Some(&a.topic), STALL)
        .unwrap_or_else(|e| fail(format!("metadata for {}: {e}", a.topic)));
    let topic = match metadata.topics().first() {
        Some(t) if t.error().is_none() && !t.partitions().is_empty() => t,
        _ => fail(format!("topic {} not found", a.topic)),
    };
    let mut assignment = TopicPartitionList::new();
    for p in topic.partitions() {
        assignment
            .add_partition_offset(&a.topic, p.id(), Offset::Beginning)
            .unwrap_or_else(|e| fail(format!("assignment: {e}")));
    }

    let mut progress = Progress::new("consume");
    let mut t0 = Instant::now();
    match &a.group {
        Some(_) => consumer
            .subscribe(&[a.topic.as_str()])
            .unwrap_or_else(|e| fail(format!("subscribe: {e}"))),
        None => consumer
            .assign(&assignment)
            .unwrap_or_else(|e| fail(format!("assign: {e}"))),
    }
    let (mut records, mut bytes, mut digest) = (0u64, 0u64, 0u64);
    // --e2e: every record's wall-clock arrival minus its value's send-time stamp (ns).
    let mut e2e: Option<Vec<i64>> = a.e2e.then(|| Vec::with_capacity(a.records));
    if a.e2e {
        // The harness starts the producer on this line.
        eprintln!("ready");
    }
    let mut waited = Instant::now();
    while records < a.records as u64 {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let v = m.payload().unwrap_or_default();
                if let Some(samples) = &mut e2e {
                    let now = wall_ns();
                    let Some(stamp) = read_stamp(v) else {
                        fail(format!(
                            "--e2e: the value at partition {} offset {} has no {STAMP_LEN}-digit send-time stamp",
                            m.partition(),
                            m.offset()
                        ))
                    };
                    samples.push(now as i64 - stamp as i64);
                }
                // Touch the value: its length and its first and last bytes.
                bytes += v.len() as u64;
                if let (Some(&first), Some(&last)) = (v.first(), v.last()) {
                    digest = digest
                        .wrapping_mul(31)
                        .wrapping_add(u64::from(first ^ last));
                }
                records += 1;
                if records % 4096 == 0 {
                    waited = Instant::now();
                    progress.tick(records, a.records);
                }
            }
            Some(Err(e)) => fail(format!("consume: {e}")),
            None if waited.elapsed() > STALL => fail(format!(
                "only {records} of {} records after {STALL:?} without one",
                a.records
            )),
            None => {}
        }
    }
    if a.group.is_some() {
        let joined = consumer
            .context()
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(at) = *joined {
            eprintln!(
                "rdkafka-perf: joined in {:.3} s (not in elapsed_s)",
                (at - t0).as_secs_f64()
            );
            t0 = at;
        }
    }
    let elapsed = t0.elapsed();
    std::hint::black_box(digest);
    let mut fields: Vec<(String, Option<f64>)> =
        vec![("p50_ms".into(), None), ("p99_ms".into(), None)];
    if let Some(mut samples) = e2e {
        samples.sort_unstable();
        fields.extend(percentiles("e2e_", &samples));
    }
    report("consume", a.records, bytes, elapsed, &fields);
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("member") {
        member::run();
        return;
    }
    let a = Args::parse();
    if a.op == "produce" {
        produce(&a);
    } else {
        consume(&a);
    }
}
