//! librdkafka's peer in `perf/run`: the peer contract of `perf/README.md` (arguments,
//! payload file, one-line JSON result) through the `rdkafka` crate.
//!
//! ```text
//! rdkafka-perf produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
//!     --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
//!     --linger-ms L --batch-size BYTES [--transactional-id ID --txn-records N]
//! rdkafka-perf consume --bootstrap HOST:PORT --topic T --records N [--group G]
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
//! - consume: a `BaseConsumer` with every partition `assign`ed at `Offset::Beginning`
//!   (no group membership, no commits), `poll`ed until N records are read; every value's
//!   bytes are touched. With `--group G`: `subscribe`d as the one member of the fresh
//!   group G instead (`auto.offset.reset` earliest, no commits), clocked from the first
//!   assignment (the rebalance callback), like the Java consumer perf-test.
//!
//! `rdkafka-perf member ...` is perf/rebalance's group member (src/member.rs).
//!
//! The result line carries an extra field, `"version"`: librdkafka's version string.

mod member;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use std::sync::Mutex;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// Every `SAMPLE`-th record's delivery latency is measured (the contract asks for at
/// least every 100th).
const SAMPLE: usize = 16;

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
        };
        while let Some(flag) = it.next() {
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

/// The contract's result line (plus `version`).
fn report(op: &str, records: usize, bytes: u64, elapsed: Duration, latency: Option<(f64, f64)>) {
    let ms = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.3}"));
    let version = rdkafka::util::get_rdkafka_version().1;
    println!(
        "{{\"client\":\"librdkafka\",\"op\":\"{op}\",\"records\":{records},\"bytes\":{bytes},\"elapsed_s\":{:.6},\"p50_ms\":{},\"p99_ms\":{},\"version\":\"{version}\"}}",
        elapsed.as_secs_f64(),
        ms(latency.map(|l| l.0)),
        ms(latency.map(|l| l.1)),
    );
}

/// The producer's context: counts delivery reports and turns sampled send times into
/// latencies, on the thread that polls (the sending thread).
struct Delivery {
    /// Origin of every timestamp below.
    base: Instant,
    /// Slot `i / SAMPLE` holds record i's send time (ns since `base`) until its report
    /// arrives, then its latency (ns).
    samples: Vec<AtomicU64>,
    delivered: AtomicU64,
    /// ns since `base` of the latest delivery report.
    last_report: AtomicU64,
    failed: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Delivery {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

impl ClientContext for Delivery {}

impl ProducerContext for Delivery {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let now = self.now();
        match result {
            Ok(_) => {
                if index % SAMPLE == 0 {
                    let slot = &self.samples[index / SAMPLE];
                    slot.store(
                        now.saturating_sub(slot.load(Ordering::Relaxed)),
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
        self.last_report.store(now, Ordering::Relaxed);
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

fn produce(a: &Args) {
    let (text, lines) = payloads(a.payload_file.as_deref().unwrap_or_default());
    let mut config = ClientConfig::new();
    if let Some(id) = &a.transactional_id {
        config.set("transactional.id", id);
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
            samples: (0..a.records.div_ceil(SAMPLE))
                .map(|_| AtomicU64::new(0))
                .collect(),
            delivered: AtomicU64::new(0),
            last_report: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_error: std::sync::Mutex::new(None),
        })
        .unwrap_or_else(|e| fail(format!("producer: {e}")));

    // Set-up outside the timed part: the connection and the topic's metadata (which also
    // gives an idempotent producer time to get its producer id, requested at start).
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
    }

    let ctx = producer.context();
    let mut progress = Progress::new("produce");
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
        let mut record = BaseRecord::<(), [u8], usize>::with_opaque_to(&a.topic, i).payload(value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    // Queue full: serve delivery reports for a millisecond, then retry.
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => fail(format!("send: {e}")),
            }
        }
        if i % 64 == 0 {
            producer.poll(Duration::ZERO);
            progress.tick(ctx.delivered.load(Ordering::Relaxed), a.records);
        }
        if txn && ((i + 1) % a.txn_records == 0 || i + 1 == a.records) {
            commit(&producer, &mut progress, a.records);
        }
    }
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
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i] as f64 / 1e6
    };
    report(
        "produce",
        a.records,
        bytes,
        elapsed,
        Some((pct(0.50), pct(0.99))),
    );
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
    let mut waited = Instant::now();
    while records < a.records as u64 {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                // Touch the value: its length and its first and last bytes.
                let v = m.payload().unwrap_or_default();
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
    report("consume", a.records, bytes, elapsed, None);
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
