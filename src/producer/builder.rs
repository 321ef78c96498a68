//! [`ProducerBuilder`]: a producer with settings of its own over a shared client, so
//! producers that differ (acks, compression, linger, a transactional id) share one
//! client's connections and worker threads instead of each needing a client.

use std::time::Duration;

use std::sync::Arc;

use super::{DeliveryHandler, Partitioner, Producer};
use crate::client::Client;
use crate::config::{Acks, Compression, Config, ProducerConfig, Role, set_for_role};
use crate::error::Result;

/// Builds a [`Producer`] with its own settings over a client's connections and workers
/// ([`Producer::builder`]).
///
/// It starts from the client's [`ProducerConfig`] (`client.config().producer`), so a
/// builder given nothing makes what [`Producer::new`] makes. [`ProducerBuilder::config`]
/// replaces those settings whole, [`ProducerBuilder::set`] takes producer properties by
/// their Java or librdkafka names, and the typed setters the common ones. A property of
/// a consumer, a group or the client (`bootstrap.servers`, `security.protocol`, ...) is
/// refused ([`ConfigurationError::NotForRole`](crate::config::ConfigurationError::NotForRole)).
/// [`ProducerBuilder::build`] validates the result as [`Config::validate`] does (with the
/// client's connection settings, e.g. idempotence and `max.in.flight`).
///
/// ```no_run
/// use kring::config::{Acks, Compression};
/// use kring::producer::{Producer, ProducerRecord};
/// use kring::{Client, Config};
/// # async fn run() -> kring::Result<()> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// // Two producers on one client: the client's settings, and fast, compressed, acks=1.
/// let safe = Producer::new(client.clone()).await?;
/// let fast = Producer::builder(&client)
///     .set("linger.ms", "20")?
///     .enable_idempotence(false)
///     .acks(Acks::Leader)
///     .compression(Compression::Lz4)
///     .build()
///     .await?;
/// fast.send(ProducerRecord::new("metrics").with_value("42")).await?.await?;
/// # drop(safe);
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct ProducerBuilder {
    client: Client,
    /// The client's configuration with this producer's section (`producer`) changed;
    /// only that section is taken by `build`.
    config: Config,
    partitioner: Option<Box<dyn Partitioner>>,
    delivery_handler: Option<Arc<dyn DeliveryHandler>>,
}

impl std::fmt::Debug for ProducerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerBuilder")
            .field("producer", &self.config.producer)
            .field("partitioner", &self.partitioner)
            .field("delivery_handler", &self.delivery_handler.is_some())
            .finish_non_exhaustive()
    }
}

impl ProducerBuilder {
    /// A builder starting from `client`'s producer settings.
    pub fn new(client: &Client) -> ProducerBuilder {
        ProducerBuilder {
            client: client.clone(),
            config: client.config().clone(),
            partitioner: None,
            delivery_handler: None,
        }
    }

    /// The settings so far.
    pub fn producer_config(&self) -> &ProducerConfig {
        &self.config.producer
    }

    /// Replaces the producer settings whole.
    pub fn config(mut self, producer: ProducerConfig) -> Self {
        self.config.producer = producer;
        self
    }

    /// Sets a producer property by its Java or librdkafka name (`linger.ms`, `acks`,
    /// `compression.type`, `transactional.id`, ...), parsed as [`Config::set`] parses it.
    /// Another role's property, or the client's, is an error saying where it belongs.
    pub fn set(mut self, name: &str, value: &str) -> Result<Self> {
        set_for_role(&mut self.config, Role::Producer, name, value)?;
        Ok(self)
    }

    /// `acks`.
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.producer.acks = acks;
        self
    }

    /// `compression.type`.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.config.producer.compression = compression;
        self
    }

    /// `linger.ms`.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.config.producer.linger = linger;
        self
    }

    /// `batch.size`.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.producer.batch_size = bytes;
        self
    }

    /// `enable.idempotence`.
    pub fn enable_idempotence(mut self, on: bool) -> Self {
        self.config.producer.enable_idempotence = on;
        self
    }

    /// `transactional.id`: the producer is transactional.
    pub fn transactional_id(mut self, id: impl Into<String>) -> Self {
        self.config.producer.transactional_id = Some(id.into());
        self
    }

    /// Adds an interceptor after those already configured
    /// ([`ProducerConfig::interceptors`]).
    pub fn interceptor(
        mut self,
        interceptor: std::sync::Arc<dyn super::ProducerInterceptor>,
    ) -> Self {
        self.config.producer.interceptors.push(interceptor);
        self
    }

    /// Where the outcomes of records sent with [`Producer::send_tagged`] go: `handler`
    /// is called once per settled batch holding such records (see [`DeliveryHandler`]).
    /// Records sent with [`Producer::send`] still get their delivery futures.
    pub fn delivery_handler(mut self, handler: impl DeliveryHandler) -> Self {
        self.delivery_handler = Some(Arc::new(handler));
        self
    }

    /// A custom partitioner instead of the one `partitioner` names
    /// ([`Producer::with_partitioner`]).
    pub fn partitioner(mut self, partitioner: Box<dyn Partitioner>) -> Self {
        self.partitioner = Some(partitioner);
        self
    }

    /// Validates the settings and starts the producer (with idempotence, it first
    /// obtains a producer id, as [`Producer::new`] does).
    pub async fn build(self) -> Result<Producer> {
        Producer::start(
            self.client,
            self.config.producer,
            self.partitioner,
            self.delivery_handler,
        )
        .await
    }

    /// [`ProducerBuilder::build`] for plain threads.
    pub fn build_blocking(self) -> Result<Producer> {
        crate::client::block_on(self.build())
    }
}
