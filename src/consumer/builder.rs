//! [`ConsumerBuilder`]: a consumer with settings of its own over a shared client, so
//! consumers that differ (isolation level, fetch sizes and waits, reset policy) share
//! one client's connections and worker threads instead of each needing a client.

use std::time::Duration;

use super::Consumer;
use crate::client::Client;
use crate::config::{Config, ConsumerConfig, IsolationLevel, OffsetReset, Role, set_for_role};
use crate::error::Result;

/// Builds a [`Consumer`] with its own settings over a client's connections and workers
/// ([`Consumer::builder`]).
///
/// It starts from the client's [`ConsumerConfig`] (`client.config().consumer`), so a
/// builder given nothing makes what [`Consumer::new`] makes. [`ConsumerBuilder::config`]
/// replaces those settings whole, [`ConsumerBuilder::set`] takes consumer properties by
/// their Java or librdkafka names, and the typed setters the common ones. A property of
/// a producer, a group or the client (`bootstrap.servers`, `security.protocol`, ...) is
/// refused ([`ConfigurationError::NotForRole`](crate::config::ConfigurationError::NotForRole)).
/// [`ConsumerBuilder::build`] validates the result as [`Config::validate`] does (e.g.
/// `kring.fetch.max.decompressed.bytes` at least `max.partition.fetch.bytes`).
/// The partition consumers, their fetchers and the offset managers made with
/// [`Consumer::offset_manager`] all read these settings.
///
/// ```no_run
/// use kring::config::IsolationLevel;
/// use kring::consumer::{Consumer, Offset};
/// use kring::{Client, Config};
/// # async fn run() -> kring::Result<()> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// // Two consumers on one client: everything, and committed transactions only.
/// let all = Consumer::new(client.clone())?;
/// let committed = Consumer::builder(&client)
///     .set("fetch.max.wait.ms", "100")?
///     .isolation_level(IsolationLevel::ReadCommitted)
///     .build()?;
/// let mut pc = committed.consume_partition("orders", 0, Offset::Oldest).await?;
/// # drop(all); let _ = pc.next_message().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ConsumerBuilder {
    client: Client,
    /// The client's configuration with this consumer's section (`consumer`) changed;
    /// only that section is taken by `build`.
    config: Config,
}

impl ConsumerBuilder {
    /// A builder starting from `client`'s consumer settings.
    pub fn new(client: &Client) -> ConsumerBuilder {
        ConsumerBuilder {
            client: client.clone(),
            config: client.config().clone(),
        }
    }

    /// The settings so far.
    pub fn consumer_config(&self) -> &ConsumerConfig {
        &self.config.consumer
    }

    /// Replaces the consumer settings whole.
    pub fn config(mut self, consumer: ConsumerConfig) -> Self {
        self.config.consumer = consumer;
        self
    }

    /// Sets a consumer property by its Java or librdkafka name (`fetch.max.wait.ms`,
    /// `isolation.level`, `auto.offset.reset`, ...), parsed as [`Config::set`] parses it.
    /// Another role's property, or the client's, is an error saying where it belongs.
    pub fn set(mut self, name: &str, value: &str) -> Result<Self> {
        set_for_role(&mut self.config, Role::Consumer, name, value)?;
        Ok(self)
    }

    /// `isolation.level`.
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.config.consumer.isolation_level = level;
        self
    }

    /// `auto.offset.reset`.
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.config.consumer.auto_offset_reset = reset;
        self
    }

    /// `fetch.max.wait.ms`.
    pub fn fetch_max_wait(mut self, wait: Duration) -> Self {
        self.config.consumer.fetch_max_wait = wait;
        self
    }

    /// `fetch.max.bytes`.
    pub fn fetch_max_bytes(mut self, bytes: i32) -> Self {
        self.config.consumer.fetch_max_bytes = bytes;
        self
    }

    /// Adds an interceptor after those already configured
    /// ([`ConsumerConfig::interceptors`]).
    pub fn interceptor(
        mut self,
        interceptor: std::sync::Arc<dyn super::ConsumerInterceptor>,
    ) -> Self {
        self.config.consumer.interceptors.push(interceptor);
        self
    }

    /// Validates the settings and makes the consumer.
    pub fn build(self) -> Result<Consumer> {
        Consumer::start(self.client, self.config.consumer)
    }
}
