//! Producer interceptors (Sarama's `ProducerInterceptor`, the Java client's
//! `ProducerInterceptor`, franz-go's produce hooks): code the application runs on each
//! record sent and on each batch's outcome, for tracing headers' bookkeeping, audit
//! counts or custom metrics. Configured in
//! [`ProducerConfig::interceptors`](crate::config::ProducerConfig::interceptors); with
//! none configured they cost one branch per record.
//!
//! Records are encoded in place into their batch as they are sent, so an interceptor
//! observes; it cannot rewrite a record (build the record you want before `send`).

use crate::error::Error;

use super::ProducerRecord;

/// One batch's outcome, as [`ProducerInterceptor::on_acknowledgement`] sees it.
#[derive(Debug)]
pub struct Acknowledgement<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition.
    pub partition: i32,
    /// How many records the batch holds (its records have consecutive offsets).
    pub records: i32,
    /// The first record's offset (-1 for acks=0), or why the batch failed for good.
    pub result: Result<i64, &'a Error>,
}

/// Code run on the producer's records. Both methods default to doing nothing.
pub trait ProducerInterceptor: Send + Sync + 'static {
    /// Called in `send` (and `try_send`, `send_blocking`) before the record is appended,
    /// on the caller's thread.
    fn on_send(&self, record: &ProducerRecord<'_>) {
        let _ = record;
    }

    /// Called once per batch when the broker acknowledged it or it failed for good, on
    /// the worker thread that owns the leader's connection: keep it short, never block.
    /// A batch that is retried is reported once, at its final outcome. It runs just
    /// after the batch's delivery futures resolve (unlike the Java client, which calls
    /// it just before the callback), so a `flush` or an awaited send may return a moment
    /// before it has run for that batch.
    fn on_acknowledgement(&self, ack: &Acknowledgement<'_>) {
        let _ = ack;
    }
}
