//! A mock consumer for unit tests of user code written against [`MessageSource`] and
//! [`PartitionSource`] (Sarama's `mocks.Consumer` with `ExpectConsumePartition`,
//! `YieldMessage`, `YieldError`): no sockets, no runtime; the test says which
//! partitions will be consumed and yields what they deliver.
//!
//! Invariants:
//! - A partition can be consumed only if an expectation for it is left, and by one
//!   stream at a time ([`Error::AlreadyConsumed`] otherwise, as on the real consumer).
//!   Any other `consume_partition` is *unexpected*: it fails with
//!   UNKNOWN_TOPIC_OR_PARTITION and is reported by [`MockConsumer::verify`].
//! - Yielded messages get consecutive offsets from the start offset (the exact offset
//!   asked for, 0 for the other starts), in yield order, whether or not the partition
//!   is being consumed yet; each `yield_*` call is delivered as one batch.
//! - `next_messages` waits (without blocking a runtime thread) until something is
//!   yielded or the handle ends the stream; after the end it returns `None`.
//! - Problems (unmet expectations, unexpected calls, a start offset other than the
//!   expected one, yielded items left unread where [`MockPartitionHandle::expect_drained`]
//!   asked) are reported by [`MockConsumer::verify`]; those still unreported when the
//!   last handle of the consumer is dropped panic the test, unless the thread is
//!   already panicking.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use kring::consumer::{
    ConsumePartitionFuture, ConsumerError, Message, MessageSource, NextMessages,
    NextMessagesFuture, Offset, PartitionSource,
};
use kring::error::{Error, Result};
use kring::protocol::{ApiKey, KafkaCode};

use super::MockError;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

enum Item {
    Batch(Vec<Message>),
    Error(ConsumerError),
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Item>,
    wakers: Vec<Waker>,
    ended: bool,
    next_offset: i64,
}

/// What a handle yields and a partition consumer reads.
struct Stream {
    topic: Arc<str>,
    partition: i32,
    queue: Mutex<Queue>,
    /// A partition consumer holds this stream now.
    live: AtomicBool,
    /// Verify reports items left unread.
    expect_drained: AtomicBool,
}

impl Stream {
    fn push(&self, item: Item) {
        let wakers = {
            let mut q = lock(&self.queue);
            q.items.push_back(item);
            std::mem::take(&mut q.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<NextMessages> {
        let mut q = lock(&self.queue);
        match q.items.pop_front() {
            Some(Item::Batch(b)) => Poll::Ready(Some(Ok(b))),
            Some(Item::Error(e)) => Poll::Ready(Some(Err(e))),
            None if q.ended => Poll::Ready(None),
            None => {
                if !q.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    q.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

struct Expectation {
    start: Offset,
    stream: Arc<Stream>,
    taken: bool,
}

struct State {
    expectations: Vec<Expectation>,
    unexpected: Vec<String>,
    failures: Vec<String>,
    reported_unexpected: usize,
    reported_failures: usize,
}

impl State {
    fn unverified(&mut self) -> Option<MockError> {
        let unused: Vec<String> = self
            .expectations
            .iter()
            .filter(|e| !e.taken)
            .map(|e| {
                format!(
                    "expected consume_partition({}, {}, {:?})",
                    e.stream.topic, e.stream.partition, e.start
                )
            })
            .collect();
        let mut failures = self.failures[self.reported_failures..].to_vec();
        for e in &self.expectations {
            let left = lock(&e.stream.queue).items.len();
            if e.stream.expect_drained.swap(false, Ordering::AcqRel) && left > 0 {
                failures.push(format!(
                    "{}-{}: {left} yielded item(s) never read",
                    e.stream.topic, e.stream.partition
                ));
            }
        }
        let unexpected = self.unexpected[self.reported_unexpected..].to_vec();
        self.reported_failures = self.failures.len();
        self.reported_unexpected = self.unexpected.len();
        // Reported once: drop the expectations never taken.
        self.expectations.retain(|e| e.taken);
        if unused.is_empty() && failures.is_empty() && unexpected.is_empty() {
            return None;
        }
        Some(MockError::ClientUnverified {
            mock: "MockConsumer",
            unused,
            unexpected,
            failures,
        })
    }
}

impl Drop for State {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if let Some(e) = self.unverified() {
            panic!("{e} (dropped without verify)");
        }
    }
}

/// A consumer for unit tests: implements [`MessageSource`]; partitions are consumed as
/// expected with [`MockConsumer::expect_consume_partition`], whose handle yields their
/// messages and errors.
///
/// Clones share one state: hand one to the code under test and verify on another.
///
/// ```
/// use kring::consumer::{MessageSource, Offset};
/// use kring_mock::MockConsumer;
/// use kring::Error;
///
/// // The user's code: counts messages until the stream ends or fails.
/// async fn count(consumer: &dyn MessageSource) -> kring::Result<usize> {
///     let mut source = consumer.consume_partition("clicks", 0, Offset::Oldest).await?;
///     let mut n = 0;
///     while let Some(batch) = source.next_messages().await {
///         n += batch.map_err(|e| e.error)?.len();
///     }
///     Ok(n)
/// }
///
/// // The user's tests.
/// let mock = MockConsumer::new();
/// mock.expect_consume_partition("clicks", 0, Offset::Oldest)
///     .yield_message("user-1", "home")
///     .yield_message("user-2", "cart")
///     .end();
/// assert_eq!(kring::client::block_on(count(&mock)).unwrap(), 2);
/// mock.verify().unwrap();
///
/// let mock = MockConsumer::new();
/// mock.expect_consume_partition("clicks", 0, Offset::Oldest)
///     .yield_value("x")
///     .yield_error(Error::Timeout("fetch".into()));
/// assert!(kring::client::block_on(count(&mock)).is_err());
/// mock.verify().unwrap();
/// ```
#[derive(Clone)]
pub struct MockConsumer {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for MockConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("MockConsumer")
            .field("expectations", &s.expectations.len())
            .field("unexpected", &s.unexpected)
            .field("failures", &s.failures)
            .finish()
    }
}

impl Default for MockConsumer {
    fn default() -> Self {
        MockConsumer::new()
    }
}

impl MockConsumer {
    /// A mock with no expectations.
    pub fn new() -> MockConsumer {
        MockConsumer {
            state: Arc::new(Mutex::new(State {
                expectations: Vec::new(),
                unexpected: Vec::new(),
                failures: Vec::new(),
                reported_unexpected: 0,
                reported_failures: 0,
            })),
        }
    }

    /// Expects `consume_partition(topic, partition, start)`; the handle yields what the
    /// partition delivers (before or after it is consumed).
    pub fn expect_consume_partition(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
    ) -> MockPartitionHandle {
        let stream = Arc::new(Stream {
            topic: Arc::from(topic),
            partition,
            queue: Mutex::new(Queue {
                next_offset: match start {
                    Offset::Exact(o) => o,
                    _ => 0,
                },
                ..Queue::default()
            }),
            live: AtomicBool::new(false),
            expect_drained: AtomicBool::new(false),
        });
        lock(&self.state).expectations.push(Expectation {
            start,
            stream: stream.clone(),
            taken: false,
        });
        MockPartitionHandle { stream }
    }

    /// Ok if every expected partition was consumed, with the expected start, nothing
    /// else was, and drained streams were read to the end; otherwise the list. Each
    /// problem is reported once.
    pub fn verify(&self) -> std::result::Result<(), MockError> {
        match lock(&self.state).unverified() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Starts a partition stream now (the mock never waits).
    pub fn consume_now(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
    ) -> Result<MockPartitionConsumer> {
        let mut s = lock(&self.state);
        let same =
            |e: &&mut Expectation| &*e.stream.topic == topic && e.stream.partition == partition;
        if s.expectations
            .iter_mut()
            .filter(same)
            .any(|e| e.taken && e.stream.live.load(Ordering::Acquire))
        {
            return Err(Error::AlreadyConsumed {
                topic: topic.to_string(),
                partition,
            });
        }
        let Some(e) = s.expectations.iter_mut().filter(same).find(|e| !e.taken) else {
            s.unexpected.push(format!(
                "consume_partition({topic}, {partition}, {start:?})"
            ));
            return Err(Error::broker(
                KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
                ApiKey::ListOffsets,
                Some(topic),
                Some(partition),
            ));
        };
        e.taken = true;
        e.stream.live.store(true, Ordering::Release);
        let stream = e.stream.clone();
        if e.start != start {
            let expected = e.start;
            s.failures.push(format!(
                "{topic}-{partition} consumed from {start:?}, expected {expected:?}"
            ));
        }
        Ok(MockPartitionConsumer { stream })
    }
}

impl MessageSource for MockConsumer {
    fn consume_partition<'a>(
        &'a self,
        topic: &'a str,
        partition: i32,
        start: Offset,
    ) -> ConsumePartitionFuture<'a> {
        let result = self
            .consume_now(topic, partition, start)
            .map(|pc| Box::new(pc) as Box<dyn PartitionSource>);
        Box::pin(std::future::ready(result))
    }

    fn consume_partition_blocking(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
    ) -> Result<Box<dyn PartitionSource>> {
        self.consume_now(topic, partition, start)
            .map(|pc| Box::new(pc) as Box<dyn PartitionSource>)
    }
}

/// The test's end of one expected partition: yields what the partition delivers.
/// Cheap to clone; usable from any thread, before or while the partition is consumed.
#[derive(Clone)]
pub struct MockPartitionHandle {
    stream: Arc<Stream>,
}

impl fmt::Debug for MockPartitionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockPartitionHandle")
            .field("topic", &self.stream.topic)
            .field("partition", &self.stream.partition)
            .finish()
    }
}

impl MockPartitionHandle {
    /// Yields one batch of records given as `(key, value)`; each gets the next offset,
    /// no headers, and timestamp -1 (none).
    pub fn yield_batch<I>(&self, records: I) -> &Self
    where
        I: IntoIterator<Item = (Option<Bytes>, Option<Bytes>)>,
    {
        let batch = {
            let mut q = lock(&self.stream.queue);
            records
                .into_iter()
                .map(|(key, value)| {
                    let offset = q.next_offset;
                    q.next_offset += 1;
                    Message {
                        topic: self.stream.topic.clone(),
                        partition: self.stream.partition,
                        offset,
                        timestamp: -1,
                        key,
                        value,
                        headers: Vec::new(),
                    }
                })
                .collect()
        };
        self.stream.push(Item::Batch(batch));
        self
    }

    /// Yields a batch of one message with `key` and `value`.
    pub fn yield_message(&self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> &Self {
        self.yield_batch([(Some(key.into()), Some(value.into()))])
    }

    /// Yields a batch of one message with no key.
    pub fn yield_value(&self, value: impl Into<Bytes>) -> &Self {
        self.yield_batch([(None, Some(value.into()))])
    }

    /// Yields a batch of one message exactly as given (topic, partition and offset
    /// included; later offsets continue after its own).
    pub fn yield_raw(&self, message: Message) -> &Self {
        {
            let mut q = lock(&self.stream.queue);
            q.next_offset = q.next_offset.max(message.offset + 1);
        }
        self.stream.push(Item::Batch(vec![message]));
        self
    }

    /// Yields an error, as the fetcher reports one (the stream goes on).
    pub fn yield_error(&self, error: Error) -> &Self {
        self.stream.push(Item::Error(ConsumerError {
            topic: self.stream.topic.to_string(),
            partition: self.stream.partition,
            error,
        }));
        self
    }

    /// Ends the stream: once what was yielded is read, `next_messages` returns `None`.
    pub fn end(&self) -> &Self {
        let wakers = {
            let mut q = lock(&self.stream.queue);
            q.ended = true;
            std::mem::take(&mut q.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
        self
    }

    /// Asks [`MockConsumer::verify`] to report what was yielded and never read (Sarama's
    /// `ExpectMessagesDrainedOnClose`).
    pub fn expect_drained(&self) -> &Self {
        self.stream.expect_drained.store(true, Ordering::Release);
        self
    }

    /// The offset the next yielded message gets.
    pub fn next_offset(&self) -> i64 {
        lock(&self.stream.queue).next_offset
    }
}

/// The partition stream a [`MockConsumer`] hands out: implements [`PartitionSource`].
pub struct MockPartitionConsumer {
    stream: Arc<Stream>,
}

impl fmt::Debug for MockPartitionConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockPartitionConsumer")
            .field("topic", &self.stream.topic)
            .field("partition", &self.stream.partition)
            .finish()
    }
}

impl Drop for MockPartitionConsumer {
    fn drop(&mut self) {
        self.stream.live.store(false, Ordering::Release);
    }
}

struct Next<'a>(&'a Stream);

impl Future for Next<'_> {
    type Output = NextMessages;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<NextMessages> {
        self.0.poll_next(cx)
    }
}

impl PartitionSource for MockPartitionConsumer {
    fn topic(&self) -> &str {
        &self.stream.topic
    }

    fn partition(&self) -> i32 {
        self.stream.partition
    }

    fn next_messages(&mut self) -> NextMessagesFuture<'_> {
        Box::pin(Next(&self.stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kring::client::block_on;
    use std::time::Duration;

    #[test]
    fn offsets_start_at_the_exact_offset_and_errors_keep_the_stream() {
        let mock = MockConsumer::new();
        let h = mock.expect_consume_partition("t", 3, Offset::Exact(40));
        h.yield_message("k", "a")
            .yield_error(Error::Timeout("x".into()));
        h.yield_batch([(None, Some(Bytes::from("b"))), (None, None)])
            .end();
        let mut pc = mock
            .consume_partition_blocking("t", 3, Offset::Exact(40))
            .unwrap();
        let first = pc.next_messages_blocking().unwrap().unwrap();
        assert_eq!((first[0].offset, first[0].partition), (40, 3));
        let err = pc.next_messages_blocking().unwrap().unwrap_err();
        assert_eq!((err.topic.as_str(), err.partition), ("t", 3));
        let offsets: Vec<i64> = pc
            .next_messages_blocking()
            .unwrap()
            .unwrap()
            .iter()
            .map(|m| m.offset)
            .collect();
        assert_eq!(offsets, [41, 42]);
        assert!(pc.next_messages_blocking().is_none());
        mock.verify().unwrap();
    }

    #[test]
    fn waits_for_a_yield_from_another_thread() {
        let mock = MockConsumer::new();
        let h = mock.expect_consume_partition("t", 0, Offset::Newest);
        let mut pc = mock
            .consume_partition_blocking("t", 0, Offset::Newest)
            .unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            h.yield_value("late");
        });
        let got = pc.next_messages_blocking().unwrap().unwrap();
        assert_eq!(got[0].value.as_deref(), Some(&b"late"[..]));
        t.join().unwrap();
        mock.verify().unwrap();
    }

    #[test]
    fn unexpected_duplicate_and_mismatched_calls_are_reported() {
        let mock = MockConsumer::new();
        mock.expect_consume_partition("t", 0, Offset::Oldest);
        mock.expect_consume_partition("t", 0, Offset::Oldest);
        mock.expect_consume_partition("t", 1, Offset::Oldest);
        let pc = mock.consume_now("t", 0, Offset::Newest).unwrap();
        assert!(matches!(
            mock.consume_now("t", 0, Offset::Oldest),
            Err(Error::AlreadyConsumed { .. })
        ));
        drop(pc);
        let _again = mock.consume_now("t", 0, Offset::Oldest).unwrap();
        assert!(block_on(mock.consume_partition("u", 0, Offset::Oldest)).is_err());
        let err = mock.verify().unwrap_err().to_string();
        assert!(err.contains("consume_partition(t, 1, Oldest)"), "{err}");
        assert!(err.contains("consume_partition(u, 0, Oldest)"), "{err}");
        assert!(err.contains("expected Oldest"), "{err}");
        mock.verify().unwrap();
    }

    #[test]
    fn undrained_streams_are_reported_when_asked() {
        let mock = MockConsumer::new();
        mock.expect_consume_partition("t", 0, Offset::Oldest)
            .yield_value("never read")
            .expect_drained();
        let _pc = mock.consume_now("t", 0, Offset::Oldest).unwrap();
        let err = mock.verify().unwrap_err().to_string();
        assert!(err.contains("never read"), "{err}");
    }
}
