//! A refused commit of a generation that is over, or that comes while a rebalance is
//! under way, must not cost the member its partitions (found by perf/rebalance: with
//! auto-commit on, every cooperative rebalance lost every member's partitions and so
//! stopped the whole group); one refused in the member's current, stable generation
//! still does.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::*;
use crate::group::protocol::{Assignment, encode_assignment};

fn settings() -> MemberSettings {
    MemberSettings {
        group_id: "g".into(),
        instance_id: None,
        session_timeout: Duration::from_secs(45),
        rebalance_timeout: Duration::from_secs(300),
        heartbeat_interval: Duration::from_secs(3),
        assignors: vec![Assignor::CooperativeSticky],
        retry_backoff: Duration::from_millis(100),
        rack: None,
        server_assignor: None,
    }
}

fn partitions(ps: &[i32]) -> Vec<TopicPartition> {
    ps.iter().map(|&p| TopicPartition::new("t", p)).collect()
}

/// Answers the join and sync the member sends: a follower of generation `generation`
/// given `assigned`.
fn join_generation(m: &mut Member, generation: i32, assigned: &[i32], now: Instant) {
    assert!(
        matches!(m.poll_request(), Some(Outgoing::Join(_))),
        "a join goes out"
    );
    m.handle_join(
        JoinGroupResponse::default()
            .with_generation_id(generation)
            .with_protocol_type(Some("consumer".into()))
            .with_protocol_name(Some("cooperative-sticky".into()))
            .with_leader("leader".into())
            .with_member_id("me".into()),
        now,
    );
    assert!(
        matches!(m.poll_request(), Some(Outgoing::Sync(_))),
        "a sync goes out"
    );
    let assignment = Assignment {
        partitions: partitions(assigned),
        user_data: None,
    };
    let bytes = encode_assignment(&assignment, 1).expect("encodes");
    m.handle_sync(SyncGroupResponse::default().with_assignment(bytes), now);
    assert_eq!(m.generation().map(|g| g.generation_id), Some(generation));
}

fn stable_member(now: Instant) -> Member {
    let topics: BTreeSet<String> = ["t".to_string()].into();
    let mut m = Member::new(settings(), topics, now);
    m.handle_coordinator_found(now);
    join_generation(&mut m, 1, &[0, 1, 2], now);
    while m.poll_event().is_some() {}
    m
}

fn lost_events(m: &mut Member) -> Vec<MemberEvent> {
    std::iter::from_fn(|| m.poll_event())
        .filter(|e| matches!(e, MemberEvent::Lost(_)))
        .collect()
}

#[test]
fn refused_commit_during_a_rebalance_keeps_the_partitions() {
    let now = Instant::now();
    let mut m = stable_member(now);
    // The coordinator starts a rebalance: a commit says so, the member rejoins
    // (cooperative: keeping what it owns).
    m.handle_commit_fenced(KafkaCode::REBALANCE_IN_PROGRESS, 1, now);
    assert!(matches!(m.poll_request(), Some(Outgoing::Join(_))));
    // The next commit, still of generation 1, lands after the coordinator moved on.
    m.handle_commit_fenced(KafkaCode::ILLEGAL_GENERATION, 1, now);
    assert_eq!(lost_events(&mut m), Vec::new());
    assert_eq!(m.owned().len(), 3);
}

#[test]
fn refused_commit_of_an_earlier_generation_keeps_the_partitions() {
    let now = Instant::now();
    let mut m = stable_member(now);
    m.handle_commit_fenced(KafkaCode::REBALANCE_IN_PROGRESS, 1, now);
    join_generation(&mut m, 2, &[0, 1, 2], now);
    while m.poll_event().is_some() {}
    // An answer to a commit sent in generation 1 arrives in generation 2.
    m.handle_commit_fenced(KafkaCode::ILLEGAL_GENERATION, 1, now);
    assert_eq!(lost_events(&mut m), Vec::new());
    assert_eq!(m.generation().map(|g| g.generation_id), Some(2));
    assert_eq!(m.owned().len(), 3);
}

#[test]
fn refused_commit_of_the_current_stable_generation_loses_the_partitions() {
    let now = Instant::now();
    let mut m = stable_member(now);
    m.handle_commit_fenced(KafkaCode::ILLEGAL_GENERATION, 1, now);
    assert_eq!(
        lost_events(&mut m),
        vec![MemberEvent::Lost(partitions(&[0, 1, 2]))]
    );
    assert!(m.owned().is_empty());
    assert!(m.generation().is_none());
}

/// Issue 15's scenario from the member's side: after the first SyncGroup of a
/// cooperative rebalance the consumer is slow to revoke (its commit is slow), and
/// meanwhile heartbeats and commits of the new generation hear REBALANCE_IN_PROGRESS
/// and an answer to a commit of the old generation says ILLEGAL_GENERATION. None of
/// that is fencing: the member keeps what it was not asked to give up, and once the
/// revocation is done it rejoins claiming exactly those partitions.
#[test]
fn a_slow_revocation_keeps_the_partitions_it_was_not_asked_for() {
    let now = Instant::now();
    let mut m = stable_member(now);
    m.handle_commit_fenced(KafkaCode::REBALANCE_IN_PROGRESS, 1, now);
    join_generation(&mut m, 2, &[0, 1], now);
    let events: Vec<MemberEvent> = std::iter::from_fn(|| m.poll_event()).collect();
    assert_eq!(events[0], MemberEvent::Revoke(partitions(&[2])));
    // Revoking still: heartbeats go on, in generation 2.
    let later = now + settings().heartbeat_interval;
    m.handle_timeout(later);
    let Some(Outgoing::Heartbeat(beat)) = m.poll_request() else {
        panic!("a heartbeat goes out while the consumer revokes");
    };
    assert_eq!(beat.generation_id, 2);
    m.handle_heartbeat(
        HeartbeatResponse::default().with_error_code(KafkaCode::REBALANCE_IN_PROGRESS.0),
        later,
    );
    m.handle_commit_fenced(KafkaCode::REBALANCE_IN_PROGRESS, 2, later);
    m.handle_commit_fenced(KafkaCode::ILLEGAL_GENERATION, 1, later);
    assert_eq!(lost_events(&mut m), Vec::new());
    assert!(
        m.poll_request().is_none(),
        "no join before the revocation is done"
    );
    m.handle_revoked(later);
    let Some(Outgoing::Join(join)) = m.poll_request() else {
        panic!("the member rejoins once it has revoked");
    };
    let subscription =
        crate::group::protocol::decode_subscription(&join.protocols[0].metadata).expect("decodes");
    assert_eq!(subscription.owned_partitions, partitions(&[0, 1]));
    assert_eq!(subscription.generation_id, Some(2));
    assert_eq!(m.owned().len(), 2);
    assert_eq!(lost_events(&mut m), Vec::new());
}
