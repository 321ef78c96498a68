//! Producer throughput, client CPU and delivery latency against the real broker
//! (`scripts/kafka up`), one configuration per run; `perf/produce-bench` runs every
//! configuration for kring and for librdkafka (`perf/rdkafka-produce`, the same workload
//! from the same file, `perf/common/produce.rs`) and writes `perf/results/produce.md`.
//!
//! `cargo bench --bench produce -- [--records N] [--size B] [--acks 1|all]
//!  [--idempotence true|false] [--compression none|lz4|zstd] [--linger-ms L]
//!  [--batch-size B] [--buffer-memory B] [--max-in-flight K] [--partitions P]
//!  [--sample S] [--warmup W] [--workers T] [--api async|blocking] [--keep-topic]`
//!
//! Each run creates a fresh topic, sends `--warmup` records and waits for them (metadata,
//! connections, producer id), then times N records from the first send until the last
//! acknowledgement, and prints one JSON line. The sending thread only sends; a second
//! thread waits on every record's `DeliveryFuture` in order (the counterpart of
//! librdkafka's per-record delivery report) and stamps every `--sample`-th one's
//! acknowledgement. `--api async` (default) sends from one `block_on` around an async
//! loop of `Producer::send`; `--api blocking` calls `send_blocking` per record.

#[path = "../perf/common/produce.rs"]
mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Latencies, Outcome, Payloads, Settings};
use kring::admin::{Admin, NewTopic};
use kring::config::{Acks, Compression};
use kring::producer::{DeliveryFuture, Producer, ProducerRecord};
use kring::{Client, Config};

/// Futures handed to the waiting thread at a time: small, so that a record acknowledged
/// while its chunk is still filling is not stamped late by much.
const CHUNK: usize = 256;

fn create_topic(client: &Client, name: &str, partitions: i32) {
    let topic = NewTopic::new(name, partitions, 1);
    kring::client::block_on(Admin::new(client.clone()).create_topic(&topic))
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
}

fn delete_topic(client: &Client, name: &str) {
    let _ = kring::client::block_on(Admin::new(client.clone()).delete_topic(name));
}

/// What the waiting thread saw.
struct Waited {
    delivered: u64,
    failed: u64,
    first_error: Option<String>,
}

/// Waits on every future in order; chunks carry the index of their first record. Hands
/// the tally back on `done`, then stays alive until `release` (so that the CPU reading
/// taken meanwhile still sees this thread's time).
fn wait_all(
    rx: mpsc::Receiver<(usize, Vec<DeliveryFuture>)>,
    latencies: &Latencies,
    done: mpsc::Sender<Waited>,
    release: mpsc::Receiver<()>,
) {
    let mut w = Waited {
        delivered: 0,
        failed: 0,
        first_error: None,
    };
    for (first, chunk) in rx {
        for (k, future) in chunk.into_iter().enumerate() {
            match future.wait() {
                Ok(_) => {
                    w.delivered += 1;
                    latencies.on_ack(first + k);
                }
                Err(e) => {
                    w.failed += 1;
                    w.first_error.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
    let _ = done.send(w);
    let _ = release.recv();
}

fn main() {
    let s = Settings::from_args();
    common::watchdog("kring", Duration::from_secs(600));
    let mut config = Config::new([s.bootstrap.clone()]);
    config.net.workers = s.workers;
    config.net.max_in_flight = s.max_in_flight;
    config.producer.acks = if s.acks == "all" {
        Acks::All
    } else {
        Acks::Leader
    };
    config.producer.enable_idempotence = s.idempotence;
    config.producer.compression = match s.compression.as_str() {
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => Compression::None,
    };
    config.producer.linger = Duration::from_millis(s.linger_ms);
    config.producer.batch_size = s.batch_size;
    config.producer.buffer_memory = s.buffer_memory;
    let client = Client::connect_blocking(config).expect("connect");
    let topic = s.topic("kring");
    create_topic(&client, &topic, s.partitions);
    let producer = Producer::new_blocking(client.clone()).expect("producer");
    let payloads = Payloads::new(s.size);

    // Warm-up: connections, topic metadata, producer id.
    let warm: Vec<DeliveryFuture> = (0..s.warmup)
        .map(|i| {
            producer
                .send_blocking(ProducerRecord::new(&topic).with_value(payloads.get(i)))
                .expect("warm-up send")
        })
        .collect();
    for f in warm {
        f.wait().expect("warm-up delivery");
    }

    let latencies = Arc::new(Latencies::new(s.records, s.sample));
    let (tx, rx) = mpsc::channel::<(usize, Vec<DeliveryFuture>)>();
    let (done_tx, done_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let waiter = {
        let latencies = latencies.clone();
        std::thread::Builder::new()
            .name("deliveries".into())
            .spawn(move || wait_all(rx, &latencies, done_tx, release_rx))
            .expect("spawn")
    };

    let cpu0 = common::CpuClock::start();
    let t0 = Instant::now();
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut first = 0;
    let mut hand_over = |i: usize, f: DeliveryFuture, chunk: &mut Vec<DeliveryFuture>| {
        chunk.push(f);
        if chunk.len() == CHUNK || i + 1 == s.records {
            let full = std::mem::replace(chunk, Vec::with_capacity(CHUNK));
            tx.send((first, full)).expect("waiter alive");
            first = i + 1;
        }
    };
    if s.api == "blocking" {
        for i in 0..s.records {
            latencies.on_send(i);
            let f = producer
                .send_blocking(ProducerRecord::new(&topic).with_value(payloads.get(i)))
                .expect("send");
            hand_over(i, f, &mut chunk);
        }
    } else {
        kring::client::block_on(async {
            for i in 0..s.records {
                latencies.on_send(i);
                let f = producer
                    .send(ProducerRecord::new(&topic).with_value(payloads.get(i)))
                    .await
                    .expect("send");
                hand_over(i, f, &mut chunk);
            }
        });
    }
    drop(tx);
    producer.flush_blocking().expect("flush");
    let waited = done_rx.recv().expect("waiter");
    let elapsed = t0.elapsed();
    let (cpu, cpu_source) = cpu0.elapsed();
    let _ = release_tx.send(());
    waiter.join().expect("waiter");

    let outcome = Outcome {
        elapsed,
        cpu_seconds: cpu,
        cpu_source,
        delivered: waited.delivered,
        failed: waited.failed,
        first_error: waited.first_error,
        latencies_ns: latencies.sorted(),
    };
    let extra = format!(
        "workers={} api={} backend={:?}",
        s.workers,
        s.api,
        client.io_backend()
    );
    common::report("kring", env!("CARGO_PKG_VERSION"), &s, &extra, &outcome);
    producer.close_blocking().expect("close");
    if !s.keep_topic {
        delete_topic(&client, &topic);
    }
    client.close();
}
