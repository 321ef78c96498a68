//! The future [`Producer::send`] returns, written out by hand rather than as an
//! `async fn`: most records are appended at its first poll without waiting, and that
//! path should cost no more than the append itself.
//!
//! An `async fn` moved its record (about 150 bytes) into its state at the first poll,
//! a `memcpy` per record on the sending thread. Here the first poll appends from the
//! record where it lies; only a record that must wait (for an arena, or for its
//! topic's metadata) is moved, into the boxed future that waits.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{DeliveryFuture, Producer, ProducerRecord, SendNow};
use crate::error::Result;

/// The boxed rest of a send that must wait.
type Waiting<'a> = Pin<Box<dyn Future<Output = Result<DeliveryFuture>> + Send + 'a>>;

/// The future of [`Producer::send`]: resolves to the record's [`DeliveryFuture`] once
/// the record is queued. Like an `async fn`'s future it does nothing until polled, and
/// panics if polled again after it resolved (or after a poll that panicked, as an
/// interceptor or partitioner may). It is `Send` and `Unpin`, not `Sync`.
#[must_use = "the record is queued only when this future is polled"]
pub struct Sending<'a> {
    producer: &'a Producer,
    stage: Stage<'a>,
    /// The record has been offered to the producer once: a first poll that panicked
    /// (in an interceptor or partitioner) must not offer it again.
    offered: bool,
}

impl std::fmt::Debug for Sending<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match self.stage {
            Stage::Start(_) if self.offered => "interrupted",
            Stage::Start(_) => "not polled yet",
            Stage::Waiting(_) => "waiting for buffer memory or metadata",
            Stage::Done => "resolved",
        };
        f.debug_struct("Sending")
            .field("stage", &stage)
            .finish_non_exhaustive()
    }
}

enum Stage<'a> {
    /// Not polled yet.
    Start(ProducerRecord<'a>),
    /// Waiting for an arena or for metadata.
    Waiting(Waiting<'a>),
    /// Resolved.
    Done,
}

impl<'a> Sending<'a> {
    pub(super) fn new(producer: &'a Producer, record: ProducerRecord<'a>) -> Self {
        Sending {
            producer,
            stage: Stage::Start(record),
            offered: false,
        }
    }
}

impl Future for Sending<'_> {
    type Output = Result<DeliveryFuture>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Stage::Waiting(waiting) = &mut this.stage {
            let polled = waiting.as_mut().poll(cx);
            return finish(&mut this.stage, polled);
        }
        let Stage::Start(record) = &this.stage else {
            panic!("`Sending` polled after it resolved");
        };
        assert!(!this.offered, "`Sending` polled after a poll that panicked");
        this.offered = true;
        let producer = this.producer;
        match producer.send_now(record) {
            Ok(SendNow::Done(delivery)) => {
                this.stage = Stage::Done;
                Poll::Ready(Ok(delivery))
            }
            Err(e) => {
                this.stage = Stage::Done;
                Poll::Ready(Err(e))
            }
            Ok(SendNow::Wait(state, in_transaction)) => {
                let Stage::Start(record) = std::mem::replace(&mut this.stage, Stage::Done) else {
                    unreachable!("the stage was Start just above");
                };
                let mut waiting: Waiting<'_> =
                    Box::pin(producer.send_waiting(record, state, in_transaction));
                let polled = waiting.as_mut().poll(cx);
                this.stage = Stage::Waiting(waiting);
                finish(&mut this.stage, polled)
            }
        }
    }
}

/// Passes a poll of the waiting part on, marking the send resolved when it is.
fn finish(
    stage: &mut Stage<'_>,
    polled: Poll<Result<DeliveryFuture>>,
) -> Poll<Result<DeliveryFuture>> {
    if polled.is_ready() {
        *stage = Stage::Done;
    }
    polled
}

#[cfg(test)]
mod tests {
    use super::Sending;

    /// What a user may rely on, as with the `async fn` it replaced.
    #[test]
    fn sending_is_send_and_unpin() {
        fn send_and_unpin<T: Send + Unpin>() {}
        send_and_unpin::<Sending<'static>>();
    }
}
