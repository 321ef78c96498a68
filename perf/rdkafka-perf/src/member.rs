//! `rdkafka-perf member`: librdkafka's group member for `perf/rebalance` (perf/README.md,
//! "The member contract"): a `BaseConsumer` subscribed to the topic, configured by the
//! properties given (`--property NAME=VALUE`, librdkafka names), logging to stdout one
//! event a line with times in ns since the Unix epoch: `J <t>` just before `subscribe`,
//! `A <t> p,...` / `R <t> p,...` from the rebalance callback (the partitions added or
//! taken: all of them with an eager assignor, the increment with a cooperative one), and
//! `M <t> <partition> <offset> <record timestamp ms>` per record. Runs until killed.

use std::io::{BufWriter, Stdout, Write};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::{ClientContext, TopicPartitionList};

use crate::fail;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The log, shared by the poll loop and the rebalance callback (both on the polling
/// thread).
struct Logger(Mutex<BufWriter<Stdout>>);

impl Logger {
    fn line(&self, line: std::fmt::Arguments<'_>) {
        let mut out = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_fmt(line);
        let _ = out.flush();
    }
}

fn partitions_text(tpl: &TopicPartitionList) -> String {
    let list: Vec<String> = tpl
        .elements()
        .iter()
        .map(|e| e.partition().to_string())
        .collect();
    if list.is_empty() {
        "-".into()
    } else {
        list.join(",")
    }
}

impl ClientContext for Logger {}

impl ConsumerContext for Logger {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                self.line(format_args!("A {} {}\n", now_ns(), partitions_text(tpl)))
            }
            Rebalance::Revoke(tpl) => {
                self.line(format_args!("R {} {}\n", now_ns(), partitions_text(tpl)))
            }
            Rebalance::Error(e) => eprintln!("rdkafka-perf member: rebalance error: {e}"),
        }
    }
}

pub fn run() {
    let mut it = std::env::args().skip(2);
    let mut topic = String::new();
    let mut config = ClientConfig::new();
    while let Some(flag) = it.next() {
        let v = it
            .next()
            .unwrap_or_else(|| fail(format!("{flag} needs a value")));
        match flag.as_str() {
            "--topic" => topic = v,
            "--property" => match v.split_once('=') {
                Some((k, val)) => {
                    config.set(k, val);
                }
                None => fail(format!("--property {v}: expected NAME=VALUE")),
            },
            _ => fail(format!("member: unknown argument {flag}")),
        }
    }
    if topic.is_empty() {
        fail("member needs --topic");
    }
    let consumer: BaseConsumer<Logger> = config
        .set("fetch.queue.backoff.ms", "10")
        .create_with_context(Logger(Mutex::new(BufWriter::with_capacity(
            1 << 16,
            std::io::stdout(),
        ))))
        .unwrap_or_else(|e| fail(format!("consumer: {e}")));
    consumer.context().line(format_args!("J {}\n", now_ns()));
    consumer
        .subscribe(&[topic.as_str()])
        .unwrap_or_else(|e| fail(format!("subscribe: {e}")));
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let t = now_ns();
                let ts = m.timestamp().to_millis().unwrap_or(-1);
                consumer.context().line(format_args!(
                    "M {t} {} {} {ts}\n",
                    m.partition(),
                    m.offset()
                ));
            }
            Some(Err(e)) => eprintln!("rdkafka-perf member: {e}"),
            None => {}
        }
    }
}
