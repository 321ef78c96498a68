//! Decoding never allocates out of proportion to its input (issue 17, item 1): for every
//! API's request and response, every header and embedded data type, at every version, the
//! peak heap held while one input decodes (the decoded value included) stays within
//! [`RATIO`] times the input's length plus [`SLACK`] bytes, measured with a counting
//! global allocator.
//!
//! The inputs are hostile: encodings of values built by `arbitrary`, then, at every byte
//! offset, the same encoding with an array or string length replaced by a huge count
//! (0x7fffffff, classic and compact), by a count that just passes the "no more elements
//! than bytes" check, and with a long run of unknown tagged fields spliced in where an
//! empty tagged-field section may be; plus plain garbage. What decodes is data; what a
//! decoder reserves on the word of a length prefix must not exceed what the input holds.
//!
//! Decoded data itself is not bounded by 4x: an element in memory is often larger than
//! its least wire size (a `String` is 24 bytes, an empty compact string 1), so a large
//! valid message of minimal elements costs up to that ratio. One test pins that such a
//! message costs exactly its elements, with no room reserved beyond its count; another
//! that claims at three levels of nesting at once (each level may reserve up to the
//! bytes that remain; no schema nests arrays deeper than four) stay within the bound.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use arbitrary::Unstructured;
use bytes::{Bytes, BytesMut};
use kring::protocol::messages::*;
use kring::protocol::{ArbitraryVersion, Decode, Encode, Message, Request};

/// Peak heap per input byte a decode may hold.
const RATIO: usize = 4;
/// Heap a decode may hold beyond `RATIO` times its input: the decoded value of a small
/// message (a few arrays of a few structs) lives on the heap.
const SLACK: usize = 8 << 10;
/// Unknown tagged fields spliced into an input (3 bytes each on the wire).
const SPLICED_TAGS: u32 = 500;

struct Counting;

thread_local! {
    // Per thread, so other tests running in parallel do not count.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(by: usize) {
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + by;
        c.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn shrank(by: usize) {
    let _ = CURRENT.try_with(|c| c.set(c.get().saturating_sub(by)));
}

// SAFETY: defers every call to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            grew(new_size - layout.size());
        } else {
            shrank(layout.size() - new_size);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The most heap held at once above the level at the start, while `decode` runs and
/// until its result is dropped (so the decoded value counts).
fn peak_while<T>(decode: impl FnOnce() -> T) -> usize {
    let start = CURRENT.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let result = decode();
    let peak = PEAK.with(Cell::get);
    drop(result);
    peak - start
}

/// Deterministic bytes for `arbitrary` (xorshift).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn uvarint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A tagged-field section of `SPLICED_TAGS` empty fields with tags no schema uses.
fn many_unknown_tags() -> Vec<u8> {
    let mut out = Vec::new();
    uvarint(u64::from(SPLICED_TAGS), &mut out);
    for i in 0..SPLICED_TAGS {
        uvarint(u64::from(1000 + i), &mut out);
        uvarint(0, &mut out);
    }
    out
}

/// `enc` with the bytes at `at..at + len` replaced by `with`.
fn splice(enc: &[u8], at: usize, len: usize, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(enc.len() + with.len());
    out.extend_from_slice(&enc[..at]);
    out.extend_from_slice(with);
    out.extend_from_slice(&enc[(at + len).min(enc.len())..]);
    out
}

/// Every hostile variant of one valid encoding.
fn variants(enc: &[u8], tags: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = vec![("valid", enc.to_vec())];
    for at in 0..enc.len() {
        let rest = enc.len() - at;
        // Classic int32 counts: huge, and exactly the bytes that remain after it.
        out.push((
            "huge int32 count",
            splice(enc, at, 4, &0x7fff_ffffu32.to_be_bytes()),
        ));
        let passing = u32::try_from(rest.saturating_sub(4)).unwrap_or(u32::MAX);
        out.push((
            "passing int32 count",
            splice(enc, at, 4, &passing.to_be_bytes()),
        ));
        // Compact counts (N+1 as an unsigned varint): huge, and the bytes that remain.
        let mut huge = Vec::new();
        uvarint(0x8000_0000, &mut huge);
        out.push(("huge compact count", splice(enc, at, 1, &huge)));
        let mut passing = Vec::new();
        uvarint(rest as u64, &mut passing);
        out.push(("passing compact count", splice(enc, at, 1, &passing)));
        // An empty tagged-field section (a zero count) that becomes many unknown fields.
        if enc[at] == 0 {
            out.push(("unknown tags", splice(enc, at, 1, tags)));
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    inputs: usize,
    decoded: usize,
    /// Inputs with spliced unknown tagged fields that decoded.
    tags_decoded: usize,
    /// The largest peak above `RATIO` times the input seen, and where.
    largest_excess: (i64, String),
    /// Per kind of input, the one that exceeded the bound by the most: (peak, length,
    /// what it was).
    worst: std::collections::BTreeMap<String, (usize, usize, String)>,
}

impl Tally {
    /// Decodes `input` as `T` at `version`, checking the peak heap held.
    fn check<T: Message>(&mut self, input: Vec<u8>, version: i16, kind: &str, what: &str) {
        let len = input.len();
        let input = Bytes::from(input);
        let mut ok = false;
        let peak = peak_while(|| {
            let mut buf = input.clone();
            let decoded = T::decode(&mut buf, version);
            ok = decoded.is_ok();
            decoded
        });
        self.inputs += 1;
        self.decoded += usize::from(ok);
        if kind == "unknown tags" {
            self.tags_decoded += usize::from(ok);
        }
        let excess = |peak: usize, len: usize| peak as i64 - (RATIO * len) as i64;
        if excess(peak, len) > self.largest_excess.0 {
            let what = format!(
                "{} v{version} ({kind}, {what}): {peak} bytes for {len}",
                T::NAME
            );
            self.largest_excess = (excess(peak, len), what);
        }
        if peak > RATIO * len + SLACK
            && self
                .worst
                .get(kind)
                .is_none_or(|&(p, l, _)| excess(peak, len) > excess(p, l))
        {
            let what = format!("{} v{version} ({what})", T::NAME);
            self.worst.insert(kind.to_string(), (peak, len, what));
        }
    }
}

/// Checks `T` at every version; returns the tally.
fn check<T: Message + ArbitraryVersion>(tally: &mut Tally) {
    let tags = many_unknown_tags();
    for version in T::VERSIONS.min..=T::VERSIONS.max {
        for seed in 0..4u64 {
            let garbage = noise(seed + 1000, 16 + seed as usize * 60);
            tally.check::<T>(garbage, version, "garbage", &format!("seed {seed}"));
            let data = noise(seed, 64 + (seed as usize % 4) * 192);
            let Ok(value) = T::arbitrary_for_version(&mut Unstructured::new(&data), version) else {
                continue;
            };
            let mut enc = BytesMut::new();
            if value.encode(&mut enc, version).is_err() {
                continue;
            }
            for (i, (kind, input)) in variants(&enc, &tags).into_iter().enumerate() {
                tally.check::<T>(input, version, kind, &format!("seed {seed}, variant {i}"));
            }
        }
    }
}

/// A request type and its response type.
fn check_api<R: Request + ArbitraryVersion>(tally: &mut Tally)
where
    R::Response: ArbitraryVersion,
{
    check::<R>(tally);
    check::<R::Response>(tally);
}

macro_rules! every_message {
    (apis: [$($request:ty,)*] others: [$($other:ty,)*]) => {
        #[test]
        fn decoding_hostile_input_holds_at_most_four_times_its_size() {
            let mut tally = Tally::default();
            $(check_api::<$request>(&mut tally);)*
            $(check::<$other>(&mut tally);)*
            eprintln!(
                "{} inputs, {} decoded; the most heap above {RATIO} x input: {} bytes, {}",
                tally.inputs, tally.decoded, tally.largest_excess.0, tally.largest_excess.1
            );
            for (kind, (peak, len, what)) in &tally.worst {
                eprintln!(
                    "{kind}: decoding {what}: {len} input bytes held {peak} bytes of heap at \
                     the peak (more than {RATIO} x {len} + {SLACK})"
                );
            }
            assert!(tally.worst.is_empty(), "{} kinds of input over the bound", tally.worst.len());
            // The inputs must have reached the decoders: many decode in full.
            assert!(tally.inputs > 100_000, "{} inputs", tally.inputs);
            assert!(tally.decoded > 10_000, "{} of {} decoded", tally.decoded, tally.inputs);
            assert!(tally.tags_decoded > 1_000, "{} with many unknown tags decoded", tally.tags_decoded);
        }
    };
}

every_message! {
    apis: [
    ProduceRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    ControlledShutdownRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    FindCoordinatorRequest,
    JoinGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    SaslHandshakeRequest,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DeleteRecordsRequest,
    InitProducerIdRequest,
    OffsetForLeaderEpochRequest,
    AddPartitionsToTxnRequest,
    AddOffsetsToTxnRequest,
    EndTxnRequest,
    WriteTxnMarkersRequest,
    TxnOffsetCommitRequest,
    DescribeAclsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeConfigsRequest,
    AlterConfigsRequest,
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    SaslAuthenticateRequest,
    CreatePartitionsRequest,
    CreateDelegationTokenRequest,
    RenewDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    DescribeDelegationTokenRequest,
    DeleteGroupsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    OffsetDeleteRequest,
    DescribeClientQuotasRequest,
    AlterClientQuotasRequest,
    DescribeUserScramCredentialsRequest,
    AlterUserScramCredentialsRequest,
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    DescribeQuorumRequest,
    AlterPartitionRequest,
    UpdateFeaturesRequest,
    EnvelopeRequest,
    FetchSnapshotRequest,
    DescribeClusterRequest,
    DescribeProducersRequest,
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    UnregisterBrokerRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
    AllocateProducerIdsRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupDescribeRequest,
    ControllerRegistrationRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    AssignReplicasToDirsRequest,
    ListClientMetricsResourcesRequest,
    DescribeTopicPartitionsRequest,
    ShareGroupHeartbeatRequest,
    ShareGroupDescribeRequest,
    ShareFetchRequest,
    ShareAcknowledgeRequest,
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    WriteShareGroupStateRequest,
    DeleteShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ]
    others: [
    RequestHeader,
    ResponseHeader,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    DefaultPrincipalData,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
    ]
}

#[test]
fn a_dense_valid_array_holds_its_elements_and_no_more() {
    let n = 100_000;
    let request = DescribeGroupsRequest::default().with_groups(vec![String::new(); n]);
    let mut enc = BytesMut::new();
    request.encode(&mut enc, 5).unwrap();
    let input = enc.freeze();
    let peak = peak_while(|| DescribeGroupsRequest::decode(&mut input.clone(), 5).unwrap());
    let elements = n * std::mem::size_of::<String>();
    eprintln!(
        "{n} empty strings: {} input bytes, {peak} bytes of heap at the peak ({:.1}x)",
        input.len(),
        peak as f64 / input.len() as f64
    );
    assert!(peak >= elements, "{peak} < {elements}");
    assert!(
        peak <= elements + SLACK,
        "{peak} bytes for {elements} of elements"
    );
}

#[test]
fn counts_claimed_at_every_level_of_nesting_stay_within_the_bound() {
    // MetadataResponse v12 whose topics, the first topic's partitions and that
    // partition's replicas each claim as many elements as the bytes that follow could
    // hold, over 64 KiB of 0xff (read as replica ids of -1 until the input ends).
    let junk = 64 << 10;
    let mut input = Vec::new();
    input.extend_from_slice(&0i32.to_be_bytes()); // throttle_time_ms
    input.push(1); // brokers: empty
    input.push(0); // cluster_id: null
    input.extend_from_slice(&0i32.to_be_bytes()); // controller_id
    uvarint((junk / 26 + 1) as u64, &mut input); // topics
    input.extend_from_slice(&0i16.to_be_bytes()); // error_code
    input.push(0); // name: null
    input.extend_from_slice(&[0; 16]); // topic_id
    input.push(0); // is_internal
    uvarint((junk / 18 + 1) as u64, &mut input); // partitions
    input.extend_from_slice(&[0; 14]); // error_code, partition_index, leader_id, leader_epoch
    uvarint((junk / 4 + 1) as u64, &mut input); // replica_nodes
    input.extend(std::iter::repeat_n(0xff, junk));
    let len = input.len();
    let input = Bytes::from(input);
    let peak = peak_while(|| MetadataResponse::decode(&mut input.clone(), 12));
    eprintln!("nested claims: {len} input bytes, {peak} bytes of heap at the peak");
    assert!(
        MetadataResponse::decode(&mut input.clone(), 12).is_err(),
        "the claimed elements are not there"
    );
    assert!(
        peak <= RATIO * len + SLACK,
        "{len} input bytes held {peak} bytes of heap at the peak"
    );
}
