//! Choosing a record's partition.
//!
//! - [`murmur2`] and the default partitioner match the Java client byte for byte
//!   (`Utils.murmur2`, `toPositive(hash) % partitions`), so keyed records land where Java
//!   producers put them; the tests hold outputs produced by the Java client itself.
//! - [`fnv1a_partition`] matches Sarama's hash partitioner (FNV-1a 32, as a signed int,
//!   modulo, negated when negative); the tests hold outputs produced by Go.
//! - Keyless records under the default partitioner stick to one partition until about
//!   a batch's worth of bytes went to it, then move to another (KIP-794's uniform sticky
//!   partitioner), so batches fill up instead of spreading thin.
//! - Randomness is a seeded generator, injectable for tests.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use crate::config::PartitionerKind;
use crate::engine::backoff::SplitMix64;

/// Kafka's murmur2 (the Java client's `Utils.murmur2`), seed 0x9747b28c.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The Java client's partition for a key: `toPositive(murmur2(key)) % partitions`.
pub fn murmur2_partition(key: &[u8], partitions: usize) -> i32 {
    ((murmur2(key) & 0x7fff_ffff) as u32 % partitions.max(1) as u32) as i32
}

/// FNV-1a, 32 bits.
pub fn fnv1a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in data {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Sarama's hash partitioner: `int32(fnv1a(key)) % partitions`, negated when negative.
pub fn fnv1a_partition(key: &[u8], partitions: usize) -> i32 {
    let p = (fnv1a(key) as i32) % (partitions.max(1) as i32);
    p.abs()
}

/// What a partitioner knows about the topic.
#[derive(Debug, Clone, Copy)]
pub struct TopicPartitions<'a> {
    /// Every partition id, `0..count`.
    pub count: usize,
    /// Partitions that currently have a leader (may be all of them).
    pub available: &'a [i32],
    /// The topic's sticky state, kept by the producer beside the topic's routes so the
    /// default partitioner need not look the topic up per record; `None` when built
    /// with [`TopicPartitions::new`] (the partitioner then keeps its own per topic).
    sticky: Option<&'a StickySlot>,
}

impl<'a> TopicPartitions<'a> {
    /// A topic of `count` partitions, of which `available` have a leader.
    pub fn new(count: usize, available: &'a [i32]) -> Self {
        TopicPartitions {
            count,
            available,
            sticky: None,
        }
    }

    /// With the producer's sticky state for this topic.
    pub(crate) fn with_sticky(self, slot: &'a StickySlot) -> Self {
        TopicPartitions {
            sticky: Some(slot),
            ..self
        }
    }
}

/// One topic's sticky partition and the bytes sent to it since it was chosen (KIP-794),
/// updated with atomics so that concurrent senders share it without a lock.
#[derive(Debug)]
pub(crate) struct StickySlot {
    /// -1 before the first choice.
    partition: AtomicI32,
    bytes: AtomicUsize,
}

impl Default for StickySlot {
    fn default() -> Self {
        StickySlot {
            partition: AtomicI32::new(-1),
            bytes: AtomicUsize::new(0),
        }
    }
}

/// Chooses a partition for a record; implement it for custom placement.
///
/// It is called on the sending thread for every record without an explicit partition,
/// while the producer holds its topic table for reading (so that routing a record
/// clones nothing): it should be quick, and must not call back into the producer.
pub trait Partitioner: Send + Sync + std::fmt::Debug {
    /// The partition for a record with this key (and encoded size, for stickiness).
    /// Must return an id in `0..partitions.count`.
    fn partition(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        size: usize,
        partitions: TopicPartitions<'_>,
    ) -> i32;
}

/// The Java client's default: murmur2 for keys, uniform sticky (KIP-794) for keyless records.
#[derive(Debug)]
pub struct DefaultPartitioner {
    sticky: Sticky,
}

/// Sarama's hash partitioner for keys; keyless records go to a random partition, as
/// in Sarama.
#[derive(Debug)]
pub struct Fnv1aPartitioner {
    rng: Mutex<SplitMix64>,
}

/// Record-by-record round robin.
#[derive(Debug, Default)]
pub struct RoundRobinPartitioner {
    next: AtomicUsize,
}

/// A random partition per record.
#[derive(Debug)]
pub struct RandomPartitioner {
    rng: Mutex<SplitMix64>,
}

/// KIP-794 stickiness: stay on a partition until `switch_after` bytes went there, then
/// pick another at random among those with a leader.
#[derive(Debug)]
struct Sticky {
    switch_after: usize,
    rng: Mutex<SplitMix64>,
    /// The slots of topics partitioned without the producer's slot (a partitioner
    /// called directly, as in tests).
    own: Mutex<Vec<(String, StickySlot)>>,
}

impl Sticky {
    fn new(switch_after: usize, seed: u64) -> Self {
        Sticky {
            switch_after: switch_after.max(1),
            rng: Mutex::new(SplitMix64::new(seed)),
            own: Mutex::new(Vec::new()),
        }
    }

    fn pick(&self, topic: &str, size: usize, partitions: TopicPartitions<'_>) -> i32 {
        if let Some(slot) = partitions.sticky {
            return self.pick_in(slot, size, partitions);
        }
        let Ok(mut own) = self.own.lock() else {
            return 0;
        };
        let index = match own.iter().position(|(t, _)| t == topic) {
            Some(i) => i,
            None => {
                own.push((topic.to_string(), StickySlot::default()));
                own.len() - 1
            }
        };
        self.pick_in(&own[index].1, size, partitions)
    }

    /// The slot's partition for a record of `size` bytes, choosing one first if it has
    /// none (or one the topic no longer has), and the next one once `switch_after`
    /// bytes went to it: the sender whose bytes cross the mark makes the switch.
    fn pick_in(&self, slot: &StickySlot, size: usize, partitions: TopicPartitions<'_>) -> i32 {
        let mut current = slot.partition.load(Ordering::Relaxed);
        if current < 0 || current as usize >= partitions.count {
            let chosen = self.choose(partitions, None);
            current = match slot.partition.compare_exchange(
                current,
                chosen,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    slot.bytes.store(0, Ordering::Relaxed);
                    chosen
                }
                // Another sender chose meanwhile; its choice is as good.
                Err(theirs) if theirs >= 0 && (theirs as usize) < partitions.count => theirs,
                Err(_) => chosen,
            };
        }
        let before = slot.bytes.fetch_add(size, Ordering::Relaxed);
        if before < self.switch_after && before.saturating_add(size) >= self.switch_after {
            let next = self.choose(partitions, Some(current));
            slot.partition.store(next, Ordering::Relaxed);
            slot.bytes.store(0, Ordering::Relaxed);
        }
        current
    }

    /// A random partition with a leader (any partition when none has one), other than
    /// `avoid` where there is a choice.
    fn choose(&self, partitions: TopicPartitions<'_>, avoid: Option<i32>) -> i32 {
        let pool = partitions.available;
        if pool.is_empty() {
            return random_in(&self.rng, partitions.count);
        }
        let r = self.rng.lock().map(|mut r| r.next_u64()).unwrap_or(0);
        let mut i = (r % pool.len() as u64) as usize;
        if pool.len() > 1 && Some(pool[i]) == avoid {
            i = (i + 1) % pool.len();
        }
        pool[i]
    }
}

impl DefaultPartitioner {
    /// Sticks keyless records to a partition for about `batch_size` bytes.
    pub fn new(batch_size: usize, seed: u64) -> Self {
        DefaultPartitioner {
            sticky: Sticky::new(batch_size, seed),
        }
    }
}

impl Partitioner for DefaultPartitioner {
    fn partition(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        size: usize,
        partitions: TopicPartitions<'_>,
    ) -> i32 {
        match key {
            Some(k) => murmur2_partition(k, partitions.count),
            None => self.sticky.pick(topic, size, partitions),
        }
    }
}

impl Fnv1aPartitioner {
    /// With a seed for keyless records.
    pub fn new(seed: u64) -> Self {
        Fnv1aPartitioner {
            rng: Mutex::new(SplitMix64::new(seed)),
        }
    }
}

impl Partitioner for Fnv1aPartitioner {
    fn partition(
        &self,
        _: &str,
        key: Option<&[u8]>,
        _: usize,
        partitions: TopicPartitions<'_>,
    ) -> i32 {
        match key {
            Some(k) => fnv1a_partition(k, partitions.count),
            None => random_in(&self.rng, partitions.count),
        }
    }
}

fn random_in(rng: &Mutex<SplitMix64>, count: usize) -> i32 {
    let r = rng.lock().map(|mut r| r.next_u64()).unwrap_or(0);
    (r % count.max(1) as u64) as i32
}

impl Partitioner for RoundRobinPartitioner {
    fn partition(
        &self,
        _: &str,
        _: Option<&[u8]>,
        _: usize,
        partitions: TopicPartitions<'_>,
    ) -> i32 {
        (self.next.fetch_add(1, Ordering::Relaxed) % partitions.count.max(1)) as i32
    }
}

impl RandomPartitioner {
    /// With a seed.
    pub fn new(seed: u64) -> Self {
        RandomPartitioner {
            rng: Mutex::new(SplitMix64::new(seed)),
        }
    }
}

impl Partitioner for RandomPartitioner {
    fn partition(
        &self,
        _: &str,
        _: Option<&[u8]>,
        _: usize,
        partitions: TopicPartitions<'_>,
    ) -> i32 {
        random_in(&self.rng, partitions.count)
    }
}

/// The partitioner a config names (`Manual` has none: records carry their partition).
pub fn from_kind(
    kind: PartitionerKind,
    batch_size: usize,
    seed: u64,
) -> Option<Box<dyn Partitioner>> {
    Some(match kind {
        PartitionerKind::Default => Box::new(DefaultPartitioner::new(batch_size, seed)),
        PartitionerKind::Fnv1a => Box::new(Fnv1aPartitioner::new(seed)),
        PartitionerKind::RoundRobin => Box::new(RoundRobinPartitioner::default()),
        PartitionerKind::Random => Box::new(RandomPartitioner::new(seed)),
        PartitionerKind::Manual => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (key, Utils.murmur2(key), partition of 7, partition of 100), printed by the Java
    /// client 4.4 (`org.apache.kafka.common.utils.Utils`).
    const JAVA: &[(&str, i32, i32, i32)] = &[
        ("", 275646681, 2, 81),
        ("a", -1563381124, 5, 24),
        ("21", -973932308, 3, 40),
        ("foobar", -790332482, 0, 66),
        ("abc", 479470107, 4, 7),
        ("kring", 2085790058, 2, 58),
        ("a-little-bit-long-string", -985981536, 1, 12),
        ("key-12345", -952703915, 0, 33),
        ("\u{e9}t\u{e9}", -2101193575, 4, 73),
    ];

    /// (key, fnv1a32, Sarama partition of 7, of 100), printed by Go's hash/fnv with
    /// Sarama's hash partitioner arithmetic.
    const GO: &[(&str, u32, i32, i32)] = &[
        ("", 0x811c9dc5, 2, 35),
        ("a", 0xe40c292c, 6, 76),
        ("21", 0x8cf297ec, 3, 52),
        ("foobar", 0xbf9cf968, 4, 76),
        ("abc", 0x1a47e90b, 5, 31),
        ("kring", 0xc9e2e1c0, 2, 52),
        ("key-12345", 0x2c5a647a, 4, 66),
    ];

    #[test]
    fn murmur2_matches_the_java_client() {
        for &(key, hash, p7, p100) in JAVA {
            assert_eq!(murmur2(key.as_bytes()), hash, "{key:?}");
            assert_eq!(murmur2_partition(key.as_bytes(), 7), p7, "{key:?}");
            assert_eq!(murmur2_partition(key.as_bytes(), 100), p100, "{key:?}");
        }
    }

    #[test]
    fn fnv1a_matches_sarama() {
        for &(key, hash, p7, p100) in GO {
            assert_eq!(fnv1a(key.as_bytes()), hash, "{key:?}");
            assert_eq!(fnv1a_partition(key.as_bytes(), 7), p7, "{key:?}");
            assert_eq!(fnv1a_partition(key.as_bytes(), 100), p100, "{key:?}");
        }
    }

    #[test]
    fn sticky_keyless_records_fill_a_batch_then_move() {
        let p = DefaultPartitioner::new(1000, 42);
        let all: Vec<i32> = (0..8).collect();
        let parts = TopicPartitions::new(8, &all);
        let first: Vec<i32> = (0..10)
            .map(|_| p.partition("t", None, 100, parts))
            .collect();
        assert!(
            first.iter().all(|&x| x == first[0]),
            "ten 100-byte records stick: {first:?}"
        );
        let next = p.partition("t", None, 100, parts);
        assert_ne!(next, first[0], "moves after a batch's worth");
        // Keys still hash.
        assert_eq!(
            p.partition("t", Some(b"21"), 10, TopicPartitions::new(7, &all[..7])),
            3
        );
        // Only partitions with a leader are chosen for keyless records.
        let only = [5];
        for _ in 0..50 {
            assert_eq!(
                p.partition("u", None, 600, TopicPartitions::new(8, &only)),
                5
            );
        }
    }

    /// The producer's per-topic slot gives the same choices as the partitioner's own
    /// per-topic state, and each topic's slot sticks on its own.
    #[test]
    fn sticky_slots_choose_as_the_partitioners_own_state_does() {
        let all: Vec<i32> = (0..8).collect();
        let own = DefaultPartitioner::new(1000, 7);
        let slotted = DefaultPartitioner::new(1000, 7);
        let (slot_a, slot_b) = (StickySlot::default(), StickySlot::default());
        let parts = TopicPartitions::new(8, &all);
        let mut switches = 0;
        let mut last = None;
        for i in 0..200 {
            let expected = own.partition("a", None, 150, parts);
            let got = slotted.partition("a", None, 150, parts.with_sticky(&slot_a));
            assert_eq!(got, expected, "record {i}");
            switches += usize::from(last.is_some_and(|l| l != got));
            last = Some(got);
        }
        // 150-byte records, 1,000 bytes per partition: a switch every 7 records.
        assert_eq!(switches, 200 / 7, "switches");
        // Topic b's slot is untouched by a's records: it starts afresh.
        assert_eq!(slot_b.partition.load(Ordering::Relaxed), -1);
        let b = slotted.partition("b", None, 10, parts.with_sticky(&slot_b));
        assert_eq!(slot_b.partition.load(Ordering::Relaxed), b);
        assert_eq!(slot_b.bytes.load(Ordering::Relaxed), 10);
    }

    /// A slot whose partition the topic no longer has (it shrank in a test, or the slot
    /// is new) chooses again among the available ones.
    #[test]
    fn a_sticky_slot_outside_the_topic_chooses_again() {
        let p = DefaultPartitioner::new(1 << 20, 3);
        let slot = StickySlot::default();
        slot.partition.store(9, Ordering::Relaxed);
        let only = [2];
        let parts = TopicPartitions::new(4, &only).with_sticky(&slot);
        assert_eq!(p.partition("t", None, 10, parts), 2);
        assert_eq!(slot.partition.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn round_robin_and_random_stay_in_range() {
        let rr = RoundRobinPartitioner::default();
        let parts = TopicPartitions::new(3, &[0, 1, 2]);
        let seq: Vec<i32> = (0..6).map(|_| rr.partition("t", None, 1, parts)).collect();
        assert_eq!(seq, vec![0, 1, 2, 0, 1, 2]);
        let r = RandomPartitioner::new(1);
        let mut seen = [false; 3];
        for _ in 0..100 {
            seen[r.partition("t", Some(b"k"), 1, parts) as usize] = true;
        }
        assert_eq!(seen, [true; 3]);
    }
}
