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

/// The completion shared by every record of one batch.
///
/// The outcome is set once, under `waiting`'s lock, so a future that finds it unset
/// under that lock has its waker taken by the settling; once set it is read without any
/// lock (every record of a batch reads it: one lock per record would be paid by every
/// delivery future).
#[derive(Debug)]
pub(crate) struct BatchShared {
    settled: OnceLock<Settled>,
    /// The wakers of the futures waiting while the batch is pending.
    waiting: Mutex<Vec<Waker>>,
    done: Condvar,
}

impl BatchShared {
    pub fn new() -> Arc<Self> {
        Arc::new(BatchShared {
            settled: OnceLock::new(),
            waiting: Mutex::new(Vec::new()),
            done: Condvar::new(),
        })
    }

    /// Settles the batch; false when it was settled already (the first outcome stays).
    fn settle(&self, outcome: Settled) -> bool {
        let wakers = match self.waiting.lock() {
            Ok(mut waiting) => {
                if self.settled.set(outcome).is_err() {
                    return false;
                }
                std::mem::take(&mut *waiting)
            }
            Err(_) => return false,
        };
        self.done.notify_all();
        for w in wakers {
            w.wake();
        }
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

    /// The result for record `index`, or the batch it moved to; registers `waker` if pending.
    #[inline]
    pub(crate) fn poll_record(&self, index: usize, waker: Option<&Waker>) -> Poll<Resolved> {
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
        if let Some(w) = waker
            && !waiting.iter().any(|x| x.will_wake(w))
        {
            waiting.push(w.clone());
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
            waiting = match self.done.wait(waiting) {
                Ok(g) => g,
                Err(_) => return Resolved::Done(Err(Error::ShuttingDown)),
            };
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

pub(crate) enum Resolved {
    Done(Result<BatchAck, Error>),
    Moved(Arc<BatchShared>),
}

/// Waits for a whole batch (flush): until it is settled, and a split batch until every
/// part is.
pub(crate) fn batch_done(shared: Arc<BatchShared>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    struct Settled(Arc<BatchShared>);
    impl Future for Settled {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            match self.0.poll_record(0, Some(cx.waker())) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(_) => Poll::Ready(()),
            }
        }
    }
    Box::pin(async move {
        Settled(shared.clone()).await;
        for c in shared.parts() {
            batch_done(c).await;
        }
    })
}
