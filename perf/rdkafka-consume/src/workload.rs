//! The consume benchmark's settings, per-record work, checks and report, shared word for
//! word by kring's side (`benches/consume.rs`, which also fills the topic) and
//! librdkafka's (`perf/rdkafka-consume`), so both read the same topic under the same
//! settings, do the same work per record and print the same JSON line.
//!
//! Per record, both clients *touch* the key and the value: their lengths are summed and
//! the first and last byte of the value and the last byte of the key go into a digest, so
//! the bytes are really read (not only the lengths from the record header). The offsets
//! of each partition must be contiguous from the oldest one; the counts, byte sums and
//! digest are checked against what the fill wrote (the digest is the same for every
//! client reading the same topic; the report script compares them).
//!
//! Client CPU is measured as in the producer benchmark (`perf/common/produce.rs`'s
//! `CpuClock`: per-thread `se.sum_exec_runtime` summed, checked against the process's
//! utime+stime), over the timed part only: from just before the partitions are assigned
//! (kring `consume_partition`, librdkafka `assign`) until the last record is touched.

#![allow(dead_code)]

use std::time::Duration;

/// Every key is the record's index as this many ASCII digits.
pub const KEY_LEN: usize = 10;

/// The key of record `i`.
pub fn key(i: usize) -> [u8; KEY_LEN] {
    let mut k = [b'0'; KEY_LEN];
    let mut n = i;
    for b in k.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

/// One configuration, as given on the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bootstrap: String,
    /// The topic to read (or to fill, or delete).
    pub topic: String,
    /// Records in the topic (all partitions together).
    pub records: usize,
    /// Value size in bytes.
    pub size: usize,
    /// "none" or "lz4" (the topic's data, as filled).
    pub compression: String,
    pub partitions: i32,
    /// kring: "borrowed" (`next_batch`, `RecordRef`) or "owned" (`next_messages`,
    /// `Message` with `Bytes`); librdkafka: "poll".
    pub mode: String,
    /// `fetch.min.bytes` (both).
    pub fetch_min_bytes: i32,
    /// Most bytes per Fetch response (kring `fetch_max_bytes`, librdkafka `fetch.max.bytes`).
    pub fetch_max_bytes: i32,
    /// Most bytes per partition per Fetch (kring `max_partition_fetch_bytes`, librdkafka
    /// `fetch.message.max.bytes` alias `max.partition.fetch.bytes`).
    pub max_partition_fetch_bytes: i32,
    /// kring `fetch_max_wait`, librdkafka `fetch.wait.max.ms`.
    pub fetch_max_wait_ms: u64,
    /// Fetched data the client may hold unconsumed (kring `fetch_buffer_memory`,
    /// librdkafka `queued.max.messages.kbytes` = this / 1024).
    pub fetch_buffer_memory: usize,
    /// Verify batch CRCs (kring `check_crcs`, librdkafka `check.crcs`).
    pub check_crcs: bool,
    /// kring's I/O worker threads.
    pub workers: usize,
    /// librdkafka `fetch.queue.backoff.ms` (how long a partition's fetching pauses once
    /// its prefetch queue is full; the default 1000 ms idles a fast reader).
    pub queue_backoff_ms: u64,
    /// Fill only: the producer's batch size and linger.
    pub batch_size: usize,
    pub linger_ms: u64,
    /// A run not finished after this many seconds fails (exit 3).
    pub timeout_s: u64,
}

impl Settings {
    /// Parses `--name value` pairs; anything unknown (cargo's `--bench`) is ignored, and
    /// so is a leading sub-command word (kring's `fill`, `consume`, `delete`).
    pub fn from_args() -> Settings {
        let mut s = Settings {
            bootstrap: "127.0.0.1:9092".into(),
            topic: String::new(),
            records: 2_000_000,
            size: 100,
            compression: "none".into(),
            partitions: 1,
            mode: String::new(),
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            max_partition_fetch_bytes: 1024 * 1024,
            fetch_max_wait_ms: 500,
            fetch_buffer_memory: 64 * 1024 * 1024,
            check_crcs: true,
            workers: 1,
            queue_backoff_ms: 10,
            batch_size: 262_144,
            linger_ms: 5,
            timeout_s: 180,
        };
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            let known = [
                "--bootstrap",
                "--topic",
                "--records",
                "--size",
                "--compression",
                "--partitions",
                "--mode",
                "--fetch-min-bytes",
                "--fetch-max-bytes",
                "--max-partition-fetch-bytes",
                "--fetch-max-wait-ms",
                "--fetch-buffer-memory",
                "--check-crcs",
                "--workers",
                "--queue-backoff-ms",
                "--batch-size",
                "--linger-ms",
                "--timeout-s",
            ];
            if !known.contains(&a.as_str()) {
                continue;
            }
            let v = it.next().unwrap_or_else(|| panic!("{a} needs a value"));
            let num = |v: &str| -> usize {
                v.parse()
                    .unwrap_or_else(|_| panic!("{a} {v}: not a number"))
            };
            match a.as_str() {
                "--bootstrap" => s.bootstrap = v,
                "--topic" => s.topic = v,
                "--records" => s.records = num(&v),
                "--size" => s.size = num(&v),
                "--compression" => {
                    assert!(
                        ["none", "lz4", "zstd"].contains(&v.as_str()),
                        "--compression none|lz4|zstd"
                    );
                    s.compression = v;
                }
                "--partitions" => s.partitions = num(&v) as i32,
                "--mode" => s.mode = v,
                "--fetch-min-bytes" => s.fetch_min_bytes = num(&v) as i32,
                "--fetch-max-bytes" => s.fetch_max_bytes = num(&v) as i32,
                "--max-partition-fetch-bytes" => s.max_partition_fetch_bytes = num(&v) as i32,
                "--fetch-max-wait-ms" => s.fetch_max_wait_ms = num(&v) as u64,
                "--fetch-buffer-memory" => s.fetch_buffer_memory = num(&v),
                "--check-crcs" => s.check_crcs = v == "true",
                "--workers" => s.workers = num(&v),
                "--queue-backoff-ms" => s.queue_backoff_ms = num(&v) as u64,
                "--batch-size" => s.batch_size = num(&v),
                "--linger-ms" => s.linger_ms = num(&v) as u64,
                "--timeout-s" => s.timeout_s = num(&v) as u64,
                _ => unreachable!(),
            }
        }
        s
    }

    pub fn need_topic(&self) {
        assert!(!self.topic.is_empty(), "--topic is required");
    }
}

/// What a client read, accumulated record by record.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub records: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    /// Sum of the first and last byte of every value and the last byte of every key.
    pub digest: u64,
    /// Record batches seen (kring's borrowed path only; 0 elsewhere).
    pub batches: u64,
    /// The first thing that was wrong (offset gap or repeat, missing key or value).
    pub first_error: Option<String>,
}

impl Tally {
    /// The per-record work: touches key and value. `next` is the partition's next
    /// expected offset, advanced here.
    #[inline(always)]
    pub fn touch(
        &mut self,
        partition: i32,
        offset: i64,
        next: &mut i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) {
        self.records += 1;
        if offset != *next && self.first_error.is_none() {
            self.first_error = Some(format!(
                "partition {partition}: offset {offset} where {} was expected",
                *next
            ));
        }
        *next = offset + 1;
        match (key, value) {
            (Some(k), Some(v)) if !k.is_empty() && !v.is_empty() => {
                self.key_bytes += k.len() as u64;
                self.value_bytes += v.len() as u64;
                self.digest = self
                    .digest
                    .wrapping_add(v[0] as u64 + v[v.len() - 1] as u64 + k[k.len() - 1] as u64);
            }
            _ => {
                if self.first_error.is_none() {
                    self.first_error = Some(format!(
                        "partition {partition} offset {offset}: no key or value"
                    ));
                }
            }
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        self.records += other.records;
        self.key_bytes += other.key_bytes;
        self.value_bytes += other.value_bytes;
        self.digest = self.digest.wrapping_add(other.digest);
        self.batches += other.batches;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }

    /// Compares with what the fill wrote: `records` records of `size`-byte values and
    /// `KEY_LEN`-byte keys.
    pub fn check(&mut self, s: &Settings) {
        if self.first_error.is_some() {
            return;
        }
        let n = s.records as u64;
        if self.records != n {
            self.first_error = Some(format!("read {} records, expected {n}", self.records));
        } else if self.value_bytes != n * s.size as u64 || self.key_bytes != n * KEY_LEN as u64 {
            self.first_error = Some(format!(
                "read {} value and {} key bytes, expected {} and {}",
                self.value_bytes,
                self.key_bytes,
                n * s.size as u64,
                n * KEY_LEN as u64
            ));
        }
    }
}

pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Prints the run as one JSON line on stdout (the report script collects these).
#[allow(clippy::too_many_arguments)]
pub fn report(
    client: &str,
    version: &str,
    s: &Settings,
    extra: &str,
    elapsed: Duration,
    cpu_seconds: f64,
    cpu_source: &str,
    t: &Tally,
) {
    let secs = elapsed.as_secs_f64();
    let rps = t.records as f64 / secs;
    let mbps = t.value_bytes as f64 / secs / 1e6;
    let cpu_per_m = cpu_seconds / (t.records.max(1) as f64 / 1e6);
    let per_core = if cpu_seconds > 0.0 {
        t.records as f64 / cpu_seconds
    } else {
        0.0
    };
    println!(
        "{{\"client\":{},\"mode\":{},\"version\":{},\"topic\":{},\"size\":{},\"records\":{},\
         \"compression\":{},\"partitions\":{},\"fetch_min_bytes\":{},\"fetch_max_bytes\":{},\
         \"max_partition_fetch_bytes\":{},\"fetch_max_wait_ms\":{},\"fetch_buffer_memory\":{},\
         \"check_crcs\":{},\"extra\":{},\"elapsed_s\":{:.4},\"records_per_s\":{:.0},\"mb_per_s\":{:.2},\
         \"cpu_s\":{:.4},\"cpu_source\":{},\"cpu_s_per_million\":{:.4},\"records_per_cpu_s\":{:.0},\
         \"consumed\":{},\"key_bytes\":{},\"value_bytes\":{},\"digest\":{},\"batches\":{},\"error\":{}}}",
        json_str(client),
        json_str(&s.mode),
        json_str(version),
        json_str(&s.topic),
        s.size,
        s.records,
        json_str(&s.compression),
        s.partitions,
        s.fetch_min_bytes,
        s.fetch_max_bytes,
        s.max_partition_fetch_bytes,
        s.fetch_max_wait_ms,
        s.fetch_buffer_memory,
        s.check_crcs,
        json_str(extra),
        secs,
        rps,
        mbps,
        cpu_seconds,
        json_str(cpu_source),
        cpu_per_m,
        per_core,
        t.records,
        t.key_bytes,
        t.value_bytes,
        t.digest,
        t.batches,
        t.first_error
            .as_deref()
            .map_or("null".to_string(), json_str),
    );
}
