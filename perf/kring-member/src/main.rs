//! kring's programs for `perf/rebalance` (perf/README.md, "The member contract"):
//!
//! ```text
//! kring-member member --property NAME=VALUE ... --topic T
//! kring-member produce --property NAME=VALUE ... --topic T --partitions P --rate R
//! ```
//!
//! - member: a `GroupConsumer` subscribed to T, configured by the Java property names
//!   given (`bootstrap.servers`, `group.id`, `partition.assignment.strategy`, ...). It logs
//!   to stdout, one event a line, times in ns since the Unix epoch:
//!   `J <t>` just before it subscribes (the join begins), `A <t> p,p,...` partitions
//!   assigned, `R <t> p,...` revoked, `L <t> p,...` lost, and `M <t> <partition>
//!   <offset> <record timestamp ms>` for every record, flushed after every batch. It runs
//!   until killed.
//! - produce: sends R records per second, record i to partition i mod P, values of 100
//!   bytes, in 10 ms ticks, until killed; delivery failures end it with a message.

use std::io::{BufWriter, Stdout, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};
use kring::producer::{Producer, ProducerRecord};
use kring::{Client, Config};

/// Prints `msg` to stderr and exits non-zero.
fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("kring-member: {msg}");
    std::process::exit(1)
}

/// Now, in ns since the Unix epoch (the clock every member program logs with, so the
/// harness can line their logs up).
fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The command line.
struct Args {
    op: String,
    topic: String,
    properties: Vec<(String, String)>,
    partitions: i32,
    rate: u64,
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let op = it.next().unwrap_or_default();
    if op != "member" && op != "produce" {
        fail(
            "usage: kring-member member|produce --topic T --property NAME=VALUE ... (perf/README.md)",
        );
    }
    let mut a = Args {
        op,
        topic: String::new(),
        properties: Vec::new(),
        partitions: 0,
        rate: 0,
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
            "--topic" => a.topic = v,
            "--partitions" => a.partitions = num(&v).min(i32::MAX as u64) as i32,
            "--rate" => a.rate = num(&v),
            "--property" => match v.split_once('=') {
                Some((k, val)) => a.properties.push((k.to_string(), val.to_string())),
                None => fail(format!("--property {v}: expected NAME=VALUE")),
            },
            _ => fail(format!("unknown argument {flag}")),
        }
    }
    if a.topic.is_empty() {
        fail("--topic is required");
    }
    if a.op == "produce" && (a.partitions < 1 || a.rate < 1) {
        fail("produce needs --partitions and --rate (> 0)");
    }
    a
}

fn client(a: &Args) -> Client {
    let mut config = Config::new(Vec::<String>::new());
    for (k, v) in &a.properties {
        config
            .set(k, v)
            .unwrap_or_else(|e| fail(format!("--property {k}={v}: {e}")));
    }
    Client::connect_blocking(config).unwrap_or_else(|e| fail(format!("connect: {e}")))
}

type Log = Arc<Mutex<BufWriter<Stdout>>>;

fn log_line(log: &Log, line: std::fmt::Arguments<'_>) {
    let mut out = log.lock().unwrap_or_else(|e| e.into_inner());
    let _ = out.write_fmt(line);
    let _ = out.flush();
}

fn partitions_text(partitions: &[TopicPartition]) -> String {
    let list: Vec<String> = partitions
        .iter()
        .map(|tp| tp.partition.to_string())
        .collect();
    if list.is_empty() {
        "-".into()
    } else {
        list.join(",")
    }
}

/// Logs assignment changes.
struct Logger(Log);

impl RebalanceListener for Logger {
    fn on_assigned<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        log_line(
            &self.0,
            format_args!("A {} {}\n", now_ns(), partitions_text(partitions)),
        );
        Box::pin(async {})
    }

    fn on_revoked<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        log_line(
            &self.0,
            format_args!("R {} {}\n", now_ns(), partitions_text(partitions)),
        );
        Box::pin(async {})
    }

    fn on_lost<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        log_line(
            &self.0,
            format_args!("L {} {}\n", now_ns(), partitions_text(partitions)),
        );
        Box::pin(async {})
    }
}

fn member(a: &Args) {
    let client = client(a);
    let log: Log = Arc::new(Mutex::new(BufWriter::with_capacity(
        1 << 16,
        std::io::stdout(),
    )));
    log_line(&log, format_args!("J {}\n", now_ns()));
    kring::client::block_on(async {
        let mut consumer = GroupConsumer::with_listener(
            client.clone(),
            Topics::names([a.topic.as_str()]),
            Box::new(Logger(log.clone())),
        )
        .await
        .unwrap_or_else(|e| fail(format!("subscribe: {e}")));
        loop {
            let batch = match consumer.next_batch().await {
                None => fail("the member left its group"),
                Some(Err(e)) => fail(format!("consume: {e}")),
                Some(Ok(batch)) => batch,
            };
            let t = now_ns();
            let mut out = log.lock().unwrap_or_else(|e| e.into_inner());
            for record in batch.batch.records() {
                let r = record.unwrap_or_else(|e| fail(format!("record: {e}")));
                let _ = writeln!(
                    out,
                    "M {t} {} {} {}",
                    batch.partition,
                    r.offset(),
                    r.timestamp()
                );
            }
            let _ = out.flush();
        }
    })
}

fn produce(a: &Args) {
    let client = client(a);
    let producer =
        Producer::new_blocking(client).unwrap_or_else(|e| fail(format!("producer: {e}")));
    let value = [b'x'; 100];
    let tick = Duration::from_millis(10);
    let per_tick = (a.rate / 100).max(1);
    let started = Instant::now();
    // Deliveries are awaited in order on a thread of their own; a failure ends the run
    // (the harness sees the exit).
    let (pending, deliveries) = std::sync::mpsc::channel::<kring::producer::DeliveryFuture>();
    std::thread::spawn(move || {
        for d in deliveries {
            if let Err(e) = d.wait() {
                fail(format!("delivery: {e}"));
            }
        }
    });
    let mut i: u64 = 0;
    for n in 1u32.. {
        for _ in 0..per_tick {
            let record = ProducerRecord::new(&a.topic)
                .with_partition((i % a.partitions as u64) as i32)
                .with_value(&value[..]);
            let d = producer
                .send_blocking(record)
                .unwrap_or_else(|e| fail(format!("send: {e}")));
            let _ = pending.send(d);
            i += 1;
        }
        if let Some(wait) = (started + tick * n).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

fn main() {
    let a = parse_args();
    match a.op.as_str() {
        "member" => member(&a),
        _ => produce(&a),
    }
}
