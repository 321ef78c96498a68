//! Where a record goes: each topic's partitions as of one metadata snapshot, and a
//! small per-thread cache of those snapshots so that routing a record takes no lock.
//!
//! A topic's routes are an immutable [`TopicRoutes`] behind an `Arc`, replaced whole
//! when the metadata moves (copy on write). Every sending thread keeps the routes of the
//! last few topics it sent to ([`with_current_routes`]): a record whose topic is cached
//! and whose routes are of the current metadata generation is routed with one atomic
//! load and a string comparison, no lock taken and no reference count touched. Two
//! snapshots of one generation are alike (partitions are only ever added, with a new
//! generation), so a cached one is as good as the table's.
//!
//! The cache is keyed by the producer's [`ProducerShared::id`](super::ProducerShared),
//! unique for the life of the process, never by an address that a later producer could
//! reuse. A thread's cache keeps the routes of a dropped producer alive (its partition
//! objects, not their batches, which the producer fails or sends when it goes) until the
//! thread sends through other producers or ends.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::partitioner::StickySlot;
use crate::engine::produce::partition::ProducePartition;

/// The producer's topics by name.
pub(crate) type TopicTable = RwLock<HashMap<String, Arc<TopicState>, TopicHasher>>;

/// One topic's partitions and what the partitioner needs to know of them.
#[derive(Debug)]
pub(crate) struct TopicState {
    pub name: Arc<str>,
    routes: RwLock<Arc<TopicRoutes>>,
    /// The partitioner's sticky state for this topic.
    pub sticky: StickySlot,
}

/// A topic's partitions as of one metadata snapshot; never changed once shared.
#[derive(Debug, Default, Clone)]
pub(crate) struct TopicRoutes {
    /// The generation of the metadata snapshot this was computed from; 0 when the topic
    /// was missing from it, so that the next record looks again.
    pub generation: u64,
    /// Partition ids are `0..count`.
    pub count: usize,
    /// The partitions that have a leader.
    pub available: Vec<i32>,
    /// Every partition the producer has made for the topic (at least `count`).
    pub partitions: Vec<Arc<ProducePartition>>,
}

impl TopicRoutes {
    /// Whether records can be routed by these routes under metadata `generation`.
    fn is_current(&self, generation: u64) -> bool {
        self.generation == generation && self.count > 0
    }
}

impl TopicState {
    pub fn new(name: &str) -> Self {
        TopicState {
            name: Arc::from(name),
            routes: RwLock::new(Arc::default()),
            sticky: StickySlot::default(),
        }
    }

    /// The routes as they are now.
    pub fn routes(&self) -> Option<Arc<TopicRoutes>> {
        self.routes.read().ok().map(|r| Arc::clone(&r))
    }

    /// Replaces the routes by `change` applied to a copy of them (the write lock held
    /// meanwhile, so changes do not overwrite each other).
    pub fn update<R>(&self, change: impl FnOnce(&mut TopicRoutes) -> R) -> Option<R> {
        let mut routes = self.routes.write().ok()?;
        let mut next = TopicRoutes::clone(&routes);
        let result = change(&mut next);
        *routes = Arc::new(next);
        Some(result)
    }

    /// Every partition made so far.
    pub fn partitions(&self) -> Vec<Arc<ProducePartition>> {
        self.routes()
            .map(|r| r.partitions.clone())
            .unwrap_or_default()
    }

    /// Partition `index`, if it was made.
    pub fn partition(&self, index: i32) -> Option<Arc<ProducePartition>> {
        let routes = self.routes()?;
        routes.partitions.get(usize::try_from(index).ok()?).cloned()
    }
}

/// Hashes topic names for the producer's topic table: a word at a time (FxHash's
/// multiply-rotate), several times cheaper than the default SipHash for short names.
/// The names are the application's own, not the wire's, so a keyed hash against
/// flooding buys nothing here.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TopicHasher;

/// The state of a [`TopicHasher`].
#[derive(Debug, Default)]
pub(crate) struct TopicHash(u64);

impl TopicHash {
    const K: u64 = 0xf135_7aea_2e62_a9c5;

    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(Self::K);
    }
}

impl std::hash::Hasher for TopicHash {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.mix(u64::from_le_bytes(w.try_into().unwrap_or_default()));
        }
        let mut tail = [0u8; 8];
        let rest = words.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.mix(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 56));
    }

    fn write_u8(&mut self, byte: u8) {
        self.mix(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the low bits weakest; hashbrown takes its bucket from them.
        self.0.rotate_left(26)
    }
}

impl std::hash::BuildHasher for TopicHasher {
    type Hasher = TopicHash;

    fn build_hasher(&self) -> TopicHash {
        TopicHash::default()
    }
}

/// A new producer's id for the route cache: unique for the life of the process.
pub(crate) fn next_producer_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Topics each thread keeps routes for: enough for a thread that alternates between a
/// few topics, small enough to scan.
const CACHED_TOPICS: usize = 4;

/// One cached topic of one producer.
struct CachedRoutes {
    producer: u64,
    topic: Arc<TopicState>,
    routes: Arc<TopicRoutes>,
}

/// A thread's cached routes, replaced in turn.
#[derive(Default)]
struct RouteCache {
    entries: Vec<CachedRoutes>,
    next_victim: usize,
}

impl RouteCache {
    fn find(&self, producer: u64, topic: &str, generation: u64) -> Option<usize> {
        self.entries.iter().position(|e| {
            e.producer == producer
                && same_name(&e.topic.name, topic)
                && e.routes.is_current(generation)
        })
    }

    /// Caches `entry` in place of the same topic's older routes, in a free slot, or in
    /// place of the next in turn; returns where.
    fn insert(&mut self, entry: CachedRoutes) -> usize {
        let same = self
            .entries
            .iter()
            .position(|e| e.producer == entry.producer && e.topic.name == entry.topic.name);
        let slot = match same {
            Some(i) => i,
            None if self.entries.len() < CACHED_TOPICS => {
                self.entries.push(entry);
                return self.entries.len() - 1;
            }
            None => {
                self.next_victim = (self.next_victim + 1) % CACHED_TOPICS;
                self.next_victim
            }
        };
        self.entries[slot] = entry;
        slot
    }
}

/// Whether two topic names are the same, compared eight bytes at a time in place: the
/// library `memcmp` the slice comparison calls was 2–3% of produce-100's profile, about
/// 5 ns a record for a short name (the call, then its dispatch on the length).
#[inline]
fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().unwrap_or_default());
    let words_equal = (&mut wa).zip(&mut wb).all(|(x, y)| word(x) == word(y));
    words_equal
        && wa
            .remainder()
            .iter()
            .zip(wb.remainder())
            .all(|(x, y)| x == y)
}

thread_local! {
    static ROUTES: RefCell<RouteCache> = RefCell::new(RouteCache::default());
}

/// Calls `route` with `topic`'s routes if they are of metadata `generation`, from this
/// thread's cache or else from `table` (then cached); `None` when the table has no
/// current routes for the topic (the caller refreshes them). Where the cache is in use
/// further up this thread's stack (a partitioner that sends) or gone (the thread is
/// ending), the table alone is used. Inlined: it is on the per-record path.
#[inline]
pub(crate) fn with_current_routes<R>(
    producer: u64,
    table: &TopicTable,
    topic: &str,
    generation: u64,
    route: impl FnOnce(&TopicState, &TopicRoutes) -> R,
) -> Option<R> {
    let mut route = Some(route);
    // Some(routed) when the cache could be used, routed or not; None when it could not.
    let through_cache = ROUTES.try_with(|cache| {
        let mut cache = cache.try_borrow_mut().ok()?;
        let slot = match cache.find(producer, topic, generation) {
            Some(i) => i,
            None => match current_in_table(table, topic, generation) {
                Some((state, routes)) => cache.insert(CachedRoutes {
                    producer,
                    topic: state,
                    routes,
                }),
                None => return Some(None),
            },
        };
        let entry = &cache.entries[slot];
        Some(route.take().map(|r| r(&entry.topic, &entry.routes)))
    });
    match through_cache {
        Ok(Some(routed)) => routed,
        _ => {
            let (state, routes) = current_in_table(table, topic, generation)?;
            Some(route.take()?(&state, &routes))
        }
    }
}

/// `topic`'s state and routes from the table, if the routes are of `generation`.
fn current_in_table(
    table: &TopicTable,
    topic: &str,
    generation: u64,
) -> Option<(Arc<TopicState>, Arc<TopicRoutes>)> {
    let state = table.read().ok()?.get(topic)?.clone();
    let routes = state.routes()?;
    routes.is_current(generation).then_some((state, routes))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn same_name_compares_every_byte_and_the_length() {
        let names = [
            "",
            "a",
            "b",
            "ab",
            "orders",
            "orders.v2",
            "orders.v3",
            "sixteen-bytes-xx",
        ];
        for a in names {
            for b in names {
                assert_eq!(same_name(a, b), a == b, "{a:?} {b:?}");
            }
        }
        let long: String = "x".repeat(40);
        for i in 0..long.len() {
            let mut other = long.clone().into_bytes();
            other[i] = b'y';
            let other = String::from_utf8(other).unwrap_or_default();
            assert!(!same_name(&long, &other), "differs at {i}");
            assert!(!same_name(&long, &long[..i]), "prefix of {i}");
        }
        assert!(same_name(&long, &"x".repeat(40)));
    }

    #[test]
    fn topic_hasher_tells_names_apart_and_finds_them_again() {
        let names = [
            "",
            "a",
            "a\0",
            "orders",
            "orders.v2",
            "sixteen-bytes-xx",
            "sixteen-bytes-xy",
            "a-topic-name-longer-than-sixteen-bytes",
        ];
        let hashes: HashSet<u64> = names.iter().map(|n| TopicHasher.hash_one(n)).collect();
        assert_eq!(hashes.len(), names.len(), "a collision among {names:?}");
        assert_eq!(
            TopicHasher.hash_one("orders"),
            TopicHasher.hash_one(String::from("orders"))
        );
        let mut table: HashMap<String, usize, TopicHasher> = HashMap::default();
        for i in 0..1000 {
            table.insert(format!("topic-{i}"), i);
        }
        for i in 0..1000 {
            assert_eq!(table.get(format!("topic-{i}").as_str()), Some(&i));
        }
        assert_eq!(table.get("topic-1000"), None);
    }

    fn table_with(topic: &str, generation: u64, count: usize) -> (TopicTable, Arc<TopicState>) {
        let state = Arc::new(TopicState::new(topic));
        state.update(|r| {
            r.generation = generation;
            r.count = count;
        });
        let mut map = HashMap::default();
        map.insert(topic.to_string(), state.clone());
        (RwLock::new(map), state)
    }

    fn count_of(producer: u64, table: &TopicTable, topic: &str, generation: u64) -> Option<usize> {
        with_current_routes(producer, table, topic, generation, |_, r| r.count)
    }

    #[test]
    fn routes_of_another_generation_are_not_used() {
        let producer = next_producer_id();
        let (table, state) = table_with("t", 7, 3);
        assert_eq!(count_of(producer, &table, "t", 7), Some(3));
        // The metadata moved on: the cached routes (generation 7) no longer serve.
        assert_eq!(count_of(producer, &table, "t", 8), None);
        state.update(|r| {
            r.generation = 8;
            r.count = 5;
        });
        assert_eq!(count_of(producer, &table, "t", 8), Some(5));
        assert_eq!(count_of(producer, &table, "missing", 8), None);
    }

    #[test]
    fn producers_do_not_share_cached_routes() {
        let (first, second) = (next_producer_id(), next_producer_id());
        let (table_a, _) = table_with("t", 1, 3);
        let (table_b, _) = table_with("t", 1, 6);
        assert_eq!(count_of(first, &table_a, "t", 1), Some(3));
        assert_eq!(count_of(second, &table_b, "t", 1), Some(6));
        assert_eq!(count_of(first, &table_a, "t", 1), Some(3));
    }

    #[test]
    fn more_topics_than_the_cache_holds_are_all_routed() {
        let producer = next_producer_id();
        let names: Vec<String> = (0..CACHED_TOPICS * 2 + 1)
            .map(|i| format!("t{i}"))
            .collect();
        let mut map = HashMap::default();
        for (i, name) in names.iter().enumerate() {
            let state = Arc::new(TopicState::new(name));
            state.update(|r| {
                r.generation = 2;
                r.count = i + 1;
            });
            map.insert(name.clone(), state);
        }
        let table = RwLock::new(map);
        for _ in 0..3 {
            for (i, name) in names.iter().enumerate() {
                assert_eq!(count_of(producer, &table, name, 2), Some(i + 1));
            }
        }
        ROUTES.with(|c| assert_eq!(c.borrow().entries.len(), CACHED_TOPICS));
    }

    #[test]
    fn a_route_that_routes_again_uses_the_table() {
        let producer = next_producer_id();
        let (table, _) = table_with("t", 4, 2);
        let inner = with_current_routes(producer, &table, "t", 4, |_, outer| {
            outer.count + count_of(producer, &table, "t", 4).unwrap_or(100)
        });
        assert_eq!(inner, Some(4));
    }
}
