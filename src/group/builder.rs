//! [`GroupConsumerBuilder`]: a group member with settings of its own (group and
//! consumer) over a shared client, so members of different groups, or with different
//! session timeouts or isolation levels, share one client's connections and workers.

use std::time::Duration;

use super::consumer::NoListener;
use super::{GroupConsumer, RebalanceListener, Topics};
use crate::client::Client;
use crate::config::{
    Config, ConsumerConfig, GroupConfig, GroupProtocol, IsolationLevel, OffsetReset, Role,
    set_for_role,
};
use crate::error::Result;

/// Builds a [`GroupConsumer`] with its own group and consumer settings over a client's
/// connections and workers ([`GroupConsumer::builder`]).
///
/// It starts from the client's [`GroupConfig`] and [`ConsumerConfig`], so a builder
/// given nothing joins as [`GroupConsumer::subscribe`] does. [`GroupConsumerBuilder::config`]
/// and [`GroupConsumerBuilder::consumer_config`] replace those sections whole,
/// [`GroupConsumerBuilder::set`] takes group and consumer properties by their Java or
/// librdkafka names (`group.id`, `session.timeout.ms`, `isolation.level`,
/// `enable.auto.commit`, ...), and the typed setters the common ones. A producer's or
/// the client's property (`bootstrap.servers`, `security.protocol`, ...) is refused
/// ([`ConfigurationError::NotForRole`](crate::config::ConfigurationError::NotForRole)).
/// [`GroupConsumerBuilder::subscribe`] validates as [`Config::validate`] does and joins.
///
/// ```no_run
/// use kring::group::{GroupConsumer, Topics};
/// use kring::{Client, Config};
/// # async fn run() -> kring::Result<()> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// // Two groups on one client.
/// let billing = GroupConsumer::builder(&client)
///     .group_id("billing")
///     .set("session.timeout.ms", "10000")?
///     .subscribe(Topics::names(["orders"]))
///     .await?;
/// let audit = GroupConsumer::builder(&client)
///     .group_id("audit")
///     .set("isolation.level", "read_committed")?
///     .subscribe(Topics::names(["orders"]))
///     .await?;
/// # drop((billing, audit));
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until subscribe() is called"]
pub struct GroupConsumerBuilder {
    client: Client,
    /// The client's configuration with this member's `group` and `consumer` sections
    /// changed; only those are taken by `subscribe`.
    config: Config,
    listener: Box<dyn RebalanceListener>,
}

impl std::fmt::Debug for GroupConsumerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConsumerBuilder")
            .field("group", &self.config.group)
            .field("consumer", &self.config.consumer)
            .finish_non_exhaustive()
    }
}

impl GroupConsumerBuilder {
    /// A builder starting from `client`'s group and consumer settings.
    pub fn new(client: &Client) -> GroupConsumerBuilder {
        GroupConsumerBuilder {
            client: client.clone(),
            config: client.config().clone(),
            listener: Box::new(NoListener),
        }
    }

    /// The group settings so far.
    pub fn group_config(&self) -> &GroupConfig {
        &self.config.group
    }

    /// Replaces the group settings whole.
    pub fn config(mut self, group: GroupConfig) -> Self {
        self.config.group = group;
        self
    }

    /// Replaces the consumer settings (fetching, reset, auto-commit) whole.
    pub fn consumer_config(mut self, consumer: ConsumerConfig) -> Self {
        self.config.consumer = consumer;
        self
    }

    /// Sets a group or consumer property by its Java or librdkafka name, parsed as
    /// [`Config::set`] parses it. A producer's or the client's property is an error
    /// saying where it belongs.
    pub fn set(mut self, name: &str, value: &str) -> Result<Self> {
        set_for_role(&mut self.config, Role::GroupConsumer, name, value)?;
        Ok(self)
    }

    /// `group.id`.
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.config.group.group_id = Some(group.into());
        self
    }

    /// `group.instance.id` (static membership, KIP-345).
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.config.group.group_instance_id = Some(id.into());
        self
    }

    /// `session.timeout.ms`.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.config.group.session_timeout = timeout;
        self
    }

    /// `group.protocol`.
    pub fn protocol(mut self, protocol: GroupProtocol) -> Self {
        self.config.group.protocol = protocol;
        self
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

    /// `enable.auto.commit`.
    pub fn enable_auto_commit(mut self, on: bool) -> Self {
        self.config.consumer.enable_auto_commit = on;
        self
    }

    /// Rebalance callbacks ([`GroupConsumer::with_listener`]).
    pub fn listener(mut self, listener: Box<dyn RebalanceListener>) -> Self {
        self.listener = listener;
        self
    }

    /// Validates the settings and joins the group subscribed to `topics`; returns at
    /// once, as [`GroupConsumer::subscribe`] does.
    pub async fn subscribe(self, topics: Topics) -> Result<GroupConsumer> {
        let mut config = self.client.config().clone();
        config.group = self.config.group;
        config.consumer = self.config.consumer;
        GroupConsumer::start(self.client, config, topics, self.listener).await
    }
}
