//! Record timestamps: the wall clock in whole milliseconds since the epoch, for each
//! record on the sending thread.
//!
//! Reading the clock (`SystemTime::now`, a vDSO call: about 24 ns on the 2-core VM the
//! benchmarks run on, an eighth of a 100-byte record's whole cost) is most of the cost;
//! turning the reading into milliseconds (`duration_since` and the division) cost a third
//! as much again. A sender sends thousands of records within one millisecond, so:
//! - each thread keeps the millisecond it last computed and the span of wall time it
//!   covers: a reading inside that span is that millisecond, exactly as computing it
//!   would give; any other (the next millisecond, or a clock set back) is computed and
//!   kept;
//! - on x86_64 with an invariant time-stamp counter (one that ticks at a constant rate,
//!   through sleep states: CPUID 8000_0007h, EDX bit 8), the thread also keeps the span
//!   of counter values that surely lies inside that millisecond, and a record whose
//!   counter reading (`RDTSC`, about 10 ns here) falls in it gets that millisecond
//!   without reading the clock. See [`counter`] for how the span is bounded, how the
//!   thread checks it against the clock, measures the counter's rate again when it
//!   misled, and gives the counter up after three such misses.

mod counter;

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One whole millisecond: `ms` is the time from `from` (included) to `until` (excluded).
#[derive(Clone, Copy)]
struct Millisecond {
    from: SystemTime,
    until: SystemTime,
    ms: i64,
}

thread_local! {
    /// The millisecond this thread last computed; none yet is an empty span.
    static LAST: Cell<Millisecond> = const {
        Cell::new(Millisecond { from: UNIX_EPOCH, until: UNIX_EPOCH, ms: 0 })
    };
}

/// The wall clock in ms since the epoch (0 before the epoch).
pub(crate) fn now_ms() -> i64 {
    counter::now_ms().unwrap_or_else(|| ms_at(SystemTime::now()))
}

/// The wall clock read: its millisecond, and the time left until the next one (`None`
/// where the millisecond's span could not be kept).
fn read_clock() -> (i64, Option<Duration>) {
    let now = SystemTime::now();
    let m = millisecond_at(now);
    let left = (m.from <= now && now < m.until)
        .then(|| m.until.duration_since(now).ok())
        .flatten();
    (m.ms, left)
}

/// `now` in whole ms since the epoch, from this thread's last millisecond when `now`
/// falls in it.
#[inline]
fn ms_at(now: SystemTime) -> i64 {
    millisecond_at(now).ms
}

/// The millisecond `now` falls in: this thread's last one when `now` falls in it, else
/// computed and kept.
#[inline]
fn millisecond_at(now: SystemTime) -> Millisecond {
    LAST.try_with(|last| {
        let m = last.get();
        if m.from <= now && now < m.until {
            return m;
        }
        let next = millisecond_of(now);
        last.set(next);
        next
    })
    .unwrap_or_else(|_| millisecond_of(now))
}

/// The whole millisecond `now` falls in; an empty span where it cannot be kept (before
/// the epoch, or a clock at the end of time).
fn millisecond_of(now: SystemTime) -> Millisecond {
    let Ok(since) = now.duration_since(UNIX_EPOCH) else {
        return Millisecond {
            from: UNIX_EPOCH,
            until: UNIX_EPOCH,
            ms: 0,
        };
    };
    let ms = (since.as_secs() as i64)
        .saturating_mul(1000)
        .saturating_add(i64::from(since.subsec_millis()));
    let from = UNIX_EPOCH.checked_add(Duration::from_millis(ms as u64));
    let until = from.and_then(|f| f.checked_add(Duration::from_millis(1)));
    match (from, until) {
        (Some(from), Some(until)) => Millisecond { from, until, ms },
        _ => Millisecond {
            from: now,
            until: now,
            ms,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, extra_ns: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms) + Duration::from_nanos(extra_ns)
    }

    #[test]
    fn every_instant_of_a_millisecond_is_that_millisecond() {
        let base = 1_764_900_000_123;
        assert_eq!(ms_at(at(base, 0)), base as i64);
        assert_eq!(ms_at(at(base, 500_000)), base as i64);
        assert_eq!(ms_at(at(base, 999_999)), base as i64);
        assert_eq!(ms_at(at(base, 1_000_000)), base as i64 + 1);
        assert_eq!(ms_at(at(base, 999_999)), base as i64, "a clock set back");
        assert_eq!(ms_at(at(base - 5_000, 7)), base as i64 - 5_000);
    }

    #[test]
    fn before_the_epoch_is_zero() {
        assert_eq!(ms_at(UNIX_EPOCH - Duration::from_secs(3)), 0);
        assert_eq!(ms_at(UNIX_EPOCH - Duration::from_nanos(1)), 0);
        assert_eq!(ms_at(UNIX_EPOCH), 0);
    }

    #[test]
    fn the_clock_agrees_with_the_system_time() {
        for _ in 0..10_000 {
            let before = SystemTime::now();
            let ms = now_ms();
            let after = SystemTime::now();
            let bound = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
            assert!(
                bound(before) <= ms && ms <= bound(after),
                "{ms} outside its readings"
            );
        }
    }
}
