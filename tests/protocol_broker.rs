//! The wire protocol proven against a real Apache Kafka on loopback (`scripts/kafka up`;
//! `KRING_BOOTSTRAP` overrides 127.0.0.1:9092). Each API is exchanged at the highest
//! version both sides support over a plain blocking TCP connection, and the decoded
//! answers are checked against what the broker must say.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use kring::client::{BlockingConnection, ConnectionConfig};
use kring::protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    ListOffsetsRequest, MetadataRequest, MetadataResponse,
    create_topics::{CreatableTopic, CreatableTopicConfig},
    delete_topics::DeleteTopicState,
    describe_configs::DescribeConfigsResource,
    list_offsets::{ListOffsetsPartition, ListOffsetsTopic},
    metadata::MetadataRequestTopic,
};
use kring::protocol::negotiation::decode_api_versions_response;
use kring::protocol::{Decode, Message};
use kring::protocol::{Encode, KafkaCode, RequestHeader, ResponseHeader};

fn bootstrap() -> String {
    std::env::var("KRING_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

fn connect() -> BlockingConnection {
    BlockingConnection::connect(&bootstrap(), ConnectionConfig::default()).unwrap_or_else(|e| {
        panic!(
            "no broker at {}: {e} (start one with `scripts/kafka up`)",
            bootstrap()
        )
    })
}

fn unique_topic(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn metadata_for(conn: &mut BlockingConnection, topic: &str) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic.into())),
        ]))
        .with_allow_auto_topic_creation(false);
    conn.send(&request).expect("metadata")
}

#[test]
fn handshake_negotiates_versions_for_the_apis_we_use() {
    let conn = connect();
    let table = conn.api_versions();
    for api in [
        ApiKey::ApiVersions,
        ApiKey::Metadata,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::ListOffsets,
        ApiKey::DescribeConfigs,
        ApiKey::Produce,
        ApiKey::Fetch,
    ] {
        let version = table
            .version_for(api)
            .unwrap_or_else(|| panic!("no common version for {api:?}"));
        let broker = table.broker_range(api).unwrap();
        assert!(broker.contains(version) && api.versions().contains(version));
        eprintln!(
            "{api:?}: broker {}-{}, using v{version}",
            broker.min, broker.max
        );
    }
}

#[test]
fn api_versions_every_version_and_the_v0_fallback() {
    let mut conn = connect();
    // Every version both sides know.
    let broker = conn
        .api_versions()
        .broker_range(ApiKey::ApiVersions)
        .unwrap();
    for version in broker.min..=ApiKey::ApiVersions.max_stable_version().min(broker.max) {
        let request = ApiVersionsRequest::default()
            .with_client_software_name("kring-test".into())
            .with_client_software_version("0.0.0".into());
        let response = conn.send_version(&request, version).expect("api versions");
        assert_eq!(
            KafkaCode(response.error_code),
            KafkaCode::NONE,
            "v{version}"
        );
        assert!(
            response
                .api_keys
                .iter()
                .any(|k| k.api_key == ApiKey::Metadata.key()),
            "v{version} lists Metadata"
        );
    }

    // A version the broker cannot know: it answers UNSUPPORTED_VERSION in the v0 format,
    // listing the ApiVersions versions it does support (KIP-511).
    // Any correlation id: the connection stamps its own and hands back the caller's.
    let correlation_id = 4242;
    let refused_version = 127;
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions.key())
        .with_request_api_version(refused_version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some("kring-test".into()))
        .encode(&mut frame, 2)
        .unwrap();
    ApiVersionsRequest::default()
        .with_client_software_name("kring-test".into())
        .with_client_software_version("0.0.0".into())
        .encode(&mut frame, ApiVersionsRequest::VERSIONS.max)
        .unwrap();
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let mut answer = conn.send_raw_frame(&frame).expect("raw api versions");
    let header = ResponseHeader::decode(&mut answer, 0).unwrap();
    assert_eq!(header.correlation_id, correlation_id);
    let response = decode_api_versions_response(answer, ApiVersionsRequest::VERSIONS.max)
        .expect("decodes as v0");
    assert_eq!(
        KafkaCode(response.error_code),
        KafkaCode::UNSUPPORTED_VERSION
    );
    let fallback = kring::protocol::negotiation::api_versions_fallback(&response).unwrap();
    assert!(fallback >= 0 && fallback < refused_version);
    // From v3 the broker requires a client software name and version (KIP-511).
    let named = ApiVersionsRequest::default()
        .with_client_software_name("kring-test".into())
        .with_client_software_version("0.0.0".into());
    let again = conn
        .send_version(&named, fallback)
        .expect("retry at the fallback version");
    assert_eq!(KafkaCode(again.error_code), KafkaCode::NONE);

    // v0 itself, which every broker answers.
    let v0 = conn
        .send_version(&ApiVersionsRequest::default(), 0)
        .expect("v0");
    assert_eq!(KafkaCode(v0.error_code), KafkaCode::NONE);
}

#[test]
fn metadata_at_every_common_version_names_this_broker() {
    let mut conn = connect();
    let broker = conn.api_versions().broker_range(ApiKey::Metadata).unwrap();
    let max = ApiKey::Metadata.max_stable_version().min(broker.max);
    for version in broker.min.max(MetadataRequest::VERSIONS.min)..=max {
        // v0 has no "all topics" null; an empty list means none there, all from v1.
        let request = MetadataRequest::default().with_topics(Some(Vec::new()));
        let response = conn.send_version(&request, version).expect("metadata");
        assert!(!response.brokers.is_empty(), "v{version} lists brokers");
        let port: i32 = bootstrap().rsplit(':').next().unwrap().parse().unwrap();
        assert!(
            response.brokers.iter().any(|b| b.port == port),
            "v{version}: broker on port {port} in {:?}",
            response.brokers
        );
        if version >= 2 {
            assert!(
                response
                    .cluster_id
                    .as_deref()
                    .is_some_and(|c| !c.is_empty())
            );
        }
    }
}

#[test]
fn create_describe_list_offsets_and_delete_a_topic() {
    let mut conn = connect();
    let topic = unique_topic("kring-proto");
    let partitions = 3;

    // CreateTopics with an explicit config.
    let create = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(topic.clone())
                .with_num_partitions(partitions)
                .with_replication_factor(1)
                .with_configs(vec![
                    CreatableTopicConfig::default()
                        .with_name("retention.ms".into())
                        .with_value(Some("3600000".into())),
                ]),
        ])
        .with_timeout_ms(30_000);
    let created = conn.send(&create).expect("create topics");
    assert_eq!(created.topics.len(), 1);
    let result = &created.topics[0];
    assert_eq!(result.name, topic);
    assert_eq!(
        KafkaCode(result.error_code),
        KafkaCode::NONE,
        "{:?}",
        result.error_message
    );

    // Creating it again is TOPIC_ALREADY_EXISTS.
    let again = conn.send(&create).expect("create topics again");
    assert_eq!(
        KafkaCode(again.topics[0].error_code),
        KafkaCode::TOPIC_ALREADY_EXISTS
    );

    // Metadata lists it with its partitions and a leader for each (wait for leaders).
    let deadline = Instant::now() + Duration::from_secs(30);
    let metadata = loop {
        let m = metadata_for(&mut conn, &topic);
        let ready = m.topics.len() == 1
            && m.topics[0].error_code == 0
            && m.topics[0].partitions.len() == partitions as usize
            && m.topics[0].partitions.iter().all(|p| p.leader_id >= 0);
        if ready || Instant::now() > deadline {
            break m;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let t = &metadata.topics[0];
    assert_eq!(t.name.as_deref(), Some(topic.as_str()));
    assert_eq!(KafkaCode(t.error_code), KafkaCode::NONE);
    assert!(!t.topic_id.is_zero(), "KIP-516 topic id is set");
    let mut indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
    indexes.sort();
    assert_eq!(indexes, (0..partitions).collect::<Vec<_>>());
    for p in &t.partitions {
        assert!(
            p.leader_id >= 0,
            "partition {} has a leader",
            p.partition_index
        );
        assert_eq!(p.replica_nodes.len(), 1);
    }

    // ListOffsets, sent to each partition's leader: earliest (-2) and latest (-1) are
    // both 0 on an empty topic.
    let mut by_leader: std::collections::BTreeMap<i32, Vec<i32>> = Default::default();
    for p in &t.partitions {
        by_leader
            .entry(p.leader_id)
            .or_default()
            .push(p.partition_index);
    }
    for (leader, leader_partitions) in by_leader {
        let broker = metadata
            .brokers
            .iter()
            .find(|b| b.node_id == leader)
            .expect("leader is listed");
        let mut leader_conn = BlockingConnection::connect(
            &format!("{}:{}", broker.host, broker.port),
            ConnectionConfig::default(),
        )
        .expect("connect to leader");
        for timestamp in [-2i64, -1] {
            let request = ListOffsetsRequest::default()
                .with_replica_id(-1)
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(
                            leader_partitions
                                .iter()
                                .map(|&i| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(i)
                                        .with_timestamp(timestamp)
                                })
                                .collect(),
                        ),
                ]);
            // A new partition's leader may not know it leads yet: retry retriable codes.
            let deadline = Instant::now() + Duration::from_secs(30);
            let answer = loop {
                let answer = leader_conn.send(&request).expect("list offsets");
                let retriable = answer.topics[0]
                    .partitions
                    .iter()
                    .any(|p| KafkaCode(p.error_code).is_retriable());
                if !retriable || Instant::now() > deadline {
                    break answer;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            assert_eq!(answer.topics.len(), 1);
            assert_eq!(answer.topics[0].partitions.len(), leader_partitions.len());
            for p in &answer.topics[0].partitions {
                assert_eq!(KafkaCode(p.error_code), KafkaCode::NONE);
                assert_eq!(
                    p.offset, 0,
                    "timestamp {timestamp} partition {}",
                    p.partition_index
                );
            }
        }
    }

    // DescribeConfigs shows the config set at creation, as a dynamic topic config.
    let describe = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2) // TOPIC
            .with_resource_name(topic.clone())
            .with_configuration_keys(Some(vec!["retention.ms".into(), "cleanup.policy".into()])),
    ]);
    let described = conn.send(&describe).expect("describe configs");
    let resource = &described.results[0];
    assert_eq!(KafkaCode(resource.error_code), KafkaCode::NONE);
    let value = |name: &str| {
        resource
            .configs
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} in {:?}", resource.configs))
    };
    assert_eq!(value("retention.ms").value.as_deref(), Some("3600000"));
    assert_eq!(
        value("retention.ms").config_source,
        1,
        "DYNAMIC_TOPIC_CONFIG"
    );
    assert_eq!(value("cleanup.policy").value.as_deref(), Some("delete"));

    // DeleteTopics, then Metadata says it is gone.
    // v6 (KIP-516) names topics in `topics`; older versions in `topic_names`.
    let delete_version = conn
        .api_versions()
        .version_for(ApiKey::DeleteTopics)
        .unwrap();
    let delete = if delete_version >= 6 {
        DeleteTopicsRequest::default().with_topics(vec![
            DeleteTopicState::default().with_name(Some(topic.clone())),
        ])
    } else {
        DeleteTopicsRequest::default().with_topic_names(vec![topic.clone()])
    }
    .with_timeout_ms(30_000);
    let deleted = conn.send(&delete).expect("delete topics");
    assert_eq!(deleted.responses.len(), 1);
    assert_eq!(KafkaCode(deleted.responses[0].error_code), KafkaCode::NONE);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = metadata_for(&mut conn, &topic);
        if KafkaCode(m.topics[0].error_code) == KafkaCode::UNKNOWN_TOPIC_OR_PARTITION {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "topic still listed: {:?}",
            m.topics[0]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn unknown_topic_is_reported_per_topic() {
    let mut conn = connect();
    let m = metadata_for(&mut conn, &unique_topic("kring-missing"));
    assert_eq!(m.topics.len(), 1);
    assert_eq!(
        KafkaCode(m.topics[0].error_code),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(KafkaCode(m.topics[0].error_code).is_retriable());
}
