//! Helpers shared by the integration tests: unique names, topic creation, and reading a
//! partition back with raw Fetch requests and the lazy batch reader (independent of the
//! consumer, so producer tests do not depend on it).

#![allow(dead_code)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kring::protocol::KafkaCode;
use kring::protocol::messages::{
    CreateTopicsRequest, FetchRequest,
    create_topics::{CreatableTopic, CreatableTopicConfig},
    fetch::{FetchPartition, FetchTopic},
};
use kring::record::{BatchRef, Batches, Decompressor};
use kring::{Client, Config};

pub fn bootstrap() -> String {
    std::env::var("KRING_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

pub fn unique(prefix: &str) -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{n}", std::process::id())
}

pub fn config() -> Config {
    let mut c = Config::new([bootstrap()]);
    c.net.workers = 2;
    c
}

pub fn client(config: Config) -> Client {
    Client::connect_blocking(config).expect("connect")
}

/// Creates a topic and waits until every partition has a leader.
pub fn create_topic(
    client: &Client,
    name: &str,
    partitions: i32,
    replication: i16,
    configs: &[(&str, &str)],
) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(name.into())
                .with_num_partitions(partitions)
                .with_replication_factor(replication)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(k.to_string())
                                .with_value(Some(v.to_string()))
                        })
                        .collect(),
                ),
        ])
        .with_timeout_ms(30_000);
    let r = kring::client::block_on(client.send_any(request)).expect("create topic");
    assert_eq!(
        KafkaCode(r.topics[0].error_code),
        KafkaCode::NONE,
        "{:?}",
        r.topics[0].error_message
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        kring::client::block_on(client.refresh_metadata(&[name])).unwrap();
        if let Some(t) = client.metadata().topics.get(name)
            && t.partitions.len() == partitions as usize
            && t.partitions.iter().all(|p| p.leader >= 0)
            && (0..partitions).all(|p| leader_serves(client, name, p))
        {
            return;
        }
        assert!(Instant::now() < deadline, "no leaders for {name}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether the partition's leader answers ListOffsets without error (a new partition's
/// leader may not know it leads yet, even when metadata already says so).
pub fn leader_serves(client: &Client, topic: &str, partition: i32) -> bool {
    use kring::protocol::messages::{
        ListOffsetsRequest,
        list_offsets::{ListOffsetsPartition, ListOffsetsTopic},
    };
    let Ok((leader, _)) = kring::client::block_on(client.leader(topic, partition)) else {
        return false;
    };
    let request = ListOffsetsRequest::default()
        .with_replica_id(-1)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic.into())
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(partition)
                        .with_timestamp(-1),
                ]),
        ]);
    leader
        .send_blocking(request)
        .is_ok_and(|r| KafkaCode(r.topics[0].partitions[0].error_code).is_ok())
}

/// A record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Fetched {
    /// An owned copy of a borrowed record (header keys must be UTF-8).
    pub fn of(r: &kring::record::RecordRef<'_>) -> Fetched {
        Fetched {
            offset: r.offset(),
            timestamp: r.timestamp(),
            key: r.key().map(<[u8]>::to_vec),
            value: r.value().map(<[u8]>::to_vec),
            headers: r
                .headers()
                .map(|h| {
                    let h = h.expect("header");
                    let key = h.key_str().expect("UTF-8 header key").to_owned();
                    (key, h.value.map(<[u8]>::to_vec))
                })
                .collect(),
        }
    }
}

/// Reads partition `partition` of `topic` from offset 0 until `count` records have been
/// read (or the deadline passes), checking every batch's CRC.
pub fn read_partition(client: &Client, topic: &str, partition: i32, count: usize) -> Vec<Fetched> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    let mut offset = 0i64;
    let mut decompressor = Decompressor::default();
    let mut scratch = Vec::new();
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "read {} of {count} records from {topic}-{partition}",
            out.len()
        );
        let metadata = client.metadata();
        let t = metadata.topics.get(topic).expect("topic in metadata");
        let topic_id = t.id;
        let Ok((leader, _)) = kring::client::block_on(client.leader(topic, partition)) else {
            std::thread::sleep(Duration::from_millis(200));
            let _ = kring::client::block_on(client.refresh_metadata(&[topic]));
            continue;
        };
        let request = FetchRequest::default()
            .with_replica_id(-1)
            .with_max_wait_ms(200)
            .with_min_bytes(1)
            .with_max_bytes(32 << 20)
            .with_isolation_level(0)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(topic.into())
                    .with_topic_id(topic_id)
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(16 << 20),
                    ]),
            ]);
        let response = match leader.send_blocking(request) {
            Ok(r) => r,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(200));
                let _ = kring::client::block_on(client.refresh_metadata(&[topic]));
                continue;
            }
        };
        let p = &response.responses[0].partitions[0];
        let code = KafkaCode(p.error_code);
        if !code.is_ok() {
            assert!(code.is_retriable(), "fetch {topic}-{partition}: {code}");
            std::thread::sleep(Duration::from_millis(200));
            let _ = kring::client::block_on(client.refresh_metadata(&[topic]));
            continue;
        }
        let records = p.records.clone().unwrap_or_default();
        for batch in Batches::new(&records).verify_crc(true) {
            let BatchRef::V2(batch) = batch.expect("valid batch") else {
                panic!("legacy message set")
            };
            if batch.is_control() {
                offset = batch.next_offset();
                continue;
            }
            for r in batch
                .decompress_records(&mut decompressor, &mut scratch)
                .expect("records")
            {
                let r = r.expect("record");
                if r.offset() < offset {
                    continue;
                }
                out.push(Fetched::of(&r));
            }
            offset = batch.next_offset();
        }
    }
    out
}

/// Threads whose name starts with `prefix` (from /proc, so it sees every thread).
pub fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end().starts_with(prefix))
        .count()
}

/// The Java tools' class names and option spellings that Kafka 4.0 changed, picked by
/// the broker's version (`scripts/kafka version`), so the tests that run them pass
/// against 3.9 as well as 4.x.
pub struct JavaTools {
    /// The console producer.
    pub console_producer: &'static str,
    /// ConfigCommand.
    pub config_command: &'static str,
    /// AclCommand.
    pub acl_command: &'static str,
    /// The console producer's option for a line reader property.
    pub reader_property: &'static str,
    /// The console consumer's option for a formatter property.
    pub formatter_property: &'static str,
    /// The console consumer's option for one consumer setting.
    pub consumer_property: &'static str,
    /// The console consumer's option for a consumer properties file.
    pub consumer_config: &'static str,
    /// The console producer's option for a producer properties file.
    pub producer_config: &'static str,
}

/// The major version of the Kafka that `scripts/kafka` runs (or would run).
pub fn kafka_major() -> u32 {
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
        .arg("version")
        .output()
        .expect("scripts/kafka version");
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("scripts/kafka version said {version:?}"))
}

/// The Java tools of the running Kafka (see [`JavaTools`]), asked once per test binary.
pub fn java_tools() -> &'static JavaTools {
    static TOOLS: std::sync::OnceLock<JavaTools> = std::sync::OnceLock::new();
    TOOLS.get_or_init(tools_of_the_running_kafka)
}

fn tools_of_the_running_kafka() -> JavaTools {
    if kafka_major() >= 4 {
        JavaTools {
            console_producer: "org.apache.kafka.tools.ConsoleProducer",
            config_command: "org.apache.kafka.tools.ConfigCommand",
            acl_command: "org.apache.kafka.tools.AclCommand",
            reader_property: "--reader-property",
            formatter_property: "--formatter-property",
            consumer_property: "--command-property",
            consumer_config: "--command-config",
            producer_config: "--command-config",
        }
    } else {
        JavaTools {
            console_producer: "kafka.tools.ConsoleProducer",
            config_command: "kafka.admin.ConfigCommand",
            acl_command: "kafka.admin.AclCommand",
            reader_property: "--property",
            formatter_property: "--property",
            consumer_property: "--consumer-property",
            consumer_config: "--consumer.config",
            producer_config: "--producer.config",
        }
    }
}

/// Runs `scripts/kafka ARGS` to success; `start-node N` first waits until a node killed
/// a moment ago has let go of its port.
pub fn kafka_script(args: &[&str]) {
    if args[0] == "start-node" {
        // A node killed a moment ago may still hold its port: wait until it is free.
        let port = 9091 + args[1].parse::<u16>().expect("node number");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka");
    let status = std::process::Command::new(script)
        .args(args)
        .status()
        .expect("scripts/kafka");
    assert!(status.success(), "scripts/kafka {args:?} failed");
}

/// Runs `futures` together on the calling task, polling each in turn, and gives their
/// outputs in order.
pub async fn together<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none()
                && let std::task::Poll::Ready(v) = future.as_mut().poll(cx)
            {
                *output = Some(v);
            }
        }
        if outputs.iter().all(Option::is_some) {
            std::task::Poll::Ready(outputs.iter_mut().flat_map(Option::take).collect())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}
