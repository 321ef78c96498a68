//! Cluster administration over a [`Client`]: what Sarama's `ClusterAdmin` and the Java
//! `Admin` do. Topics live here; the rest is split by subject: [`cluster`] (brokers,
//! controller, features, API versions), [`configs`] (describe, alter, incremental alter
//! for topics and brokers), [`partitions`] (create partitions, list offsets, delete
//! records), [`groups`] (consumer groups and their committed offsets), [`acls`],
//! [`replicas`] (leader elections, reassignments, log dirs), [`quotas`] (client quotas,
//! SCRAM credentials) and [`transactions`] (producers, transactions, aborting one).
//!
//! Every request goes to the broker its API needs — the controller the metadata names
//! (any broker forwards under KRaft, KIP-590), a named broker (its own configs), a
//! partition's leader, a group's coordinator (FindCoordinator), or every broker when the
//! answer is split among them (ListGroups). Answers that mean "ask again, elsewhere"
//! (NOT_CONTROLLER, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a lost connection,
//! a moved leader) are retried after a metadata or coordinator refresh until
//! `config.admin.timeout` runs out; everything else fails at once with an error that
//! names the resource (topic, partition, group or broker).
//!
//! The methods are async and run on any executor; from plain threads, the one generic
//! adapter [`crate::client::block_on`] waits for any of them:
//!
//! ```no_run
//! use kring::admin::{Admin, AlterConfigOp, ConfigResource};
//! use kring::client::block_on;
//!
//! let client = kring::Client::connect_blocking(kring::Config::new(["127.0.0.1:9092"]))?;
//! let admin = Admin::new(client);
//! block_on(admin.create_partitions("orders", 6, false))?;
//! let topic = ConfigResource::Topic("orders".into());
//! let set = AlterConfigOp::Set("retention.ms".into(), "86400000".into());
//! block_on(admin.incremental_alter_configs(&topic, &[set], false))?;
//! # Ok::<(), kring::Error>(())
//! ```
//!
//! Creation waits, by default, until every partition of the new topic has a leader in the
//! client's metadata, so a producer or consumer started right after sees the topic — the
//! broker's CreateTopics answer comes before the metadata has spread.

pub mod acls;
pub mod cluster;
pub mod configs;
pub mod groups;
pub mod partitions;
pub mod quotas;
pub mod replicas;
pub mod transactions;

use std::time::{Duration, Instant};

pub use acls::{
    AclBinding, AclBindingFilter, AclOperation, AclPermission, AclResourceType, PatternType,
};
pub use cluster::{ApiSupport, BrokerApis, ClusterDescription, Feature, Features};
pub use configs::{AlterConfigOp, ConfigResource, ConfigSource};
pub use groups::{CommittedOffset, GroupDescription, GroupListing, GroupMember};
pub use partitions::{DeleteBefore, ListedOffset, OffsetSpec, TopicPartition};
pub use quotas::{ClientQuota, QuotaEntity, QuotaMatch, ScramMechanism, UserScramCredentials};
pub use replicas::{Election, LogDir, LogDirReplica, Reassignment};
pub use transactions::{
    AbortTransaction, ProducerInfo, TransactionDescription, TransactionListing,
};

use crate::client::{Client, CoordinatorKind, TopicInfo};
use crate::error::{Error, Result};
use crate::io::Broker;
use crate::protocol::KafkaCode;
use crate::protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest, MetadataResponse,
    create_topics::{CreatableTopic, CreatableTopicConfig},
    delete_topics::DeleteTopicState,
    metadata::MetadataRequestTopic,
};

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Its name.
    pub name: String,
    /// Partitions; -1 takes the broker's `num.partitions`.
    pub partitions: i32,
    /// Replication factor; -1 takes the broker's `default.replication.factor`.
    pub replication_factor: i16,
    /// Topic configs (`retention.ms`, `cleanup.policy`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions and `replication_factor` replicas each.
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> Self {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    /// Adds a topic config.
    pub fn with_config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((name.into(), value.into()));
        self
    }
}

/// One config entry of a topic, as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The config name.
    pub name: String,
    /// Its value; `None` when sensitive or unset.
    pub value: Option<String>,
    /// Whether it is the broker's default rather than set on the topic.
    pub is_default: bool,
    /// Whether it can't be changed.
    pub read_only: bool,
    /// Whether the value is hidden because it is secret.
    pub sensitive: bool,
    /// Where the value comes from (v1+ of DescribeConfigs; `Unknown` before).
    pub source: ConfigSource,
}

/// Cluster administration: topics here, the other subjects in this module's submodules
/// (see the module documentation). Cheap to clone; shares the client's connections.
///
/// ```no_run
/// use kring::admin::{Admin, NewTopic};
/// use kring::{Client, Config};
///
/// # async fn run() -> kring::Result<()> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// let admin = Admin::new(client.clone());
/// let orders = NewTopic::new("orders", 6, 3).with_config("retention.ms", "86400000");
/// admin.create_topic(&orders).await?; // returns once every partition has a leader
/// for topic in admin.list_topics(false).await? {
///     println!("{}: {} partitions", topic.name, topic.partitions.len());
/// }
/// for committed in admin.list_group_offsets("billing").await? {
///     println!("{}-{}: {}", committed.topic, committed.partition, committed.offset);
/// }
/// admin.delete_topic("orders").await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    /// Administers the cluster `client` is connected to.
    pub fn new(client: Client) -> Self {
        Admin { client }
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Creates `topic` and waits until each of its partitions has a leader.
    pub async fn create_topic(&self, topic: &NewTopic) -> Result<()> {
        self.create_topic_without_waiting(topic).await?;
        self.wait_for_leaders(&topic.name).await
    }

    /// Creates `topic`, returning once the controller has accepted it.
    pub async fn create_topic_without_waiting(&self, topic: &NewTopic) -> Result<()> {
        let timeout = self.client.config().admin.timeout;
        let request = CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic.name.clone())
                    .with_num_partitions(topic.partitions)
                    .with_replication_factor(topic.replication_factor)
                    .with_configs(
                        topic
                            .configs
                            .iter()
                            .map(|(k, v)| {
                                CreatableTopicConfig::default()
                                    .with_name(k.clone())
                                    .with_value(Some(v.clone()))
                            })
                            .collect(),
                    ),
            ])
            .with_timeout_ms(millis(timeout));
        self.with_retries(ApiKey::CreateTopics, &topic.name, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                let result = response
                    .topics
                    .into_iter()
                    .next()
                    .ok_or_else(|| left_out(ApiKey::CreateTopics, &topic.name))?;
                Ok((result.error_code, result.error_message))
            }
        })
        .await
    }

    /// Deletes `topic`.
    pub async fn delete_topic(&self, topic: &str) -> Result<()> {
        let timeout = self.client.config().admin.timeout;
        self.with_retries(ApiKey::DeleteTopics, topic, |broker| {
            let version = broker
                .api_versions()
                .and_then(|v| v.version_for(ApiKey::DeleteTopics))
                .unwrap_or(0);
            // v6 names topics in `topics` (KIP-516 allows ids); earlier in `topic_names`.
            let request = if version >= 6 {
                DeleteTopicsRequest::default().with_topics(vec![
                    DeleteTopicState::default().with_name(Some(topic.to_string())),
                ])
            } else {
                DeleteTopicsRequest::default().with_topic_names(vec![topic.to_string()])
            }
            .with_timeout_ms(millis(timeout));
            async move {
                let response = broker.send(request).await?;
                let result = response
                    .responses
                    .into_iter()
                    .next()
                    .ok_or_else(|| left_out(ApiKey::DeleteTopics, topic))?;
                Ok((result.error_code, result.error_message))
            }
        })
        .await?;
        // Forget it, so a describe right after doesn't answer from the cache.
        let _ = self.client.refresh_metadata(&[topic]).await;
        Ok(())
    }

    /// Every topic, sorted by name; internal ones (`__consumer_offsets`) only when asked.
    pub async fn list_topics(&self, include_internal: bool) -> Result<Vec<TopicInfo>> {
        self.client.refresh_all_metadata().await?;
        let metadata = self.client.metadata();
        let mut topics: Vec<TopicInfo> = metadata
            .topics
            .values()
            .filter(|t| include_internal || !t.internal)
            .filter(|t| t.error.is_ok())
            .cloned()
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// A topic's partitions, leaders and replicas, fresh from the cluster; an unknown
    /// topic is `UNKNOWN_TOPIC_OR_PARTITION`.
    pub async fn describe_topic(&self, topic: &str) -> Result<TopicInfo> {
        self.client.refresh_metadata(&[topic]).await?;
        let info = self.client.topic(topic).await?;
        if !info.error.is_ok() {
            return Err(Error::broker(
                info.error,
                ApiKey::Metadata,
                Some(topic),
                None,
            ));
        }
        Ok(info)
    }

    /// A topic's configs, every one including the defaults, sorted by name.
    pub async fn topic_configs(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        self.describe_configs(&ConfigResource::Topic(topic.to_string()))
            .await
    }

    /// Waits until the metadata shows every partition of `topic` with a leader, as every
    /// broker answering tells it. A new topic reaches the brokers' metadata one by one, so
    /// a client bootstrapping from another broker right after could be told it does not
    /// exist (on three nodes, 5 of about 100 `kring produce` runs right after `kring
    /// topics create` were).
    pub async fn wait_for_leaders(&self, topic: &str) -> Result<()> {
        let deadline = Instant::now() + self.client.config().admin.timeout;
        loop {
            self.client.refresh_metadata(&[topic]).await?;
            if let Some(t) = self.client.metadata().topics.get(topic)
                && t.error.is_ok()
                && !t.partitions.is_empty()
                && t.partitions.iter().all(|p| p.leader >= 0)
                && self.every_broker_leads(topic).await
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout(format!(
                    "{topic} has no leader for every partition after {:?}",
                    self.client.config().admin.timeout
                )));
            }
            self.client.sleep(Duration::from_millis(50)).await?;
        }
    }

    /// Whether every broker that answers shows every partition of `topic` with a leader
    /// (one that does not answer is passed over: it tells no client anything either).
    async fn every_broker_leads(&self, topic: &str) -> bool {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic.to_string())),
            ]))
            .with_allow_auto_topic_creation(false);
        for broker in self.client.brokers() {
            if let Ok(answer) = broker.send(request.clone()).await
                && !shows_leaders(&answer, topic)
            {
                return false;
            }
        }
        true
    }

    /// Runs `attempt` against the controller (or any broker) until it succeeds, fails
    /// for good, or the admin timeout passes. `attempt` answers the broker's error code
    /// and message for the one resource it concerns.
    async fn with_retries<F, Fut>(&self, api: ApiKey, resource: &str, attempt: F) -> Result<()>
    where
        F: Fn(Broker) -> Fut,
        Fut: std::future::Future<Output = Result<(i16, Option<String>)>>,
    {
        self.run(Route::Controller, |broker| {
            let answer = attempt(broker);
            async move {
                let (code, message) = answer.await?;
                check(api, resource, code, message)
            }
        })
        .await
    }

    /// Runs `attempt` on the broker `route` names until it succeeds, fails for good
    /// ([`worth_retrying`] says which failures are passing), or the admin timeout
    /// passes. Between attempts the route is looked up again: metadata refreshed, a
    /// coordinator forgotten.
    pub(crate) async fn run<T, F, Fut>(&self, route: Route, attempt: F) -> Result<T>
    where
        F: Fn(Broker) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let config = self.client.config();
        let deadline = Instant::now() + config.admin.timeout;
        loop {
            let outcome = match self.broker_for(&route).await {
                Ok(broker) => attempt(broker).await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok(v) => return Ok(v),
                Err(e) if worth_retrying(&e) && Instant::now() < deadline => {
                    tracing::debug!(error = %e, ?route, "admin request retried");
                    self.reroute(&route).await;
                    self.client.sleep(config.admin.retry_backoff).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The connected broker `route` names.
    async fn broker_for(&self, route: &Route) -> Result<Broker> {
        let broker = match route {
            Route::Controller => match self.client.controller() {
                Some(b) => b,
                None => self.client.any_broker()?,
            },
            Route::Any => self.client.any_broker()?,
            Route::Node(id) => self.node(*id).await?,
            Route::Group(group) => self.client.coordinator(group).await?,
            Route::Transaction(id) => self.client.transaction_coordinator(id).await?,
        };
        broker.connect().await?;
        Ok(broker)
    }

    /// Broker `id`'s handle, refreshing metadata once if it is not known yet.
    pub(crate) async fn node(&self, id: i32) -> Result<Broker> {
        if let Some(b) = self.client.broker(id) {
            return Ok(b);
        }
        self.client.refresh_metadata(&[]).await?;
        self.client.broker(id).ok_or(Error::UnknownBroker(id))
    }

    /// After a failed attempt: forget what may have pointed to the wrong broker.
    async fn reroute(&self, route: &Route) {
        match route {
            Route::Group(g) => self
                .client
                .invalidate_coordinator(CoordinatorKind::Group, g),
            Route::Transaction(t) => self
                .client
                .invalidate_coordinator(CoordinatorKind::Transaction, t),
            Route::Controller | Route::Any | Route::Node(_) => {
                let _ = self.client.refresh_metadata(&[]).await;
            }
        }
    }

    /// The deadline of an operation that starts now.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.client.config().admin.timeout
    }

    /// The request timeout admin requests carry (`timeout_ms` fields).
    pub(crate) fn timeout_ms(&self) -> i32 {
        millis(self.client.config().admin.timeout)
    }
}

/// Where an admin request must go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// The active controller (any broker forwards under KRaft).
    Controller,
    /// Any broker.
    Any,
    /// One broker, by id (its own configs, its log dirs).
    Node(i32),
    /// A consumer group's coordinator.
    Group(String),
    /// A transactional id's coordinator.
    Transaction(String),
}

/// Whether a failed attempt may succeed when sent again (after the route is looked up
/// again): lost connections and the answers that say "not here" or "not yet". Codes
/// that Kafka calls retriable but that mean the resource is missing
/// (UNKNOWN_TOPIC_OR_PARTITION) fail at once: an admin call on a missing topic must
/// say so, not wait out its timeout.
pub(crate) fn worth_retrying(e: &Error) -> bool {
    match e {
        Error::Broker { code, .. } | Error::Rejected { code, .. } => passing_code(*code),
        Error::Io(e) => e.is_retriable(),
        Error::NotConnected(_) | Error::OutOfBrokers(_) => true,
        _ => false,
    }
}

/// The broker codes [`worth_retrying`] retries.
pub(crate) fn passing_code(code: KafkaCode) -> bool {
    [
        KafkaCode::NOT_CONTROLLER,
        KafkaCode::NOT_COORDINATOR,
        KafkaCode::COORDINATOR_LOAD_IN_PROGRESS,
        KafkaCode::COORDINATOR_NOT_AVAILABLE,
        KafkaCode::LEADER_NOT_AVAILABLE,
        KafkaCode::NOT_LEADER_OR_FOLLOWER,
        KafkaCode::FENCED_LEADER_EPOCH,
        KafkaCode::UNKNOWN_LEADER_EPOCH,
        KafkaCode::THROTTLING_QUOTA_EXCEEDED,
        KafkaCode::REBALANCE_IN_PROGRESS,
    ]
    .contains(&code)
}

/// The version of `api` the connected `broker` and this crate share, or an error
/// naming the broker when they share none.
pub(crate) fn version_of(broker: &Broker, api: ApiKey) -> Result<i16> {
    broker
        .api_versions()
        .and_then(|v| v.version_for(api))
        .ok_or_else(|| Error::Rejected {
            api,
            resource: format!("broker {}", broker.id()),
            code: KafkaCode::UNSUPPORTED_VERSION,
            message: Some("the broker and kring share no version of this API".into()),
        })
}

/// The error for an answer that left out the resource it was asked about.
pub(crate) fn left_out(api: ApiKey, resource: impl Into<String>) -> Error {
    Error::Incomplete {
        api,
        resource: resource.into(),
    }
}

/// The error a per-resource answer carries, if any.
fn check(api: ApiKey, resource: &str, code: i16, message: Option<String>) -> Result<()> {
    let code = KafkaCode(code);
    if code.is_ok() {
        return Ok(());
    }
    Err(Error::Rejected {
        api,
        resource: resource.to_string(),
        code,
        message: message.filter(|m| !m.is_empty()),
    })
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

/// Whether a Metadata answer shows `topic` with every partition led.
fn shows_leaders(answer: &MetadataResponse, topic: &str) -> bool {
    answer.topics.iter().any(|t| {
        t.name.as_deref() == Some(topic)
            && t.error_code == 0
            && !t.partitions.is_empty()
            && t.partitions.iter().all(|p| p.leader_id >= 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_resource_errors_keep_the_brokers_message() {
        assert!(check(ApiKey::CreateTopics, "t", 0, None).is_ok());
        let e = check(
            ApiKey::CreateTopics,
            "orders",
            KafkaCode::TOPIC_ALREADY_EXISTS.0,
            Some("Topic 'orders' already exists.".into()),
        )
        .unwrap_err();
        assert_eq!(e.code(), Some(KafkaCode::TOPIC_ALREADY_EXISTS));
        assert!(!e.is_retriable());
        let text = e.to_string();
        assert!(text.contains("orders"), "{text}");
        assert!(text.contains("TOPIC_ALREADY_EXISTS"), "{text}");
        assert!(text.contains("already exists."), "{text}");
        let retriable = check(ApiKey::DeleteTopics, "t", KafkaCode::NOT_CONTROLLER.0, None);
        assert!(retriable.unwrap_err().is_retriable());
    }
}
