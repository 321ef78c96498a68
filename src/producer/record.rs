//! What users hand to the producer, and what they get back: [`ProducerRecord`] (keys
//! and values borrowed or shared, never copied before the arena), [`DeliveryFuture`]
//! and [`RecordMetadata`].
//!
//! All records of a batch share one completion (`engine::produce::completion`); a
//! record's future is that completion plus its index, so sending a record allocates
//! nothing for its future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

use crate::engine::produce::completion::{BatchAck, BatchShared, Resolved, WaitSlot};
use crate::error::Error;
use crate::record::Header;

/// A key or value: borrowed for the duration of `send` (it is copied once, into the
/// batch arena), or shared `Bytes`.
#[derive(Debug, Clone)]
pub enum Payload<'a> {
    /// Borrowed bytes.
    Borrowed(&'a [u8]),
    /// Shared bytes (a `Vec<u8>` or `String` becomes this without copying).
    Shared(Bytes),
}

impl Payload<'_> {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Payload::Borrowed(b) => b,
            Payload::Shared(b) => b,
        }
    }
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(v: &'a [u8]) -> Self {
        Payload::Borrowed(v)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Payload<'a> {
    fn from(v: &'a [u8; N]) -> Self {
        Payload::Borrowed(v)
    }
}

impl<'a> From<&'a str> for Payload<'a> {
    fn from(v: &'a str) -> Self {
        Payload::Borrowed(v.as_bytes())
    }
}

impl<'a> From<&'a Vec<u8>> for Payload<'a> {
    fn from(v: &'a Vec<u8>) -> Self {
        Payload::Borrowed(v)
    }
}

impl From<Vec<u8>> for Payload<'_> {
    fn from(v: Vec<u8>) -> Self {
        Payload::Shared(Bytes::from(v))
    }
}

impl From<String> for Payload<'_> {
    fn from(v: String) -> Self {
        Payload::Shared(Bytes::from(v))
    }
}

impl From<Bytes> for Payload<'_> {
    fn from(v: Bytes) -> Self {
        Payload::Shared(v)
    }
}

/// A record to produce.
///
/// ```
/// use kring::producer::ProducerRecord;
/// let r = ProducerRecord::new("orders").with_key("customer-7").with_value(b"{\"total\":12}")
///     .with_header("source", b"web");
/// assert_eq!(r.topic, "orders");
/// ```
#[derive(Debug, Clone)]
pub struct ProducerRecord<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The key (chooses the partition under the default partitioner).
    pub key: Option<Payload<'a>>,
    /// The value.
    pub value: Option<Payload<'a>>,
    /// Headers.
    pub headers: Vec<Header<'a>>,
    /// Milliseconds since the epoch; `None` is now.
    pub timestamp: Option<i64>,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
}

impl<'a> ProducerRecord<'a> {
    /// A record for `topic` with no key, value or headers.
    pub fn new(topic: &'a str) -> Self {
        ProducerRecord {
            topic,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
            partition: None,
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Payload<'a>>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the value.
    pub fn with_value(mut self, value: impl Into<Payload<'a>>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, key: &'a str, value: &'a [u8]) -> Self {
        self.headers.push(Header::new(key, value));
        self
    }

    /// Sets the timestamp (ms since the epoch).
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Sets the partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }
}

/// Where a record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Partition.
    pub partition: i32,
    /// Offset (-1 for acks=0, where the broker says nothing).
    pub offset: i64,
    /// The record's timestamp: the broker's log append time if the topic uses it.
    pub timestamp: i64,
}

/// Resolves when the record is acknowledged (or definitively failed).
#[derive(Debug)]
#[must_use = "a delivery future reports whether the record was written"]
pub struct DeliveryFuture {
    shared: Arc<BatchShared>,
    index: usize,
    partition: i32,
    /// This future's entry among its batch's waiting wakers, once it has waited.
    slot: WaitSlot,
    timestamp: i64,
}

impl DeliveryFuture {
    pub(crate) fn new(
        shared: Arc<BatchShared>,
        index: usize,
        partition: i32,
        timestamp: i64,
    ) -> Self {
        DeliveryFuture {
            shared,
            index,
            partition,
            slot: WaitSlot::NONE,
            timestamp,
        }
    }

    /// A future that is resolved already, with `result`: for test doubles that stand
    /// in for a producer without a broker (such as `kring_mock::MockProducer`, in the
    /// `kring-mock` crate). `partition` is what [`DeliveryFuture::partition`] reports
    /// when `result` is an error; on success the metadata's own partition, offset and
    /// timestamp are kept.
    ///
    /// ```
    /// use kring::producer::{DeliveryFuture, RecordMetadata};
    ///
    /// let meta = RecordMetadata { partition: 2, offset: 41, timestamp: 1_700_000_000_000 };
    /// let delivered = DeliveryFuture::ready(2, Ok(meta));
    /// assert_eq!(delivered.partition(), 2);
    /// assert_eq!(delivered.wait().unwrap(), meta);
    /// ```
    pub fn ready(partition: i32, result: Result<RecordMetadata, Error>) -> Self {
        let shared = BatchShared::new();
        let (partition, timestamp) = match &result {
            Ok(meta) => (meta.partition, meta.timestamp),
            Err(_) => (partition, -1),
        };
        shared.complete(result.map(|meta| BatchAck {
            base_offset: meta.offset,
            log_append_time: -1,
        }));
        DeliveryFuture::new(shared, 0, partition, timestamp)
    }

    /// The partition the record went to.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    fn finish(&self, ack: Result<BatchAck, Error>) -> Result<RecordMetadata, Error> {
        let (offset, timestamp) = ack?.record_at(self.index, self.timestamp);
        Ok(RecordMetadata {
            partition: self.partition,
            offset,
            timestamp,
        })
    }

    /// Blocks this thread until the record is acknowledged.
    pub fn wait(mut self) -> Result<RecordMetadata, Error> {
        loop {
            match self.shared.wait_record(self.index) {
                Resolved::Done(r) => return self.finish(r),
                Resolved::Moved(p) => {
                    self.shared = p;
                    self.index = 0;
                }
            }
        }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let this = &mut *self;
            match this
                .shared
                .poll_record(this.index, Some((cx.waker(), &mut this.slot)))
            {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Resolved::Done(r)) => return Poll::Ready(self.finish(r)),
                Poll::Ready(Resolved::Moved(p)) => {
                    self.shared = p;
                    self.index = 0;
                    self.slot = WaitSlot::NONE;
                }
            }
        }
    }
}
