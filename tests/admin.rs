//! `kring::admin` against the real broker, checked with Kafka's own Java tools (through
//! `scripts/kafka run-class`): each method changes what the Java tools then report, and
//! reads back what they set. Bad input (an unknown topic, fewer partitions than today,
//! an unknown config name, an ACL principal without a type, deleting an active group) is
//! a clear error naming the resource, with nothing half-applied.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{bootstrap, client, config, create_topic, unique};
use kring::Error;
use kring::admin::{
    AbortTransaction, AclBinding, AclBindingFilter, AclOperation, AclPermission, AclResourceType,
    Admin, AlterConfigOp, ConfigResource, ConfigSource, DeleteBefore, Election, OffsetSpec,
    PatternType, QuotaMatch, ScramMechanism,
};
use kring::client::block_on;
use kring::producer::{ProducerRecord, SyncProducer};
use kring::protocol::KafkaCode;

fn admin() -> Admin {
    Admin::new(client(config()))
}

/// A Kafka Java tool class through `scripts/kafka run-class`.
fn kafka_tool(class: &str) -> Command {
    let mut c = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"));
    c.arg("run-class")
        .arg(class)
        .arg("--bootstrap-server")
        .arg(bootstrap())
        .env("LC_ALL", "C.UTF-8");
    c
}

/// Runs a Java tool to success; answers its stdout.
fn java(class: &str, args: &[&str]) -> String {
    let out = kafka_tool(class)
        .args(args)
        .output()
        .expect("scripts/kafka");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{class} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";
const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
const OFFSETS: &str = "org.apache.kafka.tools.GetOffsetShell";

/// The `Rejected` (or `Broker`) code of an error, asserting that its text names `what`.
fn code_naming(e: &Error, what: &str) -> KafkaCode {
    let text = e.to_string();
    assert!(text.contains(what), "{text:?} does not name {what}");
    e.code()
        .unwrap_or_else(|| panic!("no broker code in {text}"))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Polls `condition` until it holds (a minute at most).
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn describe_cluster_names_the_cluster_controller_and_brokers() {
    let admin = admin();
    let cluster = block_on(admin.describe_cluster()).unwrap();
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
        .args([
            "run-class",
            "org.apache.kafka.tools.ClusterTool",
            "cluster-id",
        ])
        .args(["--bootstrap-server", &bootstrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let java_id = String::from_utf8_lossy(&out.stdout);
    assert!(
        java_id.contains(&format!("Cluster ID: {}", cluster.cluster_id)),
        "{java_id} vs {cluster:?}"
    );
    let metadata = admin.client().metadata();
    let ids: Vec<i32> = cluster.brokers.iter().map(|b| b.id).collect();
    let known: Vec<i32> = metadata.brokers.keys().copied().collect();
    assert_eq!(ids, known);
    assert!(ids.contains(&cluster.controller_id), "{cluster:?}");
    assert!(
        cluster
            .brokers
            .iter()
            .all(|b| b.port > 0 && !b.host.is_empty())
    );
}

#[test]
fn features_and_api_versions_match_the_java_tools() {
    let admin = admin();
    let features = block_on(admin.describe_features()).unwrap();
    let java_out = java("org.apache.kafka.tools.FeatureCommand", &["describe"]);
    // "Feature: group.version  SupportedMinVersion: 0  SupportedMaxVersion: 1  FinalizedVersionLevel: 1 ..."
    let mut compared = 0;
    for line in java_out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let field = |name: &str| {
            words
                .iter()
                .position(|w| *w == name)
                .and_then(|i| words.get(i + 1))
                .copied()
        };
        let (Some(name), Some(level), Some(max)) = (
            field("Feature:"),
            field("FinalizedVersionLevel:"),
            field("SupportedMaxVersion:"),
        ) else {
            continue;
        };
        let (Ok(level), Ok(max)) = (level.parse::<i16>(), max.parse::<i16>()) else {
            continue; // metadata.version prints names (4.4-IV2)
        };
        let supported = features.supported.iter().find(|f| f.name == name);
        assert_eq!(supported.map(|f| f.max), Some(max), "{name}: {features:?}");
        let finalized = features.finalized.iter().find(|f| f.name == name);
        // Level 0 means "off": brokers leave such features out of the finalized list.
        assert_eq!(
            finalized.map_or(0, |f| f.max),
            level,
            "{name}: {features:?}"
        );
        compared += 1;
    }
    // 4.x lists group.version, kraft.version, transaction.version and more with numeric
    // levels; 3.9 only kraft.version (and metadata.version by name).
    let numeric = if common::kafka_major() >= 4 { 3 } else { 1 };
    assert!(compared >= numeric, "{java_out}");
    assert!(
        features
            .finalized
            .iter()
            .any(|f| f.name == "metadata.version")
    );

    let apis = block_on(admin.broker_api_versions()).unwrap();
    assert_eq!(apis.len(), admin.client().metadata().brokers.len());
    for b in &apis {
        let describe_cluster = b
            .apis
            .iter()
            .find(|a| a.key == 60)
            .expect("DescribeCluster");
        assert_eq!(describe_cluster.name, Some("DescribeCluster"));
        assert!(describe_cluster.used.is_some());
    }
}

#[test]
fn create_partitions_grows_a_topic_and_refuses_to_shrink_it() {
    let admin = admin();
    let topic = unique("admin-partitions");
    create_topic(admin.client(), &topic, 2, 1, &[]);
    let java_count = || {
        let out = java(TOPICS, &["--describe", "--topic", &topic]);
        out.split_whitespace()
            .skip_while(|w| *w != "PartitionCount:")
            .nth(1)
            .and_then(|n| n.parse::<i32>().ok())
            .unwrap_or_else(|| panic!("{out}"))
    };

    block_on(admin.create_partitions(&topic, 5, true)).unwrap();
    assert_eq!(java_count(), 2, "validate_only created partitions");
    block_on(admin.create_partitions(&topic, 4, false)).unwrap();
    assert_eq!(java_count(), 4);
    assert_eq!(
        block_on(admin.describe_topic(&topic))
            .unwrap()
            .partitions
            .len(),
        4
    );

    let e = block_on(admin.create_partitions(&topic, 3, false)).unwrap_err();
    assert_eq!(code_naming(&e, &topic), KafkaCode::INVALID_PARTITIONS);
    assert_eq!(java_count(), 4);
    let missing = unique("admin-no-such-topic");
    let e = block_on(admin.create_partitions(&missing, 3, false)).unwrap_err();
    assert_eq!(
        code_naming(&e, &missing),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );

    // What the Java tool sets, kring reads back.
    java(TOPICS, &["--alter", "--topic", &topic, "--partitions", "6"]);
    eventually("six partitions", || {
        block_on(admin.describe_topic(&topic))
            .unwrap()
            .partitions
            .len()
            == 6
    });
    block_on(admin.delete_topic(&topic)).unwrap();
}

/// The `name=value` pairs ConfigCommand --describe lists for an entity.
fn java_configs(entity_type: &str, entity: &[&str]) -> Vec<(String, String)> {
    let mut args = vec!["--describe", "--entity-type", entity_type];
    args.extend_from_slice(entity);
    let out = java(common::java_tools().config_command, &args);
    out.lines()
        .filter_map(|l| {
            let l = l.trim();
            let pair = l.split_whitespace().next()?;
            let (k, v) = pair.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

fn has(pairs: &[(String, String)], name: &str, value: &str) -> bool {
    pairs.iter().any(|(k, v)| k == name && v == value)
}

#[test]
fn topic_configs_alter_incrementally_atomically_and_read_back() {
    let admin = admin();
    let topic = unique("admin-configs");
    create_topic(admin.client(), &topic, 1, 1, &[]);
    let resource = ConfigResource::Topic(topic.clone());
    let java_view = || java_configs("topics", &["--entity-name", &topic]);

    let set = |ops: &[AlterConfigOp], validate_only| {
        block_on(admin.incremental_alter_configs(&resource, ops, validate_only))
    };
    let set_retention = AlterConfigOp::Set("retention.ms".into(), "123456".into());
    set(std::slice::from_ref(&set_retention), true).unwrap();
    assert!(
        !has(&java_view(), "retention.ms", "123456"),
        "validate_only applied"
    );

    set(
        &[
            set_retention.clone(),
            AlterConfigOp::Set("cleanup.policy".into(), "compact".into()),
        ],
        false,
    )
    .unwrap();
    let view = java_view();
    assert!(has(&view, "retention.ms", "123456"), "{view:?}");
    assert!(has(&view, "cleanup.policy", "compact"), "{view:?}");

    // An unknown name in the same request as a good change: neither is applied.
    let e = set(
        &[
            AlterConfigOp::Set("retention.ms".into(), "999".into()),
            AlterConfigOp::Set("no.such.config".into(), "1".into()),
        ],
        false,
    )
    .unwrap_err();
    assert_eq!(code_naming(&e, &topic), KafkaCode::INVALID_CONFIG);
    assert!(e.to_string().contains("no.such.config"), "{e}");
    assert!(has(&java_view(), "retention.ms", "123456"), "half-applied");

    set(&[AlterConfigOp::Delete("retention.ms".into())], false).unwrap();
    let view = java_view();
    assert!(!view.iter().any(|(k, _)| k == "retention.ms"), "{view:?}");

    // What the Java tool sets, kring reads back, with its source.
    java(
        common::java_tools().config_command,
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--add-config",
            "max.message.bytes=2048",
        ],
    );
    let entries = block_on(admin.describe_configs(&resource)).unwrap();
    let entry = entries
        .iter()
        .find(|c| c.name == "max.message.bytes")
        .unwrap();
    assert_eq!(entry.value.as_deref(), Some("2048"));
    assert_eq!(entry.source, ConfigSource::Topic);
    assert!(!entry.is_default);
    let default = entries
        .iter()
        .find(|c| c.name == "min.compaction.lag.ms")
        .unwrap();
    assert!(default.is_default, "{default:?}");
    assert!(
        entries
            .iter()
            .all(|c| c.is_default == (c.source == ConfigSource::Default)),
        "{entries:?}"
    );

    // The legacy API replaces the whole set: overrides not listed go back to defaults.
    block_on(admin.alter_configs(&resource, &[("segment.ms".into(), "7200000".into())], false))
        .unwrap();
    let view = java_view();
    assert!(has(&view, "segment.ms", "7200000"), "{view:?}");
    assert!(
        !view.iter().any(|(k, _)| k == "max.message.bytes"),
        "{view:?}"
    );
    assert!(!view.iter().any(|(k, _)| k == "cleanup.policy"), "{view:?}");

    let missing = unique("admin-no-such-topic");
    let e = block_on(admin.describe_configs(&ConfigResource::Topic(missing.clone()))).unwrap_err();
    assert_eq!(
        code_naming(&e, &missing),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    block_on(admin.delete_topic(&topic)).unwrap();
}

#[test]
fn broker_configs_alter_and_read_back() {
    let admin = admin();
    let id = *admin.client().metadata().brokers.keys().next().unwrap();
    let broker = ConfigResource::Broker(id);
    let name = "log.cleaner.backoff.ms";
    let entries = block_on(admin.describe_configs(&broker)).unwrap();
    assert!(
        entries
            .iter()
            .any(|c| c.name == "broker.id" || c.name == "node.id")
    );

    let op = AlterConfigOp::Set(name.into(), "15001".into());
    block_on(admin.incremental_alter_configs(&broker, &[op], false)).unwrap();
    let id_text = id.to_string();
    let view = java_configs("brokers", &["--entity-name", &id_text]);
    assert!(has(&view, name, "15001"), "{view:?}");
    let entries = block_on(admin.describe_configs(&broker)).unwrap();
    let entry = entries.iter().find(|c| c.name == name).unwrap();
    assert_eq!(
        (entry.value.as_deref(), entry.source),
        (Some("15001"), ConfigSource::DynamicBroker)
    );
    let bad = AlterConfigOp::Set(name.into(), "soon".into());
    let e = block_on(admin.incremental_alter_configs(&broker, &[bad], false)).unwrap_err();
    // Kafka 4.4 answers INVALID_REQUEST for a value of the wrong type, with its reason.
    let code = code_naming(&e, &format!("broker {id}"));
    assert!(
        [KafkaCode::INVALID_REQUEST, KafkaCode::INVALID_CONFIG].contains(&code),
        "{e}"
    );
    assert!(e.to_string().contains(name), "{e}");
    let op = AlterConfigOp::Delete(name.into());
    block_on(admin.incremental_alter_configs(&broker, &[op], false)).unwrap();
    let view = java_configs("brokers", &["--entity-name", &id_text]);
    assert!(!view.iter().any(|(k, _)| k == name), "{view:?}");

    // The cluster-wide default, set by the Java tool, read back by kring, then removed.
    java(
        common::java_tools().config_command,
        &[
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "log.cleaner.backoff.ms=15002",
        ],
    );
    let entries = block_on(admin.describe_configs(&ConfigResource::BrokerDefault)).unwrap();
    let entry = entries.iter().find(|c| c.name == name).unwrap();
    assert_eq!(entry.value.as_deref(), Some("15002"));
    let op = AlterConfigOp::Delete(name.into());
    block_on(admin.incremental_alter_configs(&ConfigResource::BrokerDefault, &[op], false))
        .unwrap();
    let view = java_configs("brokers", &["--entity-default"]);
    assert!(!view.iter().any(|(k, _)| k == name), "{view:?}");

    let e = block_on(admin.describe_configs(&ConfigResource::Broker(4242))).unwrap_err();
    assert!(matches!(e, Error::UnknownBroker(4242)), "{e}");
}

/// Produces `count` records to partition 0 with timestamps `base + i * 1000`.
fn produce_timed(admin: &Admin, topic: &str, count: i64, base: i64) {
    let producer = SyncProducer::connect(admin.client().clone()).unwrap();
    for i in 0..count {
        let value = format!("v{i}");
        let record = ProducerRecord::new(topic)
            .with_partition(0)
            .with_timestamp(base + i * 1000)
            .with_value(value.as_bytes());
        assert_eq!(producer.send(record).unwrap().offset, i);
    }
}

#[test]
fn list_offsets_and_delete_records_by_offset_and_time() {
    let admin = admin();
    let topic = unique("admin-records");
    create_topic(admin.client(), &topic, 1, 1, &[]);
    let base = now_ms() - 3_600_000;
    produce_timed(&admin, &topic, 10, base);
    let tp = vec![(topic.clone(), 0)];
    let offset = |spec| block_on(admin.list_offsets(&tp, spec)).unwrap()[0].clone();
    assert_eq!(offset(OffsetSpec::Earliest).offset, 0);
    assert_eq!(offset(OffsetSpec::Latest).offset, 10);
    let at = offset(OffsetSpec::Timestamp(base + 4_500));
    assert_eq!((at.offset, at.timestamp), (5, base + 5_000));
    assert_eq!(offset(OffsetSpec::Timestamp(base + 60_000)).offset, -1);
    let newest = offset(OffsetSpec::MaxTimestamp);
    assert_eq!((newest.offset, newest.timestamp), (9, base + 9_000));

    let java_earliest = || java(OFFSETS, &["--topic", &topic, "--time", "-2"]);
    let low = block_on(admin.delete_records(&topic, &[(0, DeleteBefore::Offset(3))])).unwrap();
    assert_eq!(low, vec![(0, 3)]);
    assert_eq!(java_earliest().trim(), format!("{topic}:0:3"));
    let low = block_on(admin.delete_records(&topic, &[(0, DeleteBefore::Timestamp(base + 5_500))]))
        .unwrap();
    assert_eq!(low, vec![(0, 6)]);
    assert_eq!(java_earliest().trim(), format!("{topic}:0:6"));

    // Beyond the high watermark: an error naming the partition; nothing deleted.
    let e = block_on(admin.delete_records(&topic, &[(0, DeleteBefore::Offset(100))])).unwrap_err();
    assert_eq!(
        code_naming(&e, &format!("{topic}-0")),
        KafkaCode::OFFSET_OUT_OF_RANGE
    );
    assert_eq!(offset(OffsetSpec::Earliest).offset, 6);
    let e = block_on(admin.delete_records(&topic, &[(7, DeleteBefore::Offset(1))])).unwrap_err();
    assert!(e.to_string().contains(&topic), "{e}");
    let missing = unique("admin-no-such-topic");
    let e = block_on(admin.topic_offsets(&missing, OffsetSpec::Latest)).unwrap_err();
    assert_eq!(
        code_naming(&e, &missing),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );

    // What the Java tool deletes, kring reads back.
    let file = std::env::temp_dir().join(format!("{topic}.json"));
    std::fs::write(
        &file,
        format!(r#"{{"partitions":[{{"topic":"{topic}","partition":0,"offset":8}}],"version":1}}"#),
    )
    .unwrap();
    java(
        "org.apache.kafka.tools.DeleteRecordsCommand",
        &["--offset-json-file", file.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&file);
    assert_eq!(offset(OffsetSpec::Earliest).offset, 8);
    let low = block_on(admin.delete_records(&topic, &[(0, DeleteBefore::HighWatermark)])).unwrap();
    assert_eq!(low, vec![(0, 10)]);
    block_on(admin.delete_topic(&topic)).unwrap();
}

/// A Java console consumer in group `group` reading `topic` from the beginning, until
/// killed (`max` None) or after `max` records.
fn console_consumer(topic: &str, group: &str, max: Option<usize>) -> Child {
    console_consumer_with(topic, group, max, &[])
}

fn console_consumer_with(topic: &str, group: &str, max: Option<usize>, extra: &[&str]) -> Child {
    let mut c = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer");
    c.args(["--topic", topic, "--group", group, "--from-beginning"]);
    c.args(extra);
    if let Some(n) = max {
        c.args(["--max-messages", &n.to_string()]);
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// ConsumerGroupCommand --describe: (partition, current offset) of `topic`.
fn java_group_offsets(group: &str, topic: &str) -> Vec<(i32, String)> {
    let out = java(GROUPS, &["--describe", "--group", group]);
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 4 && w[1] == topic).then(|| (w[2].parse().ok(), w[3].to_string()))
        })
        .filter_map(|(p, o)| Some((p?, o)))
        .collect()
}

#[test]
fn consumer_groups_list_describe_offsets_and_delete() {
    let admin = admin();
    let topic = unique("admin-groups");
    create_topic(admin.client(), &topic, 2, 1, &[]);
    let producer = SyncProducer::connect(admin.client().clone()).unwrap();
    for i in 0..6 {
        let value = format!("v{i}");
        let record = ProducerRecord::new(&topic)
            .with_partition(i % 2)
            .with_value(value.as_bytes());
        producer.send(record).unwrap();
    }

    // A group made by the Java consumer, which reads all six records and leaves.
    let group = unique("admin-group");
    let status = console_consumer(&topic, &group, Some(6)).wait().unwrap();
    assert!(status.success());
    let listed = block_on(admin.list_groups()).unwrap();
    let g = listed.iter().find(|g| g.group_id == group).expect("listed");
    assert_eq!(g.state, "Empty");
    let described = block_on(admin.describe_group(&group)).unwrap();
    assert_eq!(described.state, "Empty");
    assert!(described.members.is_empty());
    let committed = block_on(admin.list_group_offsets(&group)).unwrap();
    let offsets: Vec<(String, i32, i64)> = committed
        .iter()
        .map(|c| (c.topic.clone(), c.partition, c.offset))
        .collect();
    assert_eq!(offsets, vec![(topic.clone(), 0, 3), (topic.clone(), 1, 3)]);

    // kring sets, Java reads; Java resets, kring reads.
    block_on(admin.alter_group_offsets(&group, &[((topic.clone(), 0), 1)])).unwrap();
    let java_view = java_group_offsets(&group, &topic);
    assert!(java_view.contains(&(0, "1".into())), "{java_view:?}");
    assert!(java_view.contains(&(1, "3".into())), "{java_view:?}");
    java(
        GROUPS,
        &[
            "--reset-offsets",
            "--group",
            &group,
            "--topic",
            &format!("{topic}:1"),
            "--to-offset",
            "2",
            "--execute",
        ],
    );
    let committed = block_on(admin.list_group_offsets(&group)).unwrap();
    assert_eq!(
        committed.iter().find(|c| c.partition == 1).unwrap().offset,
        2
    );
    let e = block_on(admin.alter_group_offsets(&group, &[((topic.clone(), 0), -5)])).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    block_on(admin.delete_group_offsets(&group, &[(topic.clone(), 1)])).unwrap();
    let committed = block_on(admin.list_group_offsets(&group)).unwrap();
    assert_eq!(committed.len(), 1, "{committed:?}");

    // An active group: described with its member's assignment; deleting it fails
    // and leaves it in place.
    let active = unique("admin-active");
    let mut child = console_consumer(&topic, &active, None);
    eventually("the consumer joins", || {
        block_on(admin.describe_group(&active))
            .is_ok_and(|d| d.state == "Stable" && d.members.len() == 1)
    });
    let d = block_on(admin.describe_group(&active)).unwrap();
    assert_eq!(
        d.members[0].assignment,
        vec![(topic.clone(), 0), (topic.clone(), 1)],
        "{d:?}"
    );
    let e = block_on(admin.delete_group(&active)).unwrap_err();
    assert_eq!(code_naming(&e, &active), KafkaCode::NON_EMPTY_GROUP);
    let e = block_on(admin.alter_group_offsets(&active, &[((topic.clone(), 0), 0)])).unwrap_err();
    assert!(e.to_string().contains(&active), "{e}");
    // Stopped with SIGTERM, the consumer leaves the group, which can then go.
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    child.wait().unwrap();
    eventually("the active group is deleted once empty", || {
        block_on(admin.delete_group(&active)).is_ok()
    });

    block_on(admin.delete_group(&group)).unwrap();
    let java_list = java(GROUPS, &["--list"]);
    assert!(!java_list.lines().any(|l| l.trim() == group), "{java_list}");
    let e = block_on(admin.describe_group(&group)).unwrap_err();
    assert_eq!(code_naming(&e, &group), KafkaCode::GROUP_ID_NOT_FOUND);
    let e = block_on(admin.delete_group(&group)).unwrap_err();
    assert_eq!(code_naming(&e, &group), KafkaCode::GROUP_ID_NOT_FOUND);
}

/// ACLs on a topic of this test's own (the broker's authorizer allows everyone where
/// no ACL names the resource, so ACLs elsewhere would change other tests' rights).
#[test]
fn acls_create_describe_delete_and_read_back() {
    let admin = admin();
    let topic = unique("admin-acl");
    let java_list = || {
        java(
            common::java_tools().acl_command,
            &[
                "--list",
                "--topic",
                &topic,
                "--resource-pattern-type",
                "any",
            ],
        )
    };
    let read = AclBinding::allow(
        AclResourceType::Topic,
        &topic,
        "User:acl-reader",
        AclOperation::Read,
    );
    let mut deny = AclBinding::allow(
        AclResourceType::Topic,
        &topic,
        "User:acl-writer",
        AclOperation::Write,
    );
    deny.permission = AclPermission::Deny;
    deny.pattern_type = PatternType::Prefixed;
    deny.host = "127.0.0.2".into();
    block_on(admin.create_acls(&[read.clone(), deny.clone()])).unwrap();
    let listed = java_list();
    assert!(
        listed.contains("principal=User:acl-reader, host=*, operation=READ, permissionType=ALLOW"),
        "{listed}"
    );
    assert!(
        listed.contains(
            "principal=User:acl-writer, host=127.0.0.2, operation=WRITE, permissionType=DENY"
        ),
        "{listed}"
    );
    assert!(listed.contains("patternType=PREFIXED"), "{listed}");

    // What the Java tool adds, kring reads back; filters narrow.
    java(
        common::java_tools().acl_command,
        &[
            "--add",
            "--allow-principal",
            "User:acl-viewer",
            "--operation",
            "Describe",
            "--topic",
            &topic,
        ],
    );
    let mut on_topic = AclBindingFilter::any();
    on_topic.resource_type = AclResourceType::Topic;
    on_topic.resource_name = Some(topic.clone());
    let all = block_on(admin.describe_acls(&on_topic)).unwrap();
    let viewer = AclBinding::allow(
        AclResourceType::Topic,
        &topic,
        "User:acl-viewer",
        AclOperation::Describe,
    );
    let mut expected = vec![read.clone(), deny.clone(), viewer.clone()];
    expected.sort();
    assert_eq!(all, expected);
    let mut readers = on_topic.clone();
    readers.principal = Some("User:acl-reader".into());
    assert_eq!(
        block_on(admin.describe_acls(&readers)).unwrap(),
        vec![read.clone()]
    );
    let mut literal = on_topic.clone();
    literal.pattern_type = PatternType::Literal;
    assert_eq!(block_on(admin.describe_acls(&literal)).unwrap().len(), 2);

    // A principal without a type is refused before anything is sent.
    let mut untyped = read.clone();
    untyped.principal = "alice".into();
    untyped.operation = AclOperation::Alter;
    let e = block_on(admin.create_acls(&[untyped])).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("\"alice\" has no type"), "{e}");
    assert!(!java_list().contains("ALTER"), "half-applied");

    let deleted = block_on(admin.delete_acls(&[deny.to_filter()])).unwrap();
    assert_eq!(deleted, vec![deny.clone()]);
    let listed = java_list();
    assert!(!listed.contains("acl-writer"), "{listed}");
    assert!(listed.contains("acl-viewer"), "{listed}");
    let deleted = block_on(admin.delete_acls(&[on_topic.clone()])).unwrap();
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    assert!(block_on(admin.describe_acls(&on_topic)).unwrap().is_empty());
    assert!(!java_list().contains("principal="));
}

/// A missing topic fails at once with UNKNOWN_TOPIC_OR_PARTITION naming it: Kafka
/// calls the code retriable, but retrying an admin call on a topic that isn't there
/// only waits out the timeout (each retry refreshes metadata, counted here).
#[test]
fn a_missing_topic_is_not_retried() {
    let mut c = config();
    c.admin.timeout = Duration::from_secs(5);
    let admin = Admin::new(client(c));
    let missing = unique("admin-no-such-topic");
    let before = admin.client().metadata_requests();
    let e = block_on(admin.delete_topic(&missing)).unwrap_err();
    assert_eq!(
        code_naming(&e, &missing),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    let refreshes = admin.client().metadata_requests() - before;
    assert!(refreshes <= 1, "{refreshes} metadata refreshes: retried");
}

#[test]
fn elections_and_reassignments() {
    let admin = admin();
    let topic = unique("admin-replicas");
    create_topic(admin.client(), &topic, 2, 1, &[]);
    let id = *admin.client().metadata().brokers.keys().next().unwrap();
    let p0 = (topic.clone(), 0);
    // One replica each: already its preferred leader, so nothing changes.
    let elected =
        block_on(admin.elect_leaders(Election::Preferred, Some(std::slice::from_ref(&p0))))
            .unwrap();
    assert!(elected.is_empty(), "{elected:?}");
    let missing = (unique("admin-no-such-topic"), 0);
    let e =
        block_on(admin.elect_leaders(Election::Preferred, Some(std::slice::from_ref(&missing))))
            .unwrap_err();
    assert_eq!(
        code_naming(&e, &format!("{}-0", missing.0)),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );

    // A move onto the replicas it has completes at once; onto a broker that does not
    // exist is refused, naming the partition.
    block_on(admin.alter_partition_reassignments(&[(p0.clone(), Some(vec![id]))])).unwrap();
    eventually("no reassignment in progress", || {
        block_on(admin.list_partition_reassignments(Some(std::slice::from_ref(&p0))))
            .unwrap()
            .is_empty()
    });
    let e = block_on(admin.alter_partition_reassignments(&[(p0.clone(), Some(vec![id, 4242]))]))
        .unwrap_err();
    assert!(e.to_string().contains(&format!("{topic}-0")), "{e}");
    assert!(e.code().is_some(), "{e}");
    let e = block_on(admin.alter_partition_reassignments(&[(p0.clone(), None)])).unwrap_err();
    assert_eq!(
        code_naming(&e, &format!("{topic}-0")),
        KafkaCode::NO_REASSIGNMENT_IN_PROGRESS
    );
    let e = block_on(admin.alter_partition_reassignments(&[(p0.clone(), Some(vec![id, id]))]))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let listed = java(
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        &["--list"],
    );
    assert!(!listed.contains(&topic), "{listed}");
    block_on(admin.delete_topic(&topic)).unwrap();
}

#[test]
fn log_dirs_report_what_the_java_tool_reports() {
    let admin = admin();
    let topic = unique("admin-logdirs");
    create_topic(admin.client(), &topic, 1, 1, &[]);
    produce_timed(&admin, &topic, 3, now_ms());
    let dirs = block_on(admin.describe_log_dirs()).unwrap();
    let replica = dirs
        .iter()
        .flat_map(|d| d.replicas.iter())
        .find(|r| r.topic == topic && r.partition == 0)
        .expect("the partition's replica");
    assert!(replica.size > 0, "{replica:?}");
    assert!(
        dirs.iter()
            .all(|d| d.error == KafkaCode::NONE && d.total_bytes != 0)
    );
    let out = java(
        "org.apache.kafka.tools.LogDirsCommand",
        &["--describe", "--topic-list", &topic],
    );
    assert!(
        out.contains(&format!(
            r#""partition":"{topic}-0","size":{}"#,
            replica.size
        )),
        "{out} vs {replica:?}"
    );
    block_on(admin.delete_topic(&topic)).unwrap();
}

#[test]
fn client_quotas_alter_and_read_back() {
    let admin = admin();
    let user = unique("quota-user");
    let entity = vec![("user".to_string(), Some(user.clone()))];
    let java_view = || {
        java(
            common::java_tools().config_command,
            &[
                "--describe",
                "--entity-type",
                "users",
                "--entity-name",
                &user,
            ],
        )
    };
    block_on(admin.alter_client_quotas(
        &entity,
        &[("producer_byte_rate".into(), Some(1024.0))],
        true,
    ))
    .unwrap();
    assert!(
        !java_view().contains("producer_byte_rate"),
        "validate_only applied"
    );
    block_on(admin.alter_client_quotas(
        &entity,
        &[("producer_byte_rate".into(), Some(1024.0))],
        false,
    ))
    .unwrap();
    let view = java_view();
    assert!(view.contains("producer_byte_rate=1024.0"), "{view}");

    java(
        common::java_tools().config_command,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            &user,
            "--add-config",
            "consumer_byte_rate=2048",
        ],
    );
    let filter = [("user".to_string(), QuotaMatch::Exact(user.clone()))];
    let mut quotas = Vec::new();
    eventually("the Java tool's quotas to show", || {
        quotas = block_on(admin.describe_client_quotas(&filter, true)).unwrap();
        quotas.len() == 1 && quotas[0].values.len() == 2
    });
    assert_eq!(quotas.len(), 1, "{quotas:?}");
    assert_eq!(quotas[0].entity, entity);
    assert_eq!(
        quotas[0].values,
        vec![
            ("consumer_byte_rate".to_string(), 2048.0),
            ("producer_byte_rate".to_string(), 1024.0)
        ]
    );

    let e = block_on(admin.alter_client_quotas(
        &entity,
        &[
            ("producer_byte_rate".into(), Some(1.0)),
            ("no_such_quota".into(), Some(1.0)),
        ],
        false,
    ))
    .unwrap_err();
    assert!(e.to_string().contains(&user) && e.code().is_some(), "{e}");
    assert!(
        java_view().contains("producer_byte_rate=1024.0"),
        "half-applied"
    );

    block_on(admin.alter_client_quotas(
        &entity,
        &[
            ("producer_byte_rate".into(), None),
            ("consumer_byte_rate".into(), None),
        ],
        false,
    ))
    .unwrap();
    // Any broker answers the describe, and on a cluster of several its metadata may
    // lag the controller's by a moment.
    eventually("the quotas to be gone", || {
        block_on(admin.describe_client_quotas(&filter, true))
            .unwrap()
            .is_empty()
    });
    assert!(!java_view().contains("byte_rate"), "{}", java_view());
}

#[test]
fn scram_credentials_upsert_describe_delete_and_authenticate() {
    let admin = admin();
    let user = unique("scram-user");
    block_on(admin.upsert_scram_credential(&user, ScramMechanism::Sha256, 8192, "s3cret")).unwrap();
    let java_view = || {
        java(
            common::java_tools().config_command,
            &[
                "--describe",
                "--entity-type",
                "users",
                "--entity-name",
                &user,
            ],
        )
    };
    let view = java_view();
    assert!(view.contains("SCRAM-SHA-256=iterations=8192"), "{view}");

    // The salted password is right: the Java client logs in with the password.
    let props = std::env::temp_dir().join(format!("{user}.properties"));
    std::fs::write(
        &props,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"{user}\" password=\"s3cret\";\n"
        ),
    )
    .unwrap();
    let login = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
        .args([
            "run-class",
            TOPICS,
            "--list",
            "--bootstrap-server",
            "127.0.0.1:9392",
        ])
        .arg("--command-config")
        .arg(&props)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&props);
    assert!(
        login.status.success(),
        "SCRAM login failed: {}",
        String::from_utf8_lossy(&login.stderr)
    );

    java(
        common::java_tools().config_command,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            &user,
            "--add-config",
            "SCRAM-SHA-512=[iterations=4096,password=other]",
        ],
    );
    let described = block_on(admin.describe_user_scram_credentials(Some(&[&user]))).unwrap();
    assert_eq!(described.len(), 1);
    let mut credentials = described[0].credentials.clone();
    credentials.sort_by_key(|(m, _)| m.name());
    assert_eq!(
        credentials,
        vec![
            (ScramMechanism::Sha256, 8192),
            (ScramMechanism::Sha512, 4096)
        ]
    );

    block_on(admin.delete_scram_credential(&user, ScramMechanism::Sha256)).unwrap();
    let view = java_view();
    assert!(
        !view.contains("SCRAM-SHA-256") && view.contains("SCRAM-SHA-512"),
        "{view}"
    );
    block_on(admin.delete_scram_credential(&user, ScramMechanism::Sha512)).unwrap();
    let e = block_on(admin.describe_user_scram_credentials(Some(&[&user]))).unwrap_err();
    assert_eq!(code_naming(&e, &user), KafkaCode::RESOURCE_NOT_FOUND);
    let e = block_on(admin.delete_scram_credential(&user, ScramMechanism::Sha512)).unwrap_err();
    assert_eq!(code_naming(&e, &user), KafkaCode::RESOURCE_NOT_FOUND);
    let e = block_on(admin.upsert_scram_credential(&user, ScramMechanism::Sha512, 100, "x"))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn producers_and_transactions() {
    let admin = admin();
    let topic = unique("admin-txn");
    let txn = unique("admin-txn-id");
    create_topic(admin.client(), &topic, 1, 1, &[]);
    java_plain(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            &topic,
            "--num-records",
            "20",
            "--record-size",
            "10",
            "--throughput",
            "-1",
            "--transactional-id",
            &txn,
            "--transaction-duration-ms",
            "50",
            "--producer-props",
            &format!("bootstrap.servers={}", bootstrap()),
        ],
    );
    // The tool exits once its last commit is prepared; the coordinator completes it
    // (writes the markers) on its own time: PrepareCommit is seen until then.
    let mut listing = None;
    for _ in 0..100 {
        let listed = block_on(admin.list_transactions(&[])).unwrap();
        let found = listed.into_iter().find(|t| t.transactional_id == txn);
        let preparing = found.as_ref().is_some_and(|t| t.state == "PrepareCommit");
        listing = found;
        if !preparing {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let listing = listing.expect("listed");
    assert_eq!(listing.state, "CompleteCommit");
    let only_ongoing = block_on(admin.list_transactions(&["Ongoing"])).unwrap();
    assert!(!only_ongoing.iter().any(|t| t.transactional_id == txn));
    let described = block_on(admin.describe_transaction(&txn)).unwrap();
    assert_eq!(described.state, "CompleteCommit");
    assert_eq!(described.producer_id, listing.producer_id);
    let java_out = java(
        "org.apache.kafka.tools.TransactionsCommand",
        &["describe", "--transactional-id", &txn],
    );
    assert!(
        java_out.contains(&described.producer_id.to_string()),
        "{java_out}"
    );

    let p0 = (topic.clone(), 0);
    let producers = block_on(admin.describe_producers(std::slice::from_ref(&p0))).unwrap();
    let state = producers[0]
        .1
        .iter()
        .find(|p| p.producer_id == described.producer_id)
        .expect("the transactional producer");
    assert_eq!(state.open_transaction_start, None);
    let java_list = java("org.apache.kafka.tools.TransactionsCommand", &["list"]);
    assert!(
        java_list
            .lines()
            .any(|l| l.contains(&txn) && l.contains(&listing.producer_id.to_string())),
        "{java_list}"
    );
    let java_producers = java(
        "org.apache.kafka.tools.TransactionsCommand",
        &["describe-producers", "--topic", &topic, "--partition", "0"],
    );
    assert!(
        java_producers.contains(&state.producer_id.to_string()),
        "{java_producers}"
    );

    // An abort marker written for the producer lands as one control record.
    let end = || {
        block_on(admin.list_offsets(std::slice::from_ref(&p0), OffsetSpec::Latest)).unwrap()[0]
            .offset
    };
    let before = end();
    let abort = AbortTransaction {
        partition: p0.clone(),
        producer_id: state.producer_id,
        producer_epoch: state.producer_epoch as i16,
        coordinator_epoch: state.coordinator_epoch,
    };
    block_on(admin.abort_transaction(&abort)).unwrap();
    assert_eq!(end(), before + 1);

    let missing = unique("admin-no-such-txn");
    let e = block_on(admin.describe_transaction(&missing)).unwrap_err();
    assert_eq!(
        code_naming(&e, &missing),
        KafkaCode::TRANSACTIONAL_ID_NOT_FOUND
    );
    block_on(admin.delete_topic(&topic)).unwrap();
}

/// A Java tool that takes no `--bootstrap-server`, to success.
fn java_plain(class: &str, args: &[&str]) -> String {
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
        .arg("run-class")
        .arg(class)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{class}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A KIP-848 group (the new consumer protocol) is described with ConsumerGroupDescribe:
/// its members and their assignments, as the classic one.
#[test]
fn a_kip_848_group_is_described_and_kept_while_active() {
    let admin = admin();
    let group_version = block_on(admin.describe_features())
        .unwrap()
        .finalized
        .iter()
        .find(|f| f.name == "group.version")
        .map_or(0, |f| f.max);
    if common::kafka_major() < 4 {
        // Kafka 3.9 has KIP-848 as a preview, off unless configured (scripts/kafka does
        // not): no such group can be made, and the broker says so by its features.
        assert_eq!(group_version, 0, "group.version finalized on 3.x");
        eprintln!("Kafka 3.x without group.version: no KIP-848 group to describe");
        return;
    }
    let topic = unique("admin-848");
    create_topic(admin.client(), &topic, 2, 1, &[]);
    let group = unique("admin-848-group");
    let mut child = console_consumer_with(
        &topic,
        &group,
        None,
        &[
            common::java_tools().consumer_property,
            "group.protocol=consumer",
        ],
    );
    eventually("the consumer is assigned both partitions", || {
        block_on(admin.describe_group(&group))
            .is_ok_and(|d| d.members.len() == 1 && d.members[0].assignment.len() == 2)
    });
    let d = block_on(admin.describe_group(&group)).unwrap();
    assert_eq!(d.protocol_type, "consumer");
    assert_eq!(d.state, "Stable", "{d:?}");
    // The broker's server-side assignor: only ConsumerGroupDescribe reports it.
    assert_eq!(d.protocol, "uniform", "{d:?}");
    assert_eq!(
        d.members[0].assignment,
        vec![(topic.clone(), 0), (topic.clone(), 1)]
    );
    let listed = block_on(admin.list_groups()).unwrap();
    let g = listed.iter().find(|g| g.group_id == group).expect("listed");
    assert_eq!(g.group_type, "consumer");
    let e = block_on(admin.delete_group(&group)).unwrap_err();
    assert_eq!(code_naming(&e, &group), KafkaCode::NON_EMPTY_GROUP);
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    child.wait().unwrap();
    eventually("the group is deleted once empty", || {
        block_on(admin.delete_group(&group)).is_ok()
    });
    block_on(admin.delete_topic(&topic)).unwrap();
}
