//! Measurements for `kring perf` and the other commands' summaries: this process's CPU
//! time and peak memory (from `/proc/self`), latency percentiles, and a progress line
//! printed at most once a second.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Kernel clock ticks per second for `/proc/self/stat` times (USER_HZ; 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// User + system CPU seconds of this process, all threads; `None` off Linux.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// CPU seconds the calling thread has run so far, to the nanosecond (the scheduler's
/// own count, `/proc/thread-self/schedstat`); `None` off Linux.
pub fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Peak resident memory of this process in bytes (VmHWM); `None` off Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The `p`-quantile (0..=1) of sorted nanosecond samples, in milliseconds: nearest
/// rank, the sample at index ⌈p·n⌉ − 1 (as the harness's peer contract defines it).
///
/// Exact, over every sample kept. `kring perf` keeps one latency per 100 records, so a
/// 10-million-record run holds 100,000 samples (0.8 MB, sorted in about 3 ms after the
/// clock stops); an HDR histogram with 3 significant digits (1 µs to 1 h) takes a fixed
/// 0.2 MB, costs the same per record, and is 0.1% off: smaller only past about 2.5
/// million records, so not worth a dependency here.
pub fn percentile_ms(sorted_ns: &[u64], p: f64) -> Option<f64> {
    if sorted_ns.is_empty() {
        return None;
    }
    let rank = (sorted_ns.len() as f64 * p).ceil() as usize;
    let k = rank.clamp(1, sorted_ns.len()) - 1;
    Some(sorted_ns[k] as f64 / 1e6)
}

/// A progress line on stderr, redrawn in place on a terminal, else one line per update.
pub struct Progress {
    what: &'static str,
    started: Instant,
    last: Instant,
    last_count: u64,
    terminal: bool,
    drew: bool,
}

impl Progress {
    pub fn new(what: &'static str) -> Self {
        let now = Instant::now();
        Progress {
            what,
            started: now,
            last: now,
            last_count: 0,
            terminal: std::io::stderr().is_terminal(),
            drew: false,
        }
    }

    /// Reports `count` records and `bytes` bytes so far, if a second has passed.
    pub fn update(&mut self, count: u64, bytes: u64) {
        let now = Instant::now();
        let since = now.duration_since(self.last);
        if since < Duration::from_secs(1) {
            return;
        }
        let rate = (count - self.last_count) as f64 / since.as_secs_f64();
        let total = now.duration_since(self.started).as_secs_f64();
        let line = format!(
            "{:>6.1} s  {} {:>12} records  {:>12.0} records/s  {:>8.1} MB total",
            total,
            self.what,
            count,
            rate,
            bytes as f64 / 1e6
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
        self.drew = true;
        self.last = now;
        self.last_count = count;
    }

    /// Ends the redrawn line so what follows starts on its own line.
    pub fn finish(&mut self) {
        if self.terminal && self.drew {
            eprintln!();
        }
        self.drew = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_process_figures() {
        assert_eq!(percentile_ms(&[], 0.5), None);
        let v: Vec<u64> = (1..=100).map(|ms| ms * 1_000_000).collect();
        // Nearest rank: the sample at ⌈p·n⌉ − 1.
        assert_eq!(percentile_ms(&v, 0.5), Some(50.0));
        assert_eq!(percentile_ms(&v, 0.99), Some(99.0));
        assert_eq!(percentile_ms(&v, 0.999), Some(100.0));
        assert_eq!(percentile_ms(&v, 0.0), Some(1.0));
        assert_eq!(percentile_ms(&v, 1.0), Some(100.0));
        // This test runs on Linux, where /proc answers.
        assert!(cpu_seconds().is_some_and(|s| s >= 0.0));
        let before = thread_cpu_seconds().expect("schedstat");
        let mut spin = 0u64;
        while thread_cpu_seconds().is_some_and(|now| now <= before) {
            spin = spin.wrapping_add(1);
        }
        assert!(
            thread_cpu_seconds().is_some_and(|now| now > before),
            "{spin}"
        );
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
    }
}
