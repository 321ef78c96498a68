//! Building a [`Config`] from Java-client and librdkafka property names, so users can
//! bring the settings they already have. Every known name (and its alias in the other
//! client) maps onto one field; an unknown name or a malformed value is an error naming it.

use std::time::Duration;

use super::{
    Acks, Compression, Config, ConfigurationError, GroupProtocol, IsolationLevel, OffsetReset,
    PartitionerKind, is_host_port,
};

/// Every property name [`Config::set`] accepts (Java names, librdkafka aliases, and
/// kring's own `kring.*` settings).
pub const PROPERTIES: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "client.id",
    "socket.connection.setup.timeout.ms",
    "request.timeout.ms",
    "max.in.flight.requests.per.connection",
    "max.in.flight",
    "receive.message.max.bytes",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "kring.io.backend",
    "kring.io.workers",
    "kring.io.queue.capacity",
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "allow.auto.create.topics",
    "topic.metadata.propagation.max.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
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
    "delivery.timeout.ms",
    "message.timeout.ms",
    "partitioner",
    "transactional.id",
    "transaction.timeout.ms",
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
    "group.id",
    "group.instance.id",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "group.protocol",
    "group.remote.assignor",
    "default.api.timeout.ms",
    "security.protocol",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.ca.pem",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "sasl.oauthbearer.config",
];

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigurationError {
    ConfigurationError::InvalidValue {
        field: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn parse_u64(name: &str, value: &str) -> Result<u64, ConfigurationError> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| invalid(name, value, "expected a non-negative whole number"))
}

fn parse_ms(name: &str, value: &str) -> Result<Duration, ConfigurationError> {
    parse_u64(name, value).map(Duration::from_millis)
}

fn parse_usize(name: &str, value: &str) -> Result<usize, ConfigurationError> {
    usize::try_from(parse_u64(name, value)?).map_err(|_| invalid(name, value, "too large"))
}

fn parse_i32(name: &str, value: &str) -> Result<i32, ConfigurationError> {
    i32::try_from(parse_u64(name, value)?).map_err(|_| invalid(name, value, "above 2147483647"))
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigurationError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(name, value, "expected true or false")),
    }
}

fn optional_string(value: &str) -> Option<String> {
    let v = value.trim();
    (!v.is_empty()).then(|| v.to_string())
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn assignor_name(name: &str, value: &str, entry: &str) -> Result<String, ConfigurationError> {
    let short = entry.rsplit('.').next().unwrap_or(entry);
    Ok(match short.to_ascii_lowercase().as_str() {
        "range" | "rangeassignor" => "range",
        "roundrobin" | "roundrobinassignor" => "roundrobin",
        "sticky" | "stickyassignor" => "sticky",
        "cooperative-sticky" | "cooperativestickyassignor" => "cooperative-sticky",
        _ => return Err(invalid(name, value, format!("unknown assignor {entry:?}"))),
    }
    .to_string())
}

impl Config {
    /// A configuration from property pairs, then validated. Later pairs override
    /// earlier ones, as in a properties file.
    ///
    /// ```
    /// use kring::config::Config;
    /// let config = Config::from_properties([
    ///     ("bootstrap.servers", "127.0.0.1:9092"),
    ///     ("linger.ms", "20"),
    ///     ("compression.type", "zstd"),
    /// ])?;
    /// assert_eq!(config.producer.linger.as_millis(), 20);
    /// # Ok::<(), kring::config::ConfigurationError>(())
    /// ```
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Config, ConfigurationError> {
        let mut config = Config::default();
        for (k, v) in properties {
            config.set(k.as_ref(), v.as_ref())?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Sets one property by its Java or librdkafka name. The combination is checked
    /// later by [`Config::validate`].
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigurationError> {
        let key = name.trim();
        if self.security.set(key, value)? {
            return Ok(());
        }
        match key {
            "bootstrap.servers" | "metadata.broker.list" => {
                let servers = list(value);
                if servers.is_empty() {
                    return Err(invalid(key, value, "expected host:port[,host:port...]"));
                }
                if let Some(bad) = servers.iter().find(|s| !is_host_port(s)) {
                    return Err(invalid(key, value, format!("{bad:?} is not host:port")));
                }
                self.bootstrap_servers = servers;
            }
            "client.id" => self.client_id = value.trim().to_string(),
            "socket.connection.setup.timeout.ms" => {
                self.net.connect_timeout = parse_ms(key, value)?
            }
            "request.timeout.ms" => self.net.request_timeout = parse_ms(key, value)?,
            "max.in.flight.requests.per.connection" | "max.in.flight" => {
                self.net.max_in_flight = parse_usize(key, value)?
            }
            "receive.message.max.bytes" => self.net.max_response_size = parse_usize(key, value)?,
            "reconnect.backoff.ms" => self.net.reconnect_backoff = parse_ms(key, value)?,
            "reconnect.backoff.max.ms" => self.net.reconnect_backoff_max = parse_ms(key, value)?,
            "kring.io.backend" => {
                self.net.io_backend = value.parse().map_err(|e: String| invalid(key, value, e))?
            }
            "kring.io.workers" => self.net.workers = parse_usize(key, value)?,
            "kring.io.queue.capacity" => self.net.queue_capacity = parse_usize(key, value)?,
            "metadata.max.age.ms" | "topic.metadata.refresh.interval.ms" => {
                self.metadata.refresh_interval = parse_ms(key, value)?
            }
            "allow.auto.create.topics" => {
                self.metadata.allow_auto_topic_creation = parse_bool(key, value)?
            }
            "topic.metadata.propagation.max.ms" => {
                self.metadata.topic_propagation_max = parse_ms(key, value)?
            }
            "retry.backoff.ms" => {
                let d = parse_ms(key, value)?;
                self.producer.retry_backoff = d;
                self.metadata.refresh_backoff = d;
                self.admin.retry_backoff = d;
            }
            "retry.backoff.max.ms" => self.producer.retry_backoff_max = parse_ms(key, value)?,
            "acks" | "request.required.acks" => {
                self.producer.acks = match value.trim().to_ascii_lowercase().as_str() {
                    "all" | "-1" => Acks::All,
                    "1" => Acks::Leader,
                    "0" => Acks::None,
                    _ => return Err(invalid(key, value, "expected all, -1, 1 or 0")),
                }
            }
            "linger.ms" | "queue.buffering.max.ms" => self.producer.linger = parse_ms(key, value)?,
            "batch.size" => self.producer.batch_size = parse_usize(key, value)?,
            "buffer.memory" => self.producer.buffer_memory = parse_usize(key, value)?,
            "queue.buffering.max.kbytes" => {
                self.producer.buffer_memory = parse_usize(key, value)?
                    .checked_mul(1024)
                    .ok_or_else(|| invalid(key, value, "too large"))?
            }
            "queue.buffering.max.messages" => {
                self.producer.max_queued_records = parse_usize(key, value)?
            }
            "max.request.size" | "message.max.bytes" => {
                self.producer.max_request_size = parse_usize(key, value)?
            }
            "compression.type" | "compression.codec" => {
                self.producer.compression = match value.trim().to_ascii_lowercase().as_str() {
                    "none" | "uncompressed" => Compression::None,
                    "gzip" => Compression::Gzip,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    _ => {
                        return Err(invalid(
                            key,
                            value,
                            "expected none, gzip, snappy, lz4 or zstd",
                        ));
                    }
                }
            }
            "enable.idempotence" => self.producer.enable_idempotence = parse_bool(key, value)?,
            "retries" | "message.send.max.retries" => {
                self.producer.retries = u32::try_from(parse_u64(key, value)?).unwrap_or(u32::MAX)
            }
            "delivery.timeout.ms" | "message.timeout.ms" => {
                self.producer.delivery_timeout = parse_ms(key, value)?
            }
            "partitioner" => {
                self.producer.partitioner = match value.trim().to_ascii_lowercase().as_str() {
                    "default" | "murmur2" | "murmur2_random" | "sticky" => PartitionerKind::Default,
                    "fnv1a" | "fnv1a_random" | "hash" => PartitionerKind::Fnv1a,
                    "random" => PartitionerKind::Random,
                    "round_robin" | "roundrobin" => PartitionerKind::RoundRobin,
                    "manual" => PartitionerKind::Manual,
                    _ => {
                        return Err(invalid(
                            key,
                            value,
                            "expected default, murmur2_random, fnv1a, random, round_robin or manual",
                        ));
                    }
                }
            }
            "transactional.id" => self.producer.transactional_id = optional_string(value),
            "transaction.timeout.ms" => self.producer.transaction_timeout = parse_ms(key, value)?,
            "fetch.min.bytes" => self.consumer.fetch_min_bytes = parse_i32(key, value)?,
            "fetch.max.bytes" => self.consumer.fetch_max_bytes = parse_i32(key, value)?,
            "max.partition.fetch.bytes" => {
                self.consumer.max_partition_fetch_bytes = parse_i32(key, value)?
            }
            "fetch.max.wait.ms" | "fetch.wait.max.ms" => {
                self.consumer.fetch_max_wait = parse_ms(key, value)?
            }
            "auto.offset.reset" => {
                self.consumer.auto_offset_reset = match value.trim().to_ascii_lowercase().as_str() {
                    "earliest" | "smallest" | "beginning" => OffsetReset::Earliest,
                    "latest" | "largest" | "end" => OffsetReset::Latest,
                    "none" | "error" => OffsetReset::None,
                    _ => return Err(invalid(key, value, "expected earliest, latest or none")),
                }
            }
            "isolation.level" => {
                self.consumer.isolation_level = match value.trim().to_ascii_lowercase().as_str() {
                    "read_uncommitted" => IsolationLevel::ReadUncommitted,
                    "read_committed" => IsolationLevel::ReadCommitted,
                    _ => {
                        return Err(invalid(
                            key,
                            value,
                            "expected read_uncommitted or read_committed",
                        ));
                    }
                }
            }
            "check.crcs" => self.consumer.check_crcs = parse_bool(key, value)?,
            "kring.fetch.buffer.memory" => {
                self.consumer.fetch_buffer_memory = parse_usize(key, value)?
            }
            "kring.fetch.max.decompressed.bytes" => {
                self.consumer.fetch_max_decompressed_bytes = parse_usize(key, value)?
            }
            "enable.auto.commit" => self.consumer.enable_auto_commit = parse_bool(key, value)?,
            "auto.commit.interval.ms" => self.consumer.auto_commit_interval = parse_ms(key, value)?,
            "client.rack" => self.consumer.client_rack = value.trim().to_string(),
            "group.id" => self.group.group_id = optional_string(value),
            "group.instance.id" => self.group.group_instance_id = optional_string(value),
            "session.timeout.ms" => self.group.session_timeout = parse_ms(key, value)?,
            "heartbeat.interval.ms" => self.group.heartbeat_interval = parse_ms(key, value)?,
            "max.poll.interval.ms" => self.group.rebalance_timeout = parse_ms(key, value)?,
            "partition.assignment.strategy" => {
                let names = list(value);
                if names.is_empty() {
                    return Err(invalid(key, value, "expected at least one assignor"));
                }
                self.group.assignment_strategies = names
                    .iter()
                    .map(|n| assignor_name(key, value, n))
                    .collect::<Result<_, _>>()?;
            }
            "group.protocol" => {
                self.group.protocol = match value.trim().to_ascii_lowercase().as_str() {
                    "classic" => GroupProtocol::Classic,
                    "consumer" => GroupProtocol::Consumer,
                    _ => return Err(invalid(key, value, "expected classic or consumer")),
                }
            }
            "group.remote.assignor" => self.group.remote_assignor = optional_string(value),
            "default.api.timeout.ms" => self.admin.timeout = parse_ms(key, value)?,
            _ => return Err(ConfigurationError::UnknownProperty(key.to_string())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value for each property that must parse.
    fn sample(name: &str) -> &'static str {
        match name {
            "bootstrap.servers" | "metadata.broker.list" => "a:1,b:2",
            "client.id" | "transactional.id" | "group.id" | "group.instance.id" | "client.rack" => {
                "x"
            }
            "group.protocol" => "consumer",
            "group.remote.assignor" => "uniform",
            "kring.io.backend" => "epoll",
            "allow.auto.create.topics" => "true",
            "enable.idempotence" | "check.crcs" | "enable.auto.commit" => "false",
            "acks" | "request.required.acks" => "1",
            "compression.type" | "compression.codec" => "lz4",
            "partitioner" => "fnv1a",
            "auto.offset.reset" => "earliest",
            "isolation.level" => "read_committed",
            "partition.assignment.strategy" => {
                "org.apache.kafka.clients.consumer.RoundRobinAssignor,sticky"
            }
            "security.protocol" => "SASL_SSL",
            "ssl.truststore.type" | "ssl.keystore.type" => "PEM",
            "ssl.key.password" => "kring-key-secret",
            "ssl.keystore.password" | "ssl.truststore.password" => "",
            "ssl.endpoint.identification.algorithm" => "",
            "sasl.mechanism" | "sasl.mechanisms" => "SCRAM-SHA-512",
            "enable.sasl.oauthbearer.unsecure.jwt" => "true",
            "sasl.oauthbearer.config" => "principal=alice lifeSeconds=60",
            "sasl.jaas.config" => {
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";"
            }
            _ => "7",
        }
    }

    #[test]
    fn every_listed_property_parses() {
        for name in PROPERTIES {
            let mut c = Config::default();
            c.set(name, sample(name))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            // These only confirm what kring does anyway (PEM stores, no store passwords).
            let confirms_only = matches!(
                *name,
                "ssl.truststore.type"
                    | "ssl.keystore.type"
                    | "ssl.keystore.password"
                    | "ssl.truststore.password"
            );
            if !confirms_only {
                assert_ne!(c, Config::default(), "{name} changed nothing");
            }
        }
    }

    #[test]
    fn properties_land_on_their_fields() {
        let c = Config::from_properties([
            ("bootstrap.servers", "k1:9092, k2:9092"),
            ("linger.ms", "20"),
            ("batch.size", "65536"),
            ("acks", "-1"),
            ("compression.type", "zstd"),
            ("enable.idempotence", "true"),
            ("queue.buffering.max.kbytes", "1024"),
            ("queue.buffering.max.messages", "5000"),
            ("fetch.wait.max.ms", "250"),
            ("auto.offset.reset", "smallest"),
            ("kring.io.workers", "2"),
            ("kring.fetch.max.decompressed.bytes", "8388608"),
            ("client.rack", " r2 "),
        ])
        .unwrap();
        assert_eq!(c.bootstrap_servers, vec!["k1:9092", "k2:9092"]);
        assert_eq!(c.producer.linger, Duration::from_millis(20));
        assert_eq!(c.producer.batch_size, 65536);
        assert_eq!(c.producer.acks, Acks::All);
        assert_eq!(c.producer.compression, Compression::Zstd);
        assert_eq!(c.producer.buffer_memory, 1024 * 1024);
        assert_eq!(c.producer.max_queued_records, 5000);
        assert_eq!(c.consumer.fetch_max_wait, Duration::from_millis(250));
        assert_eq!(c.consumer.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(c.net.workers, 2);
        assert_eq!(c.consumer.fetch_max_decompressed_bytes, 8 << 20);
        assert_eq!(c.consumer.client_rack, "r2");
        // Group settings parse onto their fields and validate.
        let mut g = Config::new(["k1:9092"]);
        g.set("partition.assignment.strategy", "roundrobin")
            .unwrap();
        g.set("max.poll.interval.ms", "60000").unwrap();
        g.set("group.protocol", "consumer").unwrap();
        g.set("group.remote.assignor", "range").unwrap();
        assert_eq!(g.group.assignment_strategies, vec!["roundrobin"]);
        assert_eq!(g.group.rebalance_timeout, Duration::from_secs(60));
        assert_eq!(g.group.protocol, GroupProtocol::Consumer);
        assert_eq!(g.group.remote_assignor.as_deref(), Some("range"));
        // A classic assignor with KIP-848 is refused (the broker assigns there).
        assert!(g.validate().is_err());
        g.set("group.protocol", "classic").unwrap();
        g.validate().unwrap();
        assert!(g.set("group.protocol", "eager").is_err());
    }

    /// A property's scope (what a role's builder takes) is the section it changes: a
    /// client property changes no role's section, a role's property only its own (so
    /// a builder never refuses what it uses, nor takes what it would ignore).
    #[test]
    fn every_property_changes_only_its_scope() {
        use super::super::PropertyScope;
        for name in PROPERTIES {
            let base = Config::default();
            let mut c = base.clone();
            c.set(name, sample(name)).unwrap();
            let changed = [
                (PropertyScope::Producer, c.producer != base.producer),
                (PropertyScope::Consumer, c.consumer != base.consumer),
                (PropertyScope::Group, c.group != base.group),
            ];
            let scope = PropertyScope::of(name).unwrap_or_else(|| panic!("{name}: no scope"));
            for (section, differs) in changed {
                if section != scope {
                    assert!(
                        !differs,
                        "{name} ({scope:?}) changes the {section:?} section"
                    );
                }
            }
            if scope != PropertyScope::Client {
                assert!(
                    changed.iter().any(|&(s, d)| s == scope && d),
                    "{name} changes nothing of its {scope:?} section"
                );
            }
        }
    }

    #[test]
    fn io_uring_is_refused_with_the_reason_by_a_build_without_it() {
        let mut c = Config::default();
        let result = c.set("kring.io.backend", "io_uring");
        #[cfg(all(target_os = "linux", feature = "io-uring"))]
        assert_eq!(result, Ok(()));
        #[cfg(not(all(target_os = "linux", feature = "io-uring")))]
        match result {
            Err(ConfigurationError::InvalidValue { field, reason, .. }) => {
                assert_eq!(field, "kring.io.backend");
                assert!(reason.contains("no io_uring backend"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_properties_are_named() {
        let mut c = Config::default();
        assert_eq!(
            c.set("linger.msec", "5"),
            Err(ConfigurationError::UnknownProperty("linger.msec".into()))
        );
        for (name, value) in [
            ("linger.ms", "-5"),
            ("linger.ms", "soon"),
            ("acks", "2"),
            ("compression.type", "brotli"),
            ("enable.idempotence", "yes"),
            ("bootstrap.servers", "nohost"),
            ("bootstrap.servers", ""),
            ("fetch.max.bytes", "9999999999"),
            ("auto.offset.reset", "middle"),
            ("isolation.level", "serializable"),
            ("partition.assignment.strategy", "com.example.MyAssignor"),
            ("kring.io.backend", "kqueue"),
            ("partitioner", "crc32"),
        ] {
            match c.set(name, value) {
                Err(ConfigurationError::InvalidValue {
                    field, value: v, ..
                }) => {
                    assert_eq!(field, name);
                    assert_eq!(v, value);
                }
                other => panic!("{name}={value}: {other:?}"),
            }
        }
        // A valid set of properties whose combination is not.
        let err = Config::from_properties([
            ("bootstrap.servers", "k:9092"),
            ("acks", "1"),
            ("enable.idempotence", "true"),
        ])
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigurationError::Inconsistent {
                field: "producer.acks",
                ..
            }
        ));
    }
}
