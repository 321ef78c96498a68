//! The producer's tally of final delivery failures, sans-IO: every batch that fails for
//! good (the broker refused it, retries or `delivery.timeout.ms` ran out, a
//! non-retriable connection error, the producer dropped or the runtime gone) is counted
//! here once, with the first error since the tally was last taken, so that
//! `Producer::flush` can report failures instead of hiding them behind `Ok`.
//!
//! Each failure is also logged once per batch at `warn` (topic, partition, record count,
//! error). A storm (a broker gone with thousands of partitions) is rate-limited: at most
//! [`LOG_BURST`] lines per [`LOG_WINDOW`], then one line saying how many were not logged.
//! Time is passed in; this module never reads the clock.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::Error;

/// Most failure lines logged per window.
pub(crate) const LOG_BURST: u32 = 10;
/// The rate-limit window.
pub(crate) const LOG_WINDOW: Duration = Duration::from_secs(1);

/// What [`DeliveryFailures::take`] hands over.
#[derive(Debug, Clone)]
pub(crate) struct FailureReport {
    pub records: u64,
    pub batches: u64,
    pub first: Error,
}

#[derive(Debug, Default)]
struct Tally {
    records: u64,
    batches: u64,
    first: Option<Error>,
    window_start: Option<Instant>,
    logged_in_window: u32,
    suppressed: u64,
    /// Batches failed since the producer was made (never reset), and the last error:
    /// what a transaction compares against the count at its begin.
    lifetime_batches: u64,
    last: Option<Error>,
    /// The first failure whose code ends a transactional producer (fenced, not
    /// authorised): read by a commit, which must not call that abortable.
    ending: Option<Error>,
}

/// One producer's failure tally, shared by its partitions.
#[derive(Debug, Default)]
pub(crate) struct DeliveryFailures {
    tally: Mutex<Tally>,
}

impl DeliveryFailures {
    /// Counts a batch of `records` records of `topic`-`partition` that failed with
    /// `error`, and logs it (rate-limited).
    pub fn record(&self, topic: &str, partition: i32, records: i32, error: &Error, now: Instant) {
        let Ok(mut t) = self.tally.lock() else {
            return;
        };
        t.records += u64::try_from(records).unwrap_or(0);
        t.batches += 1;
        t.lifetime_batches += 1;
        t.last = Some(error.clone());
        if t.ending.is_none()
            && error
                .code()
                .is_some_and(crate::engine::txn::ends_the_producer)
        {
            t.ending = Some(error.clone());
        }
        if t.first.is_none() {
            t.first = Some(error.clone());
        }
        if t.window_start.is_none_or(|s| now >= s + LOG_WINDOW) {
            if t.suppressed > 0 {
                tracing::warn!(
                    batches = t.suppressed,
                    "{} more failed batch(es) were not logged one by one",
                    t.suppressed
                );
            }
            t.window_start = Some(now);
            t.logged_in_window = 0;
            t.suppressed = 0;
        }
        if t.logged_in_window < LOG_BURST {
            t.logged_in_window += 1;
            tracing::warn!(topic, partition, records, %error, "produce batch failed");
        } else {
            t.suppressed += 1;
        }
    }

    /// The failures since the last call (or since the producer started), if any, and
    /// starts counting afresh.
    /// Batches failed since the producer was made, and the last one's error.
    pub fn lifetime(&self) -> (u64, Option<Error>) {
        self.tally
            .lock()
            .map_or((0, None), |t| (t.lifetime_batches, t.last.clone()))
    }

    /// The first failure (since the producer was made) whose code ends a transactional
    /// producer, if any.
    pub fn ending(&self) -> Option<Error> {
        self.tally.lock().ok().and_then(|t| t.ending.clone())
    }

    pub fn take(&self) -> Option<FailureReport> {
        let mut t = self.tally.lock().ok()?;
        let first = t.first.take()?;
        let report = FailureReport {
            records: t.records,
            batches: t.batches,
            first,
        };
        t.records = 0;
        t.batches = 0;
        Some(report)
    }

    /// Failed batches not logged one by one in the current window.
    #[cfg(test)]
    pub fn suppressed(&self) -> u64 {
        self.tally.lock().map_or(0, |t| t.suppressed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::KafkaCode;

    #[test]
    fn take_counts_records_and_keeps_the_first_error() {
        let f = DeliveryFailures::default();
        assert!(f.take().is_none());
        let now = Instant::now();
        f.record("t", 0, 3, &Error::Timeout("first".into()), now);
        f.record("t", 1, 2, &Error::ShuttingDown, now);
        let report = f.take().expect("failures were recorded");
        assert_eq!((report.records, report.batches), (5, 2));
        assert!(matches!(report.first, Error::Timeout(ref m) if m == "first"));
        assert!(f.take().is_none(), "taken: counting starts afresh");
    }

    #[test]
    fn the_first_failure_that_ends_a_producer_is_kept() {
        let f = DeliveryFailures::default();
        let now = Instant::now();
        let rejected = |code| Error::Rejected {
            api: crate::protocol::ApiKey::Produce,
            resource: "t-0".into(),
            code,
            message: None,
        };
        f.record("t", 0, 1, &rejected(KafkaCode::NOT_LEADER_OR_FOLLOWER), now);
        assert!(f.ending().is_none(), "a leader change ends nothing");
        f.record("t", 0, 1, &rejected(KafkaCode::INVALID_PRODUCER_EPOCH), now);
        f.record("t", 1, 1, &Error::ShuttingDown, now);
        f.take();
        let ending = f.ending().expect("the fenced batch is remembered");
        assert_eq!(ending.code(), Some(KafkaCode::INVALID_PRODUCER_EPOCH));
    }

    #[test]
    fn logging_is_rate_limited_per_window() {
        let f = DeliveryFailures::default();
        let now = Instant::now();
        for _ in 0..LOG_BURST + 5 {
            f.record("t", 0, 1, &Error::ShuttingDown, now);
        }
        assert_eq!(f.suppressed(), 5);
        f.record("t", 0, 1, &Error::ShuttingDown, now + LOG_WINDOW);
        assert_eq!(f.suppressed(), 0, "a new window logs again");
        assert_eq!(f.take().map(|r| r.batches), Some(u64::from(LOG_BURST) + 6));
    }
}
