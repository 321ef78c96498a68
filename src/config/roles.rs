//! Per-role settings: which part of a [`Config`] each property belongs to, and setting a
//! role's properties on top of a client's configuration, as the builders of
//! `Producer`, `Consumer` and `GroupConsumer` do (several roles with different settings
//! over one client and its workers).
//!
//! A builder takes only its role's properties: a producer's (`acks`, `linger.ms`, ...),
//! a consumer's (`fetch.*`, `isolation.level`, ...), a group member's (a consumer's and
//! `group.*`, `session.timeout.ms`, ...). A property of another role, or of the client
//! (connections, metadata, security, admin, the I/O runtime: `bootstrap.servers`,
//! `security.protocol`, ...), is refused with [`ConfigurationError::NotForRole`] naming
//! where it belongs, so no setting is accepted and then ignored.

use super::{Config, ConfigurationError};

/// The part of a [`Config`] a property sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PropertyScope {
    /// The client's: connections, metadata, security, admin and the I/O runtime, shared
    /// by every role on one client.
    Client,
    /// A producer's ([`ProducerConfig`](super::ProducerConfig)).
    Producer,
    /// A consumer's ([`ConsumerConfig`](super::ConsumerConfig)).
    Consumer,
    /// A group member's ([`GroupConfig`](super::GroupConfig)).
    Group,
}

/// Producer properties (`ProducerConfig`). `retry.backoff.ms` also sets the client's
/// metadata and admin backoff on a whole `Config`; on a producer it sets the producer's
/// retry backoff alone.
const PRODUCER: &[&str] = &[
    "acks",
    "request.required.acks",
    "linger.ms",
    "queue.buffering.max.ms",
    "batch.size",
    "buffer.memory",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "max.request.size",
    "message.max.bytes",
    "compression.type",
    "compression.codec",
    "enable.idempotence",
    "retries",
    "message.send.max.retries",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "delivery.timeout.ms",
    "message.timeout.ms",
    "partitioner",
    "transactional.id",
    "transaction.timeout.ms",
];

/// Consumer properties (`ConsumerConfig`).
const CONSUMER: &[&str] = &[
    "fetch.min.bytes",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.max.wait.ms",
    "fetch.wait.max.ms",
    "auto.offset.reset",
    "isolation.level",
    "check.crcs",
    "kring.fetch.buffer.memory",
    "kring.fetch.max.decompressed.bytes",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "client.rack",
];

/// Group member properties (`GroupConfig`).
const GROUP: &[&str] = &[
    "group.id",
    "group.instance.id",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "group.protocol",
    "group.remote.assignor",
];

impl PropertyScope {
    /// Where property `name` belongs; `None` for a name kring does not know.
    pub fn of(name: &str) -> Option<PropertyScope> {
        let name = name.trim();
        if PRODUCER.contains(&name) {
            Some(PropertyScope::Producer)
        } else if CONSUMER.contains(&name) {
            Some(PropertyScope::Consumer)
        } else if GROUP.contains(&name) {
            Some(PropertyScope::Group)
        } else if super::PROPERTIES.contains(&name) {
            Some(PropertyScope::Client)
        } else {
            None
        }
    }

    /// What the scope is, for error messages.
    fn describe(self) -> &'static str {
        match self {
            PropertyScope::Client => {
                "a client setting (connections, metadata, security, admin and the I/O runtime \
                 are shared by every role on a client): set it in the client's Config"
            }
            PropertyScope::Producer => "a producer setting: set it on a producer's builder",
            PropertyScope::Consumer => {
                "a consumer setting: set it on a consumer's or a group consumer's builder"
            }
            PropertyScope::Group => "a group setting: set it on a group consumer's builder",
        }
    }
}

/// A role that takes some of the properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `Producer::builder`.
    Producer,
    /// `Consumer::builder`.
    Consumer,
    /// `GroupConsumer::builder`: consumer and group properties.
    GroupConsumer,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Producer => "a producer",
            Role::Consumer => "a consumer",
            Role::GroupConsumer => "a group consumer",
        }
    }

    fn accepts(self, scope: PropertyScope) -> bool {
        matches!(
            (self, scope),
            (Role::Producer, PropertyScope::Producer)
                | (Role::Consumer, PropertyScope::Consumer)
                | (
                    Role::GroupConsumer,
                    PropertyScope::Consumer | PropertyScope::Group
                )
        )
    }
}

/// The message of [`ConfigurationError::NotForRole`].
pub(super) fn not_for_role(property: &str, role: &str, scope: &PropertyScope) -> String {
    format!(
        "{property} can't be set on {role}: it is {}",
        scope.describe()
    )
}

/// Sets `name` on `config` (a builder's copy of the client's configuration) when it is a
/// property of `role`; refuses it, saying where it belongs, otherwise. Only the role's
/// sections of `config` are taken from it afterwards.
pub(crate) fn set_for_role(
    config: &mut Config,
    role: Role,
    name: &str,
    value: &str,
) -> Result<(), ConfigurationError> {
    match PropertyScope::of(name) {
        None => Err(ConfigurationError::UnknownProperty(name.trim().to_string())),
        Some(scope) if role.accepts(scope) => config.set(name, value),
        Some(scope) => Err(ConfigurationError::NotForRole {
            property: name.trim().to_string(),
            role: role.name(),
            belongs_to: scope,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_property_has_one_scope() {
        for name in PRODUCER.iter().chain(CONSUMER).chain(GROUP) {
            assert!(super::super::PROPERTIES.contains(name), "{name} unknown");
        }
        let mut seen = std::collections::HashSet::new();
        for name in PRODUCER.iter().chain(CONSUMER).chain(GROUP) {
            assert!(seen.insert(name), "{name} in two scopes");
        }
        assert_eq!(
            PropertyScope::of("bootstrap.servers"),
            Some(PropertyScope::Client)
        );
        assert_eq!(
            PropertyScope::of(" linger.ms "),
            Some(PropertyScope::Producer)
        );
        assert_eq!(PropertyScope::of("linger.msec"), None);
    }

    #[test]
    fn roles_take_their_own_properties_and_refuse_the_rest() {
        let mut c = Config::new(["k:9092"]);
        set_for_role(&mut c, Role::Producer, "linger.ms", "20").unwrap();
        set_for_role(&mut c, Role::GroupConsumer, "session.timeout.ms", "10000").unwrap();
        set_for_role(
            &mut c,
            Role::GroupConsumer,
            "isolation.level",
            "read_committed",
        )
        .unwrap();
        let cases = [
            (Role::Producer, "bootstrap.servers", "client setting"),
            (Role::Consumer, "security.protocol", "client setting"),
            (Role::Producer, "isolation.level", "consumer setting"),
            (Role::Consumer, "acks", "producer setting"),
            (Role::Consumer, "group.id", "group setting"),
            (Role::GroupConsumer, "compression.type", "producer setting"),
        ];
        for (role, name, says) in cases {
            let err = set_for_role(&mut c, role, name, "x").unwrap_err();
            assert!(
                matches!(&err, ConfigurationError::NotForRole { property, .. } if property == name),
                "{err:?}"
            );
            let text = err.to_string();
            assert!(text.contains(name) && text.contains(says), "{text}");
        }
        assert_eq!(
            set_for_role(&mut c, Role::Producer, "linger.msec", "1"),
            Err(ConfigurationError::UnknownProperty("linger.msec".into()))
        );
    }
}
