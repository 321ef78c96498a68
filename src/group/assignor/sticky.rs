//! `sticky` and `cooperative-sticky` (Java's `StickyAssignor` and
//! `CooperativeStickyAssignor`, KIP-54 and KIP-429): one balancing engine, two ways of
//! learning who owns what and of handing partitions over.
//!
//! Ownership: `sticky` reads each member's previous assignment and generation from
//! its user data (eager members revoke everything before rejoining, so their owned
//! partitions in the subscription are empty); `cooperative-sticky` reads the owned
//! partitions and generation of the subscription (v1+/v2+; none means generation -1).
//! A partition claimed in several members' lists belongs to the claim with the highest
//! generation (older claims are stale, KIP-792); claims tied at the highest generation
//! cancel each other, so neither member counts on keeping it (as in Java). Claims on
//! topics the member no longer subscribes to, or on partitions that no longer exist,
//! count for nothing.
//!
//! Balance: when all members subscribe to the same topics, each gets ⌊P/M⌋ or ⌈P/M⌉
//! partitions: members keep owned partitions up to that quota (the ⌈P/M⌉ slots going
//! to those owning the most), then the rest are dealt out in turn, in member id order.
//! Otherwise owned partitions are kept, the rest go one by one to the least-loaded
//! eligible member (topics with the fewest subscribers first), and a partition moves
//! from a member to an eligible one holding at least two fewer until none can.
//!
//! Hand-over (`cooperative-sticky` only): a partition the result gives to a member
//! while another member owns it (at the newest generation claimed, tied owners
//! included) is left out of this round; its owner, seeing it missing, revokes it and
//! rejoins, and a later rebalance assigns it (KIP-429's two phases). With shared
//! subscriptions that later rebalance is the next one; with different subscriptions
//! the moves that restore balance can take a few rounds (the tests check it settles).
//!
//! Cost: O(P log P) for shared subscriptions; the general case's moves are bounded by
//! the balance they improve (each lowers the sum of squared counts).

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use super::{AssignError, Member, PartitionCounts, partition_count};
use crate::group::TopicPartition;
use crate::group::protocol::decode_sticky_user_data;

/// Partitions a member says it owns, and in which generation.
#[derive(Debug, Default)]
struct Prior {
    owned: Vec<TopicPartition>,
    generation: i32,
}

/// The generation Java assumes when a member reports none.
const NO_GENERATION: i32 = -1;

/// `sticky`: ownership from each member's user data.
pub(super) fn assign_eager(
    members: &[&Member],
    counts: &PartitionCounts,
) -> Result<Vec<Vec<TopicPartition>>, AssignError> {
    let priors = members
        .iter()
        .map(|m| prior_from_user_data(m))
        .collect::<Result<Vec<_>, _>>()?;
    let claims = newest_claims(members, counts, &priors);
    Ok(balance(members, counts, &claims))
}

/// `cooperative-sticky`: ownership from the subscriptions, hand-over in two phases.
pub(super) fn assign_cooperative(
    members: &[&Member],
    counts: &PartitionCounts,
) -> Vec<Vec<TopicPartition>> {
    let priors: Vec<Prior> = members
        .iter()
        .map(|m| Prior {
            owned: m.subscription.owned_partitions.clone(),
            generation: m.subscription.generation_id.unwrap_or(NO_GENERATION),
        })
        .collect();
    let claims = newest_claims(members, counts, &priors);
    let mut assignment = balance(members, counts, &claims);
    withhold_partitions_owned_elsewhere(&mut assignment, &claims);
    assignment
}

fn prior_from_user_data(member: &Member) -> Result<Prior, AssignError> {
    match &member.subscription.user_data {
        Some(data) if !data.is_empty() => {
            let decoded =
                decode_sticky_user_data(data).map_err(|source| AssignError::BadUserData {
                    member: member.member_id.clone(),
                    source,
                })?;
            Ok(Prior {
                owned: decoded.partitions,
                generation: decoded.generation.unwrap_or(NO_GENERATION),
            })
        }
        _ => Ok(Prior::default()),
    }
}

/// KIP-429: drop from each member's new partitions those another member owns (at the
/// newest generation claimed for it; an older claim is stale, as in Java, and its
/// member loses the partition when it sees its new assignment).
fn withhold_partitions_owned_elsewhere(assignment: &mut [Vec<TopicPartition>], claims: &Claims) {
    for (member, partitions) in assignment.iter_mut().enumerate() {
        partitions.retain(|tp| {
            claims
                .get(tp)
                .is_none_or(|claim| claim.owners.iter().all(|&owner| owner == member))
        });
    }
}

/// The claims on one partition at the newest generation any member claimed it in.
struct Claim {
    generation: i32,
    owners: Vec<usize>,
}

type Claims = HashMap<TopicPartition, Claim>;

/// Valid claims (subscribed topic, existing partition), newest generation only.
fn newest_claims(members: &[&Member], counts: &PartitionCounts, priors: &[Prior]) -> Claims {
    let mut claims = Claims::new();
    for (member, (prior, m)) in priors.iter().zip(members).enumerate() {
        for tp in &prior.owned {
            let exists = partition_count(counts, &tp.topic)
                .is_some_and(|n| usize::try_from(tp.partition).is_ok_and(|p| p < n));
            if !exists || !m.subscription.topics.contains(&tp.topic) {
                continue;
            }
            let generation = prior.generation;
            let claim = claims.entry(tp.clone()).or_insert(Claim {
                generation,
                owners: Vec::new(),
            });
            if generation > claim.generation {
                *claim = Claim {
                    generation,
                    owners: Vec::new(),
                };
            }
            if generation == claim.generation && !claim.owners.contains(&member) {
                claim.owners.push(member);
            }
        }
    }
    claims
}

/// The balancing engine shared by both: each member's partitions, aligned with `members`.
fn balance(
    members: &[&Member],
    counts: &PartitionCounts,
    claims: &Claims,
) -> Vec<Vec<TopicPartition>> {
    let topic_sets: Vec<BTreeSet<&str>> = members
        .iter()
        .map(|m| {
            m.subscription
                .topics
                .iter()
                .map(|t| t.as_str())
                .filter(|t| counts.contains_key(*t))
                .collect()
        })
        .collect();
    let all = all_partitions(&topic_sets, counts);
    let kept = uncontested(claims, members.len());
    if topic_sets.windows(2).all(|w| w[0] == w[1]) {
        balance_shared(kept, &all)
    } else {
        balance_general(kept, &all, &topic_sets)
    }
}

/// Every partition of every subscribed topic, sorted.
fn all_partitions(topic_sets: &[BTreeSet<&str>], counts: &PartitionCounts) -> Vec<TopicPartition> {
    let topics: BTreeSet<&str> = topic_sets.iter().flatten().copied().collect();
    let mut all = Vec::new();
    for topic in topics {
        let n = partition_count(counts, topic).unwrap_or(0);
        all.extend(
            (0..n).map(|p| TopicPartition::new(topic, i32::try_from(p).unwrap_or(i32::MAX))),
        );
    }
    all
}

/// Each member's uncontested owned partitions (one owner at the newest generation), sorted.
fn uncontested(claims: &Claims, members: usize) -> Vec<Vec<TopicPartition>> {
    let mut kept = vec![Vec::new(); members];
    for (tp, claim) in claims {
        if let [owner] = claim.owners.as_slice() {
            kept[*owner].push(tp.clone());
        }
    }
    for list in &mut kept {
        list.sort();
    }
    kept
}

/// Shared subscriptions: exact ⌊P/M⌋/⌈P/M⌉ quotas, keeping owners where quotas allow.
fn balance_shared(
    mut kept: Vec<Vec<TopicPartition>>,
    all: &[TopicPartition],
) -> Vec<Vec<TopicPartition>> {
    let members = kept.len();
    if members == 0 {
        return kept;
    }
    let min = all.len() / members;
    let mut max_slots = all.len() % members;
    let mut by_ownership: Vec<usize> = (0..members).collect();
    by_ownership.sort_by_key(|&m| (Reverse(kept[m].len()), m));
    for m in by_ownership {
        let quota = if kept[m].len() > min && max_slots > 0 {
            max_slots -= 1;
            min + 1
        } else {
            min
        };
        kept[m].truncate(quota);
    }
    let taken: HashSet<&TopicPartition> = kept.iter().flatten().collect();
    let free: Vec<TopicPartition> = all
        .iter()
        .filter(|tp| !taken.contains(tp))
        .cloned()
        .collect();
    drop(taken);
    let mut free = free.into_iter();
    let mut below_min: VecDeque<usize> = (0..members).filter(|&m| kept[m].len() < min).collect();
    while let Some(m) = below_min.pop_front() {
        let Some(tp) = free.next() else { break };
        kept[m].push(tp);
        if kept[m].len() < min {
            below_min.push_back(m);
        }
    }
    // What is left equals the ⌈P/M⌉ slots still open; members at ⌊P/M⌋ take one each.
    for list in kept.iter_mut().filter(|list| list.len() == min) {
        match free.next() {
            Some(tp) => list.push(tp),
            None => break,
        }
    }
    kept
}

/// Different subscriptions: greedy placement, then moves that improve balance.
fn balance_general(
    mut assigned: Vec<Vec<TopicPartition>>,
    all: &[TopicPartition],
    topic_sets: &[BTreeSet<&str>],
) -> Vec<Vec<TopicPartition>> {
    let mut eligible: HashMap<&str, Vec<usize>> = HashMap::new();
    for (member, topics) in topic_sets.iter().enumerate() {
        for &topic in topics {
            eligible.entry(topic).or_default().push(member);
        }
    }
    let taken: HashSet<&TopicPartition> = assigned.iter().flatten().collect();
    let mut free: Vec<&TopicPartition> = all.iter().filter(|tp| !taken.contains(tp)).collect();
    drop(taken);
    free.sort_by_key(|tp| (eligible.get(tp.topic.as_str()).map_or(0, Vec::len), *tp));
    for tp in free {
        if let Some(m) = least_loaded(&assigned, eligible.get(tp.topic.as_str()), usize::MAX) {
            assigned[m].push(tp.clone());
        }
    }
    while move_one_round(&mut assigned, &eligible) {}
    assigned
}

/// The eligible member other than `except` with the fewest partitions (lowest index on ties).
fn least_loaded(
    assigned: &[Vec<TopicPartition>],
    eligible: Option<&Vec<usize>>,
    except: usize,
) -> Option<usize> {
    eligible?
        .iter()
        .copied()
        .filter(|&m| m != except)
        .min_by_key(|&m| (assigned[m].len(), m))
}

/// One pass over the members, most loaded first, moving partitions to eligible members
/// with at least two fewer. Whether anything moved.
fn move_one_round(
    assigned: &mut [Vec<TopicPartition>],
    eligible: &HashMap<&str, Vec<usize>>,
) -> bool {
    let mut order: Vec<usize> = (0..assigned.len()).collect();
    order.sort_by_key(|&m| (Reverse(assigned[m].len()), m));
    let mut moved = false;
    for from in order {
        assigned[from].sort();
        let mut index = 0;
        while index < assigned[from].len() {
            let topic = assigned[from][index].topic.as_str();
            let target = least_loaded(assigned, eligible.get(topic), from);
            match target {
                Some(to) if assigned[to].len() + 1 < assigned[from].len() => {
                    let tp = assigned[from].remove(index);
                    assigned[to].push(tp);
                    moved = true;
                }
                _ => index += 1,
            }
        }
    }
    moved
}
