//! librdkafka's side of the consume benchmark: the per-record work, checks and report of
//! kring's `benches/consume.rs` (the same file, `src/workload.rs`, defines both), through
//! the `rdkafka` crate's `BaseConsumer`. The topic is filled by kring's side
//! (`cargo bench --bench consume -- fill ...`); `perf/consume-bench` does it all.
//!
//! `cargo run --release -- --topic T [--records N] [--size B] [--mode poll|batch]
//!  [--fetch-max-bytes B] [--max-partition-fetch-bytes B] [--fetch-max-wait-ms W]
//!  [--fetch-min-bytes B] [--fetch-buffer-memory B] [--check-crcs true|false]
//!  [--queue-backoff-ms M]`
//!
//! Every partition of T is `assign`ed at `Offset::Beginning` (no group membership, no
//! commits) and read until all N records are read:
//! - `--mode poll` (default): `BaseConsumer::poll` per message, the crate's ordinary API;
//! - `--mode batch`: librdkafka's own batch call, `rd_kafka_consume_batch_queue` on the
//!   consumer queue (through `rdkafka-sys`), up to 1024 messages per call, each destroyed
//!   after it is touched: librdkafka without the crate's per-message wrapping.

#[path = "../../common/produce.rs"]
mod produce_common;
mod workload;

use std::time::{Duration, Instant};

use produce_common::CpuClock;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use rdkafka_sys as rdsys;
use workload::{Settings, Tally};

/// Messages asked for per `rd_kafka_consume_batch_queue` call.
const BATCH: usize = 1024;

fn main() {
    let mut s = Settings::from_args();
    s.need_topic();
    produce_common::watchdog("librdkafka", Duration::from_secs(s.timeout_s));
    if s.mode.is_empty() {
        s.mode = "poll".into();
    }
    assert!(
        s.mode == "poll" || s.mode == "batch",
        "--mode poll|batch, not {}",
        s.mode
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let group = format!("consume-bench-{}-{nanos}", std::process::id());
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        // Required by the consumer API; never joined (assign, not subscribe) and nothing
        // is committed.
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.min.bytes", s.fetch_min_bytes.to_string())
        .set("fetch.max.bytes", s.fetch_max_bytes.to_string())
        .set(
            "max.partition.fetch.bytes",
            s.max_partition_fetch_bytes.to_string(),
        )
        .set("fetch.wait.max.ms", s.fetch_max_wait_ms.to_string())
        // The prefetch budget counts bytes, as kring's fetch_buffer_memory does; the
        // message-count threshold is lifted so only bytes decide.
        .set(
            "queued.max.messages.kbytes",
            (s.fetch_buffer_memory / 1024).to_string(),
        )
        .set("queued.min.messages", "10000000")
        .set("fetch.queue.backoff.ms", s.queue_backoff_ms.to_string())
        .set("check.crcs", if s.check_crcs { "true" } else { "false" })
        .create()
        .expect("consumer");

    // Warm-up: metadata, a connection to the leader, and the partitions' extent.
    let metadata = consumer
        .fetch_metadata(Some(&s.topic), Duration::from_secs(30))
        .expect("metadata");
    let partitions: Vec<i32> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| p.id())
        .collect();
    assert!(!partitions.is_empty(), "{}: no partitions", s.topic);
    let mut bounds = Vec::new(); // (oldest, next) by partition id
    for &p in &partitions {
        let (lo, hi) = consumer
            .fetch_watermarks(&s.topic, p, Duration::from_secs(30))
            .expect("watermarks");
        bounds.push((p, lo, hi));
    }
    bounds.sort_unstable();
    let total: i64 = bounds.iter().map(|(_, lo, hi)| hi - lo).sum();
    assert_eq!(
        total, s.records as i64,
        "{} holds {total} records, not --records {}",
        s.topic, s.records
    );
    s.partitions = bounds.len() as i32;
    // Next expected offset per partition (partition ids are 0..P).
    let mut next: Vec<i64> = bounds.iter().map(|&(_, lo, _)| lo).collect();
    assert!(
        bounds
            .iter()
            .enumerate()
            .all(|(i, &(p, _, _))| p as usize == i)
    );

    let cpu0 = CpuClock::start();
    let t0 = Instant::now();
    let mut assignment = TopicPartitionList::new();
    for &(p, _, _) in &bounds {
        assignment
            .add_partition_offset(&s.topic, p, Offset::Beginning)
            .expect("assignment");
    }
    consumer.assign(&assignment).expect("assign");
    let mut t = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(s.timeout_s);
    let n = s.records as u64;
    if s.mode == "poll" {
        while t.records < n {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    let p = m.partition();
                    t.touch(p, m.offset(), &mut next[p as usize], m.key(), m.payload());
                }
                Some(Err(e)) => {
                    t.first_error.get_or_insert_with(|| e.to_string());
                    break;
                }
                None => assert!(Instant::now() < deadline, "no records for too long"),
            }
        }
    } else {
        // SAFETY: the queue belongs to `consumer`, alive throughout, and is destroyed
        // (its reference dropped) before it; every message returned is valid until
        // destroyed, which happens right after it is read.
        unsafe {
            let queue = rdsys::rd_kafka_queue_get_consumer(consumer.client().native_ptr());
            assert!(!queue.is_null(), "no consumer queue");
            let mut messages: Vec<*mut rdsys::rd_kafka_message_t> =
                vec![std::ptr::null_mut(); BATCH];
            let slice = |ptr: *const std::ffi::c_void, len: usize| -> Option<&[u8]> {
                (!ptr.is_null()).then(|| std::slice::from_raw_parts(ptr as *const u8, len))
            };
            while t.records < n {
                // Never more than what remains: the call waits until it has as many
                // messages as asked for (or the timeout).
                let want = BATCH.min((n - t.records) as usize);
                let got =
                    rdsys::rd_kafka_consume_batch_queue(queue, 100, messages.as_mut_ptr(), want);
                if got < 0 {
                    t.first_error
                        .get_or_insert_with(|| "rd_kafka_consume_batch_queue failed".into());
                    break;
                }
                if got == 0 {
                    assert!(Instant::now() < deadline, "no records for too long");
                }
                for &m in &messages[..got as usize] {
                    let msg = &*m;
                    if msg.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                        t.first_error
                            .get_or_insert_with(|| format!("message error {:?}", msg.err));
                    } else {
                        let p = msg.partition;
                        t.touch(
                            p,
                            msg.offset,
                            &mut next[p as usize],
                            slice(msg.key, msg.key_len),
                            slice(msg.payload, msg.len),
                        );
                    }
                    rdsys::rd_kafka_message_destroy(m);
                }
                if t.first_error.is_some() {
                    break;
                }
            }
            rdsys::rd_kafka_queue_destroy(queue);
        }
    }
    let elapsed = t0.elapsed();
    let (cpu, cpu_source) = cpu0.elapsed();
    t.check(&s);
    let version = rdkafka::util::get_rdkafka_version().1;
    let extra = if s.mode == "poll" {
        format!(
            "rdkafka crate BaseConsumer::poll per message, assign at Beginning, fetch.queue.backoff.ms={}",
            s.queue_backoff_ms
        )
    } else {
        format!(
            "rd_kafka_consume_batch_queue (up to {BATCH}) on the consumer queue, assign at Beginning, fetch.queue.backoff.ms={}",
            s.queue_backoff_ms
        )
    };
    workload::report(
        "librdkafka",
        &version,
        &s,
        &extra,
        elapsed,
        cpu,
        cpu_source,
        &t,
    );
    let _ = consumer.unassign();
}
