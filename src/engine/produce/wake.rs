//! How a partition's appending thread knows whether to wake the sink that drains it.
//!
//! A sink drains every partition it has at each wake-up, so a wake-up costs a drain of
//! them all. The appending thread wakes the sink when a batch is opened (so that the sink
//! learns the batch's linger) or sealed full (so that it goes). A batch just opened
//! cannot go before its linger ends (`ProduceSettings::linger_ends`), and while records flow the sink is mostly asleep
//! with a timer set for an earlier linger of one of its partitions, or, with no batch
//! open, for when one opened then would be due (`Sink::beat`): it will drain, and see the
//! new batch, before that batch is due anyway. [`NextDrain`] is the sink's
//! timer, published for the appending threads, so that they skip those wake-ups.
//!
//! Why a stale reading is harmless: the sink marks itself draining
//! ([`NextDrain::draining`]) before it looks at any partition, and publishes its next
//! timer ([`NextDrain::sleeping_until`]) only after the drain. A batch is opened under
//! its partition's lock, and the appending thread reads the sink's timer after that.
//! - If the drain looked at the partition after the batch was opened, the drain saw the
//!   batch and set its timer by it, whatever the appending thread read.
//! - Otherwise the drain's lock of the partition came first, so the appending thread
//!   reads "draining" (and wakes the sink) or the timer published after that drain. That
//!   timer may not count the batch, but if it is no later than the batch's linger the
//!   sink drains by then and sees it; if it is later, or there is none, the thread wakes
//!   the sink.
//!
//! What this rests on:
//! - Every drain looks at every partition of the sink, and the sink's timer is no later
//!   than the linger's end of any open batch it saw (`Sink::drain`). A drain that looked only
//!   at partitions known to have changed would break the argument above.
//! - A partition handed to another sink still names the old sink until the new one
//!   adopts it, and the old sink's timer no longer counts it: a wake-up skipped then
//!   is made up by the hand-over, which wakes the new sink, and by the adoption, which
//!   wakes it again when the partition has anything pending.
//! - With no linger a batch is due when opened, and the thread wakes the sink whatever
//!   its timer (`PartitionState::open_batch`): a timer no later than "now" may not have
//!   fired. Only a sink waiting for an answer (below) is not woken.
//!
//! A sink with every request slot it may use taken sends nothing until an answer frees
//! one, and each answer brings it back to drain every partition: it publishes that
//! instead of its timer ([`NextDrain::sleeping_for_an_answer`]), and the appending
//! threads wake it neither for a batch opened (with a linger or without) nor for one
//! sealed full. Each request made is answered or fails (the request timeout once on the
//! wire, the connect timeout before, or its connection's end), so the drain comes, in
//! about a request timeout at most, and a batch's delivery timeout is at least its
//! linger and the request timeout: a batch opened meanwhile is seen about when it could
//! first expire, at the latest. Not with acks=0: a request is done once written, and a
//! write to a broker that stopped reading has no deadline. The argument above holds for
//! this state as for a timer: it is published after a drain, and the next drain marks
//! itself draining first. What the wait defers besides sending: handing a partition
//! whose leader moved to its new sink, until that answer (no wake-up was promised for
//! it before either: nothing wakes a sink when metadata changes). Under load (three
//! brokers, 256 partitions, answers taking 200 ms) sinks wait for an answer most of the
//! time: woken for each batch sealed full, a sink drained some twenty times a request
//! to find every slot still taken.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Wakes the sink that drains a partition (its driver's notifier).
pub(crate) trait Wake: Send + Sync {
    /// Something changed: drain again.
    fn wake(&self);

    /// Whether the sink will drain by `deadline` without a wake-up (it sleeps with a
    /// timer no later than that). `false` when unknown.
    fn drains_by(&self, deadline: Instant) -> bool {
        let _ = deadline;
        false
    }

    /// Whether the sink sleeps with every request slot taken: it sends nothing before
    /// its next answer, which brings it back to drain. `false` when unknown.
    fn waits_for_an_answer(&self) -> bool {
        false
    }
}

/// The published value while the sink drains (or has not slept yet).
const AWAKE: u64 = 0;
/// The published value while the sink sleeps with no timer.
const NO_TIMER: u64 = u64::MAX;
/// The published value while the sink sleeps with every request slot taken.
const FOR_AN_ANSWER: u64 = u64::MAX - 1;

/// When a sink next drains unwoken, as nanoseconds after `base` (plus one, so that no
/// instant encodes as [`AWAKE`]).
#[derive(Debug)]
pub(crate) struct NextDrain {
    base: Instant,
    at: AtomicU64,
}

impl NextDrain {
    /// A sink not asleep yet; instants are counted from `base` (those before it are
    /// never relied on).
    pub fn new(base: Instant) -> Self {
        NextDrain {
            base,
            at: AtomicU64::new(AWAKE),
        }
    }

    /// The sink is about to drain: until it sleeps again nothing is promised. Called
    /// before the drain looks at any partition.
    pub fn draining(&self) {
        self.at.store(AWAKE, Ordering::Relaxed);
    }

    /// The sink sleeps until `timer` (or until woken, with none), after its drain.
    pub fn sleeping_until(&self, timer: Option<Instant>) {
        let at = timer.map_or(NO_TIMER, |t| self.encode(t));
        self.at.store(at, Ordering::Relaxed);
    }

    /// The sink sleeps with every request slot of its connection taken, after its drain:
    /// it sends nothing before an answer, and drains at each.
    pub fn sleeping_for_an_answer(&self) {
        self.at.store(FOR_AN_ANSWER, Ordering::Relaxed);
    }

    /// Whether the sink will drain by `deadline` unwoken (by its timer).
    ///
    /// Read after the partition's lock was taken (see the module's comment for why
    /// `Relaxed` is enough: the lock orders this read after a drain's `draining`).
    pub fn drains_by(&self, deadline: Instant) -> bool {
        let at = self.at.load(Ordering::Relaxed);
        at != AWAKE && at < FOR_AN_ANSWER && at <= self.encode(deadline)
    }

    /// Whether the sink sleeps until an answer with every request slot taken. Read as
    /// [`NextDrain::drains_by`] is.
    pub fn waits_for_an_answer(&self) -> bool {
        self.at.load(Ordering::Relaxed) == FOR_AN_ANSWER
    }

    /// `t` as nanoseconds after `base`, plus one; [`AWAKE`] for an instant before `base`
    /// (never relied on), and short of [`FOR_AN_ANSWER`] for one too far away to count.
    fn encode(&self, t: Instant) -> u64 {
        t.checked_duration_since(self.base).map_or(AWAKE, |d| {
            u64::try_from(d.as_nanos())
                .unwrap_or(u64::MAX)
                .min(FOR_AN_ANSWER - 2)
                + 1
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_sink_not_asleep_yet_promises_nothing() {
        let base = Instant::now();
        let next = NextDrain::new(base);
        assert!(!next.drains_by(base + ms(1_000)));
    }

    #[test]
    fn a_sleeping_sink_drains_by_any_deadline_at_or_after_its_timer() {
        let base = Instant::now();
        let next = NextDrain::new(base);
        next.sleeping_until(Some(base + ms(5)));
        assert!(next.drains_by(base + ms(5)));
        assert!(next.drains_by(base + ms(6)));
        assert!(!next.drains_by(base + ms(4)));
        assert!(!next.drains_by(base + ms(5) - Duration::from_nanos(1)));
    }

    #[test]
    fn a_draining_sink_or_one_without_a_timer_must_be_woken() {
        let base = Instant::now();
        let next = NextDrain::new(base);
        next.sleeping_until(Some(base + ms(5)));
        next.draining();
        assert!(!next.drains_by(base + ms(50)));
        next.sleeping_until(None);
        assert!(!next.drains_by(base + ms(50_000)));
    }

    #[test]
    fn a_sink_waiting_for_an_answer_promises_no_timer_and_draining_ends_the_wait() {
        let base = Instant::now();
        let next = NextDrain::new(base);
        next.sleeping_for_an_answer();
        assert!(next.waits_for_an_answer());
        assert!(!next.drains_by(base + ms(50_000)));
        next.draining();
        assert!(!next.waits_for_an_answer());
        next.sleeping_until(Some(base + ms(5)));
        assert!(!next.waits_for_an_answer());
        assert!(next.drains_by(base + ms(5)));
    }

    #[test]
    fn the_farthest_timer_is_still_a_timer() {
        let base = Instant::now();
        let next = NextDrain::new(base);
        let far = base + Duration::from_secs(1 << 40);
        next.sleeping_until(Some(far));
        assert!(!next.waits_for_an_answer());
        assert!(next.drains_by(far));
    }

    #[test]
    fn instants_before_the_base_are_never_relied_on() {
        let base = Instant::now() + ms(10);
        let next = NextDrain::new(base);
        // A timer before the base reads as "awake": the sink is woken.
        next.sleeping_until(Some(base - ms(5)));
        assert!(!next.drains_by(base + ms(5)));
        // A deadline before the base is earlier than any timer.
        next.sleeping_until(Some(base));
        assert!(!next.drains_by(base - ms(1)));
        assert!(next.drains_by(base));
    }
}
