//! The consumer's ListOffsets lookups against FakeCluster: partition consumers started
//! together have their start offsets looked up in one request per leader, each with the
//! right answer; a lookup of a partition already in the gathered request goes in a
//! request of its own (the broker refuses a partition listed twice). The request count
//! is what a real broker cannot show, hence the fake cluster.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use kring::client::block_on;
use kring::config::OffsetReset;
use kring::consumer::{Consumer, Offset, PartitionConsumer};
use kring::group::{GroupConsumer, Topics};
use kring::protocol::ApiKey;
use kring::protocol::KafkaCode;
use kring::protocol::RequestKind;
use kring::protocol::messages::fetch::{FetchableTopicResponse, PartitionData};
use kring::protocol::messages::{FetchResponse, ListOffsetsRequest};
use kring::{Client, Config};
use kring_mock::{FakeCluster, Reply};
use support::watchdog::watchdog;

mod support;

const PARTITIONS: i32 = 12;

/// Three brokers, `t` with twelve partitions spread over them; partition i holds i + 1
/// records.
fn cluster() -> FakeCluster {
    cluster_of(3)
}

/// [`cluster`] with `brokers` brokers.
fn cluster_of(brokers: usize) -> FakeCluster {
    let cluster = FakeCluster::builder()
        .brokers(brokers)
        .topic("t", PARTITIONS)
        .build()
        .unwrap();
    for p in 0..PARTITIONS {
        let records: Vec<_> = (0..=p).map(|_| (None, Some(b"v".as_slice()))).collect();
        cluster.append_records("t", p, 1_000, &records).unwrap();
    }
    cluster
}

/// A consumer whose client already has `t`'s metadata, so that starting a partition
/// consumer waits on nothing before its lookup.
fn consumer(cluster: &FakeCluster) -> Consumer {
    let mut config = Config::new(cluster.bootstrap());
    config.net.workers = 1;
    let client = Client::connect_blocking(config).expect("connect to the fake cluster");
    block_on(client.refresh_metadata(&["t"])).unwrap();
    Consumer::new(client).unwrap()
}

/// Runs `futures` together on the calling task, polling each in turn, and gives their
/// outputs in order (the consumer's callers start partition consumers this way, or on
/// tasks of their own).
async fn together<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none()
                && let Poll::Ready(v) = future.as_mut().poll(cx)
            {
                *output = Some(v);
            }
        }
        if outputs.iter().all(Option::is_some) {
            Poll::Ready(outputs.iter_mut().map(|o| o.take().unwrap()).collect())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// The ListOffsets requests the cluster received: (broker, [(partition, timestamp)]).
fn list_offsets(cluster: &FakeCluster) -> Vec<(i32, Vec<(i32, i64)>)> {
    cluster
        .history()
        .into_iter()
        .filter(|r| r.api_key == ApiKey::ListOffsets)
        .map(|r| {
            let RequestKind::ListOffsets(ListOffsetsRequest { topics, .. }) = r.request else {
                panic!("a ListOffsets request decodes as one");
            };
            let partitions = topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| (p.partition_index, p.timestamp))
                .collect();
            (r.broker_id, partitions)
        })
        .collect()
}

/// Each partition consumer started (the first of partition `first`, the others of the
/// partitions after it) at the end of its partition.
fn assert_started_at_their_ends(started: &[kring::Result<PartitionConsumer>], first: i32) {
    for (p, started) in (first..).zip(started) {
        let pc = started.as_ref().expect("started");
        assert_eq!(
            pc.position(),
            i64::from(p) + 1,
            "partition {p} starts at its end"
        );
    }
}

/// The cluster got one ListOffsets per leader, each listing every partition of `t` it
/// leads, at the latest offset.
fn assert_one_request_per_leader(cluster: &FakeCluster) {
    let requests = list_offsets(cluster);
    let mut brokers: Vec<i32> = requests.iter().map(|(b, _)| *b).collect();
    brokers.sort_unstable();
    brokers.dedup();
    assert_eq!(
        requests.len(),
        brokers.len(),
        "one request per leader: {requests:?}"
    );
    for (broker, partitions) in &requests {
        let mut asked: Vec<i32> = partitions.iter().map(|(p, _)| *p).collect();
        asked.sort_unstable();
        let led: Vec<i32> = (0..PARTITIONS)
            .filter(|&p| cluster.leader("t", p) == Some(*broker))
            .collect();
        assert_eq!(asked, led, "broker {broker} is asked for all it leads");
        assert!(
            partitions.iter().all(|(_, ts)| *ts == -1),
            "the latest offsets"
        );
    }
    assert_eq!(
        requests.iter().map(|(_, p)| p.len()).sum::<usize>(),
        PARTITIONS as usize
    );
}

#[test]
fn partition_consumers_started_together_look_up_their_offsets_in_one_request_per_leader() {
    let cluster = cluster();
    let consumer = consumer(&cluster);
    cluster.clear_history();
    let starts = (0..PARTITIONS).map(|p| consumer.consume_partition("t", p, Offset::Newest));
    let started = block_on(together(starts.collect()));
    assert_started_at_their_ends(&started, 0);
    assert_one_request_per_leader(&cluster);
}

#[test]
fn a_partition_looked_up_twice_at_once_goes_in_two_requests_with_the_same_answer() {
    let cluster = cluster();
    let consumer = consumer(&cluster);
    cluster.clear_history();
    let twice = vec![consumer.offsets("t", 4), consumer.offsets("t", 4)];
    let answers = block_on(together(twice));
    for answer in answers {
        assert_eq!(answer.expect("offsets"), (0, 5));
    }
    // Earliest, then latest, for each call: never the same partition twice in one.
    let requests = list_offsets(&cluster);
    assert_eq!(requests.len(), 4, "{requests:?}");
    for (_, partitions) in &requests {
        assert_eq!(partitions.len(), 1, "{requests:?}");
    }
}

/// Starts every partition consumer, polls each start once (each lookup joins its
/// leader's gathering and yields), then does `with_first` to partition 0's start (keeps
/// it without polling it, or drops it) and runs the others to their end.
fn first_start_left_behind(with_first: fn(Pin<Box<dyn Future<Output = StartResult> + '_>>)) {
    let cluster = cluster();
    let consumer = consumer(&cluster);
    cluster.clear_history();
    let mut starts: Vec<Pin<Box<dyn Future<Output = StartResult> + '_>>> = (0..PARTITIONS)
        .map(|p| Box::pin(consumer.consume_partition("t", p, Offset::Newest)) as Pin<Box<_>>)
        .collect();
    block_on(std::future::poll_fn(|cx| {
        for start in starts.iter_mut() {
            assert!(start.as_mut().poll(cx).is_pending(), "nothing answered yet");
        }
        Poll::Ready(())
    }));
    let first = starts.remove(0);
    with_first(first);
    let started = block_on(together(starts));
    assert_started_at_their_ends(&started, 1);
    assert_one_request_per_leader(&cluster);
}

type StartResult = kring::Result<PartitionConsumer>;

#[test]
fn a_lookup_whose_caller_stops_polling_holds_up_nobody() {
    // Partition 0's start is kept, never polled again: another lookup of its gathering
    // has it sent (from the worker), and every other start ends.
    watchdog("kept", || {
        first_start_left_behind(|start| std::mem::forget(start))
    });
}

#[test]
fn a_lookup_whose_caller_is_dropped_holds_up_nobody() {
    watchdog("dropped", || first_start_left_behind(|start| drop(start)));
}

#[test]
fn a_group_member_starts_its_new_partitions_with_one_lookup_per_leader() {
    // Twelve partitions assigned, none with a committed offset: each starts at the
    // reset policy's offset, looked up together.
    let cluster = cluster();
    let mut config = Config::new(cluster.bootstrap());
    config.net.workers = 1;
    config.group.group_id = Some("lookups".into());
    config.consumer.auto_offset_reset = OffsetReset::Latest;
    config.consumer.enable_auto_commit = false;
    let client = Client::connect_blocking(config).unwrap();
    cluster.clear_history();
    let positions = block_on(async {
        let mut gc = GroupConsumer::subscribe(client.clone(), Topics::names(["t"]))
            .await
            .unwrap();
        // A call joins, is assigned every partition and starts them; nothing arrives
        // after the latest offsets, so each call is cut short (a guard of 200 calls
        // against hanging, not a timing assertion).
        for _ in 0..200 {
            if gc.assignment().len() == PARTITIONS as usize {
                break;
            }
            tokio::select! {
                m = gc.next_message() => panic!("nothing to read, got {m:?}"),
                _ = client.sleep(Duration::from_millis(100)) => {}
            }
        }
        let positions: Vec<(i32, i64)> = (0..PARTITIONS)
            .filter_map(|p| Some((p, gc.position("t", p).ok()?)))
            .collect();
        gc.close().await.unwrap();
        positions
    });
    client.close();
    let ends: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, i64::from(p) + 1)).collect();
    assert_eq!(positions, ends, "every partition starts at its end");
    let requests = list_offsets(&cluster);
    let leaders = (0..PARTITIONS)
        .filter_map(|p| cluster.leader("t", p))
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        requests.len(),
        leaders.len(),
        "one request per leader: {requests:?}"
    );
}

/// A Fetch answer to `request` naming every partition it lists OFFSET_OUT_OF_RANGE.
fn all_out_of_range(request: &kring::protocol::messages::FetchRequest) -> FetchResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_error_code(KafkaCode::OFFSET_OUT_OF_RANGE.code())
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1)
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    FetchResponse::default().with_responses(topics)
}

#[test]
fn partitions_found_out_of_range_in_one_fetch_are_reset_with_one_lookup() {
    // One broker leads all twelve partitions; their consumers start at their ends (no
    // lookup). The first fetch listing all twelve is answered OFFSET_OUT_OF_RANGE for
    // each: the resets (earliest) are looked up together, not one after another.
    // FakeCluster grants no fetch sessions, so every fetch lists every partition the
    // fetcher holds (with incremental fetches the hook would have to look at the
    // session's partitions instead).
    let cluster = cluster_of(1);
    cluster.control_once(Some(ApiKey::Fetch), |r| {
        let RequestKind::Fetch(request) = &r.request else {
            return Reply::pass();
        };
        let listed: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
        if listed == PARTITIONS as usize {
            Reply::respond(all_out_of_range(request))
        } else {
            Reply::pass()
        }
    });
    let mut config = Config::new(cluster.bootstrap());
    config.net.workers = 1;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let client = Client::connect_blocking(config).expect("connect to the fake cluster");
    block_on(client.refresh_metadata(&["t"])).unwrap();
    let consumer = Consumer::new(client).unwrap();
    cluster.clear_history();
    let starts = (0..PARTITIONS)
        .map(|p| consumer.consume_partition("t", p, Offset::Exact(i64::from(p) + 1)));
    let started = block_on(together(starts.collect()));
    watchdog("resets", || {
        for (p, started) in (0..).zip(started) {
            let mut pc = started.expect("started");
            let batch = pc.next_batch_blocking().expect("alive").expect("no error");
            let first = batch.records().next().expect("a record").unwrap();
            assert_eq!(first.offset(), 0, "partition {p} reset to its earliest");
        }
    });
    let requests = list_offsets(&cluster);
    assert_eq!(requests.len(), 1, "one lookup for the twelve: {requests:?}");
    let mut asked = requests[0].1.clone();
    asked.sort_unstable();
    let earliest: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, -2)).collect();
    assert_eq!(asked, earliest);
}
