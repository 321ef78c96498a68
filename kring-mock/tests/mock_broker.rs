//! MockBroker through kring's own `Client` (the worker runtime, from plain threads and
//! from tokio) and through a raw blocking connection (`support::RawConnection`, for
//! exact control of which request goes where): the default handshake, handlers and
//! builders for each API, sequences, fixed replies, expectations, decoded history,
//! latency, dropped connections with requests in flight, every retriable error code on
//! Produce and Fetch, NOT_COORDINATOR on OffsetCommit, and garbage on the socket.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kring::client::block_on;
use kring::protocol::Request;
use kring::protocol::messages::{
    ApiVersionsResponse, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListOffsetsRequest,
    MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest,
    SyncGroupRequest,
    fetch::{FetchPartition, FetchTopic},
    join_group::JoinGroupRequestProtocol,
    list_offsets::{ListOffsetsPartition, ListOffsetsTopic},
    offset_commit::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    offset_fetch::OffsetFetchRequestTopic,
    produce::{PartitionProduceData, TopicProduceData},
};
use kring::protocol::{ApiKey, KafkaCode, Message};
use kring::record::{Batches, Decompressor};
use kring::{Client, Config};
use kring_mock::{
    MockApiVersionsResponse, MockBroker, MockError, MockFetchResponse, MockFindCoordinatorResponse,
    MockHeartbeatResponse, MockInitProducerIdResponse, MockJoinGroupResponse,
    MockLeaveGroupResponse, MockListOffsetsResponse, MockMetadataResponse,
    MockOffsetCommitResponse, MockOffsetFetchResponse, MockProduceResponse, MockSequence,
    MockSyncGroupResponse, ReceivedRequest, Reply, record_batch, topic_id,
};
use support::{RawConnection, RawError};

/// A kring client bootstrapped from `broker`, with short timeouts and backoffs.
fn client(broker: &MockBroker) -> Client {
    let mut config = Config::new([broker.address()]);
    config.net.request_timeout = Duration::from_secs(3);
    config.net.connect_timeout = Duration::from_secs(3);
    config.net.reconnect_backoff = Duration::from_millis(5);
    config.net.reconnect_backoff_max = Duration::from_millis(20);
    config.net.workers = 1;
    Client::connect_blocking(config).expect("client")
}

/// Sends `request` through the client's worker runtime and waits for the answer.
fn send<R: Request + Send + 'static>(client: &Client, request: R) -> kring::Result<R::Response> {
    block_on(client.send_any(request))
}

fn blocking(broker: &MockBroker) -> RawConnection {
    RawConnection::connect(&broker.address()).expect("connect")
}

fn produce(topic: &str, partition: i32) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic.into())
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(
                            record_batch(0, 1, &[(None, Some(b"v".as_slice()))]).unwrap(),
                        )),
                ]),
        ])
}

fn fetch(topic: &str, partition: i32, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(10)
        .with_min_bytes(1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic.into())
                .with_topic_id(topic_id(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

fn values(records: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut d = Decompressor::default();
    let mut scratch = Vec::new();
    for batch in Batches::new(records) {
        for r in batch.unwrap().records(&mut d, &mut scratch).unwrap() {
            let r = r.unwrap();
            out.push((r.offset(), r.value().unwrap_or_default().to_vec()));
        }
    }
    out
}

#[test]
fn handshake_works_without_setup_and_history_is_decoded() {
    let broker = MockBroker::new(7).unwrap();
    // The default ApiVersions answer offers every API kring speaks.
    let raw = blocking(&broker);
    for api in ApiKey::ALL {
        // APIs with no stable version yet are advertised but never chosen.
        let stable = api.max_stable_version();
        let expected = (stable >= api.versions().min).then_some(stable);
        assert_eq!(
            raw.api_versions().version_for(*api),
            expected,
            "{api:?} negotiated at kring's newest stable version"
        );
    }
    drop(raw);
    // kring's client handshakes and bootstraps from the mock with nothing scripted but
    // the metadata.
    broker.set_handler(
        ApiKey::Metadata,
        MockMetadataResponse::new().broker_of(&broker),
    );
    let client = client(&broker);
    let m = send(&client, MetadataRequest::default().with_topics(None)).unwrap();
    assert_eq!(m.brokers[0].node_id, 7);
    assert_eq!(m.brokers[0].port, i32::from(broker.port()));

    let history = broker.history();
    assert_eq!(history[0].request.api_key, ApiKey::ApiVersions);
    assert_eq!(history[1].request.api_key, ApiKey::ApiVersions);
    assert_eq!(history[1].request.client_id(), Some("kring"));
    assert!(history[1].response.is_some());
    let metadata: Vec<_> = history
        .iter()
        .filter(|h| h.request.api_key == ApiKey::Metadata)
        .collect();
    assert!(metadata.len() >= 2, "bootstrap and ours");
    assert!(
        metadata
            .iter()
            .all(|h| h.request.version == MetadataRequest::MAX_STABLE_VERSION)
    );
    assert_eq!(broker.requests::<MetadataRequest>().len(), metadata.len());
    assert!(broker.connections() >= 2);
    client.close();
    broker.close().unwrap();
}

#[test]
fn builders_answer_each_api_through_kring_client() {
    let broker = MockBroker::new(1).unwrap();
    let batch = record_batch(
        5,
        100,
        &[(None, Some(b"a".as_slice())), (None, Some(b"b".as_slice()))],
    )
    .unwrap();
    broker.set_handler(
        ApiKey::Metadata,
        MockMetadataResponse::new()
            .broker_of(&broker)
            .topic("t", 2, 1)
            .leader_epoch("t", 1, 4),
    );
    broker.set_handler(
        ApiKey::Produce,
        MockProduceResponse::new().offset("t", 0, 42),
    );
    broker.set_handler(
        ApiKey::Fetch,
        MockFetchResponse::new()
            .records("t", 0, batch)
            .high_watermark("t", 0, 9),
    );
    broker.set_handler(
        ApiKey::ListOffsets,
        MockListOffsetsResponse::new().offset("t", 0, MockListOffsetsResponse::LATEST, 9),
    );
    broker.set_handler(
        ApiKey::FindCoordinator,
        MockFindCoordinatorResponse::new().coordinator_of("g", &broker),
    );
    broker.set_handler(
        ApiKey::OffsetFetch,
        MockOffsetFetchResponse::new().offset("t", 0, 3, Some("meta")),
    );
    broker.set_handler(ApiKey::OffsetCommit, MockOffsetCommitResponse::new());
    broker.set_handler(
        ApiKey::InitProducerId,
        MockInitProducerIdResponse::new().producer(77, 2),
    );
    broker.set_handler(
        ApiKey::JoinGroup,
        MockJoinGroupResponse::new().generation(3),
    );
    broker.set_handler(
        ApiKey::SyncGroup,
        MockSyncGroupResponse::new().assignment(&b"assigned"[..]),
    );
    broker.set_handler(ApiKey::Heartbeat, MockHeartbeatResponse::new());
    broker.set_handler(ApiKey::LeaveGroup, MockLeaveGroupResponse::new());

    let c = client(&broker);

    let m = send(&c, MetadataRequest::default().with_topics(None)).unwrap();
    assert_eq!(m.topics[0].partitions.len(), 2);
    assert_eq!(m.topics[0].partitions[1].leader_epoch, 4);
    assert_eq!(m.topics[0].topic_id, topic_id("t"));

    let p = send(&c, produce("t", 0)).unwrap();
    assert_eq!(p.responses[0].partition_responses[0].base_offset, 42);

    // Fetch v17 names topics by id; the mock maps them back.
    let f = send(&c, fetch("t", 0, 6)).unwrap();
    let part = &f.responses[0].partitions[0];
    assert_eq!(part.high_watermark, 9);
    assert_eq!(
        values(part.records.as_deref().unwrap()),
        vec![(5, b"a".to_vec()), (6, b"b".to_vec())]
    );

    let lo = send(
        &c,
        ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default()
                .with_name("t".into())
                .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)]),
        ]),
    )
    .unwrap();
    assert_eq!(lo.topics[0].partitions[0].offset, 9);

    let fc = send(
        &c,
        FindCoordinatorRequest::default().with_coordinator_keys(vec!["g".into()]),
    )
    .unwrap();
    assert_eq!(fc.coordinators[0].node_id, 1);
    assert_eq!(fc.coordinators[0].port, i32::from(broker.port()));

    let of = send(
        &c,
        OffsetFetchRequest::default().with_groups(vec![
            kring::protocol::messages::offset_fetch::OffsetFetchRequestGroup::default()
                .with_group_id("g".into())
                .with_topics(None),
        ]),
    )
    .unwrap();
    let committed = &of.groups[0].topics[0].partitions[0];
    assert_eq!(committed.committed_offset, 3);
    assert_eq!(committed.metadata.as_deref(), Some("meta"));

    let ip = send(&c, InitProducerIdRequest::default()).unwrap();
    assert_eq!((ip.producer_id, ip.producer_epoch), (77, 2));

    let join = send(
        &c,
        JoinGroupRequest::default()
            .with_group_id("g".into())
            .with_protocol_type("consumer".into())
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name("range".into())
                    .with_metadata(bytes::Bytes::from_static(b"sub")),
            ]),
    )
    .unwrap();
    assert_eq!(join.generation_id, 3);
    assert_eq!(join.protocol_name.as_deref(), Some("range"));
    assert_eq!(join.leader, join.member_id);
    assert_eq!(&join.members[0].metadata[..], b"sub");

    let sync = send(&c, SyncGroupRequest::default().with_group_id("g".into())).unwrap();
    assert_eq!(&sync.assignment[..], b"assigned");
    let hb = send(&c, HeartbeatRequest::default()).unwrap();
    assert_eq!(hb.error_code, 0);
    let leave = send(&c, LeaveGroupRequest::default()).unwrap();
    assert_eq!(leave.error_code, 0);

    c.close();
    broker.close().unwrap();
}

#[test]
fn every_retriable_error_on_produce_and_fetch_reaches_the_client() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(
        ApiKey::Metadata,
        MockMetadataResponse::new().broker_of(&broker),
    );
    let c = client(&broker);
    let retriable: Vec<KafkaCode> = KafkaCode::ALL
        .iter()
        .copied()
        .filter(|c| c.is_retriable())
        .collect();
    assert!(retriable.len() > 20, "{} retriable codes", retriable.len());
    for &code in &retriable {
        // Through a builder...
        broker.set_handler(
            ApiKey::Produce,
            MockProduceResponse::new().error("t", 0, code),
        );
        let p = send(&c, produce("t", 0)).unwrap();
        let got = KafkaCode(p.responses[0].partition_responses[0].error_code);
        assert_eq!(got, code, "produce {code}");
        assert!(got.is_retriable());
        assert_eq!(p.responses[0].partition_responses[0].base_offset, -1);

        broker.set_handler(ApiKey::Fetch, MockFetchResponse::new().error("t", 0, code));
        let f = send(&c, fetch("t", 0, 0)).unwrap();
        assert_eq!(
            KafkaCode(f.responses[0].partitions[0].error_code),
            code,
            "fetch {code}"
        );

        // ...and through the broker-wide error switch, ahead of any handler.
        broker.set_error(ApiKey::Produce, code);
        broker.set_error(ApiKey::Fetch, code);
        let p = send(&c, produce("t", 0)).unwrap();
        assert_eq!(
            KafkaCode(p.responses[0].partition_responses[0].error_code),
            code
        );
        let f = send(&c, fetch("t", 0, 0)).unwrap();
        assert_eq!(KafkaCode(f.responses[0].partitions[0].error_code), code);
        broker.clear_error(ApiKey::Produce);
        broker.clear_error(ApiKey::Fetch);
    }
    assert_eq!(
        broker.requests::<ProduceRequest>().len(),
        2 * retriable.len()
    );
    c.close();
    broker.close().unwrap();
}

#[test]
fn not_coordinator_on_offset_commit() {
    let broker = MockBroker::new(1).unwrap();
    broker.expect(
        ApiKey::OffsetCommit,
        MockOffsetCommitResponse::new().error_all(KafkaCode::NOT_COORDINATOR),
    );
    broker.expect(ApiKey::OffsetCommit, MockOffsetCommitResponse::new());
    let mut conn = blocking(&broker);
    let commit = OffsetCommitRequest::default()
        .with_group_id("g".into())
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name("t".into())
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(10),
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(11),
                ]),
        ]);
    let first = conn.send(&commit).unwrap();
    for p in &first.topics[0].partitions {
        let code = KafkaCode(p.error_code);
        assert_eq!(code, KafkaCode::NOT_COORDINATOR);
        assert!(code.is_retriable());
    }
    let second = conn.send(&commit).unwrap();
    assert!(
        second.topics[0]
            .partitions
            .iter()
            .all(|p| p.error_code == 0)
    );
    let seen = broker.requests::<OffsetCommitRequest>();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].topics[0].partitions[1].committed_offset, 11);
    broker.close().unwrap();
}

#[test]
fn sequences_fixed_replies_and_handlers_that_pass() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(
        ApiKey::Heartbeat,
        MockSequence::new()
            .then(Reply::error(KafkaCode::REBALANCE_IN_PROGRESS))
            .then(MockHeartbeatResponse::new().error(KafkaCode::ILLEGAL_GENERATION))
            .then(Reply::from(
                kring::protocol::messages::HeartbeatResponse::default(),
            )),
    );
    // A fixed response, and a closure that only answers some requests.
    broker.set_handler(
        ApiKey::Metadata,
        |r: &ReceivedRequest| match r.decode::<MetadataRequest>() {
            Some(m) if m.topics.is_none() => {
                Reply::from(MetadataResponse::default().with_cluster_id(Some("all".into())))
            }
            _ => Reply::pass(),
        },
    );
    let mut conn = blocking(&broker);
    let codes: Vec<i16> = (0..4)
        .map(|_| conn.send(&HeartbeatRequest::default()).unwrap().error_code)
        .collect();
    assert_eq!(
        codes,
        [
            KafkaCode::REBALANCE_IN_PROGRESS.code(),
            KafkaCode::ILLEGAL_GENERATION.code(),
            0,
            0
        ]
    );
    let all = conn
        .send(&MetadataRequest::default().with_topics(None))
        .unwrap();
    assert_eq!(all.cluster_id.as_deref(), Some("all"));
    // The closure passes and nothing else answers Metadata: the request is unhandled,
    // the connection is closed and close() says so.
    assert!(
        conn.send(&MetadataRequest::default().with_topics(Some(vec![])))
            .is_err()
    );
    let err = broker.close().unwrap_err();
    let MockError::Unverified { unhandled, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(unhandled.len(), 1, "{err}");
    assert!(unhandled[0].starts_with("Metadata"), "{err}");
}

#[test]
fn close_reports_unused_expectations() {
    let broker = MockBroker::new(3).unwrap();
    broker.expect(ApiKey::Produce, MockProduceResponse::new());
    broker.expect_times(ApiKey::Fetch, 2, MockFetchResponse::new());
    broker.expect_any(Reply::from(MetadataResponse::default()));
    let mut conn = blocking(&broker);
    // The handshake does not use up `expect_any`; this Fetch uses one of two.
    conn.send(&fetch("t", 0, 0)).unwrap();
    assert!(broker.verify().is_err());
    let err = broker.close().unwrap_err();
    let text = err.to_string();
    assert!(text.contains("broker 3"), "{text}");
    let MockError::Unverified { unused, .. } = err else {
        panic!()
    };
    assert_eq!(unused, ["Produce x1", "Fetch x1", "any API x1"]);
}

#[test]
fn expectations_come_before_handlers_in_order() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(
        ApiKey::Produce,
        MockProduceResponse::new().offset("t", 0, 100),
    );
    broker.expect(
        ApiKey::Produce,
        MockProduceResponse::new().offset("t", 0, 1),
    );
    broker.expect_any(MockProduceResponse::new().offset("t", 0, 2));
    let mut conn = blocking(&broker);
    let offsets: Vec<i64> = (0..3)
        .map(|_| {
            conn.send(&produce("t", 0)).unwrap().responses[0].partition_responses[0].base_offset
        })
        .collect();
    assert_eq!(offsets, [1, 2, 100]);
    broker.close().unwrap();
}

#[test]
fn latency_is_injected() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(ApiKey::Heartbeat, MockHeartbeatResponse::new());
    let mut conn = blocking(&broker);
    broker.set_latency(Duration::from_millis(150));
    let started = Instant::now();
    conn.send(&HeartbeatRequest::default()).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(150));
    // A reply's own delay adds to it.
    broker.set_handler(
        ApiKey::Heartbeat,
        Reply::from(kring::protocol::messages::HeartbeatResponse::default())
            .after(Duration::from_millis(100)),
    );
    let started = Instant::now();
    conn.send(&HeartbeatRequest::default()).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(250));
    broker.close().unwrap();
}

#[test]
fn connection_dropped_with_requests_in_flight_fails_them_retriably() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(
        ApiKey::Metadata,
        MockMetadataResponse::new().broker_of(&broker),
    );
    let mut conn = blocking(&broker);
    // Slow answers keep the pipeline full; the second request closes the connection.
    broker.set_latency(Duration::from_millis(100));
    broker.close_after(1);
    let request = MetadataRequest::default().with_topics(None);
    let results = conn.pipeline(&request, 5).unwrap();
    assert!(results[0].is_ok(), "{:?}", results[0]);
    let failed: Vec<&RawError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(
        failed.len(),
        4,
        "the dropped connection answered nothing more"
    );
    for e in &failed {
        assert!(e.is_retriable(), "{e}");
    }
    let history = broker.history();
    assert!(history.iter().any(|h| h.closed));
    // The fault fires once: a new connection carries on.
    broker.set_latency(Duration::ZERO);
    blocking(&broker).send(&request).unwrap();
    assert_eq!(broker.connections(), 2);
    broker.close().unwrap();
}

#[test]
fn ignored_requests_time_out_and_acks_zero_is_never_answered() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(ApiKey::Produce, MockProduceResponse::new());
    broker.set_handler(ApiKey::Heartbeat, Reply::ignore());
    let mut conn = blocking(&broker);
    // acks=0: the producer expects nothing back, and the mock sends nothing.
    let version = conn.version_for::<ProduceRequest>().unwrap();
    conn.write(&produce("t", 0).with_acks(0), version).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while broker.history().last().map(|r| r.request.api_key) != Some(ApiKey::Produce)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let last = broker.history().pop().unwrap();
    assert_eq!(last.request.api_key, ApiKey::Produce);
    assert!(last.response.is_none(), "acks=0 is never answered");
    // The ignored Heartbeat times out; had the Produce been answered, its answer would
    // arrive here with the wrong correlation id instead.
    conn.set_read_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = conn.send(&HeartbeatRequest::default()).unwrap_err();
    assert!(matches!(err, RawError::Closed { .. }), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    broker.close().unwrap();
}

#[test]
fn works_from_a_tokio_runtime() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(
        ApiKey::Metadata,
        MockMetadataResponse::new().broker_of(&broker),
    );
    let c = client(&broker);
    let foreign = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let n = foreign.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                c.send_any(MetadataRequest::default().with_topics(None))
                    .await
            }));
        }
        let mut ok = 0;
        for t in tasks {
            t.await.unwrap().unwrap();
            ok += 1;
        }
        ok
    });
    assert_eq!(n, 20);
    drop(foreign);
    c.close();
    broker.close().unwrap();
}

#[test]
fn a_handler_panic_is_reported_and_closes_only_its_connection() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(ApiKey::Heartbeat, |_: &ReceivedRequest| -> Reply {
        panic!("scripted panic")
    });
    broker.set_handler(ApiKey::LeaveGroup, MockLeaveGroupResponse::new());
    // A response of the wrong API is a scripting error too.
    broker.set_handler(
        ApiKey::SyncGroup,
        Reply::from(kring::protocol::messages::HeartbeatResponse::default()),
    );
    let mut first = blocking(&broker);
    assert!(first.send(&HeartbeatRequest::default()).is_err());
    let mut second = blocking(&broker);
    assert!(second.send(&SyncGroupRequest::default()).is_err());
    let mut third = blocking(&broker);
    third.send(&LeaveGroupRequest::default()).unwrap();
    let err = broker.close().unwrap_err();
    let MockError::Unverified { failures, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(failures.len(), 2, "{err}");
    assert!(failures[0].contains("scripted panic"), "{err}");
    assert!(
        failures[1].contains("HeartbeatResponse") || failures[1].contains("Heartbeat"),
        "{err}"
    );
}

#[test]
fn advertised_versions_can_be_narrowed() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(
        ApiKey::ApiVersions,
        MockApiVersionsResponse::new()
            .only(&[ApiKey::ApiVersions, ApiKey::Metadata])
            .versions(ApiKey::Metadata, 0, 4),
    );
    broker.set_handler(
        ApiKey::Metadata,
        MockMetadataResponse::new().broker_of(&broker),
    );
    let mut conn = blocking(&broker);
    assert_eq!(conn.api_versions().version_for(ApiKey::Metadata), Some(4));
    assert_eq!(conn.api_versions().version_for(ApiKey::Produce), None);
    conn.send(&MetadataRequest::default().with_topics(None))
        .unwrap();
    assert_eq!(broker.history()[1].request.version, 4);
    broker.close().unwrap();
}

fn raw_frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// Sends `bytes` on a fresh connection and reads until the mock closes it.
fn send_garbage(broker: &MockBroker, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

#[test]
fn garbage_closes_the_connection_and_never_panics() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(ApiKey::Heartbeat, MockHeartbeatResponse::new());
    let mut header = BytesMut::new();
    header.put_i16(ApiKey::Metadata.key());
    header.put_i16(12);
    header.put_i32(1);
    let cases: Vec<Vec<u8>> = vec![
        vec![0xff, 0xff, 0xff, 0xf0],                      // negative length
        vec![0x7f, 0xff, 0xff, 0xff, 1, 2, 3],             // 2 GiB frame
        raw_frame(&[0, 3]),                                // too short for a header
        raw_frame(&[0x7f, 0x00, 0, 0, 0, 0, 0, 1]),        // unknown API key
        raw_frame(&[0, 3, 0x7f, 0, 0, 0, 0, 1]),           // unknown version
        raw_frame(&[&header[..], &[0xde, 0xad]].concat()), // truncated body
        raw_frame(&[0u8; 64]),                             // zeros
        (0..=255u8).cycle().take(4096).collect(),          // noise
        vec![0, 0, 0, 100, 1, 2, 3],                       // frame cut short
    ];
    for (i, case) in cases.iter().enumerate() {
        let answer = send_garbage(&broker, case);
        assert!(answer.is_empty(), "case {i}: unexpected answer {answer:?}");
    }
    // The broker is still fine.
    let mut conn = blocking(&broker);
    conn.send(&HeartbeatRequest::default()).unwrap();
    let errors = broker.protocol_errors();
    assert!(errors.len() >= 6, "{errors:?}");
    // Garbage is the client's fault, not a scripting failure.
    broker.close().unwrap();
}

#[test]
fn unknown_api_versions_version_gets_the_kip_511_answer() {
    let broker = MockBroker::new(1).unwrap();
    let mut body = BytesMut::new();
    body.put_i16(ApiKey::ApiVersions.key());
    body.put_i16(99);
    body.put_i32(5);
    body.put_i16(-1); // null client id
    body.put_u8(0);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.write_all(&raw_frame(&body)).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame).unwrap();
    let (header, response) =
        kring::protocol::decode_response_frame::<ApiVersionsResponse>(bytes::Bytes::from(frame), 0)
            .unwrap();
    assert_eq!(header.correlation_id, 5);
    assert_eq!(
        KafkaCode(response.error_code),
        KafkaCode::UNSUPPORTED_VERSION
    );
    assert!(
        response
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::ApiVersions.key())
    );
    drop(s);
    broker.close().unwrap();
}

#[test]
fn a_broker_can_come_back_at_the_same_address() {
    let broker = MockBroker::new(1).unwrap();
    let addr = broker.addr();
    broker.set_handler(ApiKey::Heartbeat, MockHeartbeatResponse::new());
    let mut conn = blocking(&broker);
    conn.send(&HeartbeatRequest::default()).unwrap();
    broker.close().unwrap();
    let err = conn.send(&HeartbeatRequest::default()).unwrap_err();
    assert!(err.is_retriable(), "{err}");
    let again = MockBroker::bind(addr, 1).unwrap();
    again.set_handler(
        ApiKey::Heartbeat,
        MockHeartbeatResponse::new().error(KafkaCode::NOT_COORDINATOR),
    );
    let answer = RawConnection::connect(&addr.to_string())
        .and_then(|mut c| c.send(&HeartbeatRequest::default()))
        .unwrap();
    assert_eq!(KafkaCode(answer.error_code), KafkaCode::NOT_COORDINATOR);
    again.close().unwrap();
}

#[test]
fn disconnect_all_drops_open_connections() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(ApiKey::Heartbeat, MockHeartbeatResponse::new());
    let mut conn = blocking(&broker);
    conn.send(&HeartbeatRequest::default()).unwrap();
    broker.disconnect_all();
    assert!(conn.send(&HeartbeatRequest::default()).is_err());
    let mut conn = blocking(&broker);
    conn.send(&HeartbeatRequest::default()).unwrap();
    broker.close().unwrap();
}

#[test]
fn offset_fetch_before_v8_and_topic_lists() {
    let broker = MockBroker::new(1).unwrap();
    broker.set_handler(
        ApiKey::OffsetFetch,
        MockOffsetFetchResponse::new()
            .offset("t", 0, 12, None)
            .partition_error("t", 1, KafkaCode::UNSTABLE_OFFSET_COMMIT),
    );
    let mut conn = blocking(&broker);
    let request = OffsetFetchRequest::default()
        .with_group_id("g".into())
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name("t".into())
                .with_partition_indexes(vec![0, 1, 2]),
        ]));
    let r = conn.send_version(&request, 7).unwrap();
    let parts = &r.topics[0].partitions;
    assert_eq!(parts[0].committed_offset, 12);
    assert_eq!(
        KafkaCode(parts[1].error_code),
        KafkaCode::UNSTABLE_OFFSET_COMMIT
    );
    assert_eq!(parts[2].committed_offset, -1);
    // An error response encodes at every version the request could come in.
    let mut buf = BytesMut::new();
    for v in 0..=7 {
        buf.clear();
        kring_mock::error_response(
            &kring::protocol::Request::into_kind(request.clone()),
            v,
            KafkaCode::NOT_COORDINATOR,
        )
        .unwrap()
        .encode(&mut buf, v)
        .unwrap();
    }
    broker.close().unwrap();
}

#[allow(dead_code)]
fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn handles_are_send_and_sync() {
    assert_send_sync::<MockBroker>();
    assert_send_sync::<kring_mock::FakeCluster>();
    assert_send_sync::<MockSequence>();
}
