//! Consumer interceptors (Sarama's `ConsumerInterceptor`, the Java client's
//! `ConsumerInterceptor`, franz-go's fetch hooks): code the application runs on each
//! batch a partition consumer (or group consumer) hands out. Configured in
//! [`ConsumerConfig::interceptors`](crate::config::ConsumerConfig::interceptors); with
//! none configured they cost one branch per batch.

/// A batch about to be handed to the application.
#[derive(Debug, Clone, Copy)]
pub struct ConsumedBatch<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition.
    pub partition: i32,
    /// The offset of the first record handed out (at or after the consumer's position).
    pub first_offset: i64,
    /// The batch's last offset.
    pub last_offset: i64,
    /// The batch's size in bytes, as fetched.
    pub bytes: usize,
}

/// Code run on what the consumer hands out. Defaults to doing nothing.
pub trait ConsumerInterceptor: Send + Sync + 'static {
    /// Called once per batch, on the consuming task, before the application sees it.
    fn on_consume(&self, batch: &ConsumedBatch<'_>) {
        let _ = batch;
    }
}
