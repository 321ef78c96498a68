//! The time-stamp counter as a cheap test of "still the same millisecond?", so that most
//! records need no clock read (the clock's own reading is about 24 ns on the benchmark
//! VM, the counter's about 10).
//!
//! How a span is bounded: when a thread reads the clock it reads the counter first
//! (`t`), then the clock (millisecond `ms`, `left` until the next one). The next
//! millisecond begins no earlier than the counter reaches `t + left × rate` (the clock
//! was read after `t`), so with `rate` a lower bound of the counter's ticks per
//! nanosecond, a reading in `[t, t + left × rate)` comes before the next millisecond.
//! It comes after the start of `ms` but for the few nanoseconds between the counter's
//! read and the clock's, the uncertainty any clock read this close to a boundary has.
//!
//! The rate is measured on each thread against the monotonic clock, from the thread's
//! first reading (or its first after a miss, below) to the first new millisecond at least
//! 10 ms later (the clock read
//! before the counter at the start and after it at the end, so that a pause between the
//! two reads can only make the rate lower), and taken 20% lower: the wall clock's rate
//! against the counter moves as NTP slews it, and chrony slews by up to 8.3% either way
//! (its default `maxslewrate`), so a rate measured during the slowest slew and used
//! during the fastest is still a lower bound. A low rate only ends spans early: a
//! reading past a span's end reads the clock and starts a new span for what is left of
//! the millisecond, a few clock reads per millisecond instead of one.
//! Until the rate is known every reading reads the clock.
//!
//! Checked: every 256th reading that falls in a span also reads the clock, before the
//! counter. A clock already past the span's millisecond means the counter misled (a
//! thread moved to a core whose counter lags, a counter that changed its rate, or the
//! clock stepped forward): the span ends and the rate is measured again; after three
//! such misses the thread reads the clock for every record from then on. A clock stepped
//! back or forward is seen at the next check or the end of the current span, within one
//! millisecond.
//!
//! The counter is used only where the CPU says it is invariant (constant rate, ticking
//! through sleep states: CPUID 8000_0007h, EDX bit 8), on x86_64.
//!
//! `unsafe`: DESIGN.md keeps it to `src/buf/` and the io_uring backend; this module is an
//! exception (like `io::sockopt`) for three instructions with no operands in memory and
//! no preconditions, `RDTSC`, `LFENCE` and `CPUID`, whose intrinsics are `unsafe` only as
//! `core::arch` intrinsics are (`__cpuid` is safe from Rust 1.87; the crate builds from
//! 1.85).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Readings in a span between two checks against the clock.
const CHECK_EVERY: u32 = 256;

/// The least time the rate is measured over.
const MEASURE_OVER: Duration = Duration::from_millis(10);

/// The measured rate is lowered by this factor, so that it stays a lower bound while
/// NTP slews the wall clock (see the module's doc).
const RATE_MARGIN: f64 = 0.8;

/// Misses (a check that found the counter misled) after which a thread gives it up.
const MISSES_TO_GIVE_UP: u32 = 3;

/// Ticks per nanosecond believed: anything outside this is a counter not to trust.
const PLAUSIBLE_RATES: std::ops::Range<f64> = 0.05..100.0;

/// The counter values known to fall in one millisecond.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Span {
    from: u64,
    until: u64,
    ms: i64,
    /// Readings in a span left before the next check.
    unchecked: u32,
    /// The counter is not used on this thread (not invariant, or it misled).
    off: bool,
}

impl Span {
    const EMPTY: Span = Span {
        from: u64::MAX,
        until: 0,
        ms: 0,
        unchecked: CHECK_EVERY,
        off: false,
    };

    fn holds(&self, tick: u64) -> bool {
        self.from <= tick && tick < self.until
    }
}

/// Where the thread's measurement of the counter's rate stands.
#[derive(Clone, Copy, Debug)]
enum Rate {
    Unknown,
    Measuring { tick: u64, at: Instant },
    Known(f64),
    Off,
}

thread_local! {
    static SPAN: Cell<Span> = const { Cell::new(Span::EMPTY) };
    static RATE: Cell<Rate> = const { Cell::new(Rate::Unknown) };
    static MISSES: Cell<u32> = const { Cell::new(0) };
}

/// The wall clock in ms since the epoch, from the counter where it can tell, else from
/// a clock read; `None` where this thread does not use the counter (the caller reads
/// the clock).
#[inline]
pub(super) fn now_ms() -> Option<i64> {
    SPAN.try_with(|cell| {
        let span = cell.get();
        if span.off {
            return None;
        }
        let tick = read_counter()?;
        if span.holds(tick) && span.unchecked > 0 {
            cell.set(Span {
                unchecked: span.unchecked - 1,
                ..span
            });
            return Some(span.ms);
        }
        Some(refresh(cell, span, tick))
    })
    .ok()
    .flatten()
}

/// A reading the span cannot answer alone: a check, or a new span from a clock read.
#[cold]
fn refresh(cell: &Cell<Span>, span: Span, tick: u64) -> i64 {
    if span.holds(tick) {
        return check(cell, span);
    }
    let (ms, left) = super::read_clock();
    let next = match (rate(tick, ms != span.ms), left) {
        (Rate::Known(rate), Some(left)) => Span {
            from: tick,
            until: span_end(tick, left, rate),
            ms,
            ..span
        },
        (Rate::Off, _) => Span {
            off: true,
            ..Span::EMPTY
        },
        // No span yet: its millisecond is kept, to see the next one begin.
        _ => Span {
            ms,
            unchecked: span.unchecked,
            ..Span::EMPTY
        },
    };
    cell.set(next);
    ms
}

/// The first counter value past `tick` that may fall in the next millisecond, `left`
/// away at no fewer than `rate` ticks per nanosecond.
fn span_end(tick: u64, left: Duration, rate: f64) -> u64 {
    let ticks = left.as_nanos() as f64 * rate;
    tick.saturating_add(ticks as u64)
}

/// Reads the clock, then the counter: a counter still in the span while the clock has
/// already passed its millisecond misled ([`missed`]). A clock that agrees keeps the
/// span; one set back (or one that passed the span's millisecond as the counter left
/// the span) ends it, and the next reading makes a new one.
fn check(cell: &Cell<Span>, span: Span) -> i64 {
    let (ms, _) = super::read_clock();
    let still_in_span = read_counter_after_clock().is_some_and(|tick| span.holds(tick));
    if ms > span.ms && still_in_span {
        missed(cell);
    } else if ms == span.ms {
        cell.set(Span {
            unchecked: CHECK_EVERY,
            ..span
        });
    } else {
        cell.set(Span::EMPTY);
    }
    ms
}

/// The counter misled: the span ends and the rate is measured again, or, at the
/// [`MISSES_TO_GIVE_UP`]th miss, the thread stops using the counter.
fn missed(cell: &Cell<Span>) {
    let misses = MISSES.try_with(|m| {
        m.set(m.get() + 1);
        m.get()
    });
    let give_up = misses.is_ok_and(|m| m >= MISSES_TO_GIVE_UP);
    let rate = if give_up { Rate::Off } else { Rate::Unknown };
    let _ = RATE.try_with(|cell| cell.set(rate));
    cell.set(Span {
        off: give_up,
        ..Span::EMPTY
    });
}

/// The counter's rate as this thread knows it: `Known` (ticks per nanosecond, a lower
/// bound), `Off`, or not yet (`Unknown` or `Measuring`). Measures it, starting at the
/// thread's first reading (or its first after a miss) and ending at the first new
/// millisecond (`new_ms`) at least [`MEASURE_OVER`] later, at the reading `tick` (taken
/// before the clock's).
fn rate(tick: u64, new_ms: bool) -> Rate {
    RATE.try_with(|cell| {
        let next = match cell.get() {
            Rate::Unknown => start_measuring(),
            Rate::Measuring { tick: start, at } if new_ms => {
                let elapsed = at.elapsed();
                if elapsed < MEASURE_OVER {
                    return Rate::Measuring { tick: start, at };
                }
                measured_rate(start, tick, elapsed).map_or(Rate::Off, Rate::Known)
            }
            known_off_or_measuring => known_off_or_measuring,
        };
        cell.set(next);
        next
    })
    .unwrap_or(Rate::Off)
}

/// The start of a measurement: the monotonic clock, then the counter (so that a pause
/// between them shortens the counter's span, never the clock's), or `Off` for a counter
/// that is not invariant.
fn start_measuring() -> Rate {
    if !counter_is_invariant() {
        return Rate::Off;
    }
    let at = Instant::now();
    match read_counter() {
        Some(tick) => Rate::Measuring { tick, at },
        None => Rate::Off,
    }
}

/// `ticks` over `elapsed`, lowered by the margin; `None` for a counter that went back
/// or ticks at no believable rate.
fn measured_rate(start: u64, end: u64, elapsed: Duration) -> Option<f64> {
    let ticks = end.checked_sub(start)?;
    let rate = ticks as f64 / elapsed.as_nanos() as f64;
    PLAUSIBLE_RATES
        .contains(&rate)
        .then_some(rate * RATE_MARGIN)
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code, unused_unsafe)]
fn counter_is_invariant() -> bool {
    use std::arch::x86_64::__cpuid;
    const INVARIANT_TSC: u32 = 1 << 8;
    // SAFETY: CPUID exists on every x86_64 CPU and only writes registers; leaf
    // 8000_0007h is read only where the highest extended leaf (8000_0000h) says it
    // exists. `unsafe` for Rust before 1.87, where the intrinsic was marked so.
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & INVARIANT_TSC != 0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn counter_is_invariant() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
#[inline]
#[allow(unsafe_code)]
fn read_counter() -> Option<u64> {
    // SAFETY: RDTSC takes no operands, touches no memory and exists on every x86_64
    // CPU; the intrinsic is `unsafe` only as `core::arch` intrinsics are. (A process that
    // set `PR_SET_TSC` to `PR_TSC_SIGSEGV` gets a signal here: a crash, not undefined
    // behaviour; no Kafka client's user is known to.)
    Some(unsafe { std::arch::x86_64::_rdtsc() })
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn read_counter() -> Option<u64> {
    None
}

/// The counter read only once everything before it has executed (`LFENCE`, then
/// `RDTSC`): a bare `RDTSC` may run ahead of the clock read just before it, and a check
/// that read the counter before the clock could find a span that held (a false miss).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn read_counter_after_clock() -> Option<u64> {
    use std::arch::x86_64::{_mm_lfence, _rdtsc};
    // SAFETY: LFENCE and RDTSC take no operands and touch no memory; LFENCE is SSE2,
    // which every x86_64 CPU has. See `read_counter`.
    Some(unsafe {
        _mm_lfence();
        _rdtsc()
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn read_counter_after_clock() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn wall_ms(t: SystemTime) -> i64 {
        t.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
    }

    #[test]
    fn a_span_ends_where_the_next_millisecond_may_begin() {
        assert_eq!(span_end(1_000, Duration::from_nanos(500), 2.0), 2_000);
        assert_eq!(span_end(1_000, Duration::ZERO, 2.0), 1_000, "an empty span");
        assert_eq!(
            span_end(u64::MAX - 5, Duration::from_millis(1), 3.0),
            u64::MAX
        );
    }

    #[test]
    fn a_rate_is_measured_low_and_only_when_believable() {
        let rate = measured_rate(1_000, 2_001_000, Duration::from_millis(1)).unwrap();
        assert!((rate - 2.0 * RATE_MARGIN).abs() < 1e-9, "{rate}");
        assert_eq!(measured_rate(5_000, 4_000, Duration::from_millis(1)), None);
        assert_eq!(measured_rate(0, 10, Duration::from_millis(1)), None);
        assert_eq!(
            measured_rate(0, 1_000_000_000_000, Duration::from_millis(1)),
            None
        );
    }

    /// Run on its own thread: the counter's state is the thread's.
    fn on_a_fresh_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    /// Reads the millisecond through the counter (or the clock where it answers `None`)
    /// between two clock reads, and checks it lies between them; `true` when the counter
    /// answered.
    fn read_and_check() -> bool {
        let before = SystemTime::now();
        let fast = now_ms();
        let ms = fast.unwrap_or_else(super::super::now_ms);
        let after = SystemTime::now();
        assert!(
            wall_ms(before) <= ms && ms <= wall_ms(after),
            "{ms} outside its readings {before:?} {after:?}"
        );
        fast.is_some()
    }

    #[test]
    fn the_counter_agrees_with_the_clock_and_is_used_where_invariant() {
        let (answered, rate) = on_a_fresh_thread(|| {
            // Bounded for a machine that stalls the thread for seconds; on an idle one
            // the rate is known after about 10 ms.
            let bound = Instant::now() + Duration::from_secs(10);
            let mut answered = 0u64;
            while Instant::now() < bound && answered < 100_000 {
                answered += u64::from(read_and_check());
                if matches!(RATE.with(Cell::get), Rate::Off) {
                    break;
                }
            }
            (answered, RATE.with(Cell::get))
        });
        if cfg!(target_arch = "x86_64") && counter_is_invariant() {
            assert!(matches!(rate, Rate::Known(_)), "{rate:?}");
            assert!(answered > 0);
        } else {
            assert!(!matches!(rate, Rate::Known(_)), "{rate:?}");
        }
    }

    /// Puts on this thread a span that claims the counter is still five milliseconds
    /// back, due a check.
    fn plant_a_misleading_span(tick: u64, real: i64) {
        SPAN.with(|cell| {
            cell.set(Span {
                from: tick,
                until: u64::MAX,
                ms: real - 5,
                unchecked: 0,
                off: false,
            })
        });
    }

    #[test]
    fn a_counter_that_misleads_is_measured_again_then_given_up() {
        on_a_fresh_thread(|| {
            let Some(tick) = read_counter() else { return };
            let real = wall_ms(SystemTime::now());
            for miss in 1..=MISSES_TO_GIVE_UP {
                RATE.with(|r| r.set(Rate::Known(1.0)));
                plant_a_misleading_span(tick, real);
                let ms = now_ms().expect("the check reads the clock");
                assert!(ms >= real, "the check answered {ms}, the clock {real}");
                let (span, rate) = (SPAN.with(Cell::get), RATE.with(Cell::get));
                assert_eq!(MISSES.with(Cell::get), miss);
                if miss < MISSES_TO_GIVE_UP {
                    assert_eq!(span, Span::EMPTY, "miss {miss}");
                    assert!(matches!(rate, Rate::Unknown), "miss {miss}: {rate:?}");
                } else {
                    assert!(span.off);
                    assert!(matches!(rate, Rate::Off), "{rate:?}");
                }
            }
            assert_eq!(now_ms(), None, "the counter is given up");
            assert!(super::super::now_ms() >= real);
        });
    }

    #[test]
    fn a_span_that_holds_answers_until_its_check() {
        on_a_fresh_thread(|| {
            let Some(tick) = read_counter() else { return };
            let real = wall_ms(SystemTime::now());
            SPAN.with(|cell| {
                cell.set(Span {
                    from: tick,
                    until: u64::MAX,
                    ms: real + 1_000,
                    unchecked: 2,
                    off: false,
                })
            });
            // The span answers twice without the clock (its millisecond is a future one,
            // so an answer from the clock would show), then the check reads the clock,
            // which is behind the span: a clock set back, not a counter that misled; the
            // span ends and the next reading makes a new one from the clock.
            assert_eq!(now_ms(), Some(real + 1_000));
            assert_eq!(now_ms(), Some(real + 1_000));
            let checked = now_ms().unwrap();
            assert!(real <= checked && checked < real + 1_000, "{checked}");
            assert_eq!(SPAN.with(Cell::get), Span::EMPTY);
            let next = now_ms().unwrap();
            assert!(real <= next && next < real + 1_000, "{next}");
        });
    }
}
