//! kring's `Admin` against FakeCluster: the admin APIs users' tests call — describe
//! cluster, create partitions, describe/alter/incremental-alter configs, list offsets,
//! delete records, list/describe/delete groups and their committed offsets — answered
//! as a broker would, bad input refused naming the resource with nothing applied, and
//! a NOT_COORDINATOR answer retried at the coordinator found again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kring::Error;
use kring::admin::{Admin, AlterConfigOp, ConfigResource, ConfigSource, DeleteBefore, OffsetSpec};
use kring::client::block_on;
use kring::protocol::messages::{
    CreatePartitionsResponse, DeleteGroupsResponse, DescribeGroupsResponse,
    create_partitions::CreatePartitionsTopicResult, delete_groups::DeletableGroupResult,
    describe_groups::DescribedGroup,
};
use kring::protocol::{ApiKey, KafkaCode};
use kring_mock::{FakeCluster, Reply, record_batch};

fn setup() -> (FakeCluster, Admin) {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .cluster_id("fake-admin")
        .build()
        .unwrap();
    let client = kring::Client::connect_blocking(kring::Config::new(cluster.bootstrap())).unwrap();
    (cluster, Admin::new(client))
}

fn code_naming(e: &Error, what: &str) -> KafkaCode {
    assert!(e.to_string().contains(what), "{e} does not name {what}");
    e.code().unwrap_or_else(|| panic!("no code in {e}"))
}

#[test]
fn describe_cluster_and_create_partitions() {
    let (cluster, admin) = setup();
    let d = block_on(admin.describe_cluster()).unwrap();
    assert_eq!(d.cluster_id, "fake-admin");
    assert_eq!(
        d.brokers.iter().map(|b| b.id).collect::<Vec<_>>(),
        cluster.broker_ids()
    );
    assert_eq!(d.controller_id, cluster.broker_ids()[0]);

    cluster.create_topic("t", 2, 2).unwrap();
    block_on(admin.create_partitions("t", 6, true)).unwrap();
    assert_eq!(cluster.partition_count("t"), Some(2));
    block_on(admin.create_partitions("t", 5, false)).unwrap();
    assert_eq!(cluster.partition_count("t"), Some(5));
    assert_eq!(cluster.replicas("t", 4).map(|r| r.len()), Some(2));
    assert_eq!(
        block_on(admin.describe_topic("t"))
            .unwrap()
            .partitions
            .len(),
        5
    );
    let e = block_on(admin.create_partitions("t", 3, false)).unwrap_err();
    assert_eq!(code_naming(&e, "t"), KafkaCode::INVALID_PARTITIONS);
    let e = block_on(admin.create_partitions("nope", 3, false)).unwrap_err();
    assert_eq!(
        code_naming(&e, "nope"),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(cluster.partition_count("t"), Some(5));
}

#[test]
fn configs_change_all_or_nothing() {
    let (cluster, admin) = setup();
    cluster.create_topic("t", 1, 1).unwrap();
    let topic = ConfigResource::Topic("t".into());
    let value = |name: &str| {
        block_on(admin.describe_configs(&topic))
            .unwrap()
            .into_iter()
            .find(|c| c.name == name)
            .map(|c| (c.value, c.source))
    };
    assert_eq!(
        value("retention.ms"),
        Some((Some("604800000".into()), ConfigSource::Default))
    );
    let set = AlterConfigOp::Set("retention.ms".into(), "1000".into());
    block_on(admin.incremental_alter_configs(&topic, std::slice::from_ref(&set), false)).unwrap();
    assert_eq!(
        value("retention.ms"),
        Some((Some("1000".into()), ConfigSource::Topic))
    );

    let e = block_on(admin.incremental_alter_configs(
        &topic,
        &[
            AlterConfigOp::Set("retention.ms".into(), "5".into()),
            AlterConfigOp::Set("bogus".into(), "1".into()),
        ],
        false,
    ))
    .unwrap_err();
    assert_eq!(code_naming(&e, "topic t"), KafkaCode::INVALID_CONFIG);
    assert!(e.to_string().contains("bogus"), "{e}");
    assert_eq!(
        value("retention.ms"),
        Some((Some("1000".into()), ConfigSource::Topic))
    );

    block_on(admin.alter_configs(&topic, &[("segment.ms".into(), "60000".into())], false)).unwrap();
    assert_eq!(value("retention.ms").unwrap().1, ConfigSource::Default);
    assert_eq!(value("segment.ms").unwrap().0.as_deref(), Some("60000"));
    let e = block_on(admin.describe_configs(&ConfigResource::Topic("nope".into()))).unwrap_err();
    assert_eq!(
        code_naming(&e, "nope"),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );

    let id = cluster.broker_ids()[1];
    let broker = ConfigResource::Broker(id);
    let op = AlterConfigOp::Set("log.cleaner.threads".into(), "2".into());
    block_on(admin.incremental_alter_configs(&broker, &[op], false)).unwrap();
    let op = AlterConfigOp::Set("log.cleaner.threads".into(), "3".into());
    block_on(admin.incremental_alter_configs(&ConfigResource::BrokerDefault, &[op], false))
        .unwrap();
    let entries = block_on(admin.describe_configs(&broker)).unwrap();
    let threads = entries
        .iter()
        .find(|c| c.name == "log.cleaner.threads")
        .unwrap();
    assert_eq!(
        (threads.value.as_deref(), threads.source),
        (Some("2"), ConfigSource::DynamicBroker)
    );
    let other =
        block_on(admin.describe_configs(&ConfigResource::Broker(cluster.broker_ids()[0]))).unwrap();
    let threads = other
        .iter()
        .find(|c| c.name == "log.cleaner.threads")
        .unwrap();
    assert_eq!(
        (threads.value.as_deref(), threads.source),
        (Some("3"), ConfigSource::DynamicDefaultBroker)
    );
}

#[test]
fn offsets_and_delete_records() {
    let (cluster, admin) = setup();
    cluster.create_topic("t", 2, 1).unwrap();
    type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
    let records: Vec<KeyValue<'_>> = (0..5).map(|_| (None, Some(&b"v"[..]))).collect();
    cluster
        .append("t", 1, &record_batch(0, 1_000, &records).unwrap())
        .unwrap();
    let latest = block_on(admin.topic_offsets("t", OffsetSpec::Latest)).unwrap();
    assert_eq!(
        latest
            .iter()
            .map(|o| (o.partition, o.offset))
            .collect::<Vec<_>>(),
        vec![(0, 0), (1, 5)]
    );
    let low = block_on(admin.delete_records("t", &[(1, DeleteBefore::Offset(3))])).unwrap();
    assert_eq!(low, vec![(1, 3)]);
    assert_eq!(cluster.log_start_offset("t", 1).unwrap(), 3);
    let e = block_on(admin.delete_records("t", &[(1, DeleteBefore::Offset(9))])).unwrap_err();
    assert_eq!(code_naming(&e, "t-1"), KafkaCode::OFFSET_OUT_OF_RANGE);
    assert_eq!(cluster.log_start_offset("t", 1).unwrap(), 3);
}

#[test]
fn groups_and_their_offsets() {
    let (cluster, admin) = setup();
    cluster.create_topic("t", 2, 1).unwrap();
    // Groups whose coordinators differ: listing asks every broker.
    let groups: Vec<String> = (0..6).map(|i| format!("g{i}")).collect();
    for g in &groups {
        cluster.commit(g, "t", 0, 7);
    }
    let coordinators: std::collections::BTreeSet<i32> = groups
        .iter()
        .filter_map(|g| cluster.coordinator(g))
        .collect();
    assert!(coordinators.len() > 1, "{coordinators:?}");
    let listed = block_on(admin.list_groups()).unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|g| g.group_id.clone())
            .collect::<Vec<_>>(),
        groups
    );
    let d = block_on(admin.describe_group("g0")).unwrap();
    assert_eq!((d.state.as_str(), d.members.len()), ("Empty", 0));

    block_on(admin.alter_group_offsets("g0", &[(("t".into(), 1), 4)])).unwrap();
    assert_eq!(cluster.committed("g0", "t", 1), Some(4));
    let committed = block_on(admin.list_group_offsets("g0")).unwrap();
    assert_eq!(
        committed
            .iter()
            .map(|c| (c.partition, c.offset))
            .collect::<Vec<_>>(),
        vec![(0, 7), (1, 4)]
    );
    block_on(admin.delete_group_offsets("g0", &[("t".into(), 0)])).unwrap();
    assert_eq!(cluster.committed("g0", "t", 0), None);

    // A coordinator that moved answers NOT_COORDINATOR once: found again, retried.
    let answered = Arc::new(AtomicUsize::new(0));
    let seen = answered.clone();
    cluster.control_once(Some(ApiKey::DeleteGroups), move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
        Reply::from(DeleteGroupsResponse::default().with_results(vec![
            DeletableGroupResult::default()
                .with_group_id("g0".into())
                .with_error_code(KafkaCode::NOT_COORDINATOR.code()),
        ]))
    });
    block_on(admin.delete_group("g0")).unwrap();
    assert_eq!(answered.load(Ordering::SeqCst), 1);
    assert_eq!(cluster.group_state("g0"), None);
    let e = block_on(admin.delete_group("g0")).unwrap_err();
    assert_eq!(code_naming(&e, "group g0"), KafkaCode::GROUP_ID_NOT_FOUND);
    let e = block_on(admin.describe_group("g0")).unwrap_err();
    assert_eq!(code_naming(&e, "group g0"), KafkaCode::GROUP_ID_NOT_FOUND);
}

/// NOT_CONTROLLER and COORDINATOR_LOAD_IN_PROGRESS are passing answers: the call is
/// sent again (after a metadata or coordinator refresh) and then succeeds.
#[test]
fn not_controller_and_loading_coordinator_are_retried() {
    let (cluster, admin) = setup();
    cluster.create_topic("t", 1, 1).unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    cluster.control_once(Some(ApiKey::CreatePartitions), move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
        Reply::from(CreatePartitionsResponse::default().with_results(vec![
            CreatePartitionsTopicResult::default()
                .with_name("t".into())
                .with_error_code(KafkaCode::NOT_CONTROLLER.code()),
        ]))
    });
    block_on(admin.create_partitions("t", 3, false)).unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(cluster.partition_count("t"), Some(3));

    cluster.commit("g", "t", 0, 1);
    let seen = hits.clone();
    cluster.control_once(Some(ApiKey::DescribeGroups), move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
        Reply::from(DescribeGroupsResponse::default().with_groups(vec![
            DescribedGroup::default()
                .with_group_id("g".into())
                .with_error_code(KafkaCode::COORDINATOR_LOAD_IN_PROGRESS.code()),
        ]))
    });
    let d = block_on(admin.describe_group("g")).unwrap();
    assert_eq!(d.state, "Empty");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}
