//! The futures [`Producer::send`] and [`Producer::send_tagged`] return, written out by
//! hand rather than as an `async fn`: most records are appended at the first poll
//! without waiting, and that path should cost no more than the append itself.
//!
//! An `async fn` moved its record (about 150 bytes) into its state at the first poll,
//! a `memcpy` per record on the sending thread. Here the first poll appends from the
//! record where it lies; only a record that must wait (for an arena, or for its
//! topic's metadata) is moved, into the boxed future that waits.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{DeliveryFuture, Producer, ProducerRecord, Queued, SendNow};
use crate::error::Result;

/// The boxed rest of a send that must wait.
type Waiting<'a> = Pin<Box<dyn Future<Output = Result<Queued>> + Send + 'a>>;

/// The future of [`Producer::send`]: resolves to the record's [`DeliveryFuture`] once
/// the record is queued. Like an `async fn`'s future it does nothing until polled, and
/// panics if polled again after it resolved (or after a poll that panicked, as an
/// interceptor or partitioner may). It is `Send` and `Unpin`, not `Sync`.
#[must_use = "the record is queued only when this future is polled"]
#[derive(Debug)]
pub struct Sending<'a>(SendCore<'a>);

impl<'a> Sending<'a> {
    pub(super) fn new(producer: &'a Producer, record: ProducerRecord<'a>) -> Self {
        Sending(SendCore::new(producer, record, None))
    }
}

impl Future for Sending<'_> {
    type Output = Result<DeliveryFuture>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut()
            .0
            .poll_queued(cx)
            .map(|queued| queued?.into_future())
    }
}

/// The future of [`Producer::send_tagged`]: resolves once the record is queued (its
/// outcome goes to the producer's delivery handler). Otherwise like [`Sending`].
#[must_use = "the record is queued only when this future is polled"]
#[derive(Debug)]
pub struct SendingTagged<'a>(SendCore<'a>);

impl<'a> SendingTagged<'a> {
    pub(super) fn new(producer: &'a Producer, record: ProducerRecord<'a>, tag: u64) -> Self {
        SendingTagged(SendCore::new(producer, record, Some(tag)))
    }
}

impl Future for SendingTagged<'_> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut()
            .0
            .poll_queued(cx)
            .map(|queued| queued.map(|_| ()))
    }
}

/// What both futures do: the record, until first polled; then the rest of a send that
/// must wait, if it must.
struct SendCore<'a> {
    producer: &'a Producer,
    stage: Stage<'a>,
    /// The tag of a record sent with a tag.
    tag: Option<u64>,
    /// The record has been offered to the producer once: a first poll that panicked
    /// (in an interceptor or partitioner) must not offer it again.
    offered: bool,
}

impl std::fmt::Debug for SendCore<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match self.stage {
            Stage::Start(_) if self.offered => "interrupted",
            Stage::Start(_) => "not polled yet",
            Stage::Waiting(_) => "waiting for buffer memory or metadata",
            Stage::Done => "resolved",
        };
        f.debug_struct("Sending")
            .field("stage", &stage)
            .field("tag", &self.tag)
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

impl<'a> SendCore<'a> {
    fn new(producer: &'a Producer, record: ProducerRecord<'a>, tag: Option<u64>) -> Self {
        SendCore {
            producer,
            stage: Stage::Start(record),
            tag,
            offered: false,
        }
    }

    /// Inlined into each future's `poll`: one call per record, as before there were two
    /// futures.
    #[inline(always)]
    fn poll_queued(&mut self, cx: &mut Context<'_>) -> Poll<Result<Queued>> {
        let this = self;
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
        match producer.send_now(record, this.tag) {
            Ok(SendNow::Done(queued)) => {
                this.stage = Stage::Done;
                Poll::Ready(Ok(queued))
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
fn finish(stage: &mut Stage<'_>, polled: Poll<Result<Queued>>) -> Poll<Result<Queued>> {
    if polled.is_ready() {
        *stage = Stage::Done;
    }
    polled
}

#[cfg(test)]
mod tests {
    use super::{Sending, SendingTagged};

    /// What a user may rely on, as with the `async fn` it replaced.
    #[test]
    fn sending_is_send_and_unpin() {
        fn send_and_unpin<T: Send + Unpin>() {}
        send_and_unpin::<Sending<'static>>();
        send_and_unpin::<SendingTagged<'static>>();
    }
}
