//! The consumer as traits, for code that wants to be tested without a broker.
//!
//! User code written against [`PartitionSource`] (one partition's stream of owned
//! [`Message`]s, what [`PartitionConsumer`] gives) and [`MessageSource`] (what
//! [`Consumer::consume_partition`] gives) runs unchanged on the real consumer and, in
//! unit tests, on `kring_mock::MockConsumer` (the `kring-mock` crate), where the test
//! yields the messages and errors (Sarama's `mocks.Consumer`).
//!
//! Invariants: both traits are object safe; the real implementations only delegate to
//! the inherent methods of the same name. The borrowed, zero-allocation path
//! ([`PartitionConsumer::next_batch`]) stays on the concrete type: it cannot be faked
//! without a fetch buffer.

use std::future::Future;
use std::pin::Pin;

use super::{Consumer, ConsumerError, Message, Offset, PartitionConsumer};
use crate::error::Result;

/// What [`PartitionSource::next_messages`] resolves to: the next batch of messages, a
/// consumer error, or `None` when the stream ended.
pub type NextMessages = Option<std::result::Result<Vec<Message>, ConsumerError>>;

/// The future of [`PartitionSource::next_messages`].
pub type NextMessagesFuture<'a> = Pin<Box<dyn Future<Output = NextMessages> + Send + 'a>>;

/// The future of [`MessageSource::consume_partition`].
pub type ConsumePartitionFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Box<dyn PartitionSource>>> + Send + 'a>>;

/// One partition's messages, in offset order: what [`PartitionConsumer`] offers as
/// owned messages, as an object-safe trait.
///
/// ```
/// use kring::consumer::PartitionSource;
///
/// /// Sums the values (decimal numbers) of the next batch; `None` when the stream ended.
/// async fn sum_next(source: &mut dyn PartitionSource) -> Option<Result<i64, String>> {
///     let batch = match source.next_messages().await? {
///         Ok(batch) => batch,
///         Err(e) => return Some(Err(e.to_string())),
///     };
///     let mut sum = 0;
///     for m in batch {
///         let text = std::str::from_utf8(m.value.as_deref().unwrap_or_default()).ok()?;
///         sum += text.parse::<i64>().ok()?;
///     }
///     Some(Ok(sum))
/// }
/// ```
pub trait PartitionSource: Send {
    /// The topic.
    fn topic(&self) -> &str;

    /// The partition.
    fn partition(&self) -> i32;

    /// The next batch of messages, an error, or `None` when the stream ended (see
    /// [`PartitionConsumer::next_messages`]).
    fn next_messages(&mut self) -> NextMessagesFuture<'_>;

    /// [`PartitionSource::next_messages`] for plain threads (not from inside an async
    /// runtime).
    fn next_messages_blocking(&mut self) -> NextMessages {
        crate::client::block_on(self.next_messages())
    }
}

impl PartitionSource for PartitionConsumer {
    fn topic(&self) -> &str {
        PartitionConsumer::topic(self)
    }

    fn partition(&self) -> i32 {
        PartitionConsumer::partition(self)
    }

    fn next_messages(&mut self) -> NextMessagesFuture<'_> {
        Box::pin(PartitionConsumer::next_messages(self))
    }

    fn next_messages_blocking(&mut self) -> NextMessages {
        PartitionConsumer::next_messages_blocking(self)
    }
}

/// Starts partition streams: what [`Consumer::consume_partition`] offers, as an
/// object-safe trait.
///
/// ```
/// use kring::consumer::{MessageSource, Offset};
///
/// /// Reads the first batch of `topic`'s partition 0.
/// async fn first_batch(consumer: &dyn MessageSource, topic: &str) -> kring::Result<usize> {
///     let mut source = consumer.consume_partition(topic, 0, Offset::Oldest).await?;
///     match source.next_messages().await {
///         Some(Ok(batch)) => Ok(batch.len()),
///         Some(Err(e)) => Err(e.error),
///         None => Ok(0),
///     }
/// }
/// ```
pub trait MessageSource: Send + Sync {
    /// Starts consuming `topic`/`partition` from `start` (see
    /// [`Consumer::consume_partition`]).
    fn consume_partition<'a>(
        &'a self,
        topic: &'a str,
        partition: i32,
        start: Offset,
    ) -> ConsumePartitionFuture<'a>;

    /// [`MessageSource::consume_partition`] for plain threads (not from inside an async
    /// runtime).
    fn consume_partition_blocking(
        &self,
        topic: &str,
        partition: i32,
        start: Offset,
    ) -> Result<Box<dyn PartitionSource>> {
        crate::client::block_on(self.consume_partition(topic, partition, start))
    }
}

impl MessageSource for Consumer {
    fn consume_partition<'a>(
        &'a self,
        topic: &'a str,
        partition: i32,
        start: Offset,
    ) -> ConsumePartitionFuture<'a> {
        Box::pin(async move {
            let pc = Consumer::consume_partition(self, topic, partition, start).await?;
            Ok(Box::new(pc) as Box<dyn PartitionSource>)
        })
    }
}

/// Forwards through `&mut S` and `Box<S>` (what [`MessageSource::consume_partition`]
/// returns), so code generic over `S: PartitionSource` takes either.
macro_rules! forward_partition_source {
    ($($ty:ty),*) => {$(
        impl<S: PartitionSource + ?Sized> PartitionSource for $ty {
            fn topic(&self) -> &str {
                (**self).topic()
            }

            fn partition(&self) -> i32 {
                (**self).partition()
            }

            fn next_messages(&mut self) -> NextMessagesFuture<'_> {
                (**self).next_messages()
            }

            fn next_messages_blocking(&mut self) -> NextMessages {
                (**self).next_messages_blocking()
            }
        }
    )*};
}

forward_partition_source!(&mut S, Box<S>);

/// Forwards through references and smart pointers.
macro_rules! forward_message_source {
    ($($ty:ty),*) => {$(
        impl<M: MessageSource + ?Sized> MessageSource for $ty {
            fn consume_partition<'a>(
                &'a self,
                topic: &'a str,
                partition: i32,
                start: Offset,
            ) -> ConsumePartitionFuture<'a> {
                (**self).consume_partition(topic, partition, start)
            }

            fn consume_partition_blocking(
                &self,
                topic: &str,
                partition: i32,
                start: Offset,
            ) -> Result<Box<dyn PartitionSource>> {
                (**self).consume_partition_blocking(topic, partition, start)
            }
        }
    )*};
}

forward_message_source!(&M, Box<M>, std::sync::Arc<M>);
