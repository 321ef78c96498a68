//! Reconnect backoff: exponential from a base to a cap, with ±20 % jitter from a seeded
//! generator, so a fleet of clients does not reconnect in lockstep and tests can replay
//! the exact sequence. Sans-IO: it computes durations, the caller sleeps.

use std::time::Duration;

/// A small, seeded pseudo-random generator (SplitMix64). Not for cryptography.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A float in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Exponential backoff state for one connection.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: u32,
    rng: SplitMix64,
}

impl Backoff {
    /// Backoff from `base` doubling to `max`, jittered by `rng`.
    pub fn new(base: Duration, max: Duration, rng: SplitMix64) -> Self {
        Backoff {
            base,
            max: max.max(base),
            failures: 0,
            rng,
        }
    }

    /// Records a failure and returns how long to wait before the next attempt:
    /// `min(base * 2^(failures-1), max)`, times a jitter factor in [0.8, 1.2).
    pub fn next_delay(&mut self) -> Duration {
        let exp = self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        let raw = self.base.saturating_mul(1u32 << exp).min(self.max);
        let factor = 0.8 + 0.4 * self.rng.next_f64();
        raw.mul_f64(factor)
    }

    /// Records a success: the next failure starts from the base again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_with_bounded_jitter() {
        let mut b = Backoff::new(
            Duration::from_millis(100),
            Duration::from_secs(2),
            SplitMix64::new(7),
        );
        let expected = [100u64, 200, 400, 800, 1600, 2000, 2000];
        for raw in expected {
            let d = b.next_delay().as_secs_f64() * 1000.0;
            assert!(
                d >= raw as f64 * 0.8 && d < raw as f64 * 1.2,
                "{d} not within 20% of {raw}"
            );
        }
        b.reset();
        assert!(b.next_delay() < Duration::from_millis(120));
    }

    #[test]
    fn same_seed_same_sequence() {
        let run = |seed| {
            let mut b = Backoff::new(
                Duration::from_millis(50),
                Duration::from_secs(1),
                SplitMix64::new(seed),
            );
            (0..8).map(|_| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
