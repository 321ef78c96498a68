//! Consumer throughput and client CPU against the real broker (`scripts/kafka up`), one
//! configuration per run; `perf/consume-bench` fills the topics once and runs every
//! configuration for kring and for librdkafka (`perf/rdkafka-consume`, the same per-record
//! work and report from the same file, `perf/rdkafka-consume/src/workload.rs`) and
//! writes `perf/results/consume.md`.
//!
//! `cargo bench --bench consume -- fill --topic T [--records N] [--size B]
//!  [--compression none|lz4|zstd] [--partitions P] [--batch-size B] [--linger-ms L]`
//! creates topic T and writes N records with kring's producer: keys are the record index
//! as 10 ASCII digits, values the producer benchmark's text-like payloads
//! (`perf/common/produce.rs`), acks=1, no idempotence.
//!
//! `cargo bench --bench consume -- [consume] --topic T [--records N] [--size B]
//!  [--mode borrowed|owned] [--fetch-max-bytes B] [--max-partition-fetch-bytes B]
//!  [--fetch-max-wait-ms W] [--fetch-min-bytes B] [--fetch-buffer-memory B]
//!  [--check-crcs true|false] [--workers T]`
//! reads every partition of T from the oldest offset until all N records are read,
//! touching every key and value, and prints one JSON line. `--mode borrowed` (default)
//! iterates `FetchedBatch::records()` (`RecordRef`, slices of the fetch buffer);
//! `--mode owned` takes `next_messages` (`Message`, `Bytes` slices). One partition is
//! read with the blocking calls (`next_batch_blocking` / `next_messages_blocking`) in a
//! loop; several are read on the same thread by one `block_on` over one async loop per
//! partition, polled together.
//!
//! `cargo bench --bench consume -- delete --topic T` deletes T.

#[path = "../perf/common/produce.rs"]
mod produce_common;
#[path = "../perf/rdkafka-consume/src/workload.rs"]
mod workload;

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::Poll;
use std::time::{Duration, Instant};

use kring::admin::{Admin, NewTopic};
use kring::client::block_on;
use kring::config::{Acks, Compression};
use kring::consumer::{Consumer, Offset, PartitionConsumer};
use kring::producer::{DeliveryFuture, Producer, ProducerRecord};
use kring::{Client, Config};
use produce_common::{CpuClock, Payloads};
use workload::{Settings, Tally};

fn create_topic(client: &Client, name: &str, partitions: i32) {
    let topic = NewTopic::new(name, partitions, 1);
    block_on(Admin::new(client.clone()).create_topic(&topic))
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
}

fn delete_topic(client: &Client, name: &str) {
    let _ = block_on(Admin::new(client.clone()).delete_topic(name));
}

/// Oldest and next offset of every partition of the topic.
fn bounds(consumer: &Consumer, topic: &str) -> Vec<(i32, i64, i64)> {
    let partitions = block_on(consumer.client().partitions(topic)).expect("partitions");
    partitions
        .into_iter()
        .map(|p| {
            let (oldest, next) = block_on(consumer.offsets(topic, p)).expect("ListOffsets");
            (p, oldest, next)
        })
        .collect()
}

fn fill(s: &Settings) {
    let mut config = Config::new([s.bootstrap.clone()]);
    config.net.workers = s.workers;
    config.producer.acks = Acks::Leader;
    config.producer.enable_idempotence = false;
    config.producer.compression = match s.compression.as_str() {
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => Compression::None,
    };
    config.producer.linger = Duration::from_millis(s.linger_ms);
    config.producer.batch_size = s.batch_size;
    let client = Client::connect_blocking(config).expect("connect");
    create_topic(&client, &s.topic, s.partitions);
    let producer = Producer::new_blocking(client.clone()).expect("producer");
    let payloads = Payloads::new(s.size);
    let t0 = Instant::now();
    let (tx, rx) = mpsc::sync_channel::<Vec<DeliveryFuture>>(64);
    let waiter = std::thread::spawn(move || {
        let mut failed = 0u64;
        let mut first = None;
        for chunk in rx {
            for f in chunk {
                if let Err(e) = f.wait() {
                    failed += 1;
                    first.get_or_insert_with(|| e.to_string());
                }
            }
        }
        (failed, first)
    });
    block_on(async {
        let mut chunk = Vec::with_capacity(4096);
        for i in 0..s.records {
            let key = workload::key(i);
            let f = producer
                .send(
                    ProducerRecord::new(&s.topic)
                        .with_key(&key[..])
                        .with_value(payloads.get(i)),
                )
                .await
                .expect("send");
            chunk.push(f);
            if chunk.len() == 4096 {
                tx.send(std::mem::replace(&mut chunk, Vec::with_capacity(4096)))
                    .expect("waiter");
            }
        }
        tx.send(chunk).expect("waiter");
    });
    drop(tx);
    producer.flush_blocking().expect("flush");
    let (failed, first) = waiter.join().expect("waiter");
    assert_eq!(failed, 0, "fill: {failed} records failed, first: {first:?}");
    let elapsed = t0.elapsed();
    producer.close_blocking().expect("close");
    let consumer = Consumer::new(client.clone()).expect("consumer");
    let b = bounds(&consumer, &s.topic);
    let total: i64 = b.iter().map(|(_, o, n)| n - o).sum();
    assert_eq!(total, s.records as i64, "fill: topic holds {total} records");
    let counts: Vec<String> = b.iter().map(|(_, o, n)| (n - o).to_string()).collect();
    println!(
        "{{\"fill\":{},\"records\":{},\"size\":{},\"compression\":{},\"partitions\":{},\
         \"batch_size\":{},\"linger_ms\":{},\"elapsed_s\":{:.3},\"per_partition\":[{}]}}",
        workload::json_str(&s.topic),
        s.records,
        s.size,
        workload::json_str(&s.compression),
        s.partitions,
        s.batch_size,
        s.linger_ms,
        elapsed.as_secs_f64(),
        counts.join(",")
    );
    client.close();
}

/// Reads one partition with the blocking calls until offset `end`.
fn read_blocking(
    pc: &mut PartitionConsumer,
    owned: bool,
    end: i64,
    mut next: i64,
    t: &mut Tally,
) -> Result<(), String> {
    let p = pc.partition();
    while next < end {
        if owned {
            let messages = match pc.next_messages_blocking() {
                None => return Err(format!("partition {p}: consumer ended at {next}")),
                Some(Err(e)) => return Err(e.to_string()),
                Some(Ok(m)) => m,
            };
            for m in &messages {
                t.touch(p, m.offset, &mut next, m.key.as_deref(), m.value.as_deref());
            }
        } else {
            let batch = match pc.next_batch_blocking() {
                None => return Err(format!("partition {p}: consumer ended at {next}")),
                Some(Err(e)) => return Err(e.to_string()),
                Some(Ok(b)) => b,
            };
            t.batches += 1;
            for r in batch.records() {
                let r = r.map_err(|e| format!("partition {p}: {e}"))?;
                t.touch(p, r.offset(), &mut next, r.key(), r.value());
            }
        }
    }
    Ok(())
}

/// [`read_blocking`] as an async loop (several partitions on one thread).
async fn read_async(
    pc: &mut PartitionConsumer,
    owned: bool,
    end: i64,
    mut next: i64,
    t: &mut Tally,
) -> Result<(), String> {
    let p = pc.partition();
    while next < end {
        if owned {
            let messages = match pc.next_messages().await {
                None => return Err(format!("partition {p}: consumer ended at {next}")),
                Some(Err(e)) => return Err(e.to_string()),
                Some(Ok(m)) => m,
            };
            for m in &messages {
                t.touch(p, m.offset, &mut next, m.key.as_deref(), m.value.as_deref());
            }
        } else {
            let batch = match pc.next_batch().await {
                None => return Err(format!("partition {p}: consumer ended at {next}")),
                Some(Err(e)) => return Err(e.to_string()),
                Some(Ok(b)) => b,
            };
            t.batches += 1;
            for r in batch.records() {
                let r = r.map_err(|e| format!("partition {p}: {e}"))?;
                t.touch(p, r.offset(), &mut next, r.key(), r.value());
            }
        }
    }
    Ok(())
}

type PartFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + 'a>>;

fn consume(s: &Settings) {
    let owned = match s.mode.as_str() {
        "" | "borrowed" => false,
        "owned" => true,
        m => panic!("--mode borrowed|owned, not {m}"),
    };
    let mut s = s.clone();
    s.mode = if owned { "owned" } else { "borrowed" }.into();
    let mut config = Config::new([s.bootstrap.clone()]);
    config.net.workers = s.workers;
    config.consumer.fetch_min_bytes = s.fetch_min_bytes;
    config.consumer.fetch_max_bytes = s.fetch_max_bytes;
    config.consumer.max_partition_fetch_bytes = s.max_partition_fetch_bytes;
    config.consumer.fetch_max_wait = Duration::from_millis(s.fetch_max_wait_ms);
    config.consumer.fetch_buffer_memory = s.fetch_buffer_memory;
    config.consumer.check_crcs = s.check_crcs;
    config.consumer.enable_auto_commit = false;
    let client = Client::connect_blocking(config).expect("connect");
    let consumer = Consumer::new(client.clone()).expect("consumer");

    // Warm-up: metadata, a connection to the leader, and the partitions' extent.
    let b = bounds(&consumer, &s.topic);
    let total: i64 = b.iter().map(|(_, o, n)| n - o).sum();
    assert_eq!(
        total, s.records as i64,
        "{} holds {total} records, not --records {}",
        s.topic, s.records
    );
    s.partitions = b.len() as i32;

    let cpu0 = CpuClock::start();
    let t0 = Instant::now();
    let mut consumers: Vec<PartitionConsumer> = b
        .iter()
        .map(|&(p, _, _)| {
            consumer
                .consume_partition_blocking(&s.topic, p, Offset::Oldest)
                .expect("consume_partition")
        })
        .collect();
    let mut tallies = vec![Tally::default(); b.len()];
    let results: Vec<Result<(), String>> = if consumers.len() == 1 {
        let (_, oldest, end) = b[0];
        vec![read_blocking(
            &mut consumers[0],
            owned,
            end,
            oldest,
            &mut tallies[0],
        )]
    } else {
        let mut futures: Vec<Option<PartFuture<'_>>> = consumers
            .iter_mut()
            .zip(tallies.iter_mut())
            .zip(&b)
            .map(|((pc, t), &(_, oldest, end))| {
                Some(Box::pin(read_async(pc, owned, end, oldest, t)) as PartFuture<'_>)
            })
            .collect();
        let mut results: Vec<Option<Result<(), String>>> = vec![None; futures.len()];
        block_on(std::future::poll_fn(|cx| {
            for (f, r) in futures.iter_mut().zip(results.iter_mut()) {
                if let Some(fut) = f
                    && let Poll::Ready(out) = fut.as_mut().poll(cx)
                {
                    *r = Some(out);
                    *f = None;
                }
            }
            if results.iter().all(Option::is_some) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }));
        drop(futures);
        results.into_iter().map(|r| r.expect("done")).collect()
    };
    let elapsed = t0.elapsed();
    let (cpu, cpu_source) = cpu0.elapsed();

    let mut tally = Tally::default();
    for t in &tallies {
        tally.merge(t);
    }
    if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
        tally.first_error.get_or_insert(e);
    }
    tally.check(&s);
    let api = match (owned, b.len()) {
        (false, 1) => "next_batch_blocking",
        (true, 1) => "next_messages_blocking",
        (false, _) => "next_batch, one block_on over all partitions",
        (true, _) => "next_messages, one block_on over all partitions",
    };
    let extra = format!(
        "workers={} backend={:?} api={api}",
        s.workers,
        client.io_backend()
    );
    workload::report(
        "kring",
        env!("CARGO_PKG_VERSION"),
        &s,
        &extra,
        elapsed,
        cpu,
        cpu_source,
        &tally,
    );
    drop(consumers);
    client.close();
}

fn main() {
    let s = Settings::from_args();
    s.need_topic();
    produce_common::watchdog("kring", Duration::from_secs(s.timeout_s));
    let command = std::env::args()
        .skip(1)
        .find(|a| ["fill", "consume", "delete"].contains(&a.as_str()))
        .unwrap_or_else(|| "consume".into());
    match command.as_str() {
        "fill" => fill(&s),
        "delete" => {
            let client =
                Client::connect_blocking(Config::new([s.bootstrap.clone()])).expect("connect");
            delete_topic(&client, &s.topic);
            client.close();
        }
        _ => consume(&s),
    }
}
