//! [`QueuedRecords`]: how many records the producer holds that are not settled yet
//! (sent to `send` and neither acknowledged nor failed for good), and the limit on them
//! (`queue.buffering.max.messages`, librdkafka's name; franz-go's `MaxBufferedRecords`
//! is the same idea). None by default, as in the Java client.
//!
//! `buffer.memory` bounds the bytes held; this bounds the records. With small records
//! a count binds first: 100,000 records of 100 B hold about 11 MB where the byte budget
//! would let the sending thread run 32 MiB ahead of the broker. A send past the limit
//! waits (or, from `try_send`, fails) until records settle.
//!
//! Counting: a record is counted when it is appended to a batch ([`QueuedRecords::try_take`],
//! one atomic add) and given back with its batch when the batch settles for good
//! ([`QueuedRecords::give_back`]: acknowledged, or failed; a batch split in parts gives
//! its records back through the parts). With no limit nothing is counted.
//!
//! Waiting: a sender refused registers its waker, then looks again; a settling gives
//! its records back, then looks for waiters. Both use sequentially consistent
//! operations, so either the sender sees the records given back or the settling sees
//! the waiter: a wake-up is never lost. Everyone waiting is woken when the count falls
//! below the limit; those who find it full again wait again.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

/// The producer's count of unsettled records and its limit (0: none).
#[derive(Debug, Default)]
pub(crate) struct QueuedRecords {
    limit: usize,
    queued: AtomicUsize,
    /// Someone waits for room (its waker is in `wakers`).
    waiting: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl QueuedRecords {
    /// A count limited to `limit` records (0: no limit, and no counting).
    pub fn new(limit: usize) -> Self {
        QueuedRecords {
            limit,
            ..QueuedRecords::default()
        }
    }

    /// The limit (0: none).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Records counted now (0 without a limit).
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Counts one record, unless the limit is reached.
    #[inline]
    pub fn try_take(&self) -> bool {
        if self.limit == 0 {
            return true;
        }
        if self.queued.fetch_add(1, Ordering::SeqCst) < self.limit {
            return true;
        }
        // Over by this one: undone (and anyone who waited meanwhile looks again).
        self.give_back(1);
        false
    }

    /// Gives back `records` counted by [`QueuedRecords::try_take`], waking whoever
    /// waits for room once there is some.
    pub fn give_back(&self, records: usize) {
        if self.limit == 0 || records == 0 {
            return;
        }
        let before = self.queued.fetch_sub(records, Ordering::SeqCst);
        debug_assert!(before >= records, "more records given back than counted");
        if before - records < self.limit && self.waiting.load(Ordering::SeqCst) {
            self.wake_waiters();
        }
    }

    fn wake_waiters(&self) {
        let wakers = {
            let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
            self.waiting.store(false, Ordering::SeqCst);
            std::mem::take(&mut *wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Whether a record could be counted now.
    fn has_room(&self) -> bool {
        self.limit == 0 || self.queued.load(Ordering::SeqCst) < self.limit
    }

    /// Resolves once a record could be counted (it does not count one: the append
    /// that follows does, and may find the limit reached again by another sender).
    pub fn room(&self) -> Room<'_> {
        Room { records: self }
    }
}

/// The future of [`QueuedRecords::room`].
#[derive(Debug)]
pub(crate) struct Room<'a> {
    records: &'a QueuedRecords,
}

impl Future for Room<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let records = self.records;
        if records.has_room() {
            return Poll::Ready(());
        }
        {
            let mut wakers = records.wakers.lock().unwrap_or_else(|p| p.into_inner());
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            records.waiting.store(true, Ordering::SeqCst);
        }
        // Looked at again after the waiter is visible: records given back before that
        // are seen here, those given back after it find the waiter.
        if records.has_room() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::QueuedRecords;
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_room(records: &QueuedRecords, waker: &Waker) -> Poll<()> {
        let mut room = std::pin::pin!(records.room());
        room.as_mut().poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn counts_up_to_the_limit_and_refuses_past_it() {
        let q = QueuedRecords::new(3);
        assert!(q.try_take() && q.try_take() && q.try_take());
        assert!(!q.try_take(), "the fourth record is refused");
        assert_eq!(q.queued(), 3, "a refusal leaves the count as it was");
        q.give_back(2);
        assert_eq!(q.queued(), 1);
        assert!(q.try_take());
    }

    #[test]
    fn without_a_limit_nothing_is_counted_or_refused() {
        let q = QueuedRecords::new(0);
        for _ in 0..1000 {
            assert!(q.try_take());
        }
        assert_eq!(q.queued(), 0);
        q.give_back(10);
        assert_eq!(q.queued(), 0);
    }

    #[test]
    fn a_waiter_is_woken_when_records_settle() {
        let q = QueuedRecords::new(2);
        assert!(q.try_take() && q.try_take());
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        assert!(poll_room(&q, &waker).is_pending());
        assert!(
            poll_room(&q, &waker).is_pending(),
            "polled again: one waker kept"
        );
        q.give_back(1);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "woken once");
        assert!(poll_room(&q, &waker).is_ready());
        q.give_back(1);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "nobody waits any more");
    }

    #[test]
    fn room_freed_between_the_check_and_the_wait_is_not_missed() {
        // Many threads take and give back records while one waits: every time it is
        // pending, a later give-back must wake it.
        let q = Arc::new(QueuedRecords::new(2));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn: Vec<_> = (0..2)
            .map(|_| {
                let (q, stop) = (q.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if q.try_take() {
                            q.give_back(1);
                        }
                    }
                })
            })
            .collect();
        for _ in 0..2000 {
            while !q.try_take() {
                crate::client::block_on(q.room());
            }
            q.give_back(1);
        }
        stop.store(true, Ordering::Relaxed);
        for t in churn {
            t.join().unwrap();
        }
        assert_eq!(q.queued(), 0);
    }
}
