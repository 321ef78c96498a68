//! The completion all records of one batch share: pending (with the wakers of the
//! futures waiting on it), done (the broker's answer or the final error), or split
//! (MESSAGE_TOO_LARGE: record `i` moved to batch `i`). Settled once; the first outcome
//! stays. It is the handoff from a sink to the users' delivery futures, on any thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::error::Error;

/// The broker's answer for a whole batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchAck {
    pub base_offset: i64,
    pub log_append_time: i64,
}

/// How a batch ended.
#[derive(Debug)]
enum Settled {
    Done(Result<BatchAck, Error>),
    /// The batch was split (MESSAGE_TOO_LARGE); record `i` now lives in batch `i`.
    Split(Vec<Arc<BatchShared>>),
}

/// Where one future's waker sits in its batch's list of waiting wakers, once the
/// future has waited: each future keeps to its own entry and replaces the waker there
/// when polled again with another.
///
/// Not a search of the list with `Waker::will_wake` against the waker a poll is given:
/// a stored clone can compare unequal to the very waker it was cloned from (its vtable
/// a copy elsewhere in the binary, as with tokio's `block_on` waker in a release build),
/// and then every poll of a pending future added a waker more. A harness polling its
/// oldest report at every turn left about ten per batch, each an `eventfd` write when
/// the batch settled; a future polled in a loop would have grown the list without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitSlot(u32);

impl WaitSlot {
    /// Not waiting yet (or waiting on another batch: a split moves the record). A
    /// future made afresh for each wait (as `Producer::flush` makes for each batch it
    /// waits on) takes a new entry each time.
    pub const NONE: WaitSlot = WaitSlot(u32::MAX);
}

/// The completion shared by every record of one batch.
///
/// The outcome is set once, under `waiting`'s lock, so a future that finds it unset
/// under that lock has its waker taken by the settling; once set it is read without any
/// lock (every record of a batch reads it: one lock per record would be paid by every
/// delivery future).
#[derive(Debug)]
pub(crate) struct BatchShared {
    settled: OnceLock<Settled>,
    waiting: Mutex<Waiting>,
    /// Where threads blocked in [`BatchShared::wait_record`] sleep.
    done: Condvar,
}

/// Who waits while the batch is pending.
#[derive(Debug, Default)]
struct Waiting {
    /// The wakers of the futures, one entry per future (its [`WaitSlot`]).
    wakers: Vec<Waker>,
    /// Threads asleep on `done`: settling notifies the condition variable (a system
    /// call) only when there are some.
    blocked: usize,
}

impl BatchShared {
    pub fn new() -> Arc<Self> {
        Arc::new(BatchShared {
            settled: OnceLock::new(),
            waiting: Mutex::new(Waiting::default()),
            done: Condvar::new(),
        })
    }

    /// Settles the batch; false when it was settled already (the first outcome stays).
    fn settle(&self, outcome: Settled) -> bool {
        let (wakers, blocked) = match self.waiting.lock() {
            Ok(mut waiting) => {
                if self.settled.set(outcome).is_err() {
                    return false;
                }
                (std::mem::take(&mut waiting.wakers), waiting.blocked)
            }
            Err(_) => return false,
        };
        if blocked > 0 {
            self.done.notify_all();
        }
        wake_each_task_once(wakers);
        true
    }

    /// Whether the batch has its outcome (done or split).
    pub fn is_settled(&self) -> bool {
        self.settled.get().is_some()
    }

    /// Completes every record of the batch; false when it was settled already.
    pub fn complete(&self, result: Result<BatchAck, Error>) -> bool {
        self.settle(Settled::Done(result))
    }

    /// Hands each record over to its own new batch.
    pub fn split_into(&self, parts: Vec<Arc<BatchShared>>) {
        let _ = self.settle(Settled::Split(parts));
    }

    /// Record `index`'s part of the outcome, once there is one.
    fn resolved(&self, index: usize) -> Option<Resolved> {
        Some(match self.settled.get()? {
            Settled::Done(r) => Resolved::Done(r.clone()),
            Settled::Split(parts) => match parts.get(index) {
                Some(p) => Resolved::Moved(p.clone()),
                None => Resolved::Done(Err(Error::ShuttingDown)),
            },
        })
    }

    /// The result for record `index`, or the batch it moved to; if pending, registers
    /// the waker in the future's own entry (`slot`: [`WaitSlot::NONE`] the first time).
    #[inline]
    pub(crate) fn poll_record(
        &self,
        index: usize,
        waiter: Option<(&Waker, &mut WaitSlot)>,
    ) -> Poll<Resolved> {
        if let Some(r) = self.resolved(index) {
            return Poll::Ready(r);
        }
        let Ok(mut waiting) = self.waiting.lock() else {
            return Poll::Ready(Resolved::Done(Err(Error::ShuttingDown)));
        };
        // Settled meanwhile: its wakers were taken already.
        if let Some(r) = self.resolved(index) {
            return Poll::Ready(r);
        }
        if let Some((waker, slot)) = waiter {
            register(&mut waiting.wakers, waker, slot);
        }
        Poll::Pending
    }

    #[inline]
    pub(crate) fn wait_record(&self, index: usize) -> Resolved {
        if let Some(r) = self.resolved(index) {
            return r;
        }
        let Ok(mut waiting) = self.waiting.lock() else {
            return Resolved::Done(Err(Error::ShuttingDown));
        };
        loop {
            if let Some(r) = self.resolved(index) {
                return r;
            }
            waiting.blocked += 1;
            waiting = match self.done.wait(waiting) {
                Ok(g) => g,
                Err(_) => return Resolved::Done(Err(Error::ShuttingDown)),
            };
            waiting.blocked -= 1;
        }
    }

    /// The batches a split batch became (none when it was not split).
    fn parts(&self) -> Vec<Arc<BatchShared>> {
        match self.settled.get() {
            Some(Settled::Split(p)) => p.clone(),
            _ => Vec::new(),
        }
    }
}

/// Puts `waker` in the entry `slot` names, or in a new one.
fn register(waiting: &mut Vec<Waker>, waker: &Waker, slot: &mut WaitSlot) {
    let entry = (*slot != WaitSlot::NONE)
        .then(|| waiting.get_mut(slot.0 as usize))
        .flatten();
    match entry {
        // `clone_from` keeps the stored waker when it is known to wake the same task.
        Some(old) => old.clone_from(waker),
        None => {
            // A batch holds at most i32::MAX records, so the index fits; were it ever
            // not to, the slot stays NONE and the future registers afresh at each poll.
            if let Ok(index) = u32::try_from(waiting.len())
                && index != WaitSlot::NONE.0
            {
                *slot = WaitSlot(index);
            }
            waiting.push(waker.clone());
        }
    }
}

/// Wakes every waker, but one equal to the waker woken just before it only once: the
/// futures of one task (records of one batch awaited together) register one after
/// another, and their stored clones compare equal to each other.
fn wake_each_task_once(wakers: Vec<Waker>) {
    let mut last: Option<Waker> = None;
    for w in wakers {
        if last.as_ref().is_some_and(|l| l.will_wake(&w)) {
            continue;
        }
        w.wake_by_ref();
        last = Some(w);
    }
}

pub(crate) enum Resolved {
    Done(Result<BatchAck, Error>),
    Moved(Arc<BatchShared>),
}

/// Waits for a whole batch (flush): until it is settled, and a split batch until every
/// part is.
pub(crate) fn batch_done(shared: Arc<BatchShared>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    struct Settled(Arc<BatchShared>, WaitSlot);
    impl Future for Settled {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let Settled(shared, slot) = &mut *self;
            match shared.poll_record(0, Some((cx.waker(), slot))) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(_) => Poll::Ready(()),
            }
        }
    }
    Box::pin(async move {
        Settled(shared.clone(), WaitSlot::NONE).await;
        for c in shared.parts() {
            batch_done(c).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    /// A task that counts its wake-ups.
    #[derive(Default)]
    struct Task(AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn woken(task: &Arc<Task>) -> usize {
        task.0.load(Ordering::SeqCst)
    }

    fn ack() -> Result<BatchAck, Error> {
        Ok(BatchAck {
            base_offset: 7,
            log_append_time: -1,
        })
    }

    #[test]
    fn a_thread_blocked_on_a_record_is_woken_when_its_batch_settles() {
        let shared = BatchShared::new();
        let blocked = {
            let shared = shared.clone();
            std::thread::spawn(move || match shared.wait_record(3) {
                Resolved::Done(r) => r.map(|a| a.base_offset),
                Resolved::Moved(_) => panic!("not split"),
            })
        };
        // Settled only once the thread sleeps on the batch (or it finds it settled).
        while shared.waiting.lock().unwrap().blocked == 0 && !blocked.is_finished() {
            std::thread::yield_now();
        }
        assert!(shared.complete(ack()));
        assert_eq!(blocked.join().unwrap().unwrap(), 7);
        assert_eq!(shared.waiting.lock().unwrap().blocked, 0);
    }

    #[test]
    fn a_future_polled_again_keeps_one_entry_and_only_its_last_waker_is_woken() {
        let shared = BatchShared::new();
        let tasks: Vec<Arc<Task>> = (0..1000).map(|_| Arc::default()).collect();
        let mut slot = WaitSlot::NONE;
        for task in &tasks {
            let waker = Waker::from(task.clone());
            assert!(
                shared
                    .poll_record(0, Some((&waker, &mut slot)))
                    .is_pending()
            );
        }
        assert_eq!(shared.waiting.lock().unwrap().wakers.len(), 1);
        assert!(shared.complete(ack()));
        let (last, earlier) = tasks.split_last().unwrap();
        assert_eq!(woken(last), 1);
        assert!(earlier.iter().all(|t| woken(t) == 0));
    }

    #[test]
    fn every_waiting_future_of_a_batch_is_woken_and_one_task_once() {
        let shared = BatchShared::new();
        let (a, b) = (Arc::<Task>::default(), Arc::<Task>::default());
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        let mut slots = [WaitSlot::NONE; 4];
        // Records 0 and 1 awaited by task a, 2 by b, then 3 by a again.
        for (i, w) in [&wa, &wa, &wb, &wa].into_iter().enumerate() {
            assert!(shared.poll_record(i, Some((w, &mut slots[i]))).is_pending());
        }
        assert_eq!(shared.waiting.lock().unwrap().wakers.len(), 4);
        assert!(shared.complete(ack()));
        // a's two entries in a row wake it once; its later one again.
        assert_eq!((woken(&a), woken(&b)), (2, 1));
        let mut slot = WaitSlot::NONE;
        match shared.poll_record(3, Some((&wa, &mut slot))) {
            Poll::Ready(Resolved::Done(Ok(ack))) => assert_eq!(ack.base_offset, 7),
            _ => panic!("a settled batch is ready"),
        }
        assert_eq!(slot, WaitSlot::NONE);
    }
}
