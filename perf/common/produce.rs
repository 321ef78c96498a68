//! The produce benchmark's workload and report, shared word for word by kring's side
//! (`benches/produce.rs`) and librdkafka's (`perf/rdkafka-produce`), so both clients send
//! the same payloads under the same settings and print the same JSON line.
//!
//! Payloads are text-like (words drawn by a fixed-seed xorshift from a small vocabulary),
//! so lz4 and zstd have something realistic to do; a pool of distinct payloads of about
//! 4 MiB is cycled, larger than a batch, so batches do not repeat themselves.
//!
//! Delivery latency is sampled: every `sample`-th record's send time is stored in a
//! preallocated slot, and the delivery report (kring's `DeliveryFuture`, librdkafka's
//! delivery callback) turns it into send→ack nanoseconds. Client CPU is taken around the
//! timed part only: the sum of every thread's `se.sum_exec_runtime` (ns precision) when
//! it agrees with the process's utime+stime from `/proc/self/stat` (what getrusage
//! reports, at 10 ms resolution), else the latter.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One configuration, as given on the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bootstrap: String,
    pub records: usize,
    pub size: usize,
    /// "1" or "all".
    pub acks: String,
    pub idempotence: bool,
    /// "none", "lz4" or "zstd".
    pub compression: String,
    pub linger_ms: u64,
    pub batch_size: usize,
    /// Bytes of unacknowledged records the producer may hold (kring `buffer_memory`,
    /// librdkafka `queue.buffering.max.kbytes`).
    pub buffer_memory: usize,
    /// Produce requests in flight per connection.
    pub max_in_flight: usize,
    pub partitions: i32,
    /// Every n-th record's delivery latency is measured.
    pub sample: usize,
    /// Records sent and acknowledged before timing starts (new topic, connections, ids).
    pub warmup: usize,
    /// kring's I/O worker threads.
    pub workers: usize,
    /// kring: "async" (one `block_on` around an async send loop) or "blocking"
    /// (`send_blocking` per record).
    pub api: String,
    pub keep_topic: bool,
}

impl Settings {
    /// Parses `--name value` pairs; anything unknown (cargo's `--bench`) is ignored.
    pub fn from_args() -> Settings {
        let mut s = Settings {
            bootstrap: "127.0.0.1:9092".into(),
            records: 1_000_000,
            size: 100,
            acks: "1".into(),
            idempotence: false,
            compression: "none".into(),
            linger_ms: 5,
            batch_size: 1_000_000,
            buffer_memory: 32 << 20,
            max_in_flight: 5,
            partitions: 1,
            sample: 64,
            warmup: 1000,
            workers: 1,
            api: "async".into(),
            keep_topic: false,
        };
        let mut idempotence = None;
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            if a == "--keep-topic" {
                s.keep_topic = true;
                continue;
            }
            let known = [
                "--bootstrap",
                "--records",
                "--size",
                "--acks",
                "--idempotence",
                "--compression",
                "--linger-ms",
                "--batch-size",
                "--buffer-memory",
                "--max-in-flight",
                "--partitions",
                "--sample",
                "--warmup",
                "--workers",
                "--api",
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
                "--records" => s.records = num(&v),
                "--size" => s.size = num(&v),
                "--acks" => {
                    assert!(v == "1" || v == "all", "--acks 1|all");
                    s.acks = v;
                }
                "--idempotence" => idempotence = Some(v == "true"),
                "--compression" => {
                    assert!(
                        ["none", "lz4", "zstd"].contains(&v.as_str()),
                        "--compression none|lz4|zstd"
                    );
                    s.compression = v;
                }
                "--linger-ms" => s.linger_ms = num(&v) as u64,
                "--batch-size" => s.batch_size = num(&v),
                "--buffer-memory" => s.buffer_memory = num(&v),
                "--max-in-flight" => s.max_in_flight = num(&v),
                "--partitions" => s.partitions = num(&v) as i32,
                "--sample" => s.sample = num(&v).max(1),
                "--warmup" => s.warmup = num(&v),
                "--workers" => s.workers = num(&v),
                "--api" => s.api = v,
                _ => unreachable!(),
            }
        }
        // Idempotence needs acks=all; by default it follows acks (on for all, as both
        // clients default to, off for 1).
        s.idempotence = idempotence.unwrap_or(s.acks == "all");
        assert!(
            !(s.idempotence && s.acks != "all"),
            "idempotence needs --acks all"
        );
        s
    }

    /// A fresh topic name for this client and configuration.
    pub fn topic(&self, client: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!(
            "produce-bench-{client}-{}b-acks{}-{}-{}-{nanos}",
            self.size,
            self.acks,
            self.compression,
            std::process::id()
        )
    }
}

/// `count` distinct text-like payloads of `size` bytes each, laid end to end.
pub struct Payloads {
    bytes: Vec<u8>,
    size: usize,
    count: usize,
}

impl Payloads {
    pub fn new(size: usize) -> Payloads {
        const VOCABULARY: &str = "order customer shipped pending warehouse invoice amount currency EUR \
            USD status created updated region north south east west priority high \
            low normal sku item quantity price discount total session user click \
            view page home cart checkout payment card refund true false null id ts \
            event source web mobile";
        let words: Vec<&str> = VOCABULARY.split(' ').collect();
        let count = ((4 << 20) / size.max(1)).clamp(1024, 1 << 16);
        let mut bytes = Vec::with_capacity(count * size);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..count {
            let start = bytes.len();
            while bytes.len() - start < size {
                let r = next();
                let word = words[(r % words.len() as u64) as usize].as_bytes();
                let room = size - (bytes.len() - start);
                bytes.extend_from_slice(&word[..word.len().min(room)]);
                if bytes.len() - start < size {
                    // Numbers too, as real records have.
                    let sep: &[u8] = if r >> 60 == 0 { b"=1234," } else { b" " };
                    let room = size - (bytes.len() - start);
                    bytes.extend_from_slice(&sep[..sep.len().min(room)]);
                }
            }
        }
        Payloads { bytes, size, count }
    }

    /// The payload of record `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        let k = i % self.count;
        &self.bytes[k * self.size..(k + 1) * self.size]
    }
}

/// Client CPU time of this process so far (all threads, user + system), in seconds, at
/// the kernel's clock-tick resolution (10 ms): `/proc/self/stat`'s utime + stime.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime and stime are fields 14 and 15, in USER_HZ
    // (100 per second on Linux).
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    (utime + stime) as f64 / 100.0
}

/// The CPU time of the threads alive now, summed from each one's
/// `/proc/self/task/*/sched` (`se.sum_exec_runtime`, nanosecond precision); time of
/// threads that have exited is not in it.
pub fn live_threads_cpu_seconds() -> Option<f64> {
    let mut total = 0.0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(sched) = std::fs::read_to_string(task.ok()?.path().join("sched")) else {
            continue; // exited meanwhile
        };
        let line = sched
            .lines()
            .find(|l| l.starts_with("se.sum_exec_runtime"))?;
        let ms: f64 = line.rsplit(':').next()?.trim().parse().ok()?;
        total += ms / 1e3;
    }
    Some(total)
}

/// Process CPU time over an interval: the precise per-thread sum when it agrees with
/// the process total (no thread's time was lost to an exit), else the process total.
pub struct CpuClock {
    ticks: f64,
    threads: Option<f64>,
}

impl CpuClock {
    pub fn start() -> CpuClock {
        CpuClock {
            ticks: cpu_seconds(),
            threads: live_threads_cpu_seconds(),
        }
    }

    /// Seconds since `start`, and which clock gave them.
    pub fn elapsed(&self) -> (f64, &'static str) {
        let ticks = cpu_seconds() - self.ticks;
        match (self.threads, live_threads_cpu_seconds()) {
            // Two readings of a 10 ms clock: the difference is within 20 ms of the truth.
            (Some(a), Some(b)) if ((b - a) - ticks).abs() <= 0.021 => (b - a, "threads"),
            _ => (ticks, "ticks"),
        }
    }
}

/// Send times of the sampled records, and their latencies once acknowledged.
pub struct Latencies {
    start: Instant,
    every: usize,
    sent: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
}

impl Latencies {
    pub fn new(records: usize, every: usize) -> Latencies {
        let n = records / every + 1;
        Latencies {
            start: Instant::now(),
            every,
            sent: (0..n).map(|_| AtomicU64::new(0)).collect(),
            acked: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
        }
    }

    #[inline]
    pub fn sampled(&self, i: usize) -> bool {
        i % self.every == 0
    }

    /// Call just before record `i` is handed to the client (if sampled).
    #[inline]
    pub fn on_send(&self, i: usize) {
        if self.sampled(i) {
            let t = self.start.elapsed().as_nanos() as u64;
            self.sent[i / self.every].store(t, Ordering::Relaxed);
        }
    }

    /// Call when record `i`'s delivery is reported (if sampled).
    #[inline]
    pub fn on_ack(&self, i: usize) {
        if self.sampled(i) {
            let t = self.start.elapsed().as_nanos() as u64;
            let sent = self.sent[i / self.every].load(Ordering::Relaxed);
            self.acked[i / self.every].store(t.saturating_sub(sent), Ordering::Relaxed);
        }
    }

    /// The measured latencies, sorted, in nanoseconds.
    pub fn sorted(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .acked
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .filter(|&a| a != u64::MAX)
            .collect();
        v.sort_unstable();
        v
    }
}

/// The p-quantile in milliseconds, as JSON (`null` without samples).
fn percentile(sorted: &[u64], p: f64) -> String {
    if sorted.is_empty() {
        return "null".into();
    }
    let k = ((sorted.len() - 1) as f64 * p).round() as usize;
    format!("{:.2}", sorted[k] as f64 / 1e6)
}

/// What one timed run measured.
pub struct Outcome {
    pub elapsed: Duration,
    pub cpu_seconds: f64,
    /// "threads" (per-thread sum, precise) or "ticks" (process total, 10 ms).
    pub cpu_source: &'static str,
    pub delivered: u64,
    pub failed: u64,
    pub first_error: Option<String>,
    pub latencies_ns: Vec<u64>,
}

fn json_str(s: &str) -> String {
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
pub fn report(client: &str, version: &str, s: &Settings, extra: &str, o: &Outcome) {
    let secs = o.elapsed.as_secs_f64();
    let rps = o.delivered as f64 / secs;
    let mbps = o.delivered as f64 * s.size as f64 / secs / 1e6;
    let cpu_per_m = o.cpu_seconds / (s.records as f64 / 1e6);
    println!(
        "{{\"client\":{},\"version\":{},\"size\":{},\"records\":{},\"acks\":{},\"idempotence\":{},\
         \"compression\":{},\"linger_ms\":{},\"batch_size\":{},\"buffer_memory\":{},\"max_in_flight\":{},\
         \"partitions\":{},\"sample_every\":{},\"extra\":{},\"elapsed_s\":{:.4},\"records_per_s\":{:.0},\
         \"mb_per_s\":{:.2},\"cpu_s\":{:.3},\"cpu_source\":{},\"cpu_s_per_million\":{:.3},\"p50_ms\":{},\"p99_ms\":{},\
         \"latency_samples\":{},\"delivered\":{},\"failed\":{},\"first_error\":{}}}",
        json_str(client),
        json_str(version),
        s.size,
        s.records,
        json_str(&s.acks),
        s.idempotence,
        json_str(&s.compression),
        s.linger_ms,
        s.batch_size,
        s.buffer_memory,
        s.max_in_flight,
        s.partitions,
        s.sample,
        json_str(extra),
        secs,
        rps,
        mbps,
        o.cpu_seconds,
        json_str(o.cpu_source),
        cpu_per_m,
        percentile(&o.latencies_ns, 0.50),
        percentile(&o.latencies_ns, 0.99),
        o.latencies_ns.len(),
        o.delivered,
        o.failed,
        o.first_error
            .as_deref()
            .map_or("null".to_string(), json_str),
    );
}

/// Ends the process (exit 3, with a line on stderr) if the run has not finished within
/// `limit`, so a hung client fails the report script instead of stalling it.
pub fn watchdog(client: &'static str, limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("{client}: run not finished after {limit:?}; giving up");
        std::process::exit(3);
    });
}
