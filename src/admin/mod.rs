//! Cluster administration over a [`Client`]: create, delete, list and describe topics
//! and read their configs — the topic half of Sarama's `ClusterAdmin` and of the Java
//! `Admin`. Requests go to the controller the metadata names (any broker forwards them
//! under KRaft, KIP-590); NOT_CONTROLLER and other retriable answers are retried after a
//! metadata refresh until `config.admin.timeout` runs out.
//!
//! Creation waits, by default, until every partition of the new topic has a leader in the
//! client's metadata, so a producer or consumer started right after sees the topic — the
//! broker's CreateTopics answer comes before the metadata has spread.

use std::time::{Duration, Instant};

use crate::client::{Client, TopicInfo};
use crate::error::{Error, Result};
use crate::io::Broker;
use crate::protocol::KafkaCode;
use crate::protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    create_topics::{CreatableTopic, CreatableTopicConfig},
    delete_topics::DeleteTopicState,
    describe_configs::DescribeConfigsResource,
};

/// DescribeConfigs resource type of a topic (`ConfigResource.Type.TOPIC`).
const RESOURCE_TOPIC: i8 = 2;

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
}

/// Topic administration. Cheap to clone; shares the client's connections.
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
                let result = response.topics.into_iter().next().ok_or_else(|| {
                    Error::Timeout("CreateTopics answered without the topic".into())
                })?;
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
                let result = response.responses.into_iter().next().ok_or_else(|| {
                    Error::Timeout("DeleteTopics answered without the topic".into())
                })?;
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
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(topic.to_string())
                .with_configuration_keys(None),
        ]);
        let response = self.client.send_any(request).await?;
        let result =
            response.results.into_iter().next().ok_or_else(|| {
                Error::Timeout("DescribeConfigs answered without the topic".into())
            })?;
        check(
            ApiKey::DescribeConfigs,
            topic,
            result.error_code,
            result.error_message,
        )?;
        let mut entries: Vec<ConfigEntry> = result
            .configs
            .into_iter()
            .map(|c| ConfigEntry {
                // v1+ reports the source (5 = DEFAULT_CONFIG); v0 a flag.
                is_default: c.is_default || c.config_source == 5,
                name: c.name,
                value: c.value,
                read_only: c.read_only,
                sensitive: c.is_sensitive,
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Waits until the metadata shows every partition of `topic` with a leader.
    pub async fn wait_for_leaders(&self, topic: &str) -> Result<()> {
        let deadline = Instant::now() + self.client.config().admin.timeout;
        loop {
            self.client.refresh_metadata(&[topic]).await?;
            if let Some(t) = self.client.metadata().topics.get(topic)
                && t.error.is_ok()
                && !t.partitions.is_empty()
                && t.partitions.iter().all(|p| p.leader >= 0)
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

    /// Runs `attempt` against the controller (or any broker) until it succeeds, fails
    /// for good, or the admin timeout passes. `attempt` answers the broker's error code
    /// and message for the one resource it concerns.
    async fn with_retries<F, Fut>(&self, api: ApiKey, resource: &str, attempt: F) -> Result<()>
    where
        F: Fn(Broker) -> Fut,
        Fut: std::future::Future<Output = Result<(i16, Option<String>)>>,
    {
        let config = self.client.config();
        let deadline = Instant::now() + config.admin.timeout;
        loop {
            let broker = match self.client.controller() {
                Some(b) => b,
                None => self.client.any_broker()?,
            };
            let outcome = attempt(broker)
                .await
                .and_then(|(code, message)| check(api, resource, code, message));
            match outcome {
                Ok(()) => return Ok(()),
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    let _ = self.client.refresh_all_metadata().await;
                    self.client.sleep(config.admin.retry_backoff).await?;
                }
                Err(e) => return Err(e),
            }
        }
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
