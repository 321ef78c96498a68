//! Whether a sink's broker, not the way to it, is what holds the sink's requests up, and
//! so whether a batch due by its linger alone should wait for the broker's next answer
//! rather than go in a request of its own.
//!
//! A broker reads a connection's next request only once it has answered the one before
//! (Kafka mutes the connection meanwhile, acks=all's wait for the replicas included). So
//! with one request being served and one waiting behind it (ready for the moment the
//! first is answered), a request made now would only wait in the socket, carrying the
//! batches sealed now, where made at the next answer it carries everything appended until
//! then. Fewer, larger batches are what a busy broker handles fastest: 256 partitions on
//! three nodes sharing one core took 1,000,000 keyed records in 2.3–3.0 s with two
//! requests in flight against 4.1–4.4 s with five, at 250 records a batch against 130.
//!
//! The broker counts as behind while two or more requests are out and the oldest has been
//! out longer than the quickest round trip of the recent answers: where the round trip is
//! the longer (a distant broker answering quickly), the waiting request cannot cover it
//! and nothing waits. A batch waits only until the requests made before it became due are
//! answered (as long as a request made then would have waited), so a quiet partition
//! among busy ones is not held back while full batches keep the broker behind. Sans-IO:
//! time is passed in.

use std::time::{Duration, Instant};

/// Answers per window of round trips: the quickest of this window and the one before
/// counts, so a path that became slower (another route, a reconnection) is seen within
/// two windows.
const WINDOW: u32 = 64;

/// One sink's view of its broker's pace.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// The quickest round trip of the answers of this window so far.
    quickest_now: Option<Duration>,
    /// The quickest of the window before.
    quickest_before: Option<Duration>,
    /// Answers in this window.
    answers: u32,
}

impl Pace {
    /// A request made at `made` was answered at `now`.
    pub fn answered(&mut self, made: Instant, now: Instant) {
        let took = now.saturating_duration_since(made);
        self.quickest_now = Some(self.quickest_now.map_or(took, |q| q.min(took)));
        self.answers += 1;
        if self.answers >= WINDOW {
            self.quickest_before = self.quickest_now.take();
            self.answers = 0;
        }
    }

    /// A request failed without an answer (its connection broke, or it could not be
    /// sent): a next connection may take another path, so round trips are learnt afresh.
    pub fn failed(&mut self) {
        *self = Pace::default();
    }

    /// The quickest round trip of the recent answers.
    fn quickest(&self) -> Option<Duration> {
        match (self.quickest_now, self.quickest_before) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the broker is behind at `now`, with `in_flight` requests out, the oldest
    /// made at `oldest`.
    pub fn broker_is_behind(
        &self,
        now: Instant,
        in_flight: usize,
        oldest: Option<Instant>,
    ) -> bool {
        match (self.quickest(), oldest) {
            (Some(quickest), Some(oldest)) => {
                in_flight >= 2 && now.saturating_duration_since(oldest) > quickest
            }
            _ => false,
        }
    }

    /// Whether a batch due at `due` may still wait, the oldest request out made at
    /// `oldest`: while a request made no later than it became due is out. A request
    /// made then would have waited for those before it to be answered; the batch waits
    /// no longer, however many full batches go meanwhile.
    pub fn may_wait(due: Instant, oldest: Option<Instant>) -> bool {
        oldest.is_some_and(|made| made <= due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn behind_only_with_two_out_and_the_oldest_out_longer_than_the_quickest_round_trip() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        assert!(
            !pace.broker_is_behind(t0 + MS * 50, 3, Some(t0)),
            "no round trip known yet"
        );
        pace.answered(t0, t0 + MS * 2);
        pace.answered(t0, t0 + MS * 9);
        let now = t0 + MS * 20;
        assert!(pace.broker_is_behind(now, 2, Some(now - MS * 3)));
        assert!(
            !pace.broker_is_behind(now, 1, Some(now - MS * 3)),
            "one out"
        );
        assert!(
            !pace.broker_is_behind(now, 2, Some(now - MS)),
            "out less than 2 ms"
        );
        assert!(!pace.broker_is_behind(now, 2, None));
    }

    #[test]
    fn a_slower_path_is_learnt_within_two_windows_and_a_failure_forgets_the_old_one() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        pace.answered(t0, t0 + MS);
        for _ in 0..2 * WINDOW {
            pace.answered(t0, t0 + MS * 10);
        }
        assert_eq!(pace.quickest(), Some(MS * 10));
        pace.answered(t0, t0 + MS);
        pace.failed();
        assert_eq!(pace.quickest(), None);
        assert!(!pace.broker_is_behind(t0 + MS * 100, 3, Some(t0)));
    }

    #[test]
    fn a_batch_waits_only_while_a_request_made_before_it_was_due_is_out() {
        let t0 = Instant::now();
        assert!(Pace::may_wait(t0 + MS, Some(t0)));
        assert!(Pace::may_wait(t0, Some(t0)), "made as it became due");
        assert!(
            !Pace::may_wait(t0, Some(t0 + MS)),
            "every request out made after"
        );
        assert!(!Pace::may_wait(t0, None), "none out");
    }
}
