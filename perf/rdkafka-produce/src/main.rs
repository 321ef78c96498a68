//! librdkafka's side of the produce benchmark: the workload and report of kring's
//! `benches/produce.rs` (the same file, `perf/common/produce.rs`, defines both), through
//! the `rdkafka` crate's `BaseProducer`.
//!
//! `cargo run --release -- [--records N] [--size B] [--acks 1|all] [--idempotence true|false]
//!  [--compression none|lz4|zstd] [--linger-ms L] [--batch-size B] [--buffer-memory B]
//!  [--max-in-flight K] [--partitions P] [--sample S] [--warmup W] [--keep-topic]`
//!
//! The sending thread calls `poll(0)` after every 64 sends and, when the queue is full,
//! `poll(1 ms)` until space frees up — the pattern of librdkafka's own
//! `rdkafka_performance` — so delivery callbacks run on the sending thread, promptly.
//! The delivery opaque is the record's index (a `usize`, no allocation).

#[path = "../../common/produce.rs"]
mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Latencies, Outcome, Payloads, Settings};
use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};

struct Context {
    latencies: Latencies,
    /// Records below this index are the warm-up (not sampled).
    warmup: usize,
    delivered: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl ClientContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        match result {
            Ok(_) => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
                if index >= self.warmup {
                    self.latencies.on_ack(index - self.warmup);
                }
            }
            Err((e, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = self.first_error.lock() {
                    first.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
}

fn admin(s: &Settings) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        .create()
        .expect("admin client")
}

/// Waits until every record is delivered and its report served. (The crate's `flush`
/// polls in whole 100 ms steps, which would add up to 100 ms to a timed run; this waits
/// in 1 ms steps.)
fn drain(producer: &BaseProducer<Context>, limit: Duration) {
    let deadline = Instant::now() + limit;
    while producer.in_flight_count() > 0 {
        assert!(
            Instant::now() < deadline,
            "records still undelivered after {limit:?}"
        );
        producer.poll(Duration::from_millis(1));
    }
}

fn main() {
    let s = Settings::from_args();
    common::watchdog("librdkafka", Duration::from_secs(600));
    let topic = s.topic("rdkafka");
    let admin = admin(&s);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let created = futures_executor::block_on(admin.create_topics(
        &[NewTopic::new(
            &topic,
            s.partitions,
            TopicReplication::Fixed(1),
        )],
        &options,
    ))
    .expect("create topic");
    for r in created {
        r.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }

    let codec_level = if s.compression == "zstd" { "3" } else { "-1" };
    let producer: BaseProducer<Context> = ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        .set("acks", &s.acks)
        .set(
            "enable.idempotence",
            if s.idempotence { "true" } else { "false" },
        )
        .set("compression.codec", &s.compression)
        .set("compression.level", codec_level)
        .set("linger.ms", s.linger_ms.to_string())
        .set("batch.size", s.batch_size.to_string())
        .set(
            "max.in.flight.requests.per.connection",
            s.max_in_flight.to_string(),
        )
        // The memory budget counts bytes, as kring's buffer_memory does; the message
        // count limit is lifted so only bytes decide.
        .set(
            "queue.buffering.max.kbytes",
            (s.buffer_memory / 1024).to_string(),
        )
        .set("queue.buffering.max.messages", "10000000")
        .create_with_context(Context {
            latencies: Latencies::new(s.records, s.sample),
            warmup: s.warmup,
            delivered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_error: Mutex::new(None),
        })
        .expect("producer");

    let payloads = Payloads::new(s.size);
    // `index` is the delivery opaque: 0..warmup for the warm-up, then warmup + i.
    let send = |index: usize, payload: &[u8]| {
        let mut record =
            BaseRecord::<(), [u8], usize>::with_opaque_to(&topic, index).payload(payload);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    // buffer full: serve delivery reports for a millisecond, then retry
                    // (poll(t) always waits the whole t).
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("send: {e}"),
            }
        }
        if index % 64 == 0 {
            producer.poll(Duration::ZERO);
        }
    };

    // Warm-up: topic metadata, connections, producer id; waits until acknowledged.
    for i in 0..s.warmup {
        send(i, payloads.get(i));
    }
    drain(&producer, Duration::from_secs(120));
    let ctx = producer.context();
    assert_eq!(
        ctx.failed.load(Ordering::Relaxed),
        0,
        "warm-up failed: {:?}",
        ctx.first_error.lock().ok().and_then(|e| e.clone())
    );
    ctx.delivered.store(0, Ordering::Relaxed);

    let cpu0 = common::CpuClock::start();
    let t0 = Instant::now();
    for i in 0..s.records {
        ctx.latencies.on_send(i);
        send(s.warmup + i, payloads.get(i));
    }
    drain(&producer, Duration::from_secs(300));
    let elapsed = t0.elapsed();
    let (cpu, cpu_source) = cpu0.elapsed();

    let outcome = Outcome {
        elapsed,
        cpu_seconds: cpu,
        cpu_source,
        delivered: ctx.delivered.load(Ordering::Relaxed),
        failed: ctx.failed.load(Ordering::Relaxed),
        first_error: ctx.first_error.lock().ok().and_then(|e| e.clone()),
        latencies_ns: ctx.latencies.sorted(),
    };
    let version = rdkafka::util::get_rdkafka_version().1;
    common::report(
        "librdkafka",
        &version,
        &s,
        "rdkafka crate BaseProducer, poll(0) every 64 sends",
        &outcome,
    );
    drop(producer);
    if !s.keep_topic {
        let _ = futures_executor::block_on(admin.delete_topics(&[&topic], &options));
    }
}
