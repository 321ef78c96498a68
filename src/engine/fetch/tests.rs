//! The fetcher's decisions, driven by hand with time passed in.

use std::sync::atomic::Ordering;

use super::testing::TestTarget;
use super::*;
use crate::buf::MemoryBudget;
use crate::protocol::messages::fetch::{FetchableTopicResponse, PartitionData};
use crate::record::{BatchBuilder, BatchOptions, RecordBatchRef};

type Target = TestTarget;

/// A partition whose consumer holds any number of chunks.
fn target(partition: i32, position: i64) -> Arc<Target> {
    TestTarget::new("t", partition, position, usize::MAX)
}

fn settings() -> FetchSettings {
    FetchSettings {
        max_wait: Duration::from_millis(500),
        min_bytes: 1,
        max_bytes: 50 << 20,
        partition_max_bytes: 1 << 20,
        isolation_level: 0,
        error_backoff: Duration::from_millis(100),
        error_backoff_max: Duration::from_secs(1),
        rack_id: String::new(),
        read_replica_max_age: Duration::from_secs(300),
    }
}

fn no_ids(_: &str) -> Uuid {
    Uuid::ZERO
}

fn batch(base_offset: i64, records: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(
        Vec::with_capacity(4096),
        BatchOptions::default().with_base_offset(base_offset),
    )
    .unwrap();
    for i in 0..records {
        b.append(1, None, Some(format!("v{i}").as_bytes()), &[])
            .unwrap();
    }
    b.seal().unwrap().into_inner()
}

fn response(parts: Vec<(i32, i16, i64, Vec<u8>)>, session_id: i32) -> FetchResponse {
    FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic("t".into())
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, code, hw, records)| {
                            PartitionData::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                                .with_high_watermark(hw)
                                .with_records(Some(Bytes::from(records)))
                        })
                        .collect(),
                ),
        ])
}

fn permit() -> Permit {
    MemoryBudget::new(64 << 20).try_acquire(1 << 20).unwrap()
}

fn fetch(fetcher: &mut Fetcher<Target>, now: Instant) -> FetchRequest {
    fetch_with(fetcher, now, 12, &no_ids)
}

/// The fetch decided at `now`, built at `version` with `topic_id`.
fn fetch_with(
    fetcher: &mut Fetcher<Target>,
    now: Instant,
    version: i16,
    topic_id: &dyn Fn(&str) -> Uuid,
) -> FetchRequest {
    let Next::Fetch {
        max_bytes,
        short_poll,
    } = fetcher.poll_next(now, 64 << 20)
    else {
        panic!("expected a fetch")
    };
    fetcher.build_request(version, max_bytes, short_poll, topic_id)
}

fn sent_partitions(request: &FetchRequest) -> Vec<(i32, i64)> {
    request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
        .collect()
}

#[test]
fn complete_batches_become_spans_and_a_cut_batch_is_fetched_again() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 10);
    fetcher.add(p.clone());
    fetch(&mut fetcher, now);
    let mut records = batch(10, 3);
    records.extend(batch(13, 2));
    let cut = batch(15, 4);
    let complete = records.len();
    records.extend(&cut[..cut.len() - 5]);
    let outcome =
        fetcher.handle_response(response(vec![(0, 0, 100, records)], 0), 12, permit(), now);
    assert!(outcome.moved.is_empty() && outcome.reset.is_empty());
    let chunks = p.queue();
    let chunk = &chunks[0];
    assert_eq!(chunk.records.len(), complete, "the cut batch is left out");
    let spans: Vec<(i64, i64)> = chunk
        .batches
        .iter()
        .map(|s| (s.base_offset, s.last_offset))
        .collect();
    assert_eq!(spans, vec![(10, 12), (13, 14)]);
    for span in &chunk.batches {
        let b = RecordBatchRef::from_span(&chunk.records, *span).unwrap();
        assert_eq!(b.base_offset(), span.base_offset);
    }
    assert_eq!(p.fetch_position(), 15, "continues at the cut batch");
    assert_eq!(p.high_watermark(), 100);
}

#[test]
fn a_full_consumer_is_refetched_from_the_same_position() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 0);
    fetcher.add(p.clone());
    fetch(&mut fetcher, now);
    p.capacity.store(0, Ordering::SeqCst);
    fetcher.handle_response(
        response(vec![(0, 0, 10, batch(0, 5))], 0),
        12,
        permit(),
        now,
    );
    assert_eq!(p.fetch_position(), 0);
    assert_eq!(
        fetcher.poll_next(now, 1 << 20),
        Next::Wait {
            until: now + FULL_RECHECK
        }
    );
}

#[test]
fn the_session_sends_only_what_changed_and_forgets_what_left() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let (a, b) = (target(0, 0), target(1, 50));
    fetcher.add(a.clone());
    fetcher.add(b.clone());
    let first = fetch(&mut fetcher, now);
    assert_eq!(
        (first.session_id, first.session_epoch),
        (0, 0),
        "a full fetch opens a session"
    );
    assert_eq!(sent_partitions(&first), vec![(0, 0), (1, 50)]);
    fetcher.handle_response(
        response(vec![(0, 0, 10, batch(0, 5))], 77),
        12,
        permit(),
        now,
    );
    let second = fetch(&mut fetcher, now);
    assert_eq!((second.session_id, second.session_epoch), (77, 1));
    assert_eq!(
        sent_partitions(&second),
        vec![(0, 5)],
        "only the partition that moved"
    );
    b.closed.store(true, Ordering::SeqCst);
    fetcher.handle_response(response(vec![], 77), 12, permit(), now);
    let third = fetch(&mut fetcher, now);
    assert_eq!(third.session_epoch, 2);
    assert!(sent_partitions(&third).is_empty());
    assert_eq!(third.forgotten_topics_data.len(), 1);
    assert_eq!(third.forgotten_topics_data[0].partitions, vec![1]);
    // A session error falls back to a full fetch.
    let mut broken = response(vec![], 0);
    broken.error_code = KafkaCode::INVALID_FETCH_SESSION_EPOCH.code();
    fetcher.handle_response(broken, 12, permit(), now);
    let fourth = fetch(&mut fetcher, now);
    assert_eq!((fourth.session_id, fourth.session_epoch), (0, 0));
    assert_eq!(sent_partitions(&fourth), vec![(0, 5)]);
}

/// A fetch at `version` (the request's session id and epoch).
fn fetch_at(fetcher: &mut Fetcher<Target>, now: Instant, version: i16) -> (i32, i32) {
    let r = fetch_with(fetcher, now, version, &|_| Uuid([9; 16]));
    (r.session_id, r.session_epoch)
}

#[test]
fn a_version_change_across_13_begins_a_new_session() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    fetcher.add(target(0, 0));
    assert_eq!(fetch_at(&mut fetcher, now, 12), (0, 0));
    fetcher.handle_response(response(vec![], 77), 12, permit(), now);
    assert_eq!(fetch_at(&mut fetcher, now, 12), (77, 1));
    fetcher.handle_response(response(vec![], 77), 12, permit(), now);
    // Named by id from v13: the broker's session names them by name.
    assert_eq!(fetch_at(&mut fetcher, now, 16), (0, 0));
    fetcher.handle_response(response(vec![], 78), 16, permit(), now);
    assert_eq!(fetch_at(&mut fetcher, now, 16), (78, 1));
}

#[test]
fn a_refused_session_is_begun_again_at_once_but_a_refused_full_fetch_backs_off() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    fetcher.add(target(0, 0));
    let refused = || {
        let mut r = response(vec![], 0);
        r.error_code = KafkaCode::FETCH_SESSION_TOPIC_ID_ERROR.code();
        r
    };
    fetch(&mut fetcher, now);
    fetcher.handle_response(response(vec![], 77), 12, permit(), now);
    assert_eq!(fetch(&mut fetcher, now).session_id, 77);
    fetcher.handle_response(refused(), 12, permit(), now);
    let full = fetch(&mut fetcher, now);
    assert_eq!((full.session_id, full.session_epoch), (0, 0));
    // The full fetch refused as well: no loop of full fetches.
    fetcher.handle_response(refused(), 12, permit(), now);
    let until = now + settings().error_backoff;
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Wait { until });
}

#[test]
fn moved_and_out_of_range_partitions_are_handed_back() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let (a, b, c) = (target(0, 0), target(1, 0), target(2, 0));
    for t in [&a, &b, &c] {
        fetcher.add(t.clone());
    }
    fetch(&mut fetcher, now);
    let outcome = fetcher.handle_response(
        response(
            vec![
                (0, KafkaCode::NOT_LEADER_OR_FOLLOWER.code(), -1, Vec::new()),
                (1, KafkaCode::OFFSET_OUT_OF_RANGE.code(), -1, Vec::new()),
                (2, KafkaCode::CORRUPT_MESSAGE.code(), -1, Vec::new()),
            ],
            0,
        ),
        12,
        permit(),
        now,
    );
    assert_eq!(outcome.moved.len(), 1);
    assert!(Arc::ptr_eq(&outcome.moved[0], &a));
    assert_eq!(outcome.reset.len(), 1);
    assert!(Arc::ptr_eq(&outcome.reset[0], &b));
    assert_eq!(c.errors().len(), 1, "other codes are reported");
    // Both failed at their position: fetched again after the backoff.
    let next = fetch(&mut fetcher, now + settings().error_backoff);
    assert_eq!(
        sent_partitions(&next),
        vec![(1, 0), (2, 0)],
        "the moved one left this fetcher"
    );
    assert_eq!(
        fetcher.handle_failure().len(),
        2,
        "a failure hands back the rest"
    );
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Idle);
}

#[test]
fn a_failed_fetch_backs_off() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    fetcher.add(target(0, 0));
    fetch(&mut fetcher, now);
    let mut failed = response(vec![], 0);
    failed.error_code = KafkaCode::UNKNOWN_SERVER_ERROR.code();
    fetcher.handle_response(failed, 12, permit(), now);
    let until = now + settings().error_backoff;
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Wait { until });
    assert!(matches!(
        fetcher.poll_next(until, 1 << 20),
        Next::Fetch { .. }
    ));
}

#[test]
fn caught_up_partitions_wait_for_room_then_short_poll() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let (full, at_end) = (target(0, 10), target(1, 700));
    full.capacity.store(0, Ordering::SeqCst);
    full.high_watermark.store(500, Ordering::SeqCst);
    at_end.high_watermark.store(700, Ordering::SeqCst);
    fetcher.add(full.clone());
    fetcher.add(at_end.clone());
    let until = now + SHORT_POLL;
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Wait { until });
    // Woken early: still waiting for the same deadline.
    assert_eq!(
        fetcher.poll_next(now + Duration::from_millis(5), 1 << 20),
        Next::Wait { until }
    );
    let Next::Fetch {
        max_bytes,
        short_poll: true,
    } = fetcher.poll_next(until, 1 << 20)
    else {
        panic!("a short poll after the wait")
    };
    let request = fetcher.build_request(12, max_bytes, true, &no_ids);
    assert_eq!(request.max_wait_ms, SHORT_POLL.as_millis() as i32);
    assert_eq!(sent_partitions(&request), vec![(1, 700)]);
    // The full one made room: a normal fetch at once.
    full.capacity.store(usize::MAX, Ordering::SeqCst);
    assert!(matches!(
        fetcher.poll_next(until, 1 << 20),
        Next::Fetch {
            short_poll: false,
            ..
        }
    ));
}

#[test]
fn fetches_poll_short_while_partitions_join_and_long_once_they_stop() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let long = settings().max_wait.as_millis() as i32;
    let short = SHORT_POLL.as_millis() as i32;
    fetcher.add(target(0, 0));
    // The first fetch goes at once, but the broker may not hold it long: the next
    // partition to join would wait behind it.
    assert_eq!(fetch(&mut fetcher, now).max_wait_ms, short);
    let later = now + JOIN_SETTLE / 2;
    fetcher.add(target(1, 0));
    assert_eq!(fetch(&mut fetcher, later).max_wait_ms, short);
    // The window runs from the last join.
    assert_eq!(fetch(&mut fetcher, now + JOIN_SETTLE).max_wait_ms, short);
    assert_eq!(fetch(&mut fetcher, later + JOIN_SETTLE).max_wait_ms, long);
    fetcher.add(target(2, 0));
    assert_eq!(
        fetch(&mut fetcher, later + JOIN_SETTLE * 3).max_wait_ms,
        short
    );
}

#[test]
fn the_decision_that_avoids_long_polls() {
    let state = |paused, has_room, fetch_position, high_watermark| FetchState {
        paused,
        has_room,
        backing_off: false,
        fetch_position,
        high_watermark,
    };
    // One partition at its end, two full: wait for room instead of a long poll.
    let full = state(false, false, 10, 500);
    let at_end = state(false, true, 700, 700);
    assert!(nothing_worth_fetching(&[full, full, at_end]));
    // One with data to fetch: fetch (the broker answers at once).
    let behind = state(false, true, 10, 500);
    assert!(!nothing_worth_fetching(&[full, behind, at_end]));
    // Everything caught up and nothing waiting: the long poll is what we want.
    assert!(!nothing_worth_fetching(&[at_end, at_end]));
    // High watermark not known yet: fetch.
    assert!(!nothing_worth_fetching(&[full, state(false, true, 0, -1)]));
    // Paused partitions neither wait for room nor take part.
    let paused_full = state(true, false, 10, 500);
    assert!(!nothing_worth_fetching(&[paused_full, at_end]));
    // Nothing active at all is the caller's other case.
    assert!(!nothing_worth_fetching(&[full]));
}

#[test]
fn topics_are_fetched_by_id_from_v13() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 0);
    fetcher.add(p.clone());
    let Next::Fetch { max_bytes, .. } = fetcher.poll_next(now, 1 << 20) else {
        panic!()
    };
    let id = Uuid([7; 16]);
    let request = fetcher.build_request(13, max_bytes, false, &|_| id);
    assert_eq!(request.topics[0].topic_id, id);
    assert!(request.topics[0].topic.is_empty());
    let mut r = response(vec![(0, 0, 5, batch(0, 5))], 0);
    r.responses[0].topic = String::new();
    r.responses[0].topic_id = id;
    fetcher.handle_response(r, 13, permit(), now);
    assert_eq!(p.fetch_position(), 5, "the answer matched by topic id");
}

#[test]
fn an_incremental_answer_for_a_partition_left_out_of_the_request_is_delivered() {
    // v13+: the session leaves an unchanged partition out of the request; the broker
    // still answers with its new data, by topic id.
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 100);
    fetcher.add(p.clone());
    let id = Uuid([9; 16]);
    let ids = |_: &str| id;
    let Next::Fetch { max_bytes, .. } = fetcher.poll_next(now, 1 << 20) else {
        panic!()
    };
    fetcher.build_request(13, max_bytes, false, &ids);
    let mut empty = response(vec![(0, 0, 100, Vec::new())], 55);
    empty.responses[0].topic_id = id;
    fetcher.handle_response(empty, 13, permit(), now);
    let Next::Fetch { max_bytes, .. } = fetcher.poll_next(now, 1 << 20) else {
        panic!()
    };
    let request = fetcher.build_request(13, max_bytes, false, &ids);
    assert!(sent_partitions(&request).is_empty(), "unchanged: left out");
    let mut data = response(vec![(0, 0, 101, batch(100, 1))], 55);
    data.responses[0].topic_id = id;
    fetcher.handle_response(data, 13, permit(), now);
    assert_eq!(p.fetch_position(), 101);
    assert_eq!(p.queue().len(), 1);
}

#[test]
fn a_partition_whose_fetch_failed_waits_growing_while_the_others_are_fetched() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let (failing, fine) = (target(0, 5), target(1, 0));
    fetcher.add(failing.clone());
    fetcher.add(fine.clone());
    let base = settings().error_backoff;
    let mut t = now;
    // OFFSET_OUT_OF_RANGE under reset none (the position stays), then a broker error
    // at the same position: each failure doubles the wait.
    let codes = [
        KafkaCode::OFFSET_OUT_OF_RANGE,
        KafkaCode::UNKNOWN_SERVER_ERROR,
        KafkaCode::OFFSET_OUT_OF_RANGE,
    ];
    for (i, code) in codes.into_iter().enumerate() {
        let request = fetch(&mut fetcher, t);
        assert_eq!(sent_partitions(&request), vec![(0, 5), (1, 0)], "round {i}");
        let answer = response(vec![(0, code.code(), 100, vec![]), (1, 0, 0, vec![])], 0);
        fetcher.handle_response(answer, 12, permit(), t);
        let wait = base * (1 << i);
        // The other partition is still fetched at once, without the failing one.
        assert_eq!(sent_partitions(&fetch(&mut fetcher, t)), vec![(1, 0)]);
        fetcher.handle_response(response(vec![(1, 0, 0, vec![])], 0), 12, permit(), t);
        let just_before = t + wait - Duration::from_millis(1);
        assert_eq!(
            sent_partitions(&fetch(&mut fetcher, just_before)),
            vec![(1, 0)]
        );
        fetcher.handle_response(response(vec![(1, 0, 0, vec![])], 0), 12, permit(), t);
        t += wait;
    }
    // Alone, the failing partition makes the fetcher wait for the end of its backoff.
    fine.closed.store(true, Ordering::SeqCst);
    let request = fetch(&mut fetcher, t);
    assert_eq!(sent_partitions(&request), vec![(0, 5)]);
    let answer = response(
        vec![(0, KafkaCode::UNKNOWN_SERVER_ERROR.code(), 100, vec![])],
        0,
    );
    fetcher.handle_response(answer, 12, permit(), t);
    let until = t + settings().error_backoff_max.min(base * 8);
    assert_eq!(fetcher.poll_next(t, 1 << 20), Next::Wait { until });
    // A new position (the reset policy, or a seek) ends the wait at once.
    failing.set_fetch_position(50, -1);
    assert_eq!(sent_partitions(&fetch(&mut fetcher, t)), vec![(0, 50)]);
}

#[test]
fn a_malformed_batch_at_the_position_backs_off() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 0);
    fetcher.add(p.clone());
    fetch(&mut fetcher, now);
    let mut bad = batch(0, 2);
    bad[16] = 9; // an unknown magic
    fetcher.handle_response(response(vec![(0, 0, 100, bad)], 0), 12, permit(), now);
    assert_eq!(p.errors().len(), 1, "{:?}", p.errors());
    let until = now + settings().error_backoff;
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Wait { until });
    assert!(matches!(
        fetcher.poll_next(until, 1 << 20),
        Next::Fetch { .. }
    ));
}

fn batch_in_epoch(base_offset: i64, records: usize, epoch: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(
        Vec::with_capacity(4096),
        BatchOptions::default()
            .with_base_offset(base_offset)
            .with_partition_leader_epoch(epoch),
    )
    .unwrap();
    for i in 0..records {
        b.append(1, None, Some(format!("v{i}").as_bytes()), &[])
            .unwrap();
    }
    b.seal().unwrap().into_inner()
}

/// (current leader epoch, last fetched epoch) of each partition sent.
fn sent_epochs(request: &FetchRequest) -> Vec<(i32, i32)> {
    request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.current_leader_epoch, p.last_fetched_epoch))
        })
        .collect()
}

#[test]
fn fetches_carry_the_leader_epoch_and_the_epoch_of_the_last_batch_fetched() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 0);
    p.leader_epoch.store(7, Ordering::SeqCst);
    fetcher.add(p.clone());
    let first = fetch(&mut fetcher, now);
    assert_eq!(sent_epochs(&first), vec![(7, -1)], "nothing fetched yet");
    let mut records = batch_in_epoch(0, 3, 5);
    records.extend(batch_in_epoch(3, 2, 6));
    fetcher.handle_response(response(vec![(0, 0, 5, records)], 0), 12, permit(), now);
    assert_eq!((p.fetch_position(), p.fetch_epoch()), (5, 6));
    let second = fetch(&mut fetcher, now);
    assert_eq!(sent_epochs(&second), vec![(7, 6)]);
    // Before v12 there is no last fetched epoch to send; the request still encodes.
    fetcher.handle_response(response(vec![], 0), 12, permit(), now);
    let Next::Fetch { max_bytes, .. } = fetcher.poll_next(now, 1 << 20) else {
        panic!("expected a fetch")
    };
    let v11 = fetcher.build_request(11, max_bytes, false, &no_ids);
    assert_eq!(sent_epochs(&v11), vec![(7, -1)]);
    let mut buf = bytes::BytesMut::new();
    crate::protocol::Encode::encode(&v11, &mut buf, 11).unwrap();
}

#[test]
fn a_fenced_epoch_hands_the_partition_back_with_the_leader_the_broker_names() {
    use crate::protocol::messages::fetch::{LeaderIdAndEpoch, NodeEndpoint};
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let (a, b) = (target(0, 10), target(1, 10));
    fetcher.add(a.clone());
    fetcher.add(b.clone());
    fetch(&mut fetcher, now);
    let mut r = response(
        vec![
            (0, KafkaCode::FENCED_LEADER_EPOCH.code(), -1, Vec::new()),
            (1, KafkaCode::NOT_LEADER_OR_FOLLOWER.code(), -1, Vec::new()),
        ],
        0,
    );
    r.responses[0].partitions[0].current_leader = LeaderIdAndEpoch::default()
        .with_leader_id(2)
        .with_leader_epoch(8);
    r.node_endpoints = vec![
        NodeEndpoint::default()
            .with_node_id(2)
            .with_host("h2".into())
            .with_port(9093),
    ];
    let outcome = fetcher.handle_response(r, 12, permit(), now);
    assert_eq!(outcome.moved.len(), 2, "both go to find their leader");
    assert_eq!(
        outcome.hints,
        vec![LeaderHint::new(Arc::from("t"), 0, 2, 8).unwrap()],
        "only the one the broker named a leader for"
    );
    assert_eq!(outcome.endpoints.len(), 1);
    assert_eq!(outcome.endpoints[0].addr(), "h2:9093");
    assert!(a.errors().is_empty() && b.errors().is_empty());
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Idle);
}

#[test]
fn an_unknown_leader_epoch_is_fetched_again_after_a_backoff_without_an_error() {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 10);
    p.leader_epoch.store(9, Ordering::SeqCst);
    fetcher.add(p.clone());
    fetch(&mut fetcher, now);
    let outcome = fetcher.handle_response(
        response(
            vec![(0, KafkaCode::UNKNOWN_LEADER_EPOCH.code(), -1, Vec::new())],
            0,
        ),
        12,
        permit(),
        now,
    );
    assert!(outcome.moved.is_empty(), "the broker is behind, not us");
    assert!(p.errors().is_empty(), "{:?}", p.errors());
    let until = now + settings().error_backoff;
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Wait { until });
    assert_eq!(sent_epochs(&fetch(&mut fetcher, until)), vec![(9, -1)]);
}

#[test]
fn a_diverging_epoch_is_handed_back_and_nothing_is_delivered() {
    use crate::protocol::messages::fetch::EpochEndOffset;
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let p = target(0, 100);
    p.fetch_epoch.store(4, Ordering::SeqCst);
    fetcher.add(p.clone());
    fetch(&mut fetcher, now);
    let mut r = response(vec![(0, 0, 80, batch_in_epoch(60, 5, 5))], 44);
    r.responses[0].partitions[0].diverging_epoch =
        EpochEndOffset::default().with_epoch(4).with_end_offset(60);
    let outcome = fetcher.handle_response(r, 12, permit(), now);
    assert_eq!(outcome.diverged.len(), 1);
    assert!(Arc::ptr_eq(&outcome.diverged[0].0, &p));
    assert_eq!(
        outcome.diverged[0].1,
        EpochEnd {
            leader_epoch: 4,
            end_offset: 60
        }
    );
    assert!(
        p.queue().is_empty(),
        "nothing past the divergence is delivered"
    );
    assert_eq!(p.fetch_position(), 100, "the driver decides where to go");
    // Left as it is (reset none), it is fetched again, in full, after the backoff.
    let until = now + settings().error_backoff;
    assert_eq!(fetcher.poll_next(now, 1 << 20), Next::Wait { until });
    assert_eq!(sent_partitions(&fetch(&mut fetcher, until)), vec![(0, 100)]);
}

/// A group member that lost a partition while its fetch was in flight and got it back
/// (a new consumer for the same partition, added before the answer came): the stale
/// answer is not the new consumer's, and the session fetches the new consumer from its
/// own position without forgetting the partition.
fn lost_and_regained_during_a_fetch(regained_at: i64, expect_sent: Vec<(i32, i64)>) {
    let now = Instant::now();
    let mut fetcher = Fetcher::new(settings());
    let (a, old) = (target(0, 0), target(1, 10));
    fetcher.add(a.clone());
    fetcher.add(old.clone());
    fetch(&mut fetcher, now);
    fetcher.handle_response(response(vec![], 77), 12, permit(), now);
    let in_flight = fetch(&mut fetcher, now);
    assert_eq!(in_flight.session_id, 77);
    old.closed.store(true, Ordering::SeqCst);
    let regained = target(1, regained_at);
    fetcher.add(regained.clone());
    let stale = fetcher.handle_response(
        response(vec![(1, 0, 20, batch(10, 5))], 77),
        12,
        permit(),
        now,
    );
    assert!(stale.moved.is_empty() && stale.reset.is_empty());
    assert!(
        regained.queue().is_empty(),
        "the answer to the old consumer's fetch"
    );
    assert_eq!(regained.fetch_position(), regained_at);
    let next = fetch(&mut fetcher, now);
    assert_eq!(next.session_id, 77, "the session goes on");
    assert_eq!(sent_partitions(&next), expect_sent);
    assert!(
        next.forgotten_topics_data.is_empty(),
        "the partition is still fetched: {:?}",
        next.forgotten_topics_data
    );
    fetcher.handle_response(
        response(vec![(1, 0, 20, batch(regained_at, 10))], 77),
        12,
        permit(),
        now,
    );
    assert_eq!(regained.queue().len(), 1);
    assert_eq!(regained.fetch_position(), regained_at + 10);
}

#[test]
fn a_partition_regained_during_a_fetch_is_fetched_from_its_new_position() {
    // Nothing was committed: the new consumer reads again from the earliest offset.
    lost_and_regained_during_a_fetch(0, vec![(1, 0)]);
}

#[test]
fn a_partition_regained_at_the_same_position_during_a_fetch_keeps_its_session_entry() {
    // Committed where the old consumer was: the broker's session already has that
    // position (KIP-227 sessions keep the fetch offset the client last sent).
    lost_and_regained_during_a_fetch(10, vec![]);
}

/// The fetcher of broker `node`, consuming with rack `r1`.
fn fetcher_of(node: i32) -> Fetcher<Target> {
    let mut s = settings();
    s.rack_id = "r1".into();
    Fetcher::for_broker(s, node)
}

/// `response` whose partitions all name `replica` as their preferred read replica.
fn naming(mut r: FetchResponse, replica: i32) -> FetchResponse {
    for t in &mut r.responses {
        for p in &mut t.partitions {
            p.preferred_read_replica = replica;
        }
    }
    r
}

fn read_replica_of(p: &Target) -> Option<(i32, Instant)> {
    p.read_replica().map(|r| (r.broker, r.until))
}

#[test]
fn the_rack_is_sent_from_v11() {
    let now = Instant::now();
    let mut fetcher = fetcher_of(1);
    fetcher.add(target(0, 0));
    let Next::Fetch { max_bytes, .. } = fetcher.poll_next(now, 64 << 20) else {
        panic!("expected a fetch")
    };
    let v11 = fetcher.build_request(11, max_bytes, false, &no_ids);
    assert_eq!(v11.rack_id, "r1");
    let v10 = fetcher.build_request(10, max_bytes, false, &no_ids);
    assert_eq!(v10.rack_id, "", "no field below v11");
}

#[test]
fn a_named_read_replica_takes_the_partition_with_the_records_delivered() {
    let now = Instant::now();
    let mut fetcher = fetcher_of(1);
    let (p, other) = (target(0, 0), target(1, 0));
    fetcher.add(p.clone());
    fetcher.add(other.clone());
    fetch(&mut fetcher, now);
    let mut answer = response(vec![(0, 0, 10, batch(0, 5)), (1, 0, 10, Vec::new())], 9);
    answer.responses[0].partitions[0].preferred_read_replica = 3;
    let outcome = fetcher.handle_response(answer, 12, permit(), now);
    assert_eq!(outcome.redirected.len(), 1);
    assert!(Arc::ptr_eq(&outcome.redirected[0], &p));
    assert!(outcome.moved.is_empty() && outcome.fallback.is_empty());
    assert_eq!(
        read_replica_of(&p),
        Some((3, now + settings().read_replica_max_age))
    );
    assert_eq!(p.fetch_position(), 5, "what came with it was delivered");
    assert_eq!(p.queue().len(), 1);
    assert_eq!(read_replica_of(&other), None);
    // It left this fetcher, and the broker's session forgets it.
    let next = fetch(&mut fetcher, now);
    assert_eq!(sent_partitions(&next), Vec::<(i32, i64)>::new());
    assert_eq!(next.forgotten_topics_data.len(), 1);
    assert_eq!(next.forgotten_topics_data[0].partitions, vec![0]);
}

#[test]
fn minus_one_or_this_broker_keeps_the_partition_here() {
    let now = Instant::now();
    for named in [-1, 1] {
        let mut fetcher = fetcher_of(1);
        let p = target(0, 0);
        fetcher.add(p.clone());
        fetch(&mut fetcher, now);
        let outcome = fetcher.handle_response(
            naming(response(vec![(0, 0, 10, batch(0, 5))], 0), named),
            12,
            permit(),
            now,
        );
        assert!(outcome.redirected.is_empty(), "{named}");
        assert_eq!(read_replica_of(&p), None, "{named}");
        assert_eq!(sent_partitions(&fetch(&mut fetcher, now)), vec![(0, 5)]);
    }
}

#[test]
fn a_replica_named_again_keeps_its_first_age() {
    let now = Instant::now();
    let age = settings().read_replica_max_age;
    // On the leader while metadata does not list the replica yet.
    let mut fetcher = fetcher_of(1);
    let p = target(0, 0);
    p.set_read_replica(Some(ReadReplica {
        broker: 3,
        until: now + age,
    }));
    fetcher.add(p.clone());
    let later = now + Duration::from_secs(5);
    fetch(&mut fetcher, later);
    let outcome = fetcher.handle_response(
        naming(response(vec![(0, 0, 10, Vec::new())], 0), 3),
        12,
        permit(),
        later,
    );
    assert_eq!(
        outcome.redirected.len(),
        1,
        "handed back to try the replica again"
    );
    assert_eq!(read_replica_of(&p), Some((3, now + age)));
}

/// The fetcher of broker 3 serving `p` as its read replica until `until`.
fn on_replica(p: &Arc<Target>, until: Instant) -> Fetcher<Target> {
    p.set_read_replica(Some(ReadReplica { broker: 3, until }));
    let mut fetcher = fetcher_of(3);
    fetcher.add(p.clone());
    fetcher
}

#[test]
fn a_read_replica_gives_the_partition_back_when_its_age_runs_out() {
    let now = Instant::now();
    let age = settings().read_replica_max_age;
    let p = target(0, 40);
    let mut fetcher = on_replica(&p, now + age);
    assert!(fetcher.poll_expired(now).is_empty());
    let just_before = now + age - Duration::from_millis(1);
    assert!(fetcher.poll_expired(just_before).is_empty());
    // A wait ends at the age at the latest.
    p.capacity.store(0, Ordering::SeqCst);
    assert_eq!(
        fetcher.poll_next(just_before, 64 << 20),
        Next::Wait { until: now + age }
    );
    let expired = fetcher.poll_expired(now + age);
    assert_eq!(expired.len(), 1);
    assert!(Arc::ptr_eq(&expired[0], &p));
    assert_eq!(read_replica_of(&p), None, "the leader is asked again");
    assert_eq!(p.fetch_position(), 40, "the position stays");
    assert_eq!(fetcher.poll_next(now + age, 64 << 20), Next::Idle);
}

#[test]
fn a_leader_keeps_a_partition_whose_replica_aged_out_elsewhere() {
    // Only a read replica's own fetcher hands a partition back on age.
    let now = Instant::now();
    let p = target(0, 0);
    p.set_read_replica(Some(ReadReplica {
        broker: 3,
        until: now,
    }));
    let mut fetcher = fetcher_of(1);
    fetcher.add(p.clone());
    assert!(fetcher.poll_expired(now).is_empty());
    assert_eq!(sent_partitions(&fetch(&mut fetcher, now)), vec![(0, 0)]);
}

#[test]
fn a_read_replica_that_cannot_serve_sends_the_partition_back_to_the_leader() {
    let now = Instant::now();
    let age = settings().read_replica_max_age;
    for code in [
        KafkaCode::NOT_LEADER_OR_FOLLOWER,
        KafkaCode::REPLICA_NOT_AVAILABLE,
        KafkaCode::FENCED_LEADER_EPOCH,
        KafkaCode::UNKNOWN_LEADER_EPOCH,
        KafkaCode::OFFSET_NOT_AVAILABLE,
        KafkaCode::OFFSET_OUT_OF_RANGE,
    ] {
        let p = target(0, 70);
        let mut fetcher = on_replica(&p, now + age);
        fetch(&mut fetcher, now);
        let outcome = fetcher.handle_response(
            response(vec![(0, code.code(), -1, Vec::new())], 0),
            12,
            permit(),
            now,
        );
        assert_eq!(outcome.fallback.len(), 1, "{code}");
        assert!(Arc::ptr_eq(&outcome.fallback[0], &p));
        assert!(
            outcome.reset.is_empty() && outcome.moved.is_empty() && outcome.diverged.is_empty(),
            "{code}: no reset from a follower's answer"
        );
        assert_eq!(read_replica_of(&p), None, "{code}");
        assert_eq!(p.fetch_position(), 70, "{code}: the position stays");
        assert!(p.errors().is_empty(), "{code}: nothing to report");
        assert_eq!(fetcher.poll_next(now, 64 << 20), Next::Idle, "{code}");
    }
}

#[test]
fn the_same_answers_from_the_leader_keep_their_meaning() {
    let now = Instant::now();
    let p = target(0, 70);
    let mut fetcher = fetcher_of(1);
    fetcher.add(p.clone());
    fetch(&mut fetcher, now);
    let outcome = fetcher.handle_response(
        response(
            vec![(0, KafkaCode::OFFSET_OUT_OF_RANGE.code(), -1, Vec::new())],
            0,
        ),
        12,
        permit(),
        now,
    );
    assert!(outcome.fallback.is_empty());
    assert_eq!(outcome.reset.len(), 1, "the leader's out of range resets");
}

#[test]
fn a_broken_fetch_from_a_read_replica_forgets_it() {
    let now = Instant::now();
    let p = target(0, 70);
    let mut fetcher = on_replica(&p, now + settings().read_replica_max_age);
    fetch(&mut fetcher, now);
    let back = fetcher.handle_failure();
    assert_eq!(back.len(), 1);
    assert_eq!(read_replica_of(&p), None, "back to the leader");
    assert_eq!(p.fetch_position(), 70);
    // A leader's broken fetch keeps a replica named but not yet listed.
    let q = target(1, 0);
    q.set_read_replica(Some(ReadReplica {
        broker: 3,
        until: now + settings().read_replica_max_age,
    }));
    let mut leader = fetcher_of(1);
    leader.add(q.clone());
    fetch(&mut leader, now);
    leader.handle_failure();
    assert_eq!(read_replica_of(&q).map(|r| r.0), Some(3));
}

#[test]
fn a_read_replica_serves_records_up_to_what_it_has() {
    let now = Instant::now();
    let p = target(0, 0);
    let mut fetcher = on_replica(&p, now + settings().read_replica_max_age);
    fetch(&mut fetcher, now);
    let outcome =
        fetcher.handle_response(response(vec![(0, 0, 3, batch(0, 3))], 0), 12, permit(), now);
    assert!(outcome.fallback.is_empty() && outcome.redirected.is_empty());
    assert_eq!(p.fetch_position(), 3);
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(sent_partitions(&fetch(&mut fetcher, now)), vec![(0, 3)]);
}
