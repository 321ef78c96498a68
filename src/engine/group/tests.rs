//! The classic member engine driven by hand: hand-built JoinGroup, SyncGroup,
//! Heartbeat and LeaveGroup answers, virtual time (instants advanced by the test), and
//! checks of the requests and events the member gives, rule by rule of the module doc.

use super::*;
use crate::group::protocol::tests::unhex;
use crate::protocol::messages::join_group::JoinGroupResponseMember;

const HEARTBEAT: Duration = Duration::from_secs(3);
const SESSION: Duration = Duration::from_secs(45);
const REBALANCE: Duration = Duration::from_secs(300);
const BACKOFF: Duration = Duration::from_millis(100);
const ME: &str = "m-1";
const OTHER: &str = "m-2";

fn settings(assignors: &[Assignor], instance_id: Option<&str>) -> MemberSettings {
    MemberSettings {
        group_id: "g".to_string(),
        instance_id: instance_id.map(str::to_string),
        session_timeout: SESSION,
        rebalance_timeout: REBALANCE,
        heartbeat_interval: HEARTBEAT,
        assignors: assignors.to_vec(),
        retry_backoff: BACKOFF,
        rack: None,
        server_assignor: None,
    }
}

fn topics(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
    list.iter().map(|(t, p)| tp(t, *p)).collect()
}

fn counts(list: &[(&str, i32)]) -> PartitionCounts {
    list.iter().map(|(t, c)| (t.to_string(), *c)).collect()
}

/// A member's subscription as kring encodes it.
fn subscription_bytes(names: &[&str], owned: &[(&str, i32)]) -> Bytes {
    let subscription = Subscription {
        topics: names.iter().map(|n| n.to_string()).collect(),
        owned_partitions: tps(owned),
        ..Subscription::default()
    };
    encode_subscription(&subscription, SUBSCRIPTION_VERSION).unwrap()
}

fn assignment_bytes(partitions: &[(&str, i32)]) -> Bytes {
    let assignment = Assignment {
        partitions: tps(partitions),
        user_data: None,
    };
    encode_assignment(&assignment, ASSIGNMENT_VERSION).unwrap()
}

fn join_error(code: KafkaCode, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code.0)
        .with_member_id(member_id.to_string())
}

/// A successful JoinGroup answer for `ME` with `leader` as the leader.
fn join_ok(generation: i32, protocol: &str, leader: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_generation_id(generation)
        .with_protocol_type(Some("consumer".to_string()))
        .with_protocol_name(Some(protocol.to_string()))
        .with_leader(leader.to_string())
        .with_member_id(ME.to_string())
}

fn group_member(member_id: &str, metadata: Bytes) -> JoinGroupResponseMember {
    JoinGroupResponseMember::default()
        .with_member_id(member_id.to_string())
        .with_metadata(metadata)
}

fn sync_ok(partitions: &[(&str, i32)]) -> SyncGroupResponse {
    SyncGroupResponse::default().with_assignment(assignment_bytes(partitions))
}

fn sync_error(code: KafkaCode) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(code.0)
}

fn heartbeat(code: KafkaCode) -> HeartbeatResponse {
    HeartbeatResponse::default().with_error_code(code.0)
}

/// One member and the virtual clock it runs on.
struct Harness {
    member: Member,
    now: Instant,
}

impl Harness {
    fn new(assignors: &[Assignor], instance_id: Option<&str>, subscribed: &[&str]) -> Harness {
        let now = Instant::now();
        let member = Member::new(settings(assignors, instance_id), topics(subscribed), now);
        Harness { member, now }
    }

    /// An eager (range) dynamic member subscribed to `a` and `b`.
    fn eager() -> Harness {
        Harness::new(&[Assignor::Range], None, &["a", "b"])
    }

    /// A cooperative-sticky dynamic member subscribed to `a` and `b`.
    fn cooperative() -> Harness {
        Harness::new(&[Assignor::CooperativeSticky], None, &["a", "b"])
    }

    /// Lets `d` pass; the member sees the time and the application polls.
    fn pass_polling(&mut self, d: Duration) {
        self.now += d;
        self.member.handle_poll(self.now);
    }

    /// Lets `d` pass without the application polling.
    fn pass(&mut self, d: Duration) {
        self.now += d;
        self.member.handle_timeout(self.now);
    }

    fn found(&mut self) {
        self.member.handle_coordinator_found(self.now);
    }

    fn events(&mut self) -> Vec<MemberEvent> {
        std::iter::from_fn(|| self.member.poll_event()).collect()
    }

    fn request(&mut self) -> Option<Outgoing> {
        self.member.poll_request()
    }

    fn no_request(&mut self) {
        let request = self.request();
        assert!(request.is_none(), "unexpected request {request:?}");
    }

    fn join_request(&mut self) -> JoinGroupRequest {
        match self.request() {
            Some(Outgoing::Join(r)) => r,
            other => panic!("expected a JoinGroup, got {other:?}"),
        }
    }

    fn sync_request(&mut self) -> SyncGroupRequest {
        match self.request() {
            Some(Outgoing::Sync(r)) => r,
            other => panic!("expected a SyncGroup, got {other:?}"),
        }
    }

    fn heartbeat_request(&mut self) -> HeartbeatRequest {
        match self.request() {
            Some(Outgoing::Heartbeat(r)) => r,
            other => panic!("expected a Heartbeat, got {other:?}"),
        }
    }

    fn leave_request(&mut self) -> LeaveGroupRequest {
        match self.request() {
            Some(Outgoing::Leave(r)) => r,
            other => panic!("expected a LeaveGroup, got {other:?}"),
        }
    }

    fn join(&mut self, response: JoinGroupResponse) {
        self.member.handle_join(response, self.now);
    }

    fn sync(&mut self, response: SyncGroupResponse) {
        self.member.handle_sync(response, self.now);
    }

    fn heartbeat(&mut self, code: KafkaCode) {
        self.member.handle_heartbeat(heartbeat(code), self.now);
    }

    /// Joins as a follower in `generation` and takes `partitions`; returns the events.
    fn join_as_follower(
        &mut self,
        generation: i32,
        partitions: &[(&str, i32)],
    ) -> Vec<MemberEvent> {
        self.join_request();
        let protocol = self.member.settings().assignors[0].name();
        self.join(join_ok(generation, protocol, OTHER));
        self.sync_request();
        self.sync(sync_ok(partitions));
        self.events()
    }

    /// A member in the group, generation 1, owning `partitions`.
    fn stable(mut self, partitions: &[(&str, i32)]) -> Harness {
        self.found();
        self.join_as_follower(1, partitions);
        assert_eq!(self.member.state, State::Stable);
        self
    }

    /// Sends the due heartbeat and answers it with `code`.
    fn beat(&mut self, code: KafkaCode) {
        self.pass_polling(HEARTBEAT);
        self.heartbeat_request();
        self.heartbeat(code);
    }

    /// Whether the next deadline lies ahead: a deadline at or before `now` after
    /// `handle_timeout(now)` would make a driver spin.
    fn deadline_ahead(&self) -> bool {
        self.member.poll_timeout().is_none_or(|t| t > self.now)
    }
}

fn decoded(request: &JoinGroupRequest, index: usize) -> Subscription {
    decode_subscription(&request.protocols[index].metadata).unwrap()
}

fn assigned(generation: i32, protocol: &'static str, added: &[(&str, i32)]) -> MemberEvent {
    MemberEvent::Assigned {
        generation: Generation {
            generation_id: generation,
            member_id: ME.to_string(),
            protocol,
        },
        added: tps(added),
    }
}

fn failed(events: &[MemberEvent]) -> &GroupError {
    match events.last() {
        Some(MemberEvent::Failed(e)) => e,
        other => panic!("expected Failed last, got {other:?} in {events:?}"),
    }
}

// ---- Joining ----

#[test]
fn nothing_is_sent_before_the_coordinator_is_known() {
    let mut h = Harness::eager();
    h.pass_polling(Duration::from_secs(10));
    h.no_request();
    assert!(h.events().is_empty());
    assert!(h.deadline_ahead());
}

#[test]
fn first_join_carries_settings_and_every_assignor_in_preference_order() {
    let mut h = Harness::new(
        &[Assignor::Sticky, Assignor::Range, Assignor::RoundRobin],
        None,
        &["b", "a"],
    );
    h.found();
    let join = h.join_request();
    assert_eq!(join.group_id, "g");
    assert_eq!(join.member_id, "");
    assert_eq!(join.group_instance_id, None);
    assert_eq!(join.session_timeout_ms, 45_000);
    assert_eq!(join.rebalance_timeout_ms, 300_000);
    assert_eq!(join.protocol_type, "consumer");
    let names: Vec<&str> = join.protocols.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["sticky", "range", "roundrobin"]);
    for i in 0..3 {
        let s = decoded(&join, i);
        assert_eq!(s.topics, ["a", "b"]);
        assert!(s.owned_partitions.is_empty());
        assert_eq!(s.generation_id, None);
    }
    // The sticky assignor's user data says "no previous assignment, generation -1".
    let sticky = decoded(&join, 0).user_data.unwrap();
    let sticky = crate::group::protocol::decode_sticky_user_data(&sticky).unwrap();
    assert!(sticky.partitions.is_empty());
    assert_eq!(sticky.generation, Some(-1));
    assert_eq!(decoded(&join, 1).user_data, None);
    // One request at a time: nothing more until the answer.
    h.pass_polling(HEARTBEAT * 3);
    h.no_request();
}

#[test]
fn member_id_required_then_rejoins_with_the_given_id() {
    let mut h = Harness::eager();
    h.found();
    assert_eq!(h.join_request().member_id, "");
    h.join(join_error(KafkaCode::MEMBER_ID_REQUIRED, ME));
    assert!(h.events().is_empty());
    let again = h.join_request();
    assert_eq!(again.member_id, ME);
    assert_eq!(decoded(&again, 0).topics, ["a", "b"]);
}

#[test]
fn static_member_sends_its_instance_id_in_every_request() {
    let mut h = Harness::new(&[Assignor::Range], Some("i-1"), &["a"]);
    h.found();
    assert_eq!(h.join_request().group_instance_id.as_deref(), Some("i-1"));
    h.join(join_ok(1, "range", OTHER));
    assert_eq!(h.sync_request().group_instance_id.as_deref(), Some("i-1"));
    h.sync(sync_ok(&[("a", 0)]));
    h.pass_polling(HEARTBEAT);
    assert_eq!(
        h.heartbeat_request().group_instance_id.as_deref(),
        Some("i-1")
    );
}

// ---- Leader and follower ----

#[test]
fn leader_asks_for_metadata_then_syncs_every_members_assignment() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    // A kring member, and a Java member whose subscription is Java's own bytes
    // (`testdata/protocol.txt`, v1: topics t1 and t2 with user data and owned partitions).
    let java_v1 = unhex(
        "0001000000020002743100027432000000030102ff000000020002743100000002000000000000000300027432000000010000000100000005",
    );
    let java_v1 = java_v1.slice(..java_v1.len() - 4); // v1 ends before v2's generation
    assert!(decode_subscription(&java_v1).is_ok());
    let response = join_ok(7, "range", ME).with_members(vec![
        group_member(ME, subscription_bytes(&["a", "b"], &[])),
        group_member(OTHER, subscription_bytes(&["a"], &[])),
        group_member("m-java", java_v1),
    ]);
    h.join(response);
    assert_eq!(
        h.events(),
        [MemberEvent::NeedMetadata(vec![
            "a".into(),
            "b".into(),
            "t1".into(),
            "t2".into()
        ])]
    );
    assert!(h.member.is_leader());
    // Waiting for metadata: no heartbeat, no sync.
    h.pass_polling(HEARTBEAT * 2);
    h.no_request();

    h.member
        .handle_metadata(counts(&[("a", 4), ("b", 1), ("t1", 4), ("t2", 2)]), h.now);
    let sync = h.sync_request();
    assert_eq!(sync.generation_id, 7);
    assert_eq!(sync.member_id, ME);
    assert_eq!(sync.protocol_name.as_deref(), Some("range"));
    assert_eq!(sync.protocol_type.as_deref(), Some("consumer"));
    let by_member: BTreeMap<String, Vec<TopicPartition>> = sync
        .assignments
        .iter()
        .map(|a| {
            let decoded = decode_assignment(&a.assignment).unwrap();
            let mut partitions = decoded.partitions;
            partitions.sort();
            (a.member_id.clone(), partitions)
        })
        .collect();
    // Range per topic over the members subscribed to it, sorted by member id.
    assert_eq!(
        by_member,
        BTreeMap::from([
            (ME.to_string(), tps(&[("a", 0), ("a", 1), ("b", 0)])),
            (OTHER.to_string(), tps(&[("a", 2), ("a", 3)])),
            (
                "m-java".to_string(),
                tps(&[
                    ("t1", 0),
                    ("t1", 1),
                    ("t1", 2),
                    ("t1", 3),
                    ("t2", 0),
                    ("t2", 1)
                ])
            ),
        ])
    );
    h.sync(sync_ok(&[("a", 0), ("a", 1), ("b", 0)]));
    assert_eq!(
        h.events(),
        [assigned(7, "range", &[("a", 0), ("a", 1), ("b", 0)])]
    );
    assert_eq!(h.member.generation().map(|g| g.generation_id), Some(7));
    assert!(h.member.is_leader());
}

#[test]
fn leader_leaves_topics_without_metadata_out() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(
        join_ok(1, "range", ME)
            .with_members(vec![group_member(ME, subscription_bytes(&["a", "b"], &[]))]),
    );
    h.events();
    h.member.handle_metadata(counts(&[("a", 2)]), h.now);
    let sync = h.sync_request();
    let mine = decode_assignment(&sync.assignments[0].assignment).unwrap();
    assert_eq!(mine.partitions, tps(&[("a", 0), ("a", 1)]));
}

#[test]
fn follower_syncs_without_assignments_and_takes_what_it_is_given() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(join_ok(3, "range", OTHER));
    assert!(h.events().is_empty(), "a follower needs no metadata");
    let sync = h.sync_request();
    assert!(sync.assignments.is_empty());
    assert_eq!(sync.generation_id, 3);
    assert_eq!(sync.member_id, ME);
    assert!(!h.member.is_leader());
    h.sync(sync_ok(&[("b", 1), ("a", 0)]));
    assert_eq!(h.events(), [assigned(3, "range", &[("a", 0), ("b", 1)])]);
    assert_eq!(
        h.member.owned().iter().cloned().collect::<Vec<_>>(),
        tps(&[("a", 0), ("b", 1)])
    );
}

#[test]
fn a_leader_told_to_skip_assignment_syncs_as_a_follower() {
    // KIP-814: a static leader rejoining keeps the assignment it made before.
    let mut h = Harness::new(&[Assignor::Range], Some("i-1"), &["a"]);
    h.found();
    h.join_request();
    h.join(join_ok(2, "range", ME).with_skip_assignment(true));
    assert!(h.events().is_empty());
    assert!(h.sync_request().assignments.is_empty());
}

// ---- Heartbeats ----

#[test]
fn heartbeats_go_at_the_interval_one_at_a_time() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    let synced = h.now;
    assert_eq!(h.member.poll_timeout(), Some(synced + HEARTBEAT));
    h.pass_polling(HEARTBEAT - Duration::from_millis(1));
    h.no_request();
    h.pass_polling(Duration::from_millis(1));
    let beat = h.heartbeat_request();
    assert_eq!(beat.group_id, "g");
    assert_eq!(beat.generation_id, 1);
    assert_eq!(beat.member_id, ME);
    // Unanswered: no second heartbeat however long it takes.
    h.pass_polling(HEARTBEAT * 3);
    h.no_request();
    h.heartbeat(KafkaCode::NONE);
    // The interval counts from when the last one was sent.
    assert_eq!(h.member.poll_timeout(), Some(synced + HEARTBEAT * 5));
    h.pass_polling(HEARTBEAT);
    h.heartbeat_request();
    assert!(h.events().is_empty());
}

#[test]
fn no_heartbeat_while_a_join_or_sync_is_out() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.beat(KafkaCode::REBALANCE_IN_PROGRESS);
    h.events();
    h.member.handle_revoked(h.now);
    h.join_request();
    for _ in 0..5 {
        h.pass_polling(HEARTBEAT);
        h.no_request();
    }
    h.join(join_ok(2, "range", OTHER));
    h.sync_request();
    for _ in 0..5 {
        h.pass_polling(HEARTBEAT);
        h.no_request();
    }
    h.sync(sync_ok(&[("a", 0)]));
    h.pass_polling(HEARTBEAT);
    assert_eq!(h.heartbeat_request().generation_id, 2);
}

#[test]
fn a_retriable_heartbeat_error_retries_after_the_backoff() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.beat(KafkaCode(7)); // REQUEST_TIMED_OUT
    assert!(h.events().is_empty());
    h.pass_polling(BACKOFF - Duration::from_millis(1));
    h.no_request();
    h.pass_polling(Duration::from_millis(1));
    h.heartbeat_request();
}

// ---- Rebalances ----

#[test]
fn eager_revokes_everything_before_joining() {
    let mut h = Harness::eager().stable(&[("a", 0), ("b", 0)]);
    h.beat(KafkaCode::REBALANCE_IN_PROGRESS);
    assert_eq!(
        h.events(),
        [MemberEvent::Revoke(tps(&[("a", 0), ("b", 0)]))]
    );
    // No join until the consumer has committed and stopped them.
    h.pass_polling(HEARTBEAT * 2);
    h.no_request();
    assert_eq!(h.member.owned().len(), 2);
    h.member.handle_revoked(h.now);
    assert!(h.member.owned().is_empty());
    let join = h.join_request();
    assert_eq!(join.member_id, ME);
    assert!(decoded(&join, 0).owned_partitions.is_empty());
    h.join(join_ok(2, "range", OTHER));
    h.sync_request();
    h.sync(sync_ok(&[("a", 0)]));
    assert_eq!(h.events(), [assigned(2, "range", &[("a", 0)])]);
}

#[test]
fn eager_sticky_member_reports_its_previous_assignment() {
    let mut h = Harness::new(&[Assignor::Sticky], None, &["a"]).stable(&[("a", 0), ("a", 1)]);
    h.beat(KafkaCode::REBALANCE_IN_PROGRESS);
    h.events();
    h.member.handle_revoked(h.now);
    let join = h.join_request();
    let user_data = decoded(&join, 0).user_data.unwrap();
    let sticky = crate::group::protocol::decode_sticky_user_data(&user_data).unwrap();
    assert_eq!(sticky.partitions, tps(&[("a", 0), ("a", 1)]));
    assert_eq!(sticky.generation, Some(1));
}

#[test]
fn cooperative_keeps_partitions_through_the_rebalance_then_revokes_and_rejoins() {
    let mut h = Harness::cooperative().stable(&[("a", 0), ("a", 1), ("a", 2)]);
    h.beat(KafkaCode::REBALANCE_IN_PROGRESS);
    assert!(h.events().is_empty(), "nothing revoked before the join");
    let join = h.join_request();
    let s = decoded(&join, 0);
    assert_eq!(s.owned_partitions, tps(&[("a", 0), ("a", 1), ("a", 2)]));
    assert_eq!(s.generation_id, Some(1));
    assert_eq!(s.user_data.as_deref(), Some(&1i32.to_be_bytes()[..]));
    assert_eq!(h.member.owned().len(), 3);

    h.join(join_ok(2, "cooperative-sticky", OTHER));
    h.sync_request();
    h.sync(sync_ok(&[("a", 0), ("a", 1), ("b", 0)]));
    assert_eq!(
        h.events(),
        [
            MemberEvent::Revoke(tps(&[("a", 2)])),
            assigned(2, "cooperative-sticky", &[("b", 0)]),
        ]
    );
    // a-2 stays owned until the consumer has committed it; heartbeats go on meanwhile.
    assert!(h.member.owned().contains(&tp("a", 2)));
    h.pass_polling(HEARTBEAT);
    h.heartbeat_request();
    h.heartbeat(KafkaCode::NONE);
    h.member.handle_revoked(h.now);
    assert!(!h.member.owned().contains(&tp("a", 2)));
    // Then a rejoin at once, so the leader can hand a-2 on.
    let join = h.join_request();
    assert_eq!(
        decoded(&join, 0).owned_partitions,
        tps(&[("a", 0), ("a", 1), ("b", 0)])
    );
    assert_eq!(decoded(&join, 0).generation_id, Some(2));
    h.join(join_ok(3, "cooperative-sticky", OTHER));
    h.sync_request();
    h.sync(sync_ok(&[("a", 0), ("a", 1), ("b", 0)]));
    assert_eq!(h.events(), [assigned(3, "cooperative-sticky", &[])]);
    h.pass_polling(HEARTBEAT);
    assert_eq!(h.heartbeat_request().generation_id, 3);
}

/// Sends the due heartbeat `after` the last step and answers it.
fn beat_after(h: &mut Harness, after: Duration) {
    h.pass_polling(after - Duration::from_millis(1));
    h.no_request();
    h.pass_polling(Duration::from_millis(1));
    h.heartbeat_request();
    h.heartbeat(KafkaCode::NONE);
}

#[test]
fn after_a_cooperative_sync_heartbeats_come_soon_then_back_off_to_the_interval() {
    let mut h = Harness::cooperative().stable(&[("a", 0)]);
    let ms = Duration::from_millis;
    for wait in [50, 100, 200, 400, 800, 1600] {
        beat_after(&mut h, ms(wait));
    }
    beat_after(&mut h, HEARTBEAT);
    beat_after(&mut h, HEARTBEAT);

    // A second round (a revoking member rejoined) is heard from the first of them.
    let mut h = Harness::cooperative().stable(&[("a", 0)]);
    h.pass_polling(ms(50));
    h.heartbeat_request();
    h.heartbeat(KafkaCode::REBALANCE_IN_PROGRESS);
    h.join_request();
    h.join(join_ok(2, "cooperative-sticky", OTHER));
    h.sync_request();
    h.sync(sync_ok(&[("a", 0)]));
    // The schedule starts again after every sync.
    beat_after(&mut h, ms(50));
    beat_after(&mut h, ms(100));
}

#[test]
fn after_an_eager_sync_the_first_heartbeat_waits_the_interval() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    beat_after(&mut h, HEARTBEAT);
    beat_after(&mut h, HEARTBEAT);
}

#[test]
fn rebalance_in_progress_on_join_or_sync_rejoins_at_once() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(join_error(KafkaCode::REBALANCE_IN_PROGRESS, ME));
    h.join_request();
    h.join(join_ok(1, "range", OTHER));
    h.sync_request();
    h.sync(sync_error(KafkaCode::REBALANCE_IN_PROGRESS));
    assert!(h.events().is_empty());
    assert_eq!(h.join_request().member_id, ME);
}

// ---- Fencing and fatal errors ----

#[test]
fn unknown_member_id_loses_the_partitions_and_forgets_the_id() {
    for api in [ApiKey::Heartbeat, ApiKey::SyncGroup, ApiKey::JoinGroup] {
        let mut h = Harness::cooperative().stable(&[("a", 0), ("b", 1)]);
        answer_with(&mut h, api, KafkaCode::UNKNOWN_MEMBER_ID);
        assert_eq!(
            h.events(),
            [MemberEvent::Lost(tps(&[("a", 0), ("b", 1)]))],
            "{api:?}"
        );
        assert!(h.member.owned().is_empty());
        assert_eq!(h.member.generation(), None);
        let join = h.join_request();
        assert_eq!(join.member_id, "", "{api:?}");
        assert!(decoded(&join, 0).owned_partitions.is_empty());
    }
}

#[test]
fn illegal_generation_loses_the_partitions_and_keeps_the_id() {
    for api in [ApiKey::Heartbeat, ApiKey::SyncGroup, ApiKey::JoinGroup] {
        let mut h = Harness::cooperative().stable(&[("a", 0)]);
        answer_with(&mut h, api, KafkaCode::ILLEGAL_GENERATION);
        assert_eq!(h.events(), [MemberEvent::Lost(tps(&[("a", 0)]))], "{api:?}");
        assert_eq!(h.member.generation(), None);
        let join = h.join_request();
        assert_eq!(join.member_id, ME, "{api:?}");
        assert_eq!(decoded(&join, 0).generation_id, None);
    }
}

/// Brings a stable cooperative member to where `api` is in flight (a heartbeat, or a
/// rejoin's join or sync, partitions still owned), then answers it with `code`.
fn answer_with(h: &mut Harness, api: ApiKey, code: KafkaCode) {
    if api == ApiKey::Heartbeat {
        return h.beat(code);
    }
    h.beat(KafkaCode::REBALANCE_IN_PROGRESS);
    h.join_request();
    if api == ApiKey::JoinGroup {
        return h.join(join_error(code, ME));
    }
    h.join(join_ok(2, "cooperative-sticky", OTHER));
    h.sync_request();
    h.sync(sync_error(code));
}

#[test]
fn fenced_instance_id_ends_the_member() {
    for api in [ApiKey::Heartbeat, ApiKey::SyncGroup, ApiKey::JoinGroup] {
        let mut h =
            Harness::new(&[Assignor::CooperativeSticky], Some("i-1"), &["a"]).stable(&[("a", 0)]);
        answer_with(&mut h, api, KafkaCode::FENCED_INSTANCE_ID);
        let events = h.events();
        assert_eq!(
            failed(&events),
            &GroupError::FencedInstance {
                group: "g".into(),
                instance_id: "i-1".into()
            },
            "{api:?}"
        );
        assert!(h.member.is_done());
        assert_eq!(h.member.generation(), None);
        h.pass_polling(HEARTBEAT * 10);
        h.no_request();
        assert!(h.events().is_empty());
    }
}

#[test]
fn authorization_failure_ends_the_member_naming_the_request() {
    for api in [ApiKey::Heartbeat, ApiKey::SyncGroup, ApiKey::JoinGroup] {
        let mut h = Harness::cooperative().stable(&[("a", 0)]);
        answer_with(&mut h, api, KafkaCode::GROUP_AUTHORIZATION_FAILED);
        let events = h.events();
        let error = failed(&events);
        assert_eq!(
            error,
            &GroupError::Refused {
                group: "g".into(),
                api,
                code: KafkaCode::GROUP_AUTHORIZATION_FAILED
            }
        );
        assert!(
            error.to_string().contains("GROUP_AUTHORIZATION_FAILED"),
            "{error}"
        );
        assert!(h.member.is_done());
        h.pass_polling(HEARTBEAT * 10);
        h.no_request();
    }
}

#[test]
fn a_first_join_refused_for_good_ends_the_member() {
    for code in [
        KafkaCode::GROUP_AUTHORIZATION_FAILED,
        KafkaCode::INCONSISTENT_GROUP_PROTOCOL,
        KafkaCode::INVALID_SESSION_TIMEOUT,
        KafkaCode::GROUP_MAX_SIZE_REACHED,
    ] {
        let mut h = Harness::eager();
        h.found();
        h.join_request();
        h.join(join_error(code, ""));
        let events = h.events();
        assert!(
            matches!(failed(&events), GroupError::Refused { code: c, api: ApiKey::JoinGroup, .. } if *c == code),
            "{code}: {events:?}"
        );
        assert!(h.member.is_done());
    }
}

// ---- The coordinator ----

#[test]
fn coordinator_errors_ask_for_the_coordinator_and_retry_once_found() {
    for code in [
        KafkaCode::NOT_COORDINATOR,
        KafkaCode::COORDINATOR_NOT_AVAILABLE,
        KafkaCode::COORDINATOR_LOAD_IN_PROGRESS,
    ] {
        // On a join.
        let mut h = Harness::eager();
        h.found();
        h.join_request();
        h.join(join_error(code, ""));
        assert_eq!(h.events(), [MemberEvent::CoordinatorLost], "{code}");
        h.pass_polling(BACKOFF * 10);
        h.no_request();
        h.found();
        h.join_request();

        // On a heartbeat: the member stays in the group with its partitions.
        let mut h = Harness::eager().stable(&[("a", 0)]);
        h.beat(code);
        assert_eq!(h.events(), [MemberEvent::CoordinatorLost], "{code}");
        h.pass_polling(HEARTBEAT * 2);
        h.no_request();
        assert!(
            h.deadline_ahead(),
            "{code}: no deadline in the past while lost"
        );
        h.found();
        assert_eq!(h.heartbeat_request().generation_id, 1);
        assert_eq!(h.member.owned().len(), 1);

        // On a sync: a rejoin follows.
        let mut h = Harness::eager();
        h.found();
        h.join_request();
        h.join(join_ok(1, "range", OTHER));
        h.sync_request();
        h.sync(sync_error(code));
        assert_eq!(h.events(), [MemberEvent::CoordinatorLost], "{code}");
        h.no_request();
        h.found();
        assert_eq!(h.join_request().member_id, ME);
    }
}

#[test]
fn a_failed_join_retries_after_the_backoff() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.member.handle_request_failed(h.now);
    assert_eq!(h.events(), [MemberEvent::CoordinatorLost]);
    h.found();
    h.no_request();
    assert_eq!(h.member.poll_timeout(), Some(h.now + BACKOFF));
    h.pass_polling(BACKOFF - Duration::from_millis(1));
    h.no_request();
    h.pass_polling(Duration::from_millis(1));
    h.join_request();
}

#[test]
fn a_failed_sync_rejoins_after_the_backoff() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(join_ok(1, "range", OTHER));
    h.sync_request();
    h.member.handle_request_failed(h.now);
    assert_eq!(h.events(), [MemberEvent::CoordinatorLost]);
    h.found();
    h.no_request();
    h.pass_polling(BACKOFF);
    assert_eq!(h.join_request().member_id, ME);
}

#[test]
fn a_failed_heartbeat_keeps_the_partitions_and_beats_again_once_found() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.pass_polling(HEARTBEAT);
    h.heartbeat_request();
    h.member.handle_request_failed(h.now);
    assert_eq!(h.events(), [MemberEvent::CoordinatorLost]);
    assert_eq!(h.member.owned().len(), 1);
    h.found();
    h.pass_polling(HEARTBEAT);
    h.heartbeat_request();
}

#[test]
fn while_the_coordinator_is_lost_no_deadline_lies_in_the_past() {
    // A driver sleeps until poll_timeout and then calls handle_timeout: a deadline that
    // handle_timeout cannot move on would wake it again at once, forever.
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.pass_polling(HEARTBEAT);
    h.heartbeat_request();
    h.member.handle_request_failed(h.now);
    h.events();
    for _ in 0..20 {
        h.pass_polling(HEARTBEAT);
        h.no_request();
        assert!(
            h.deadline_ahead(),
            "deadline {:?} at {:?}",
            h.member.poll_timeout(),
            h.now
        );
        assert!(!h.member.session_expired(h.now), "already looking for it");
    }
    h.found();
    h.heartbeat_request();
}

#[test]
fn session_runs_out_without_heartbeat_answers() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    let synced = h.now;
    h.pass_polling(HEARTBEAT);
    h.heartbeat_request();
    assert!(
        !h.member
            .session_expired(synced + SESSION - Duration::from_millis(1))
    );
    assert!(h.member.session_expired(synced + SESSION));
}

// ---- max.poll.interval.ms ----

/// Keeps the heartbeats answered, without polling, until the poll interval runs out.
fn stay_away(h: &mut Harness) {
    let last_poll = h.now;
    while h.now + HEARTBEAT < last_poll + REBALANCE {
        h.pass(HEARTBEAT);
        h.heartbeat_request();
        h.member.handle_heartbeat(heartbeat(KafkaCode::NONE), h.now);
    }
    assert!(h.events().is_empty());
    h.now = last_poll + REBALANCE;
    h.member.handle_timeout(h.now);
}

#[test]
fn a_dynamic_member_that_stops_polling_leaves_and_rejoins_on_the_next_poll() {
    let mut h = Harness::eager().stable(&[("a", 0), ("a", 1)]);
    stay_away(&mut h);
    let leave = h.leave_request();
    assert_eq!(leave.group_id, "g");
    assert_eq!(leave.members.len(), 1);
    assert_eq!(leave.members[0].member_id, ME);
    assert_eq!(h.events(), [MemberEvent::Lost(tps(&[("a", 0), ("a", 1)]))]);
    assert_eq!(h.member.generation(), None);
    h.member.handle_leave(LeaveGroupResponse::default());
    assert!(!h.member.is_done(), "out of the group, not ended");
    assert!(h.events().is_empty());
    // Out of the group: no heartbeats, no join, no wake-ups until the application
    // comes back.
    assert_eq!(h.member.poll_timeout(), None);
    h.pass(REBALANCE);
    h.no_request();
    h.pass_polling(Duration::from_secs(1));
    let join = h.join_request();
    assert_eq!(join.member_id, "", "the member left: a new id");
}

#[test]
fn a_static_member_that_stops_polling_lets_its_session_run_out() {
    let mut h = Harness::new(&[Assignor::Range], Some("i-1"), &["a"]).stable(&[("a", 0)]);
    stay_away(&mut h);
    h.no_request();
    assert_eq!(h.events(), [MemberEvent::Lost(tps(&[("a", 0)]))]);
    assert!(!h.member.is_done());
    h.pass(HEARTBEAT * 5);
    h.no_request();
    h.pass_polling(Duration::from_secs(1));
    assert_eq!(h.join_request().group_instance_id.as_deref(), Some("i-1"));
}

#[test]
fn the_poll_interval_counts_while_a_join_is_out() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.pass(REBALANCE);
    // The member had no id yet: nothing to leave, and the join's answer is dropped.
    h.no_request();
    h.join(join_ok(1, "range", OTHER));
    h.no_request();
    assert!(!h.member.is_done());
    h.pass_polling(Duration::from_millis(1));
    h.join_request();
}

#[test]
fn a_failed_leave_after_the_poll_interval_does_not_end_the_member() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    stay_away(&mut h);
    h.leave_request();
    h.events();
    h.member.handle_request_failed(h.now);
    let events = h.events();
    assert!(
        !events.contains(&MemberEvent::Left),
        "the application did not close: {events:?}"
    );
    assert!(!h.member.is_done());
    h.found();
    h.pass_polling(Duration::from_secs(1));
    h.join_request();
}

#[test]
fn the_poll_interval_runs_out_while_the_coordinator_is_lost() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(join_error(KafkaCode::NOT_COORDINATOR, ""));
    h.events();
    // No coordinator for longer than the poll interval, the application away.
    h.pass(REBALANCE);
    assert!(
        h.deadline_ahead(),
        "deadline {:?} at {:?}",
        h.member.poll_timeout(),
        h.now
    );
    h.pass_polling(Duration::from_secs(1));
    h.found();
    h.join_request();
}

#[test]
fn the_poll_interval_runs_out_while_the_leader_waits_for_metadata() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(
        join_ok(1, "range", ME)
            .with_members(vec![group_member(ME, subscription_bytes(&["a"], &[]))]),
    );
    h.events();
    h.pass(REBALANCE);
    assert!(
        h.deadline_ahead(),
        "deadline {:?} at {:?}",
        h.member.poll_timeout(),
        h.now
    );
    // The member left; metadata coming late starts no sync.
    h.member.handle_metadata(counts(&[("a", 1)]), h.now);
    assert!(!matches!(h.request(), Some(Outgoing::Sync(_))));
}

// ---- Leaving ----

#[test]
fn leave_sends_leave_group_for_a_dynamic_member() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.member.leave(h.now);
    let leave = h.leave_request();
    // v3+ names the member in `members` only: with a top-level id too it encodes at no
    // version, and no LeaveGroup would go out.
    assert_eq!(leave.member_id, "");
    assert_eq!(leave.members[0].member_id, ME);
    let mut frame = bytes::BytesMut::new();
    crate::protocol::encode_request_frame(&mut frame, &leave, 5, 1, Some("c")).unwrap();
    assert_eq!(leave.members[0].group_instance_id, None);
    assert!(leave.members[0].reason.is_some());
    assert!(h.member.owned().is_empty());
    assert!(h.events().is_empty(), "Left only once answered");
    h.member.handle_leave(
        LeaveGroupResponse::default().with_error_code(KafkaCode::UNKNOWN_MEMBER_ID.0),
    );
    assert_eq!(h.events(), [MemberEvent::Left]);
    assert!(h.member.is_done());
    assert_eq!(h.member.generation(), None);
    h.pass_polling(HEARTBEAT * 3);
    h.no_request();
}

#[test]
fn leave_of_a_static_member_sends_nothing() {
    let mut h = Harness::new(&[Assignor::Range], Some("i-1"), &["a"]).stable(&[("a", 0)]);
    h.member.leave(h.now);
    h.no_request();
    assert_eq!(h.events(), [MemberEvent::Left]);
    assert!(h.member.is_done());
    h.pass_polling(HEARTBEAT * 3);
    h.no_request();
}

#[test]
fn leave_ends_even_when_the_leave_request_fails() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.member.leave(h.now);
    h.leave_request();
    h.member.handle_request_failed(h.now);
    assert_eq!(h.events(), [MemberEvent::Left]);
    assert!(h.member.is_done());
}

#[test]
fn leave_during_the_first_join_leaves_with_the_id_the_answer_brings() {
    for answer in [
        join_ok(1, "range", OTHER),
        join_error(KafkaCode::MEMBER_ID_REQUIRED, ME),
    ] {
        let mut h = Harness::eager();
        h.found();
        h.join_request();
        h.member.leave(h.now);
        h.no_request();
        assert!(h.events().is_empty());
        h.join(answer);
        // The broker now knows the member: tell it to let go, rather than have the
        // group wait out its session.
        let leave = h.leave_request();
        assert_eq!(leave.members[0].member_id, ME);
        h.member.handle_leave(LeaveGroupResponse::default());
        assert_eq!(h.events(), [MemberEvent::Left]);
    }
}

#[test]
fn leave_while_a_sync_is_out_ignores_its_answer() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(join_ok(1, "range", OTHER));
    h.sync_request();
    h.member.leave(h.now);
    h.leave_request();
    h.sync(sync_ok(&[("a", 0)]));
    assert!(h.events().is_empty(), "no assignment after leave");
    h.member.handle_leave(LeaveGroupResponse::default());
    assert_eq!(h.events(), [MemberEvent::Left]);
}

// ---- Metadata and subscription changes ----

/// A leader in generation 1 that assigned with `a` at 2 partitions.
fn stable_leader(subscribed: &[&str], known: &[(&str, i32)]) -> Harness {
    let mut h = Harness::new(&[Assignor::Range], None, subscribed);
    h.found();
    h.join_request();
    h.join(
        join_ok(1, "range", ME)
            .with_members(vec![group_member(ME, subscription_bytes(subscribed, &[]))]),
    );
    h.events();
    h.member.handle_metadata(counts(known), h.now);
    let sync = h.sync_request();
    let mine = decode_assignment(&sync.assignments[0].assignment).unwrap();
    h.sync(SyncGroupResponse::default().with_assignment(sync.assignments[0].assignment.clone()));
    h.events();
    assert!(!mine.partitions.is_empty());
    h
}

#[test]
fn the_leader_rejoins_when_partition_counts_change() {
    let mut h = stable_leader(&["a"], &[("a", 2)]);
    h.member
        .handle_metadata_changed(&counts(&[("a", 2)]), h.now);
    h.no_request();
    h.member
        .handle_metadata_changed(&counts(&[("a", 3)]), h.now);
    assert_eq!(
        h.events(),
        [MemberEvent::Revoke(tps(&[("a", 0), ("a", 1)]))]
    );
    h.member.handle_revoked(h.now);
    h.join_request();
}

#[test]
fn the_leader_rejoins_when_a_subscribed_topic_appears() {
    // `b` did not exist when the leader assigned; once it does, its partitions must be
    // handed out.
    let mut h = stable_leader(&["a", "b"], &[("a", 2)]);
    h.member
        .handle_metadata_changed(&counts(&[("a", 2), ("b", 4)]), h.now);
    assert_eq!(
        h.events(),
        [MemberEvent::Revoke(tps(&[("a", 0), ("a", 1)]))]
    );
}

#[test]
fn the_leader_ignores_counts_of_topics_nobody_subscribed_to() {
    let mut h = stable_leader(&["a"], &[("a", 2)]);
    h.member
        .handle_metadata_changed(&counts(&[("a", 2), ("z", 4)]), h.now);
    h.no_request();
    assert!(h.events().is_empty());
}

#[test]
fn a_follower_does_not_rejoin_for_metadata() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.member
        .handle_metadata_changed(&counts(&[("a", 9), ("b", 9)]), h.now);
    h.no_request();
    assert!(h.events().is_empty());
}

#[test]
fn a_new_subscription_rejoins_with_the_new_topics() {
    let mut h = Harness::eager().stable(&[("a", 0), ("b", 0)]);
    h.member.subscribe(topics(&["a", "b"]), h.now);
    h.no_request();
    assert!(h.events().is_empty(), "the same topics change nothing");
    h.member.subscribe(topics(&["a", "c"]), h.now);
    assert_eq!(
        h.events(),
        [MemberEvent::Revoke(tps(&[("a", 0), ("b", 0)]))]
    );
    h.member.handle_revoked(h.now);
    assert_eq!(decoded(&h.join_request(), 0).topics, ["a", "c"]);
}

#[test]
fn a_cooperative_member_revokes_only_dropped_topics_before_rejoining() {
    let mut h = Harness::cooperative().stable(&[("a", 0), ("b", 0)]);
    h.member.subscribe(topics(&["a"]), h.now);
    assert_eq!(h.events(), [MemberEvent::Revoke(tps(&[("b", 0)]))]);
    h.no_request();
    h.member.handle_revoked(h.now);
    let join = h.join_request();
    let s = decoded(&join, 0);
    assert_eq!(s.topics, ["a"]);
    assert_eq!(s.owned_partitions, tps(&[("a", 0)]));
}

#[test]
fn a_subscription_change_during_a_heartbeat_rejoins_after_its_answer() {
    let mut h = Harness::cooperative().stable(&[("a", 0)]);
    h.pass_polling(HEARTBEAT);
    h.heartbeat_request();
    h.member.subscribe(topics(&["a", "c"]), h.now);
    h.no_request();
    h.heartbeat(KafkaCode::NONE);
    assert_eq!(decoded(&h.join_request(), 0).topics, ["a", "c"]);
}

// ---- Commits refused ----

#[test]
fn a_fenced_commit_moves_the_member_as_a_heartbeat_would() {
    let mut h = Harness::cooperative().stable(&[("a", 0)]);
    h.member.handle_commit_fenced(
        KafkaCode::REBALANCE_IN_PROGRESS,
        h.member.generation().map_or(-1, |g| g.generation_id),
        h.now,
    );
    assert!(h.events().is_empty());
    assert_eq!(h.join_request().member_id, ME);

    let mut h = Harness::cooperative().stable(&[("a", 0)]);
    h.member.handle_commit_fenced(
        KafkaCode::UNKNOWN_MEMBER_ID,
        h.member.generation().map_or(-1, |g| g.generation_id),
        h.now,
    );
    assert_eq!(h.events(), [MemberEvent::Lost(tps(&[("a", 0)]))]);
    assert_eq!(h.join_request().member_id, "");

    let mut h = Harness::cooperative().stable(&[("a", 0)]);
    h.member.handle_commit_fenced(
        KafkaCode::ILLEGAL_GENERATION,
        h.member.generation().map_or(-1, |g| g.generation_id),
        h.now,
    );
    assert_eq!(h.events(), [MemberEvent::Lost(tps(&[("a", 0)]))]);
    assert_eq!(h.join_request().member_id, ME);

    let mut h = Harness::new(&[Assignor::Range], Some("i-1"), &["a"]).stable(&[("a", 0)]);
    h.member.handle_commit_fenced(
        KafkaCode::FENCED_INSTANCE_ID,
        h.member.generation().map_or(-1, |g| g.generation_id),
        h.now,
    );
    let events = h.events();
    assert!(matches!(failed(&events), GroupError::FencedInstance { .. }));
}

// ---- Hostile answers ----

#[test]
fn an_assignment_that_does_not_decode_ends_the_member() {
    for garbage in [
        Bytes::new(),
        Bytes::from_static(&[0]),
        Bytes::from_static(&[0xff, 0xff, 0, 0]),
        Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff]),
        // A valid assignment with a byte too many.
        {
            let mut v = assignment_bytes(&[("a", 0)]).to_vec();
            v.push(0);
            Bytes::from(v)
        },
    ] {
        let mut h = Harness::eager();
        h.found();
        h.join_request();
        h.join(join_ok(1, "range", OTHER));
        h.sync_request();
        h.sync(SyncGroupResponse::default().with_assignment(garbage.clone()));
        let events = h.events();
        let error = failed(&events);
        assert!(
            matches!(error, GroupError::Payload { .. }),
            "{garbage:?}: {error:?}"
        );
        assert!(error.to_string().contains("assignment"), "{error}");
        assert!(h.member.is_done());
        assert!(h.member.owned().is_empty());
    }
}

#[test]
fn a_protocol_not_offered_ends_the_member() {
    for chosen in [Some("roundrobin"), Some(""), None] {
        let mut h = Harness::eager();
        h.found();
        h.join_request();
        let mut response = join_ok(1, "range", OTHER);
        response.protocol_name = chosen.map(str::to_string);
        h.join(response);
        let events = h.events();
        assert_eq!(
            failed(&events),
            &GroupError::UnknownProtocol {
                group: "g".into(),
                protocol: chosen.unwrap_or_default().into()
            }
        );
        assert!(h.member.is_done());
        h.no_request();
    }
}

#[test]
fn a_member_with_undecodable_metadata_ends_the_leader() {
    let java_v3 = unhex(
        "0003000000020002743100027432000000030102ff00000002000274310000000200000000000000030002743200000001000000010000000500067261636b2d61",
    );
    for garbage in [
        Bytes::new(),
        Bytes::from_static(&[0x80, 0x00]),
        // A topic count far beyond the bytes.
        Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1]),
        // Java's v3 subscription cut short.
        java_v3.slice(..java_v3.len() - 3),
    ] {
        let mut h = Harness::eager();
        h.found();
        h.join_request();
        h.join(join_ok(1, "range", ME).with_members(vec![
            group_member(ME, subscription_bytes(&["a"], &[])),
            group_member(OTHER, garbage.clone()),
        ]));
        let events = h.events();
        let error = failed(&events);
        assert!(
            matches!(error, GroupError::Payload { .. }),
            "{garbage:?}: {error:?}"
        );
        assert!(error.to_string().contains("subscription"), "{error}");
        h.no_request();
    }
    // The whole vector decodes: the cut was what failed.
    assert!(decode_subscription(&java_v3).is_ok());
}

#[test]
fn a_group_with_a_member_twice_ends_the_leader() {
    let mut h = Harness::eager();
    h.found();
    h.join_request();
    h.join(join_ok(1, "range", ME).with_members(vec![
        group_member(ME, subscription_bytes(&["a"], &[])),
        group_member(ME, subscription_bytes(&["a"], &[])),
    ]));
    h.events();
    h.member.handle_metadata(counts(&[("a", 2)]), h.now);
    let events = h.events();
    assert!(matches!(failed(&events), GroupError::Assignment { .. }));
    h.no_request();
}

#[test]
fn answers_nobody_asked_for_are_ignored() {
    let mut h = Harness::eager().stable(&[("a", 0)]);
    h.join(join_ok(9, "range", ME));
    h.sync(sync_ok(&[("b", 0)]));
    h.heartbeat(KafkaCode::UNKNOWN_MEMBER_ID);
    h.member.handle_leave(LeaveGroupResponse::default());
    h.member.handle_metadata(counts(&[("a", 1)]), h.now);
    h.member.handle_revoked(h.now);
    h.no_request();
    assert!(h.events().is_empty());
    assert_eq!(h.member.generation().map(|g| g.generation_id), Some(1));
    assert_eq!(h.member.owned().len(), 1);
}
