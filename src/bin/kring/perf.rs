//! `kring perf produce|consume`: throughput runs with a live progress line and a final
//! report — records/s, MB/s, CPU-seconds per million records, latency percentiles and
//! peak memory — ending in one JSON line, the result format every client of the
//! side-by-side harness prints (`perf/README.md`, "The peer contract").

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kring::consumer::{Consumer, Offset, PartitionConsumer};
use kring::producer::{Producer, ProducerBuilder, ProducerRecord};
use tokio::sync::Notify;

use crate::args::{ClusterArgs, UsageError};
use crate::deliveries::{Deliveries, TaggedDeliveries};
use crate::produce::{check_topic, check_topic_to_produce};
use crate::stats::{Progress, cpu_seconds, peak_rss_bytes, percentile_ms, thread_cpu_seconds};
use crate::{CliError, CliResult, connect, wait};

/// What both tests print, in `kring perf --help`.
pub const REPORT: &str = "\
Both tests print a progress line each second on stderr, then a report, and last a JSON line:
{\"client\":\"kring\",\"op\":...,\"records\":...,\"bytes\":...,\"elapsed_s\":...,\"p50_ms\":...,\"p99_ms\":...,\"io_backend\":...}";

/// `kring perf TEST`.
#[derive(Debug, clap::Subcommand)]
pub enum PerfCommand {
    /// Send records as fast as the producer takes them and wait for every ack
    #[command(
        after_help = "Latency is measured on every 100th record, from send to delivery report."
    )]
    Produce(PerfProduceArgs),
    /// Read every partition from its oldest record
    #[command(
        after_help = "Latency is end to end on every 100th record: now − the record's \
                             timestamp (run it beside a perf produce to see delivery latency; \
                             on a backlog it is the records' age)."
    )]
    Consume(PerfConsumeArgs),
}

/// `kring perf produce`.
#[derive(Debug, clap::Args)]
pub struct PerfProduceArgs {
    /// The topic (must exist)
    #[arg(short = 't', long, value_name = "TOPIC")]
    topic: String,
    /// Records to send
    #[arg(short = 'n', long, value_name = "N", default_value_t = 1_000_000)]
    records: u64,
    /// Value size of generated text-like payloads
    #[arg(short = 's', long, value_name = "BYTES", default_value_t = 100)]
    record_size: usize,
    /// Values from PATH instead: one per line, record i takes line i mod (number of lines)
    #[arg(long, value_name = "PATH")]
    payload_file: Option<String>,
    /// Acknowledgements [default: all]
    #[arg(long, value_name = "0|1|all")]
    acks: Option<String>,
    /// Idempotent producer [default: true] (needs acks=all)
    #[arg(long, value_name = "true|false")]
    idempotence: Option<String>,
    /// none, gzip, snappy, lz4 or zstd [default: none]
    #[arg(long, value_name = "CODEC")]
    compression: Option<String>,
    /// linger.ms [default: 5]
    #[arg(long, value_name = "MS")]
    linger_ms: Option<String>,
    /// batch.size [default: 1000000]
    #[arg(long, value_name = "BYTES")]
    batch_size: Option<String>,
    /// Send in transactions with this transactional.id (needs --txn-records)
    #[arg(long, value_name = "ID")]
    transactional_id: Option<String>,
    /// Records per transaction (with --transactional-id): begin, N sends, commit, and
    /// again; the clock then runs to the end of the last commit
    #[arg(long, value_name = "N")]
    txn_records: Option<u64>,
    /// Give record i a key: the first K of the 16 hex digits of i × 0x9E3779B97F4A7C15
    /// (1 to 16; keys are null without it)
    #[arg(long, value_name = "K")]
    key_size: Option<usize>,
    /// Send at this many records/s on a fixed schedule instead of flat out, timing every
    /// record and stamping each value's first 19 bytes with its send time (ns since the
    /// epoch) for `perf consume --e2e`
    #[arg(long, value_name = "RECORDS_PER_S")]
    rate: Option<f64>,
    /// How delivery reports come back when sending flat out: `handler`, records sent
    /// with a tag (their index) and reported a batch at a time to the producer's delivery
    /// handler, each sampled record timed when its batch settles; or `futures`, a
    /// delivery future per record resolved on a thread of its own and timed there. A
    /// `--rate` run always times delivery futures
    #[arg(long, value_name = "handler|futures", default_value = "handler")]
    deliveries: DeliveryReports,
    #[command(flatten)]
    metrics: crate::metrics_view::MetricsArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// How `perf produce` learns of its records' fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeliveryReports {
    /// `Producer::send_tagged` and a delivery handler.
    Handler,
    /// `Producer::send` and a delivery future per record.
    Futures,
}

/// `kring perf consume`.
#[derive(Debug, clap::Args)]
pub struct PerfConsumeArgs {
    /// The topic
    #[arg(short = 't', long, value_name = "TOPIC")]
    topic: String,
    /// Records to read [default: as many as the topic holds now]
    #[arg(short = 'n', long, value_name = "N")]
    records: Option<u64>,
    /// Read as the one member of consumer group GROUP (a fresh one: from the oldest
    /// offsets, nothing committed) instead of with one partition consumer per partition;
    /// the clock starts at the first assignment (the join is reported apart)
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
    /// Fail if they haven't all arrived by then
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    timeout: u64,
    /// End-to-end latency of every record, from the send-time stamp `perf produce
    /// --rate` writes into values (one without a stamp is an error); prints `ready` on
    /// stderr just before the first fetch, so the producer can be started then
    #[arg(long)]
    e2e: bool,
    #[command(flatten)]
    metrics: crate::metrics_view::MetricsArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Records sampled for latency: one in this many.
pub(crate) const LATENCY_SAMPLE_EVERY: u64 = 100;

/// Runs `kring perf ...`.
pub fn run(command: PerfCommand) -> CliResult {
    let metrics = match &command {
        PerfCommand::Produce(a) => &a.metrics,
        PerfCommand::Consume(a) => &a.metrics,
    };
    let view = metrics.start()?;
    let result = match command {
        PerfCommand::Produce(args) => produce(args),
        PerfCommand::Consume(args) => consume(args),
    };
    if let Some(view) = view {
        view.finish();
    }
    result
}

/// The measured outcome of a run, for the report and the JSON line.
pub(crate) struct Outcome {
    pub(crate) op: &'static str,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) elapsed: Duration,
    pub(crate) cpu_seconds: Option<f64>,
    /// Produce: the CPU time of the thread that called `send` for every record (from
    /// its first send to the end of the final flush), where the per-record path runs.
    pub(crate) sender_cpu_seconds: Option<f64>,
    /// Produce: send → delivery report of sampled records (these go into the JSON).
    pub(crate) latencies_ns: Vec<u64>,
    /// Consume: now − record timestamp of sampled records, end to end when reading
    /// while a producer writes, the records' age when reading a backlog (report only;
    /// the peers of the harness have no such figure, so the JSON leaves it out); with
    /// `--e2e`, now − the send-time stamp of every record instead.
    pub(crate) end_to_end_ns: Vec<u64>,
    /// Whether `end_to_end_ns` holds `--e2e`'s stamped latencies (they go into the JSON).
    pub(crate) end_to_end_is_stamped: bool,
    /// The I/O backend the client ran on (in the report and the JSON line, so a result
    /// always says which it measured).
    pub(crate) io_backend: &'static str,
}

impl Outcome {
    pub(crate) fn print(&self) {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        println!("  I/O backend  {}", self.io_backend);
        println!("  records      {}", self.records);
        println!("  elapsed      {secs:.3} s");
        println!(
            "  throughput   {:.0} records/s   {:.2} MB/s (values, 10^6 bytes)",
            self.records as f64 / secs,
            self.bytes as f64 / 1e6 / secs
        );
        if let Some(cpu) = self.cpu_seconds {
            println!(
                "  CPU          {cpu:.2} s  ({:.3} CPU-s per million records)",
                cpu * 1e6 / self.records.max(1) as f64
            );
        }
        if let Some(cpu) = self.sender_cpu_seconds {
            println!(
                "  sender CPU   {cpu:.3} s  ({:.1} ns per record, the sending thread alone)",
                cpu * 1e9 / self.records.max(1) as f64
            );
        }
        if !self.latencies_ns.is_empty() {
            let p = |q| percentile_ms(&self.latencies_ns, q).unwrap_or(0.0);
            println!(
                "  latency      p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms",
                p(0.5),
                p(0.9),
                p(0.99),
                p(0.999),
                p(1.0)
            );
        }
        if self.end_to_end_is_stamped {
            let p = |q| percentile_ms(&self.end_to_end_ns, q).unwrap_or(0.0);
            println!(
                "  end to end   p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms (every record: now − its send-time stamp)",
                p(0.5),
                p(0.99),
                p(0.999),
                p(1.0)
            );
        } else if !self.end_to_end_ns.is_empty() {
            let p = |q| percentile_ms(&self.end_to_end_ns, q).unwrap_or(0.0);
            println!(
                "  end to end   p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms (now − record timestamp: the records' age when reading a backlog)",
                p(0.5),
                p(0.99),
                p(1.0)
            );
        }
        if let Some(rss) = peak_rss_bytes() {
            println!("  peak RSS     {:.1} MiB", rss as f64 / (1 << 20) as f64);
        }
        println!("{}", self.json_line(secs));
    }

    /// The contract's result line.
    fn json_line(&self, secs: f64) -> String {
        let ms = |samples: &[u64], q| {
            percentile_ms(samples, q).map_or("null".into(), |v| format!("{v:.3}"))
        };
        let lat = &self.latencies_ns;
        let mut line = format!(
            "{{\"client\":\"kring\",\"op\":\"{}\",\"records\":{},\"bytes\":{},\"elapsed_s\":{secs:.6},\"p50_ms\":{},\"p99_ms\":{},\"p999_ms\":{},\"max_ms\":{}",
            self.op,
            self.records,
            self.bytes,
            ms(lat, 0.5),
            ms(lat, 0.99),
            ms(lat, 0.999),
            ms(lat, 1.0),
        );
        if self.end_to_end_is_stamped {
            let e2e = &self.end_to_end_ns;
            line += &format!(
                ",\"e2e_p50_ms\":{},\"e2e_p99_ms\":{},\"e2e_p999_ms\":{},\"e2e_max_ms\":{}",
                ms(e2e, 0.5),
                ms(e2e, 0.99),
                ms(e2e, 0.999),
                ms(e2e, 1.0)
            );
        }
        line + &format!(",\"io_backend\":\"{}\"}}", self.io_backend)
    }
}

/// Values to send: read from a file (one per line) or generated.
fn payloads(file: Option<&str>, size: usize) -> Result<Vec<Vec<u8>>, CliError> {
    match file {
        Some(path) => {
            let text =
                std::fs::read(path).map_err(|e| CliError::io(format!("reading {path}"), e))?;
            let lines: Vec<Vec<u8>> = text
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec)
                .collect();
            if lines.is_empty() {
                return Err(CliError::Failed(format!("{path} holds no payload lines")));
            }
            Ok(lines)
        }
        None => Ok(generated_payloads(size, 4096)),
    }
}

/// `count` text-like values of `size` bytes: words and numbers from a small vocabulary
/// chosen by a seeded xorshift, so compression codecs see realistic, not trivial, input.
fn generated_payloads(size: usize, count: usize) -> Vec<Vec<u8>> {
    const WORDS: &[&str] = &[
        "order",
        "customer",
        "shipped",
        "pending",
        "warehouse",
        "invoice",
        "amount",
        "EUR",
        "USD",
        "status",
        "created",
        "updated",
        "region",
        "north",
        "south",
        "priority",
        "sku",
        "item",
        "quantity",
        "price",
        "discount",
        "total",
        "session",
        "user",
        "click",
        "view",
        "page",
        "cart",
        "checkout",
        "payment",
        "refund",
        "true",
        "false",
        "null",
        "event",
        "source",
        "web",
        "mobile",
    ];
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..count)
        .map(|_| {
            let mut v = Vec::with_capacity(size + 16);
            while v.len() < size {
                let r = next();
                v.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes());
                if r >> 61 == 0 {
                    v.extend_from_slice(format!("={}", (r >> 20) % 100_000).as_bytes());
                }
                v.push(b' ');
            }
            v.truncate(size);
            v
        })
        .collect()
}

fn produce(args: PerfProduceArgs) -> CliResult {
    let PerfProduceArgs {
        topic,
        records,
        record_size: size,
        payload_file,
        acks,
        idempotence,
        compression,
        linger_ms,
        batch_size,
        transactional_id,
        txn_records,
        key_size,
        rate,
        deliveries: reports,
        cluster,
        metrics: _,
    } = args;
    let txn = crate::perf_txn::TxnOptions::check(transactional_id, txn_records)?;
    let key_size = crate::perf_rate::check_key_size(key_size)?;
    let mut settings: Vec<(&str, Option<String>)> = vec![
        ("linger.ms", Some("5".into())),
        ("batch.size", Some("1000000".into())),
    ];
    for (value, property) in [
        (acks, "acks"),
        (idempotence, "enable.idempotence"),
        (compression, "compression.type"),
        (linger_ms, "linger.ms"),
        (batch_size, "batch.size"),
    ] {
        if let Some(v) = value {
            settings.retain(|(p, _)| *p != property);
            settings.push((property, Some(v)));
        }
    }
    settings.extend(txn.as_ref().map(crate::perf_txn::TxnOptions::setting));
    let mut cluster = cluster.options()?;
    // The contract's budget is bytes alone (32 MiB, `buffer.memory`'s default): every
    // peer lifts its record-count limit (librdkafka's `queue.buffering.max.messages`,
    // franz-go's `MaxBufferedRecords`); kring has none by default, and none here
    // unless told otherwise.
    if !cluster.was_given("queue.buffering.max.messages") {
        settings.push(("queue.buffering.max.messages", Some("0".into())));
    }
    if records == 0 {
        return Err(UsageError::new("--records must be at least 1").into());
    }
    cluster.set_producer(&settings)?;
    let values = payloads(payload_file.as_deref(), size)?;
    let rate = crate::perf_rate::check_rate(rate, txn.is_some(), &values)?;
    let p = &cluster.config.producer;
    println!(
        "perf produce: {records} records to {topic}: acks={} idempotence={} compression={:?} linger={} ms batch.size={} B",
        match p.acks.as_i16() {
            -1 => "all".to_string(),
            a => a.to_string(),
        },
        p.enable_idempotence,
        p.compression,
        p.linger.as_millis(),
        p.batch_size
    );
    let client = connect(cluster)?;
    check_topic_to_produce(&client, &topic, None)?;
    let tagged = (reports == DeliveryReports::Handler && rate.is_none())
        .then(|| TaggedDeliveries::new(records, LATENCY_SAMPLE_EVERY));
    let mut builder = ProducerBuilder::new(&client);
    if let Some(t) = &tagged {
        builder = builder.delivery_handler(t.handler());
    }
    let producer = wait(builder.build())?;
    if let Some(txn) = &txn {
        crate::perf_txn::init(&producer, txn)?;
    }

    if let Some(rate) = rate {
        return produce_paced(&producer, &client, &topic, &values, key_size, records, rate);
    }
    let mut progress = Progress::new("acked");
    let mut deliveries = match tagged {
        Some(t) => Reports::Tagged(t),
        None => Reports::Futures(Deliveries::start()),
    };
    let cpu_start = cpu_seconds();
    let sender_start = thread_cpu_seconds();
    let started = Instant::now();
    let mut sender = RecordSender {
        producer: &producer,
        topic: &topic,
        values: &values,
        reports: &mut deliveries,
        progress: &mut progress,
        key_size,
        bytes: 0,
    };
    let sent: Result<(), kring::Error> = wait(async {
        match &txn {
            Some(t) => crate::perf_txn::send_in_transactions(&mut sender, records, t.records).await,
            None => {
                sender.send(0..records).await?;
                producer.flush().await
            }
        }
    });
    let sender_cpu = sender_start.zip(thread_cpu_seconds()).map(|(a, b)| b - a);
    // In transactions, the run ends with the last commit, after the last report.
    let committed = txn.is_some().then(Instant::now);
    let bytes = sender.bytes;
    let tally = deliveries.finish();
    let cpu_end = cpu_seconds();
    progress.finish();
    let _ = wait(producer.close());
    client.close();
    match sent {
        // flush's count of failed records: the tally below names them.
        Ok(()) | Err(kring::Error::DeliveryFailed { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    if tally.failed > 0 {
        return Err(CliError::Failed(format!(
            "{} of {records} record(s) failed; the first: {}",
            tally.failed,
            tally.first_error.unwrap_or_default()
        )));
    }
    let elapsed = committed.or(tally.last_report).unwrap_or_else(Instant::now) - started;
    let mut outcome = produced(tally, bytes, elapsed, cpu_start, cpu_end, &client);
    outcome.sender_cpu_seconds = sender_cpu;
    outcome.print();
    Ok(())
}

/// The outcome of a produce run whose every record was delivered.
fn produced(
    tally: crate::deliveries::Tally,
    bytes: u64,
    elapsed: Duration,
    cpu_start: Option<f64>,
    cpu_end: Option<f64>,
    client: &kring::Client,
) -> Outcome {
    Outcome {
        op: "produce",
        records: tally.delivered,
        bytes,
        elapsed,
        cpu_seconds: cpu_start.zip(cpu_end).map(|(a, b)| b - a),
        sender_cpu_seconds: None,
        latencies_ns: tally.latencies_ns,
        end_to_end_ns: Vec::new(),
        end_to_end_is_stamped: false,
        io_backend: client.io_backend().name(),
    }
}

/// `perf produce --rate`: the paced run of the latency workload.
fn produce_paced(
    producer: &Producer,
    client: &kring::Client,
    topic: &str,
    values: &[Vec<u8>],
    key_size: Option<usize>,
    records: u64,
    rate: f64,
) -> CliResult {
    let cpu_start = cpu_seconds();
    let started = Instant::now();
    let run =
        crate::perf_rate::send_paced(producer, topic, values, key_size, records, rate, started)?;
    let cpu_end = cpu_seconds();
    let _ = wait(producer.close());
    client.close();
    let tally = run.tally;
    if tally.failed > 0 {
        return Err(CliError::Failed(format!(
            "{} of {records} record(s) failed; the first: {}",
            tally.failed,
            tally.first_error.unwrap_or_default()
        )));
    }
    let elapsed = tally.last_report.unwrap_or_else(Instant::now) - started;
    produced(tally, run.bytes, elapsed, cpu_start, cpu_end, client).print();
    Ok(())
}

/// Where perf produce's delivery reports go.
pub(crate) enum Reports {
    /// Records sent with their index as tag, counted by the producer's delivery handler.
    Tagged(TaggedDeliveries),
    /// Each record's delivery future, handed to a waiter thread.
    Futures(Deliveries),
}

impl Reports {
    fn reported(&self) -> u64 {
        match self {
            Reports::Tagged(t) => t.reported(),
            Reports::Futures(d) => d.reported(),
        }
    }

    /// The tally, once every record was flushed.
    fn finish(self) -> crate::deliveries::Tally {
        match self {
            Reports::Tagged(t) => t.finish(),
            Reports::Futures(d) => d.finish(),
        }
    }
}

/// perf produce's send loop: hands records to the producer, tagged or with their
/// delivery futures handed to a waiter (every [`LATENCY_SAMPLE_EVERY`]th timed), updating
/// the progress line.
pub(crate) struct RecordSender<'a> {
    producer: &'a Producer,
    topic: &'a str,
    values: &'a [Vec<u8>],
    reports: &'a mut Reports,
    progress: &'a mut Progress,
    /// `--key-size`: record i's key is the first this many bytes of `perf_rate::key_of(i)`.
    key_size: Option<usize>,
    /// Value bytes sent so far.
    bytes: u64,
}

impl RecordSender<'_> {
    pub(crate) fn producer(&self) -> &Producer {
        self.producer
    }

    /// Sends records `range`: record i's value is `values[i mod values.len()]`.
    pub(crate) async fn send(&mut self, range: std::ops::Range<u64>) -> Result<(), kring::Error> {
        // Record i's value index, i mod values.len(), kept as a running count: a division
        // per record would be the harness's cost, not the producer's.
        let mut index = (range.start % self.values.len().max(1) as u64) as usize;
        for i in range {
            let value = &self.values[index];
            index += 1;
            if index == self.values.len() {
                index = 0;
            }
            let sampled = (i % LATENCY_SAMPLE_EVERY == 0).then(Instant::now);
            let key = self.key_size.map(|k| (crate::perf_rate::key_of(i), k));
            // The record is made in each arm, right where it is sent: made before the
            // match, it was copied (144 bytes, three times) on its way into either.
            let key = key.as_ref().map(|(key, k)| &key[..*k]);
            match &mut self.reports {
                Reports::Tagged(t) => {
                    if let Some(at) = sampled {
                        t.sent(i, at);
                    }
                    let record = ProducerRecord::new(self.topic).with_value(value.as_slice());
                    let record = match key {
                        Some(key) => record.with_key(key),
                        None => record,
                    };
                    // The blocking call, as a sending thread of a pipeline makes it: this
                    // loop is the only future of the main thread's `block_on`, so a send
                    // that waits for memory holds up nothing else, and a record appended
                    // at once costs no future (`send_tagged().await`'s future, its poll
                    // and the record's moves into it cost about 80 instructions per
                    // record, 6.6% of this loop's, under callgrind: `perf/instructions`).
                    self.producer.send_tagged_blocking(record, i)?;
                }
                Reports::Futures(d) => {
                    let mut record = ProducerRecord::new(self.topic).with_value(value.as_slice());
                    if let Some(key) = key {
                        record = record.with_key(key);
                    }
                    let future = self.producer.send(record).await?;
                    d.push(future, sampled);
                }
            }
            self.bytes += value.len() as u64;
            if i % 4096 == 0 {
                let reported = self.reports.reported();
                self.progress
                    .update(reported, self.bytes * reported / (i + 1));
            }
        }
        Ok(())
    }
}

/// Totals of a consume run, shared by the partition tasks (all on one thread).
struct ConsumeShared {
    target: u64,
    records: Cell<u64>,
    bytes: Cell<u64>,
    finished_at: Cell<Option<Instant>>,
    end_to_end_ns: std::cell::RefCell<Vec<u64>>,
    /// Sum over the values read of `len << 16 | first << 8 | last`: reading a value's
    /// bytes as a user would, and comparable across clients (the Go peers print the same
    /// digest) whatever order the records arrive in.
    digest: Cell<u64>,
    error: std::cell::RefCell<Option<String>>,
    done: Notify,
    /// `--e2e`: every record's value carries a send-time stamp, read for its latency.
    stamped: bool,
}

fn consume(args: PerfConsumeArgs) -> CliResult {
    let PerfConsumeArgs {
        topic,
        records,
        group,
        timeout,
        e2e,
        cluster,
        metrics: _,
    } = args;
    let cluster = cluster.options()?;
    if let (Some(_), true) = (&group, e2e) {
        return Err(UsageError::new("--e2e reads partitions directly, not as a --group").into());
    }
    if let Some(group) = group {
        return crate::perf_group::consume(cluster, &topic, &group, records, timeout);
    }
    let client = connect(cluster)?;
    let count = check_topic(&client, &topic, None)?;
    let consumer = Consumer::new(client.clone())?;
    let target = consume_target(&client, &topic, count, records, "")?;

    let runtime = crate::local_runtime()?;
    let shared = Rc::new(ConsumeShared {
        target,
        records: Cell::new(0),
        bytes: Cell::new(0),
        finished_at: Cell::new(None),
        end_to_end_ns: std::cell::RefCell::new(Vec::new()),
        digest: Cell::new(0),
        error: std::cell::RefCell::new(None),
        done: Notify::new(),
        stamped: e2e,
    });
    let cpu_start = cpu_seconds();
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    let mut progress = Progress::new("read");
    let timed_out = local.block_on(&runtime, async {
        // Every partition consumer starts at once, as a user reading many partitions
        // would start them: their start offsets are looked up together (one ListOffsets
        // per leader) instead of one round trip after another.
        let starting: Vec<_> = (0..count as i32)
            .map(|p| {
                let (consumer, topic) = (consumer.clone(), topic.clone());
                tokio::task::spawn_local(async move {
                    consumer.consume_partition(&topic, p, Offset::Oldest).await
                })
            })
            .collect();
        for started in starting {
            match started.await {
                Ok(Ok(pc)) => {
                    tokio::task::spawn_local(read_partition(shared.clone(), pc));
                }
                Ok(Err(e)) => {
                    shared.error.borrow_mut().get_or_insert(e.to_string());
                    return false;
                }
                Err(e) => {
                    let failed = format!("starting a partition consumer: {e}");
                    shared.error.borrow_mut().get_or_insert(failed);
                    return false;
                }
            }
        }
        if e2e {
            // The partition tasks fetch once this task first waits, just below.
            eprintln!("ready");
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
        loop {
            let tick = tokio::time::sleep(Duration::from_millis(250));
            tokio::select! {
                () = shared.done.notified() => return false,
                () = tick => {
                    progress.update(shared.records.get(), shared.bytes.get());
                    if tokio::time::Instant::now() >= deadline {
                        return true;
                    }
                }
            }
        }
    });
    let cpu_end = cpu_seconds();
    drop(local);
    drop(runtime);
    progress.finish();
    client.close();
    if let Some(e) = shared.error.borrow_mut().take() {
        return Err(CliError::Failed(e));
    }
    if timed_out {
        return Err(CliError::Failed(format!(
            "only {} of {target} records arrived within {timeout} s",
            shared.records.get()
        )));
    }
    let finished = shared.finished_at.get().unwrap_or_else(Instant::now);
    eprintln!(
        "kring: consumed values' digest {:016x}",
        shared.digest.get()
    );
    Outcome {
        op: "consume",
        records: shared.records.get(),
        bytes: shared.bytes.get(),
        elapsed: finished - started,
        cpu_seconds: cpu_start.zip(cpu_end).map(|(a, b)| b - a),
        sender_cpu_seconds: None,
        latencies_ns: Vec::new(),
        end_to_end_ns: {
            let mut v = shared.end_to_end_ns.take();
            v.sort_unstable();
            v
        },
        end_to_end_is_stamped: e2e,
        io_backend: client.io_backend().name(),
    }
    .print();
    Ok(())
}

/// How many records a perf consume reads: `records`, or all the topic holds now;
/// announced (with `how`, e.g. the group it reads as); none is an error.
pub(crate) fn consume_target(
    client: &kring::Client,
    topic: &str,
    count: usize,
    records: Option<u64>,
    how: &str,
) -> Result<u64, CliError> {
    let available = available_records(client, topic, count)?;
    let target = records.unwrap_or(available);
    println!(
        "perf consume: {target} records from {topic} ({count} partition(s), {available} records there now){how}"
    );
    if target == 0 {
        return Err(CliError::Failed(format!(
            "{topic} holds no records to read"
        )));
    }
    Ok(target)
}

/// Records between the earliest and latest offsets of the topic's `count` partitions, at
/// the consumer's isolation level. Looked up all at once, so that the consumer gathers
/// them into two ListOffsets per leader (the earliest offsets, then the latest): one
/// partition after another was 512 round trips for 256 partitions, counted in the run's
/// CPU.
pub(crate) fn available_records(
    client: &kring::Client,
    topic: &str,
    count: usize,
) -> Result<u64, CliError> {
    let consumer = Consumer::new(client.clone())?;
    let lookups = (0..count as i32)
        .map(|p| consumer.offsets(topic, p))
        .collect();
    let mut available = 0u64;
    for offsets in wait(all_together(lookups)) {
        let (earliest, latest) = offsets?;
        available += (latest - earliest).max(0) as u64;
    }
    Ok(available)
}

/// Runs `futures` together on the calling task and gives their outputs in order.
async fn all_together<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none()
                && let std::task::Poll::Ready(v) = future.as_mut().poll(cx)
            {
                *output = Some(v);
            }
        }
        if outputs.iter().all(Option::is_some) {
            std::task::Poll::Ready(outputs.iter_mut().filter_map(Option::take).collect())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// A value's part of the consume digest: `len << 16 | first << 8 | last`.
pub(crate) fn value_share(value: &[u8]) -> u64 {
    let mut share = (value.len() as u64) << 16;
    if let (Some(&first), Some(&last)) = (value.first(), value.last()) {
        share |= u64::from(first) << 8 | u64::from(last);
    }
    share
}

/// Now − a record's timestamp (ms since the epoch), in ns; 0 for one from the future.
pub(crate) fn age_ns(timestamp_ms: i64) -> u64 {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    (now_ms - timestamp_ms).max(0) as u64 * 1_000_000
}

/// Counts up to `room` records of `batch`: (records, value bytes, digest), sampling the
/// end-to-end latency of every [`LATENCY_SAMPLE_EVERY`]th record of the run. Not
/// inlined: the per-record loop is compiled by itself, not inside the async state
/// machine that calls it, whose size would otherwise decide how well it is optimised.
#[inline(never)]
fn tally_batch(
    shared: &ConsumeShared,
    batch: &kring::consumer::FetchedBatch<'_>,
    room: u64,
) -> Result<(u64, u64, u64), kring::record::RecordError> {
    let (mut n, mut bytes, mut digest) = (0u64, 0u64, 0u64);
    for record in batch.records() {
        let r = record?;
        let value = r.value().unwrap_or_default();
        bytes += value.len() as u64;
        digest = digest.wrapping_add(value_share(value));
        if (shared.records.get() + n) % LATENCY_SAMPLE_EVERY == 0 {
            shared
                .end_to_end_ns
                .borrow_mut()
                .push(age_ns(r.timestamp()));
        }
        n += 1;
        if n == room {
            break;
        }
    }
    Ok((n, bytes, digest))
}

/// [`tally_batch`] for `--e2e`: every record's end-to-end latency from the send-time
/// stamp at the start of its value (now by the wall clock, taken once per batch: the
/// batch is handed over whole). A value without a stamp is an error.
fn tally_stamped_batch(
    shared: &ConsumeShared,
    batch: &kring::consumer::FetchedBatch<'_>,
    partition: i32,
    room: u64,
) -> Result<(u64, u64, u64), String> {
    let now = crate::perf_rate::wall_ns();
    let (mut n, mut bytes, mut digest) = (0u64, 0u64, 0u64);
    let mut latencies = shared.end_to_end_ns.borrow_mut();
    for record in batch.records() {
        let r = record.map_err(|e| e.to_string())?;
        let value = r.value().unwrap_or_default();
        let stamp = crate::perf_rate::read_stamp(value).ok_or_else(|| {
            format!(
                "--e2e: a value without a send-time stamp at partition {partition} offset {}",
                r.offset()
            )
        })?;
        latencies.push(now.saturating_sub(stamp));
        bytes += value.len() as u64;
        digest = digest.wrapping_add(value_share(value));
        n += 1;
        if n == room {
            break;
        }
    }
    Ok((n, bytes, digest))
}

/// Reads one partition's borrowed records, summing value lengths, until the run's
/// target is reached.
async fn read_partition(shared: Rc<ConsumeShared>, mut pc: PartitionConsumer) {
    let partition = pc.partition();
    loop {
        if shared.records.get() >= shared.target {
            return;
        }
        let batch = match pc.next_batch().await {
            None => return,
            Some(Err(e)) => {
                shared.error.borrow_mut().get_or_insert(e.to_string());
                shared.done.notify_one();
                return;
            }
            Some(Ok(batch)) => batch,
        };
        let room = shared.target - shared.records.get();
        let tallied = if shared.stamped {
            tally_stamped_batch(&shared, &batch, partition, room)
        } else {
            tally_batch(&shared, &batch, room).map_err(|e| e.to_string())
        };
        let (n, bytes, digest) = match tallied {
            Ok(tally) => tally,
            Err(e) => {
                shared.error.borrow_mut().get_or_insert(e.to_string());
                shared.done.notify_one();
                return;
            }
        };
        shared.records.set(shared.records.get() + n);
        shared.bytes.set(shared.bytes.get() + bytes);
        shared.digest.set(shared.digest.get().wrapping_add(digest));
        if shared.records.get() >= shared.target {
            shared.finished_at.set(Some(Instant::now()));
            shared.done.notify_one();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_payloads_have_the_size_and_vary() {
        let p = generated_payloads(100, 64);
        assert_eq!(p.len(), 64);
        assert!(p.iter().all(|v| v.len() == 100));
        assert_ne!(p[0], p[1]);
        assert!(p[0].iter().all(|b| b.is_ascii_graphic() || *b == b' '));
        let tiny = generated_payloads(1, 4);
        assert!(tiny.iter().all(|v| v.len() == 1));
    }
}
