//! The assignors against Java's outcomes (`testdata/assignors.txt`, from
//! `GenVectors.java`), hand-picked cases, and properties over random groups.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::group::protocol::{decode_sticky_user_data, encode_sticky_user_data};

const JAVA: &str = include_str!("../testdata/assignors.txt");

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn unhex(s: &str) -> Bytes {
    crate::group::protocol::tests::unhex(s)
}

fn parse_tps(s: &str) -> Vec<TopicPartition> {
    if s == "-" {
        return vec![];
    }
    s.split(',')
        .map(|x| {
            let (t, p) = x.rsplit_once(':').expect("topic:partition");
            tp(t, p.parse().expect("partition"))
        })
        .collect()
}

fn member(id: &str, topics: &[&str]) -> Member {
    Member {
        member_id: id.into(),
        subscription: Subscription {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A member that owns `owned` in `generation`, told the way `assignor` reads it.
fn owner(
    assignor: Assignor,
    id: &str,
    topics: &[&str],
    owned: &[TopicPartition],
    generation: i32,
) -> Member {
    let mut m = member(id, topics);
    if assignor == Assignor::Sticky {
        m.subscription.user_data = Some(encode_sticky_user_data(owned, generation).unwrap());
    } else {
        m.subscription.owned_partitions = owned.to_vec();
        m.subscription.generation_id = Some(generation);
    }
    m
}

fn counts(topics: &[(&str, i32)]) -> PartitionCounts {
    topics.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

struct Scenario {
    name: String,
    assignor: Assignor,
    counts: PartitionCounts,
    members: Vec<Member>,
    expect: GroupAssignment,
}

fn java_scenarios() -> Vec<Scenario> {
    let mut out = Vec::new();
    let mut current: Option<Scenario> = None;
    for line in JAVA.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "scenario" => {
                current = Some(Scenario {
                    name: w[1].into(),
                    assignor: Assignor::from_name(w[2]).expect("known assignor"),
                    counts: PartitionCounts::new(),
                    members: vec![],
                    expect: GroupAssignment::new(),
                })
            }
            "topic" => {
                let s = current.as_mut().expect("in a scenario");
                s.counts.insert(w[1].into(), w[2].parse().unwrap());
            }
            "member" => {
                let s = current.as_mut().expect("in a scenario");
                let generation: i32 = w[5].parse().unwrap();
                let user_data = (w[6] != "-").then(|| unhex(w[6]));
                let owned = parse_tps(w[4]);
                if let Some(data) = &user_data {
                    // Java's sticky user data decodes to what Java was given, and kring
                    // writes the same bytes.
                    let decoded = decode_sticky_user_data(data).unwrap();
                    assert_eq!(decoded.partitions, owned, "{line}");
                    assert_eq!(decoded.generation, Some(generation), "{line}");
                    assert_eq!(
                        &encode_sticky_user_data(&owned, generation).unwrap(),
                        data,
                        "{line}"
                    );
                }
                s.members.push(Member {
                    member_id: w[1].into(),
                    group_instance_id: (w[2] != "-").then(|| w[2].to_string()),
                    subscription: Subscription {
                        topics: w[3].split(',').map(String::from).collect(),
                        user_data,
                        owned_partitions: if s.assignor == Assignor::Sticky {
                            vec![]
                        } else {
                            owned
                        },
                        generation_id: (generation >= 0).then_some(generation),
                        rack_id: None,
                    },
                });
            }
            "expect" => {
                let s = current.as_mut().expect("in a scenario");
                s.expect.insert(w[1].into(), parse_tps(w[2]));
            }
            "end" => out.push(current.take().expect("in a scenario")),
            _ => panic!("unexpected line {line:?}"),
        }
    }
    out
}

/// Partitions that stay with the member that validly owned them.
fn kept(members: &[Member], assignor: Assignor, result: &GroupAssignment) -> usize {
    members
        .iter()
        .map(|m| {
            let owned: Vec<TopicPartition> = match assignor {
                Assignor::Sticky => m
                    .subscription
                    .user_data
                    .as_ref()
                    .map(|d| decode_sticky_user_data(d).unwrap().partitions)
                    .unwrap_or_default(),
                _ => m.subscription.owned_partitions.clone(),
            };
            result[&m.member_id]
                .iter()
                .filter(|tp| owned.contains(tp))
                .count()
        })
        .sum()
}

fn spread(result: &GroupAssignment) -> usize {
    let sizes = result.values().map(Vec::len);
    sizes.clone().max().unwrap_or(0) - sizes.min().unwrap_or(0)
}

#[test]
fn range_and_roundrobin_match_java_exactly() {
    let scenarios: Vec<_> = java_scenarios()
        .into_iter()
        .filter(|s| matches!(s.assignor, Assignor::Range | Assignor::RoundRobin))
        .collect();
    assert_eq!(scenarios.len(), 10);
    for s in scenarios {
        let ours = s.assignor.assign(&s.members, &s.counts).unwrap();
        assert_eq!(ours, s.expect, "{} {}", s.assignor.name(), s.name);
    }
}

#[test]
fn sticky_assignors_are_as_balanced_and_sticky_as_java() {
    let scenarios: Vec<_> = java_scenarios()
        .into_iter()
        .filter(|s| matches!(s.assignor, Assignor::Sticky | Assignor::CooperativeSticky))
        .collect();
    assert_eq!(scenarios.len(), 12);
    for s in scenarios {
        let what = format!("{} {}", s.assignor.name(), s.name);
        let ours = s.assignor.assign(&s.members, &s.counts).unwrap();
        check_valid(&s.members, &s.counts, &ours);
        assert!(
            spread(&ours) <= spread(&s.expect),
            "{what}: {ours:?} vs Java {:?}",
            s.expect
        );
        assert!(
            kept(&s.members, s.assignor, &ours) >= kept(&s.members, s.assignor, &s.expect),
            "{what}: {ours:?} vs Java {:?}",
            s.expect
        );
        let total = |a: &GroupAssignment| a.values().map(Vec::len).sum::<usize>();
        assert_eq!(
            total(&ours),
            total(&s.expect),
            "{what}: as many handed out (or withheld) as Java"
        );
        if s.assignor == Assignor::CooperativeSticky {
            check_no_double_ownership(&s.members, &ours);
        }
    }
}

/// Each partition at most once, only to subscribers, only existing partitions, every
/// member present.
fn check_valid(members: &[Member], counts: &PartitionCounts, result: &GroupAssignment) {
    assert_eq!(result.len(), members.len());
    let mut seen = BTreeSet::new();
    for m in members {
        for p in &result[&m.member_id] {
            assert!(
                m.subscription.topics.contains(&p.topic),
                "{p} to unsubscribed {}",
                m.member_id
            );
            assert!(
                p.partition >= 0 && p.partition < counts[&p.topic],
                "{p} does not exist"
            );
            assert!(seen.insert(p.clone()), "{p} assigned twice");
        }
    }
}

/// Every subscribed partition is assigned.
fn check_complete(members: &[Member], counts: &PartitionCounts, result: &GroupAssignment) {
    let topics: BTreeSet<&String> = members
        .iter()
        .flat_map(|m| &m.subscription.topics)
        .collect();
    let expected: usize = topics
        .iter()
        .filter_map(|t| counts.get(*t))
        .map(|&n| n as usize)
        .sum();
    assert_eq!(
        result.values().map(Vec::len).sum::<usize>(),
        expected,
        "{result:?}"
    );
}

/// Cooperative: nothing given to a member while another owns it (at the newest
/// generation claimed for it: older claims are stale, as in Java).
fn check_no_double_ownership(members: &[Member], result: &GroupAssignment) {
    let generation = |m: &Member| m.subscription.generation_id.unwrap_or(-1);
    for m in members {
        for p in &result[&m.member_id] {
            let claimers: Vec<&Member> = members
                .iter()
                .filter(|o| {
                    o.subscription.owned_partitions.contains(p)
                        && o.subscription.topics.contains(&p.topic)
                })
                .collect();
            let newest = claimers.iter().map(|o| generation(o)).max();
            for o in claimers.iter().filter(|o| o.member_id != m.member_id) {
                assert!(
                    Some(generation(o)) != newest,
                    "{p} given to {} while {} owns it",
                    m.member_id,
                    o.member_id
                );
            }
        }
    }
}

#[test]
fn names_round_trip_and_only_cooperative_sticky_is_cooperative() {
    for a in [
        Assignor::Range,
        Assignor::RoundRobin,
        Assignor::Sticky,
        Assignor::CooperativeSticky,
    ] {
        assert_eq!(Assignor::from_name(a.name()), Some(a));
        assert_eq!(a.is_cooperative(), a == Assignor::CooperativeSticky);
    }
    assert_eq!(Assignor::from_name("RangeAssignor"), None);
}

const ALL: [Assignor; 4] = [
    Assignor::Range,
    Assignor::RoundRobin,
    Assignor::Sticky,
    Assignor::CooperativeSticky,
];

#[test]
fn more_members_than_partitions_leaves_some_empty() {
    let members: Vec<Member> = (0..5).map(|i| member(&format!("m{i}"), &["t"])).collect();
    for a in ALL {
        let result = a.assign(&members, &counts(&[("t", 2)])).unwrap();
        check_valid(&members, &counts(&[("t", 2)]), &result);
        check_complete(&members, &counts(&[("t", 2)]), &result);
        assert_eq!(
            result.values().filter(|v| v.len() == 1).count(),
            2,
            "{}",
            a.name()
        );
    }
}

#[test]
fn no_members_no_subscriptions_and_empty_topics_give_empty_assignments() {
    for a in ALL {
        assert!(a.assign(&[], &counts(&[("t", 3)])).unwrap().is_empty());
        let idle = [member("a", &[]), member("b", &[])];
        let result = a.assign(&idle, &counts(&[("t", 3)])).unwrap();
        assert_eq!(result.len(), 2);
        assert!(result.values().all(Vec::is_empty), "{}", a.name());
        let zero = [member("a", &["empty", "gone"]), member("b", &["empty"])];
        let result = a.assign(&zero, &counts(&[("empty", 0)])).unwrap();
        assert!(result.values().all(Vec::is_empty), "{}", a.name());
    }
}

#[test]
fn bad_inputs_are_named() {
    for a in ALL {
        let dup = [member("a", &["t"]), member("a", &["t"])];
        assert!(
            matches!(a.assign(&dup, &counts(&[("t", 1)])), Err(AssignError::DuplicateMember(m)) if m == "a")
        );
        let one = [member("a", &["t"])];
        assert!(matches!(
            a.assign(&one, &counts(&[("t", -1)])),
            Err(AssignError::NegativePartitionCount { count: -1, .. })
        ));
    }
    let mut garbled = member("b", &["t"]);
    garbled.subscription.user_data = Some(Bytes::from_static(&[0, 0, 0, 9]));
    assert!(matches!(
        Assignor::Sticky.assign(&[garbled], &counts(&[("t", 1)])),
        Err(AssignError::BadUserData { member, .. }) if member == "b"
    ));
}

#[test]
fn results_do_not_depend_on_member_order() {
    let c = counts(&[("a", 7), ("b", 5), ("c", 3)]);
    let members = vec![
        owner(
            Assignor::CooperativeSticky,
            "m3",
            &["a", "b"],
            &[tp("a", 1), tp("b", 2)],
            3,
        ),
        member("m1", &["a", "b", "c"]),
        owner(
            Assignor::CooperativeSticky,
            "m2",
            &["c", "a"],
            &[tp("a", 1), tp("c", 0)],
            2,
        ),
        member("m0", &["b"]),
    ];
    let mut reversed = members.clone();
    reversed.reverse();
    for a in ALL {
        assert_eq!(
            a.assign(&members, &c).unwrap(),
            a.assign(&reversed, &c).unwrap(),
            "{}",
            a.name()
        );
    }
}

/// Runs one rebalance the way members would: with `owned` as each member's partitions.
fn rebalance(
    a: Assignor,
    ids: &[&str],
    topics: &[&str],
    c: &PartitionCounts,
    owned: &GroupAssignment,
    generation: i32,
) -> GroupAssignment {
    let members: Vec<Member> = ids
        .iter()
        .map(|id| match owned.get(*id) {
            Some(p) => owner(a, id, topics, p, generation),
            None => member(id, topics),
        })
        .collect();
    let result = a.assign(&members, c).unwrap();
    check_valid(&members, c, &result);
    if a == Assignor::CooperativeSticky {
        check_no_double_ownership(&members, &result);
    }
    result
}

#[test]
fn sticky_keeps_partitions_across_joins_and_leaves() {
    let c = counts(&[("t1", 6), ("t2", 6)]);
    for a in [Assignor::Sticky, Assignor::CooperativeSticky] {
        let first = rebalance(
            a,
            &["a", "b", "c"],
            &["t1", "t2"],
            &c,
            &GroupAssignment::new(),
            0,
        );
        assert!(first.values().all(|v| v.len() == 4));
        // "d" joins: every member gives up exactly one partition, the rest stay.
        let ids = ["a", "b", "c", "d"];
        let mut second = rebalance(a, &ids, &["t1", "t2"], &c, &first, 1);
        if a.is_cooperative() {
            assert!(
                second["d"].is_empty(),
                "phase one: d waits for the revocations"
            );
            second = rebalance(a, &ids, &["t1", "t2"], &c, &second, 2);
        }
        assert_eq!(
            second.values().map(Vec::len).collect::<Vec<_>>(),
            [3, 3, 3, 3]
        );
        for id in ["a", "b", "c"] {
            assert!(
                second[id].iter().all(|p| first[id].contains(p)),
                "{} {id} kept only its own",
                a.name()
            );
        }
        // "b" leaves: its partitions spread, nobody else loses any.
        let third = rebalance(a, &["a", "c", "d"], &["t1", "t2"], &c, &second, 3);
        for id in ["a", "c", "d"] {
            assert!(
                second[id].iter().all(|p| third[id].contains(p)),
                "{} {id} lost a partition",
                a.name()
            );
            assert_eq!(third[id].len(), 4);
        }
    }
}

#[test]
fn eager_sticky_ignores_owned_partitions_in_the_subscription() {
    // Eager members have revoked everything; only the user data says what they had.
    let mut a = member("a", &["t"]);
    a.subscription.owned_partitions = vec![tp("t", 0), tp("t", 1)];
    a.subscription.generation_id = Some(4);
    let b = owner(Assignor::Sticky, "b", &["t"], &[tp("t", 0), tp("t", 1)], 4);
    let result = Assignor::Sticky
        .assign(&[a, b], &counts(&[("t", 2)]))
        .unwrap();
    assert_eq!(result["b"], [tp("t", 0)]);
    assert_eq!(result["a"], [tp("t", 1)]);
}

#[test]
fn cooperative_moves_take_two_rebalances_and_then_settle() {
    let c = counts(&[("t", 9)]);
    let all: Vec<TopicPartition> = (0..9).map(|p| tp("t", p)).collect();
    let start: GroupAssignment = [("a".to_string(), all)].into();
    let ids = ["a", "b", "c"];
    let phase1 = rebalance(Assignor::CooperativeSticky, &ids, &["t"], &c, &start, 1);
    assert_eq!(
        phase1["a"].len(),
        3,
        "a keeps its quota and revokes the rest"
    );
    assert!(phase1["b"].is_empty() && phase1["c"].is_empty());
    let phase2 = rebalance(Assignor::CooperativeSticky, &ids, &["t"], &c, &phase1, 2);
    assert_eq!(phase2["a"], phase1["a"]);
    assert_eq!((phase2["b"].len(), phase2["c"].len()), (3, 3));
    let phase3 = rebalance(Assignor::CooperativeSticky, &ids, &["t"], &c, &phase2, 3);
    assert_eq!(phase3, phase2, "a settled group stays put");
}

#[test]
fn conflicting_claims_go_to_the_newest_generation_and_ties_cancel() {
    for a in [Assignor::Sticky, Assignor::CooperativeSticky] {
        let c = counts(&[("t", 4)]);
        let members = [
            owner(a, "x", &["t"], &[tp("t", 0), tp("t", 1)], 7),
            owner(a, "y", &["t"], &[tp("t", 0), tp("t", 2)], 6),
            owner(a, "z", &["t"], &[tp("t", 2)], 6),
        ];
        let result = a.assign(&members, &c).unwrap();
        assert!(
            result["x"].contains(&tp("t", 0)),
            "{}: newest generation wins",
            a.name()
        );
        // t:2 is claimed by y and z in the same generation: neither may count on it.
        if a.is_cooperative() {
            assert!(
                result.values().all(|v| !v.contains(&tp("t", 2))),
                "withheld while contested"
            );
        }
        check_valid(&members, &c, &result);
    }
}

#[test]
fn heterogeneous_subscriptions_balance_where_they_can() {
    let c = counts(&[("t1", 3), ("t2", 5), ("t3", 2)]);
    let members = [
        member("a", &["t1"]),
        member("b", &["t1", "t2"]),
        member("c", &["t2", "t3"]),
    ];
    for a in [Assignor::Sticky, Assignor::CooperativeSticky] {
        let result = a.assign(&members, &c).unwrap();
        check_valid(&members, &c, &result);
        check_complete(&members, &c, &result);
        let mut sizes: Vec<usize> = result.values().map(Vec::len).collect();
        sizes.sort();
        assert_eq!(sizes, [3, 3, 4], "{}: {result:?}", a.name());
    }
}

#[test]
fn ten_thousand_partitions_and_a_hundred_members() {
    let topics: Vec<String> = (0..20).map(|i| format!("topic-{i}")).collect();
    let c: PartitionCounts = topics.iter().map(|t| (t.clone(), 500)).collect();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    let ids: Vec<String> = (0..100).map(|i| format!("member-{i:03}")).collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    for a in ALL {
        let first = rebalance(a, &id_refs, &refs, &c, &GroupAssignment::new(), 1);
        assert_eq!(first.values().map(Vec::len).sum::<usize>(), 10_000);
        // One member leaves, the rest rebalance with what they own.
        let second = rebalance(a, &id_refs[1..], &refs, &c, &first, 2);
        assert_eq!(second.len(), 99);
        // And with different subscriptions (the general path): half skip one topic.
        let members: Vec<Member> = (0..100)
            .map(|i| member(&ids[i], if i % 2 == 0 { &refs[..] } else { &refs[1..] }))
            .collect();
        let result = a.assign(&members, &c).unwrap();
        check_complete(&members, &c, &result);
    }
}

/// A random member: indices of its topics, (topic index, partition) it owns, generation.
type MemberSpec = (Vec<usize>, Vec<(usize, i32)>, i32);

/// A random group: topics with 0..12 partitions, members subscribing to subsets (or
/// all to the same set), owning random partitions in random generations.
fn arb_group(shared: bool) -> impl Strategy<Value = (PartitionCounts, Vec<MemberSpec>)> {
    let topics = prop::collection::vec(0..12i32, 1..5);
    topics.prop_flat_map(move |sizes| {
        let n = sizes.len();
        let member = (
            prop::collection::vec(0..n, 0..=n),
            prop::collection::vec((0..n, 0..14i32), 0..6),
            0..4i32,
        );
        (
            Just(sizes),
            prop::collection::vec(member, 0..8),
            prop::collection::vec(0..n, 1..=n),
        )
            .prop_map(move |(sizes, mut members, common)| {
                if shared {
                    for m in &mut members {
                        m.0 = common.clone();
                    }
                }
                let c = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| (format!("t{i}"), s))
                    .collect();
                (c, members)
            })
    })
}

fn build(a: Assignor, group: &[MemberSpec]) -> Vec<Member> {
    group
        .iter()
        .enumerate()
        .map(|(i, (topics, owned, generation))| {
            let topics: Vec<String> = topics.iter().map(|t| format!("t{t}")).collect();
            let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            let owned: Vec<TopicPartition> = owned
                .iter()
                .map(|(t, p)| tp(&format!("t{t}"), *p))
                .collect();
            owner(a, &format!("m{i}"), &refs, &owned, *generation)
        })
        .collect()
}

proptest! {
    #[test]
    fn every_partition_goes_once_to_a_subscriber((c, group) in arb_group(false)) {
        for a in [Assignor::Range, Assignor::RoundRobin, Assignor::Sticky] {
            let members = build(a, &group);
            let result = a.assign(&members, &c).unwrap();
            check_valid(&members, &c, &result);
            check_complete(&members, &c, &result);
        }
        // Cooperative: at most once and never to a member while another owns it; all
        // assigned once the owners have revoked what they lost (a few rebalances).
        let mut members = build(Assignor::CooperativeSticky, &group);
        let mut rounds = 0;
        loop {
            let result = Assignor::CooperativeSticky.assign(&members, &c).unwrap();
            check_valid(&members, &c, &result);
            check_no_double_ownership(&members, &result);
            let settled = members.iter().all(|m| m.subscription.owned_partitions == result[&m.member_id]);
            if settled {
                check_complete(&members, &c, &result);
                break;
            }
            rounds += 1;
            prop_assert!(rounds < 4, "not settled after {rounds} rebalances: {result:?}");
            for m in &mut members {
                m.subscription.owned_partitions = result[&m.member_id].clone();
                m.subscription.generation_id = Some(10 + rounds);
            }
        }
    }

    #[test]
    fn shared_subscriptions_balance_within_one((c, group) in arb_group(true)) {
        for a in [Assignor::RoundRobin, Assignor::Sticky, Assignor::CooperativeSticky] {
            let members = build(a, &group);
            let mut result = a.assign(&members, &c).unwrap();
            if a.is_cooperative() {
                let next: Vec<Member> = members.iter().map(|m| {
                    let mut m = m.clone();
                    m.subscription.owned_partitions = result[&m.member_id].clone();
                    m.subscription.generation_id = Some(10);
                    m
                }).collect();
                result = a.assign(&next, &c).unwrap();
            }
            check_complete(&members, &c, &result);
            prop_assert!(spread(&result) <= 1, "{}: {:?}", a.name(), result);
        }
    }

    #[test]
    fn sticky_keeps_every_owned_partition_its_quota_allows((c, group) in arb_group(true)) {
        // With shared subscriptions, each member keeps min(valid owned, its quota).
        let members = build(Assignor::Sticky, &group);
        let result = Assignor::Sticky.assign(&members, &c).unwrap();
        let total: usize = result.values().map(Vec::len).sum();
        if !members.is_empty() {
            let floor = total / members.len();
            let valid = valid_owned(&members, &c);
            for m in &members {
                let mine = &valid[&m.member_id];
                let kept = result[&m.member_id].iter().filter(|p| mine.contains(p)).count();
                prop_assert!(kept >= mine.len().min(floor), "{}: kept {kept} of {mine:?} in {result:?}", m.member_id);
            }
        }
    }
}

/// What each sticky member validly and uniquely owns (newest generation, no ties).
fn valid_owned(
    members: &[Member],
    c: &PartitionCounts,
) -> HashMap<String, BTreeSet<TopicPartition>> {
    let mut best: BTreeMap<TopicPartition, (i32, Vec<String>)> = BTreeMap::new();
    for m in members {
        let data = decode_sticky_user_data(m.subscription.user_data.as_ref().unwrap()).unwrap();
        let mut owned = data.partitions;
        owned.sort();
        owned.dedup();
        for p in owned {
            if !m.subscription.topics.contains(&p.topic) || p.partition >= c[&p.topic] {
                continue;
            }
            let generation = data.generation.unwrap();
            let entry = best.entry(p).or_insert((generation, vec![]));
            if generation > entry.0 {
                *entry = (generation, vec![]);
            }
            if generation == entry.0 {
                entry.1.push(m.member_id.clone());
            }
        }
    }
    let mut out: HashMap<String, BTreeSet<TopicPartition>> = members
        .iter()
        .map(|m| (m.member_id.clone(), BTreeSet::new()))
        .collect();
    for (p, (_, owners)) in best {
        if let [only] = owners.as_slice() {
            out.get_mut(only).unwrap().insert(p);
        }
    }
    out
}

#[test]
fn every_name_the_config_accepts_names_an_assignor() {
    let value = "range,org.apache.kafka.clients.consumer.RoundRobinAssignor,StickyAssignor,\
                 org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
    let mut config = crate::config::Config::new(["k1:9092"]);
    config.set("partition.assignment.strategy", value).unwrap();
    let names = &config.group.assignment_strategies;
    let parsed: Vec<Option<Assignor>> = names.iter().map(|n| Assignor::from_name(n)).collect();
    assert_eq!(parsed, ALL.map(Some));
    let defaults = crate::config::Config::new(["k1:9092"])
        .group
        .assignment_strategies;
    assert!(
        defaults.iter().all(|n| Assignor::from_name(n).is_some()),
        "{defaults:?}"
    );
}
