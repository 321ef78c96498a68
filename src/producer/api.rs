//! The producer as traits, for code that wants to be tested without a broker.
//!
//! User code written against [`RecordProducer`] (or [`SyncRecordProducer`]) instead of
//! [`Producer`] (or [`SyncProducer`]) runs unchanged on the real producer and, in unit
//! tests, on `kring_mock::MockProducer` / `MockSyncProducer` (the `kring-mock` crate),
//! which check each send against scripted expectations (Sarama's `mocks` package).
//! Tagged sends ([`RecordProducer::send_tagged`]) are on the asynchronous trait only: a
//! [`SyncRecordProducer`] waits for each record's acknowledgement, which a tag's report
//! to the delivery handler exists to avoid.
//!
//! Invariants: both traits are object safe (`&dyn RecordProducer`,
//! `Arc<dyn RecordProducer>` work), `Send + Sync`, and the real implementations only
//! delegate to the inherent methods of the same name, so behaviour is identical.

use std::future::Future;
use std::pin::Pin;

use super::{DeliveryFuture, Producer, ProducerRecord, RecordMetadata, SyncProducer};
use crate::error::Result;

/// The future of [`RecordProducer::send`]: nothing happens until it is first polled;
/// the record is queued by the time it resolves.
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<DeliveryFuture>> + Send + 'a>>;

/// The future of [`RecordProducer::send_tagged`]: nothing happens until it is first
/// polled; the record is queued by the time it resolves, and its outcome goes to the
/// producer's delivery handler.
pub type TaggedSendFuture<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

/// The future of [`RecordProducer::flush`].
pub type FlushFuture<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

/// An asynchronous producer: what [`Producer`] offers, as an object-safe trait.
///
/// Write code against this trait to test it with `kring_mock::MockProducer`:
///
/// ```
/// use kring::producer::{ProducerRecord, RecordMetadata, RecordProducer};
///
/// /// Publishes one order event and waits for the broker's acknowledgement.
/// async fn publish(producer: &dyn RecordProducer, id: &str) -> kring::Result<RecordMetadata> {
///     let value = format!("{{\"order\":\"{id}\"}}");
///     let delivery = producer
///         .send(ProducerRecord::new("orders").with_key(id).with_value(value))
///         .await?;
///     delivery.await
/// }
/// ```
pub trait RecordProducer: Send + Sync {
    /// Queues `record` and returns its delivery future (see [`Producer::send`]).
    fn send<'a>(&'a self, record: ProducerRecord<'a>) -> SendFuture<'a>;

    /// Queues `record` without a delivery future: its outcome goes, with `tag`, to the
    /// producer's delivery handler (see [`Producer::send_tagged`]). Through the trait
    /// each call boxes its future; the inherent [`Producer::send_tagged`] does not.
    fn send_tagged<'a>(&'a self, record: ProducerRecord<'a>, tag: u64) -> TaggedSendFuture<'a>;

    /// Sends everything queued and waits for the outcomes (see [`Producer::flush`]).
    fn flush(&self) -> FlushFuture<'_>;

    /// [`RecordProducer::send`] for plain threads (not from inside an async runtime).
    fn send_blocking(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        crate::client::block_on(self.send(record))
    }

    /// [`RecordProducer::send_tagged`] for plain threads (not from inside an async
    /// runtime).
    fn send_tagged_blocking(&self, record: ProducerRecord<'_>, tag: u64) -> Result<()> {
        crate::client::block_on(self.send_tagged(record, tag))
    }

    /// [`RecordProducer::flush`] for plain threads (not from inside an async runtime).
    fn flush_blocking(&self) -> Result<()> {
        crate::client::block_on(self.flush())
    }
}

impl RecordProducer for Producer {
    fn send<'a>(&'a self, record: ProducerRecord<'a>) -> SendFuture<'a> {
        Box::pin(Producer::send(self, record))
    }

    fn send_tagged<'a>(&'a self, record: ProducerRecord<'a>, tag: u64) -> TaggedSendFuture<'a> {
        Box::pin(Producer::send_tagged(self, record, tag))
    }

    fn flush(&self) -> FlushFuture<'_> {
        Box::pin(Producer::flush(self))
    }

    fn send_blocking(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        Producer::send_blocking(self, record)
    }

    fn send_tagged_blocking(&self, record: ProducerRecord<'_>, tag: u64) -> Result<()> {
        Producer::send_tagged_blocking(self, record, tag)
    }

    fn flush_blocking(&self) -> Result<()> {
        Producer::flush_blocking(self)
    }
}

/// A blocking producer: what [`SyncProducer`] offers, as an object-safe trait.
///
/// ```
/// use kring::producer::{ProducerRecord, SyncRecordProducer};
///
/// /// Writes an audit line; returns its offset.
/// fn audit(producer: &dyn SyncRecordProducer, line: &str) -> kring::Result<i64> {
///     Ok(producer.send(ProducerRecord::new("audit").with_value(line))?.offset)
/// }
/// ```
pub trait SyncRecordProducer: Send + Sync {
    /// Sends one record and waits for its acknowledgement (see [`SyncProducer::send`]).
    fn send(&self, record: ProducerRecord<'_>) -> Result<RecordMetadata>;

    /// Sends every record and waits for all; one result per record, in order (see
    /// [`SyncProducer::send_all`]).
    fn send_all(&self, records: &[ProducerRecord<'_>]) -> Vec<Result<RecordMetadata>> {
        records.iter().map(|r| self.send(r.clone())).collect()
    }
}

impl SyncRecordProducer for SyncProducer {
    fn send(&self, record: ProducerRecord<'_>) -> Result<RecordMetadata> {
        SyncProducer::send(self, record)
    }

    fn send_all(&self, records: &[ProducerRecord<'_>]) -> Vec<Result<RecordMetadata>> {
        SyncProducer::send_all(self, records)
    }
}

/// Forwards through references and smart pointers, so `&P`, `Box<dyn RecordProducer>`
/// and `Arc<dyn RecordProducer>` are producers too.
macro_rules! forward_record_producer {
    ($($ty:ty),*) => {$(
        impl<P: RecordProducer + ?Sized> RecordProducer for $ty {
            fn send<'a>(&'a self, record: ProducerRecord<'a>) -> SendFuture<'a> {
                (**self).send(record)
            }

            fn send_tagged<'a>(
                &'a self,
                record: ProducerRecord<'a>,
                tag: u64,
            ) -> TaggedSendFuture<'a> {
                (**self).send_tagged(record, tag)
            }

            fn flush(&self) -> FlushFuture<'_> {
                (**self).flush()
            }

            fn send_blocking(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
                (**self).send_blocking(record)
            }

            fn send_tagged_blocking(&self, record: ProducerRecord<'_>, tag: u64) -> Result<()> {
                (**self).send_tagged_blocking(record, tag)
            }

            fn flush_blocking(&self) -> Result<()> {
                (**self).flush_blocking()
            }
        }
    )*};
}

forward_record_producer!(&P, Box<P>, std::sync::Arc<P>);

macro_rules! forward_sync_record_producer {
    ($($ty:ty),*) => {$(
        impl<P: SyncRecordProducer + ?Sized> SyncRecordProducer for $ty {
            fn send(&self, record: ProducerRecord<'_>) -> Result<RecordMetadata> {
                (**self).send(record)
            }

            fn send_all(&self, records: &[ProducerRecord<'_>]) -> Vec<Result<RecordMetadata>> {
                (**self).send_all(records)
            }
        }
    )*};
}

forward_sync_record_producer!(&P, Box<P>, std::sync::Arc<P>);
