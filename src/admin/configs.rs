//! Configs of topics and brokers: describe (DescribeConfigs), replace
//! (AlterConfigs, the legacy whole-set API) and change one entry at a time
//! (IncrementalAlterConfigs, KIP-339). A broker's own configs go to that broker; the
//! cluster-wide broker default (empty name) and topics to any broker, which forwards to
//! the controller under KRaft. Each alter call is one resource, which the broker
//! applies atomically: all entries or none, so a bad entry leaves the others unchanged;
//! `validate_only` checks without applying.

use super::{Admin, ConfigEntry, Route, check, left_out};
use crate::error::{Error, Result};
use crate::protocol::messages::{
    AlterConfigsRequest, ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    alter_configs, describe_configs::DescribeConfigsResource, incremental_alter_configs,
};

/// A resource that has configs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConfigResource {
    /// A topic.
    Topic(String),
    /// One broker's own (per-broker, dynamic) configs.
    Broker(i32),
    /// The cluster-wide default of every broker's dynamic configs.
    BrokerDefault,
    /// One broker's log4j logger levels.
    BrokerLogger(i32),
}

impl ConfigResource {
    /// The resource type on the wire (`ConfigResource.Type`).
    pub fn type_code(&self) -> i8 {
        match self {
            ConfigResource::Topic(_) => 2,
            ConfigResource::Broker(_) | ConfigResource::BrokerDefault => 4,
            ConfigResource::BrokerLogger(_) => 8,
        }
    }

    /// The resource name on the wire.
    pub fn wire_name(&self) -> String {
        match self {
            ConfigResource::Topic(t) => t.clone(),
            ConfigResource::Broker(id) | ConfigResource::BrokerLogger(id) => id.to_string(),
            ConfigResource::BrokerDefault => String::new(),
        }
    }

    /// Where requests about it go: a broker's own configs to that broker.
    fn route(&self) -> Route {
        match self {
            ConfigResource::Broker(id) | ConfigResource::BrokerLogger(id) => Route::Node(*id),
            ConfigResource::Topic(_) | ConfigResource::BrokerDefault => Route::Any,
        }
    }
}

impl std::fmt::Display for ConfigResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigResource::Topic(t) => write!(f, "topic {t}"),
            ConfigResource::Broker(id) => write!(f, "broker {id}"),
            ConfigResource::BrokerDefault => f.write_str("the broker default"),
            ConfigResource::BrokerLogger(id) => write!(f, "broker {id}'s loggers"),
        }
    }
}

/// Where a config value comes from (DescribeConfigs v1+ `ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigSource {
    /// Set on the topic.
    Topic,
    /// Set dynamically for this broker.
    DynamicBroker,
    /// Set dynamically as the default of every broker.
    DynamicDefaultBroker,
    /// In the broker's properties file.
    StaticBroker,
    /// Kafka's built-in default.
    Default,
    /// Set dynamically for this broker's logger.
    DynamicBrokerLogger,
    /// A client metrics or group config, or one this crate doesn't know.
    Unknown,
}

impl ConfigSource {
    fn from_wire(code: i8) -> Self {
        match code {
            1 => ConfigSource::Topic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            6 => ConfigSource::DynamicBrokerLogger,
            _ => ConfigSource::Unknown,
        }
    }

    /// Its name as the Java tools print it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::Topic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::DynamicBrokerLogger => "DYNAMIC_BROKER_LOGGER_CONFIG",
            ConfigSource::Unknown => "UNKNOWN",
        }
    }
}

/// One change of an incremental alter (KIP-339 `OpType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Sets `name` to `value`.
    Set(String, String),
    /// Removes `name`'s override, back to its default.
    Delete(String),
    /// Appends `value` to list config `name`.
    Append(String, String),
    /// Removes `value` from list config `name`.
    Subtract(String, String),
}

impl AlterConfigOp {
    /// The config it changes.
    pub fn name(&self) -> &str {
        match self {
            AlterConfigOp::Set(n, _)
            | AlterConfigOp::Delete(n)
            | AlterConfigOp::Append(n, _)
            | AlterConfigOp::Subtract(n, _) => n,
        }
    }

    fn to_wire(&self) -> incremental_alter_configs::AlterableConfig {
        let (op, value) = match self {
            AlterConfigOp::Set(_, v) => (0, Some(v.clone())),
            AlterConfigOp::Delete(_) => (1, None),
            AlterConfigOp::Append(_, v) => (2, Some(v.clone())),
            AlterConfigOp::Subtract(_, v) => (3, Some(v.clone())),
        };
        incremental_alter_configs::AlterableConfig::default()
            .with_name(self.name().to_string())
            .with_config_operation(op)
            .with_value(value)
    }
}

impl Admin {
    /// Every config of `resource`, defaults included, sorted by name.
    pub async fn describe_configs(&self, resource: &ConfigResource) -> Result<Vec<ConfigEntry>> {
        let label = resource.to_string();
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource.type_code())
                .with_resource_name(resource.wire_name())
                .with_configuration_keys(None),
        ]);
        let label = &label;
        self.run(resource.route(), |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                let result = response
                    .results
                    .into_iter()
                    .next()
                    .ok_or_else(|| left_out(ApiKey::DescribeConfigs, label))?;
                check(
                    ApiKey::DescribeConfigs,
                    label,
                    result.error_code,
                    result.error_message,
                )?;
                let mut entries: Vec<ConfigEntry> = result
                    .configs
                    .into_iter()
                    .map(|c| {
                        let source = ConfigSource::from_wire(c.config_source);
                        ConfigEntry {
                            // v1+ reports the source; v0 a flag.
                            is_default: c.is_default || source == ConfigSource::Default,
                            name: c.name,
                            value: c.value,
                            read_only: c.read_only,
                            sensitive: c.is_sensitive,
                            source,
                        }
                    })
                    .collect();
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(entries)
            }
        })
        .await
    }

    /// Applies `ops` to `resource`'s configs, all or none (IncrementalAlterConfigs); an
    /// unknown config name or a bad value is an error naming the resource, with the
    /// broker's explanation. With `validate_only` the broker checks without applying.
    pub async fn incremental_alter_configs(
        &self,
        resource: &ConfigResource,
        ops: &[AlterConfigOp],
        validate_only: bool,
    ) -> Result<()> {
        refuse_duplicates(resource, ops.iter().map(AlterConfigOp::name))?;
        let label = resource.to_string();
        let request = IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![
                incremental_alter_configs::AlterConfigsResource::default()
                    .with_resource_type(resource.type_code())
                    .with_resource_name(resource.wire_name())
                    .with_configs(ops.iter().map(AlterConfigOp::to_wire).collect()),
            ]);
        let label = &label;
        self.run(resource.route(), |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                let result = response
                    .responses
                    .into_iter()
                    .next()
                    .ok_or_else(|| left_out(ApiKey::IncrementalAlterConfigs, label))?;
                check(
                    ApiKey::IncrementalAlterConfigs,
                    label,
                    result.error_code,
                    result.error_message,
                )
            }
        })
        .await
    }

    /// Replaces `resource`'s whole set of overrides with `entries` (AlterConfigs, the
    /// legacy API: every override not listed goes back to its default).
    pub async fn alter_configs(
        &self,
        resource: &ConfigResource,
        entries: &[(String, String)],
        validate_only: bool,
    ) -> Result<()> {
        refuse_duplicates(resource, entries.iter().map(|(k, _)| k.as_str()))?;
        let label = resource.to_string();
        let request = AlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![
                alter_configs::AlterConfigsResource::default()
                    .with_resource_type(resource.type_code())
                    .with_resource_name(resource.wire_name())
                    .with_configs(
                        entries
                            .iter()
                            .map(|(k, v)| {
                                alter_configs::AlterableConfig::default()
                                    .with_name(k.clone())
                                    .with_value(Some(v.clone()))
                            })
                            .collect(),
                    ),
            ]);
        let label = &label;
        self.run(resource.route(), |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                let result = response
                    .responses
                    .into_iter()
                    .next()
                    .ok_or_else(|| left_out(ApiKey::AlterConfigs, label))?;
                check(
                    ApiKey::AlterConfigs,
                    label,
                    result.error_code,
                    result.error_message,
                )
            }
        })
        .await
    }
}

/// The same config twice in one alter is ambiguous (the broker refuses it with
/// INVALID_REQUEST); say which before sending.
fn refuse_duplicates<'a>(
    resource: &ConfigResource,
    names: impl Iterator<Item = &'a str>,
) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(Error::InvalidArgument(format!(
                "config {name} of {resource} is changed twice in one request"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_and_ops_on_the_wire() {
        assert_eq!(ConfigResource::Topic("t".into()).type_code(), 2);
        assert_eq!(ConfigResource::Broker(3).wire_name(), "3");
        assert_eq!(ConfigResource::BrokerDefault.wire_name(), "");
        assert_eq!(ConfigResource::Broker(3).route(), Route::Node(3));
        let op = AlterConfigOp::Delete("retention.ms".into()).to_wire();
        assert_eq!((op.config_operation, op.value), (1, None));
        let op = AlterConfigOp::Subtract("a".into(), "x".into()).to_wire();
        assert_eq!(op.config_operation, 3);
        let twice = [
            AlterConfigOp::Set("a".into(), "1".into()),
            AlterConfigOp::Delete("a".into()),
        ];
        let e = refuse_duplicates(
            &ConfigResource::Topic("t".into()),
            twice.iter().map(AlterConfigOp::name),
        )
        .unwrap_err();
        assert!(e.to_string().contains("config a of topic t"), "{e}");
    }
}
