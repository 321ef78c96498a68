//! The completion all records of one batch share: pending (with the wakers of the
//! futures waiting on it), done (the broker's answer or the final error), or split
//! (MESSAGE_TOO_LARGE: record `i` moved to batch `i`). Settled once; the first outcome
//! stays. It is the handoff from a sink to the users' delivery futures, on any thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

use crate::error::Error;

/// The broker's answer for a whole batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchAck {
    pub base_offset: i64,
    pub log_append_time: i64,
}

#[derive(Debug)]
enum Outcome {
    Pending(Vec<Waker>),
    Done(Result<BatchAck, Error>),
    /// The batch was split (MESSAGE_TOO_LARGE); record `i` now lives in batch `i`.
    Split(Vec<Arc<BatchShared>>),
}

/// The completion shared by every record of one batch.
#[derive(Debug)]
pub(crate) struct BatchShared {
    outcome: Mutex<Outcome>,
    done: Condvar,
}

impl BatchShared {
    pub fn new() -> Arc<Self> {
        Arc::new(BatchShared {
            outcome: Mutex::new(Outcome::Pending(Vec::new())),
            done: Condvar::new(),
        })
    }

    /// Settles the batch; false when it was settled already (the first outcome stays).
    fn settle(&self, outcome: Outcome) -> bool {
        let wakers = match self.outcome.lock() {
            Ok(mut o) => match std::mem::replace(&mut *o, outcome) {
                Outcome::Pending(w) => w,
                previous => {
                    *o = previous;
                    return false;
                }
            },
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
        self.outcome
            .lock()
            .map_or(true, |o| !matches!(*o, Outcome::Pending(_)))
    }

    /// Completes every record of the batch; false when it was settled already.
    pub fn complete(&self, result: Result<BatchAck, Error>) -> bool {
        self.settle(Outcome::Done(result))
    }

    /// Hands each record over to its own new batch.
    pub fn split_into(&self, parts: Vec<Arc<BatchShared>>) {
        let _ = self.settle(Outcome::Split(parts));
    }

    /// The result for record `index`, or the batch it moved to; registers `waker` if pending.
    #[inline]
    pub(crate) fn poll_record(&self, index: usize, waker: Option<&Waker>) -> Poll<Resolved> {
        let Ok(mut o) = self.outcome.lock() else {
            return Poll::Ready(Resolved::Done(Err(Error::ShuttingDown)));
        };
        match &mut *o {
            Outcome::Pending(wakers) => {
                if let Some(w) = waker
                    && !wakers.iter().any(|x| x.will_wake(w))
                {
                    wakers.push(w.clone());
                }
                Poll::Pending
            }
            Outcome::Done(r) => Poll::Ready(Resolved::Done(r.clone())),
            Outcome::Split(parts) => match parts.get(index) {
                Some(p) => Poll::Ready(Resolved::Moved(p.clone())),
                None => Poll::Ready(Resolved::Done(Err(Error::ShuttingDown))),
            },
        }
    }

    #[inline]
    pub(crate) fn wait_record(&self, index: usize) -> Resolved {
        let Ok(mut o) = self.outcome.lock() else {
            return Resolved::Done(Err(Error::ShuttingDown));
        };
        loop {
            match &*o {
                Outcome::Pending(_) => match self.done.wait(o) {
                    Ok(g) => o = g,
                    Err(_) => return Resolved::Done(Err(Error::ShuttingDown)),
                },
                Outcome::Done(r) => return Resolved::Done(r.clone()),
                Outcome::Split(parts) => {
                    return match parts.get(index) {
                        Some(p) => Resolved::Moved(p.clone()),
                        None => Resolved::Done(Err(Error::ShuttingDown)),
                    };
                }
            }
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
        let children = match shared.outcome.lock() {
            Ok(o) => match &*o {
                Outcome::Split(p) => p.clone(),
                _ => return,
            },
            Err(_) => return,
        };
        for c in children {
            batch_done(c).await;
        }
    })
}
