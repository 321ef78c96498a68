//! Builder ↔ reader round trips for every codec, known-answer bytes, and hostile
//! input against the batch reader.

use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq)]
struct Rec {
    ts: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// The batch of `recs` sealed with `codec`, and the codec it ended up with. Sealed
/// every way, into a second arena, in place, and moved to a buffer offered once the
/// batch's final length is known (compressed or not), which must all give the same
/// bytes.
fn build(recs: &[Rec], options: BatchOptions, codec: Compression) -> (Vec<u8>, Compression) {
    let mut c = Compressor::new();
    let (sealed, spare) = fill(recs, options)
        .seal_compressed(codec, &mut c, Vec::with_capacity(1 << 20))
        .unwrap();
    assert!(spare.is_empty());
    let used = sealed.compression();
    let bytes = sealed.into_inner();
    let mut scratch = vec![7u8; 64];
    let in_place = fill(recs, options)
        .seal_compressed_in_place(codec, &mut c, &mut scratch)
        .unwrap();
    assert_eq!(in_place.compression(), used, "{codec:?}");
    assert_eq!(in_place.into_inner(), bytes, "{codec:?} in place");
    let mut offered = None;
    let moved = fill(recs, options)
        .seal_compressed_moving(codec, &mut c, &mut scratch, |arena, len| {
            offered = Some((arena.len(), len));
            Some(vec![5u8; 3])
        })
        .unwrap();
    // Compressed or not, the batch is offered a new home at its exact length; a
    // compressed one only once it has shrunk.
    let (arena_len, len) = offered.expect("offered a new home");
    assert_eq!(len, bytes.len(), "{codec:?}: the exact length");
    if used == Compression::None {
        assert_eq!(arena_len, len, "{codec:?}: offered the arena as it is");
    } else {
        assert!(arena_len > len, "{codec:?}: offered once it has shrunk");
    }
    assert_eq!(moved.into_inner(), bytes, "{codec:?} moved");
    let deferred = options.with_deferred_crc(true);
    let moved = fill(recs, deferred)
        .seal_compressed_moving(codec, &mut c, &mut scratch, |_, _| Some(Vec::new()))
        .unwrap();
    assert_eq!(moved.into_inner(), bytes, "{codec:?} moved, CRC deferred");
    let (later, _) = fill(recs, deferred)
        .seal_compressed(codec, &mut c, Vec::with_capacity(1 << 20))
        .unwrap();
    assert_eq!(later.into_inner(), bytes, "{codec:?} with the CRC deferred");
    let later = fill(recs, deferred)
        .seal_compressed_in_place(codec, &mut c, &mut scratch)
        .unwrap();
    assert_eq!(
        later.into_inner(),
        bytes,
        "{codec:?} in place, CRC deferred"
    );
    (bytes, used)
}

fn fill(recs: &[Rec], options: BatchOptions) -> BatchBuilder<Vec<u8>> {
    let mut b = BatchBuilder::new(Vec::with_capacity(1 << 20), options).unwrap();
    for r in recs {
        let headers: Vec<Header<'_>> = r
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: k,
                value: v.as_deref(),
            })
            .collect();
        let size = b.record_size(r.ts, r.key.as_deref(), r.value.as_deref(), &headers);
        let before = b.size();
        b.append(r.ts, r.key.as_deref(), r.value.as_deref(), &headers)
            .unwrap();
        assert_eq!(b.size() - before, size, "record_size is exact");
    }
    b
}

fn read(bytes: &[u8]) -> Vec<Rec> {
    let batch = RecordBatchRef::new(bytes).unwrap();
    batch.verify_crc().unwrap();
    let mut d = Decompressor::new(4 << 20);
    let mut scratch = Vec::new();
    let out: Vec<Rec> = batch
        .decompress_records(&mut d, &mut scratch)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            Rec {
                ts: r.timestamp(),
                key: r.key().map(<[u8]>::to_vec),
                value: r.value().map(<[u8]>::to_vec),
                headers: r
                    .headers()
                    .map(|h| {
                        let h = h.unwrap();
                        (h.key_str().unwrap().to_owned(), h.value.map(<[u8]>::to_vec))
                    })
                    .collect(),
            }
        })
        .collect();
    assert_eq!(out.len(), batch.record_count() as usize);
    out
}

fn rec(ts: i64, key: &[u8], value: &[u8]) -> Rec {
    Rec {
        ts,
        key: Some(key.to_vec()),
        value: Some(value.to_vec()),
        headers: vec![],
    }
}

#[test]
fn known_answer_single_record_batch() {
    // One record, key "k", value "v", no headers, timestamp 0, default options.
    let (bytes, _) = build(
        &[rec(0, b"k", b"v")],
        BatchOptions::default(),
        Compression::None,
    );
    let record: &[u8] = &[
        0x10, // length 8 (zig-zag)
        0x00, // attributes
        0x00, // timestamp delta
        0x00, // offset delta
        0x02, b'k', // key
        0x02, b'v', // value
        0x00, // headers
    ];
    assert_eq!(&bytes[61..], record);
    assert_eq!(bytes.len(), 61 + record.len());
    let b = RecordBatchRef::new(&bytes).unwrap();
    assert_eq!(b.base_offset(), 0);
    assert_eq!(b.batch_length() as usize, bytes.len() - 12);
    assert_eq!(b.partition_leader_epoch(), -1);
    assert_eq!(b.magic(), 2);
    assert_eq!(b.attributes(), 0);
    assert_eq!(b.last_offset_delta(), 0);
    assert_eq!(b.base_timestamp(), 0);
    assert_eq!(b.max_timestamp(), 0);
    assert_eq!(b.producer_id(), -1);
    assert_eq!(b.producer_epoch(), -1);
    assert_eq!(b.base_sequence(), -1);
    assert_eq!(b.record_count(), 1);
    // CRC-32C (Castagnoli) over attributes..end, computed independently.
    assert_eq!(b.crc(), crc32c_reference(&bytes[21..]));
}

/// Bitwise CRC-32C, to check the crate's hardware path against the definition.
fn crc32c_reference(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn header_fields_and_flags() {
    let options = BatchOptions::default()
        .with_base_offset(1000)
        .with_producer(77, 3, 42)
        .with_transactional(true)
        .with_partition_leader_epoch(9)
        .with_timestamp_type(TimestampType::LogAppendTime);
    let recs = [
        rec(500, b"a", b"1"),
        rec(400, b"b", b"2"),
        rec(900, b"c", b"3"),
    ];
    let (bytes, _) = build(&recs, options, Compression::None);
    let b = RecordBatchRef::new(&bytes).unwrap();
    assert_eq!(b.base_offset(), 1000);
    assert_eq!(b.last_offset(), 1002);
    assert_eq!(b.next_offset(), 1003);
    assert_eq!(b.producer_id(), 77);
    assert_eq!(b.producer_epoch(), 3);
    assert_eq!(b.base_sequence(), 42);
    assert!(b.is_transactional());
    assert!(!b.is_control());
    assert_eq!(b.partition_leader_epoch(), 9);
    assert_eq!(b.base_timestamp(), 500);
    assert_eq!(b.max_timestamp(), 900);
    assert_eq!(b.timestamp_type(), TimestampType::LogAppendTime);
    // Log-append time: every record reports the batch's max timestamp.
    let offsets: Vec<(i64, i64)> = b
        .records()
        .unwrap()
        .map(|r| r.map(|r| (r.offset(), r.timestamp())).unwrap())
        .collect();
    assert_eq!(offsets, vec![(1000, 900), (1001, 900), (1002, 900)]);
}

#[test]
fn producer_state_after_seal_keeps_crc_valid() {
    let mut b = BatchBuilder::new(Vec::with_capacity(4096), BatchOptions::default()).unwrap();
    b.append(1, None, Some(b"x"), &[]).unwrap();
    let mut sealed = b.seal().unwrap();
    sealed.set_producer_state(5, 1, 100);
    sealed.set_base_offset(7);
    sealed.set_partition_leader_epoch(3);
    let batch = sealed.as_batch().unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence()
        ),
        (5, 1, 100)
    );
    assert_eq!(batch.base_offset(), 7);
}

#[test]
fn a_deferred_crc_comes_out_as_the_eager_one_once_the_producer_state_is_set() {
    let sealed = |deferred: bool| {
        let options = BatchOptions::default().with_deferred_crc(deferred);
        let mut b = BatchBuilder::new(Vec::with_capacity(4096), options).unwrap();
        b.append(1, Some(b"k"), Some(b"x"), &[]).unwrap();
        b.append(2, None, Some(b"y"), &[]).unwrap();
        b.seal().unwrap()
    };
    let mut eager = sealed(false);
    let mut deferred = sealed(true);
    eager.set_producer_state(9, 2, 40);
    deferred.set_producer_state(9, 2, 40);
    deferred.as_batch().unwrap().verify_crc().unwrap();
    assert_eq!(deferred.into_inner(), eager.into_inner());
}

#[test]
fn control_batches() {
    let options = BatchOptions::default()
        .with_control(true)
        .with_transactional(true)
        .with_producer(10, 0, -1);
    let mut b = BatchBuilder::new(Vec::with_capacity(1024), options).unwrap();
    assert_eq!(
        b.append(1, None, Some(b"x"), &[]),
        Err(BuildError::ControlMismatch)
    );
    b.append_control(1, ControlRecord::marker(true, 5)).unwrap();
    let sealed = b.seal().unwrap();
    let batch = sealed.as_batch().unwrap();
    batch.verify_crc().unwrap();
    assert!(batch.is_control());
    let marker = batch.control_record().unwrap().unwrap();
    assert_eq!(marker.kind, ControlRecordType::Commit);
    assert_eq!(marker.coordinator_epoch, Some(5));
    // Byte layout of the marker: key (version 0, type 1), value (version 0, epoch 5).
    let r = batch.records().unwrap().next().unwrap().unwrap();
    assert_eq!(r.key(), Some(&[0, 0, 0, 1][..]));
    assert_eq!(r.value(), Some(&[0, 0, 0, 0, 0, 5][..]));

    let mut data = BatchBuilder::new(Vec::with_capacity(1024), BatchOptions::default()).unwrap();
    assert_eq!(
        data.append_control(1, ControlRecord::marker(false, 1)),
        Err(BuildError::ControlMismatch)
    );
    data.append(1, None, None, &[]).unwrap();
    assert_eq!(
        data.seal().unwrap().as_batch().unwrap().control_record(),
        Ok(None)
    );
}

#[test]
fn full_arena_refuses_without_writing() {
    let mut b = BatchBuilder::new(Vec::with_capacity(100), BatchOptions::default()).unwrap();
    let value = [7u8; 20];
    let mut n = 0;
    loop {
        let size = b.record_size(0, None, Some(&value), &[]);
        let before = b.size();
        match b.append(0, None, Some(&value), &[]) {
            Ok(()) => n += 1,
            Err(BuildError::Full { needed, remaining }) => {
                assert_eq!(needed, size);
                assert!(!b.fits(size));
                assert_eq!(remaining, b.remaining());
                assert_eq!(b.size(), before);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(n, 1);
    let sealed = b.seal().unwrap();
    assert!(sealed.len() <= 100);
    assert_eq!(read(sealed.as_bytes()).len(), 1);

    assert_eq!(
        BatchBuilder::new(Vec::with_capacity(10), BatchOptions::default()).err(),
        Some(BuildError::ArenaTooSmall(10))
    );
    let empty = BatchBuilder::new(Vec::with_capacity(100), BatchOptions::default()).unwrap();
    assert_eq!(empty.seal().err(), Some(BuildError::Empty));
}

#[test]
fn incompressible_batches_fall_back_to_uncompressed() {
    let mut x = 99u32;
    let noise: Vec<u8> = (0..4000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect();
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let (bytes, used) = build(&[rec(0, b"", &noise)], BatchOptions::default(), codec);
        assert_eq!(used, Compression::None, "{codec:?}");
        assert_eq!(read(&bytes)[0].value.as_deref(), Some(&noise[..]));
    }
    // Compressible data really is compressed.
    let zeros = vec![0u8; 4000];
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let (bytes, used) = build(&[rec(0, b"", &zeros)], BatchOptions::default(), codec);
        assert_eq!(used, codec);
        assert!(bytes.len() < 1000, "{codec:?}: {}", bytes.len());
        assert_eq!(
            RecordBatchRef::new(&bytes).unwrap().compression(),
            Ok(codec)
        );
        assert_eq!(read(&bytes)[0].value.as_deref(), Some(&zeros[..]));
    }
}

#[test]
fn compressed_batch_needs_a_decompressor() {
    let zeros = vec![0u8; 1000];
    let (bytes, _) = build(
        &[rec(0, b"", &zeros)],
        BatchOptions::default(),
        Compression::Lz4,
    );
    let batch = RecordBatchRef::new(&bytes).unwrap();
    assert_eq!(
        batch.records().err(),
        Some(RecordError::Compressed(Compression::Lz4))
    );
    // A cap below the batch's size is a clear error, not an allocation.
    let mut scratch = Vec::new();
    let err = batch
        .decompress_records(&mut Decompressor::new(100), &mut scratch)
        .unwrap_err();
    assert!(matches!(
        err,
        RecordError::Compression(CompressionError::OutputTooLarge { cap: 100, .. })
    ));
}

#[test]
fn batches_walks_and_stops_at_a_partial_batch() {
    let (a, _) = build(
        &[rec(1, b"a", b"1")],
        BatchOptions::default(),
        Compression::None,
    );
    let (b, _) = build(
        &[rec(2, b"b", b"2"), rec(3, b"c", b"3")],
        BatchOptions::default().with_base_offset(1),
        Compression::Zstd,
    );
    let mut all = a.clone();
    all.extend_from_slice(&b);
    for cut in 0..=all.len() {
        let input = &all[..cut];
        let mut batches = Batches::new(input).verify_crc(true);
        let n = batches.by_ref().inspect(|b| assert!(b.is_ok())).count();
        let expect = if cut >= all.len() {
            2
        } else if cut >= a.len() {
            1
        } else {
            0
        };
        assert_eq!(n, expect, "cut {cut}");
        let consumed = [0, a.len(), all.len()][expect];
        assert_eq!(batches.remainder().len(), cut - consumed);
    }
}

#[test]
fn hostile_batches_are_errors() {
    let recs = [rec(1, b"key", b"value"), rec(2, b"k2", b"v2")];
    let (good, _) = build(&recs, BatchOptions::default(), Compression::None);

    // CRC mismatch.
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 0xff;
    let b = RecordBatchRef::new(&bad).unwrap();
    assert!(matches!(
        b.verify_crc(),
        Err(RecordError::CrcMismatch { .. })
    ));
    assert!(matches!(
        Batches::new(&bad).verify_crc(true).next(),
        Some(Err(RecordError::CrcMismatch { .. }))
    ));

    // A record count larger than the bytes allow.
    let mut bad = good.clone();
    bad[57..61].copy_from_slice(&1_000_000i32.to_be_bytes());
    let err = RecordBatchRef::new(&bad).unwrap().records().unwrap_err();
    assert!(matches!(
        err,
        RecordError::RecordCount {
            count: 1_000_000,
            ..
        }
    ));
    // Negative count.
    bad[57..61].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(matches!(
        RecordBatchRef::new(&bad).unwrap().records(),
        Err(RecordError::RecordCount { count: -1, .. })
    ));
    // A count one larger than the records present: the last read runs out.
    bad[57..61].copy_from_slice(&3i32.to_be_bytes());
    let results: Vec<_> = RecordBatchRef::new(&bad)
        .unwrap()
        .records()
        .unwrap()
        .collect();
    assert_eq!(results.len(), 3);
    assert!(results[2].is_err());
    // A count one smaller: trailing bytes.
    bad[57..61].copy_from_slice(&1i32.to_be_bytes());
    let results: Vec<_> = RecordBatchRef::new(&bad)
        .unwrap()
        .records()
        .unwrap()
        .collect();
    assert!(matches!(results[1], Err(RecordError::TrailingBytes(_))));

    // Record length past the end of the batch.
    let mut bad = good.clone();
    bad[61] = 0x7e; // 63
    let err = RecordBatchRef::new(&bad)
        .unwrap()
        .records()
        .unwrap()
        .next()
        .unwrap();
    assert!(matches!(
        err,
        Err(RecordError::Truncated { what: "record", .. })
    ));
    // Overlong varint as a record length.
    let mut bad = good.clone();
    bad[61..67].copy_from_slice(&[0xff; 6]);
    let err = RecordBatchRef::new(&bad)
        .unwrap()
        .records()
        .unwrap()
        .next()
        .unwrap();
    assert!(matches!(err, Err(RecordError::Varint(_))));
    // Negative key length other than -1.
    let mut bad = good.clone();
    bad[65] = 0x03; // zig-zag -2
    let err = RecordBatchRef::new(&bad)
        .unwrap()
        .records()
        .unwrap()
        .next()
        .unwrap();
    assert!(matches!(err, Err(RecordError::InvalidLength { .. })));
    // Key length past the record.
    let mut bad = good.clone();
    bad[65] = 0x40; // 32
    let err = RecordBatchRef::new(&bad)
        .unwrap()
        .records()
        .unwrap()
        .next()
        .unwrap();
    assert!(matches!(err, Err(RecordError::Truncated { .. })));

    // Batch length below the header, negative, and wrong magic.
    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        RecordBatchRef::parse(&bad),
        Err(RecordError::InvalidLength { .. })
    ));
    bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(RecordBatchRef::parse(&bad).is_err());
    let mut bad = good.clone();
    bad[16] = 7;
    assert_eq!(
        RecordBatchRef::parse(&bad).err(),
        Some(RecordError::UnsupportedMagic(7))
    );
    assert!(matches!(
        Batches::new(&bad).next(),
        Some(Err(RecordError::UnsupportedMagic(7)))
    ));
    // Unknown codec.
    let mut bad = good.clone();
    bad[22] = 6;
    assert_eq!(
        RecordBatchRef::new(&bad).unwrap().records().err(),
        Some(RecordError::UnknownCompression(6))
    );
}

#[test]
fn garbage_compressed_records_are_errors() {
    let zeros = vec![0u8; 2000];
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let (mut bytes, _) = build(&[rec(0, b"", &zeros)], BatchOptions::default(), codec);
        let len = bytes.len();
        for b in &mut bytes[61..len] {
            *b = b.wrapping_mul(31).wrapping_add(7);
        }
        let batch = RecordBatchRef::new(&bytes).unwrap();
        let mut scratch = Vec::new();
        if let Ok(records) = batch.decompress_records(&mut Decompressor::new(1 << 16), &mut scratch)
        {
            for r in records {
                let _ = r;
            }
        }
    }
}

fn recs_strategy() -> impl Strategy<Value = Vec<Rec>> {
    let bytes = proptest::collection::vec(any::<u8>(), 0..64);
    let header = ("[a-z]{0,8}", proptest::option::of(bytes.clone()));
    let rec = (
        -1000i64..1_000_000,
        proptest::option::of(bytes.clone()),
        proptest::option::of(prop_oneof![bytes, Just(vec![b'x'; 300])]),
        proptest::collection::vec(header, 0..3),
    )
        .prop_map(|(ts, key, value, headers)| Rec {
            ts: 1_700_000_000_000 + ts,
            key,
            value,
            headers,
        });
    proptest::collection::vec(rec, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn prop_round_trip_every_codec(
        recs in recs_strategy(),
        codec in proptest::sample::select(Compression::ALL.to_vec()),
        base in 0i64..1 << 40,
        transactional: bool,
    ) {
        let options = BatchOptions::default()
            .with_base_offset(base)
            .with_transactional(transactional);
        let (bytes, _) = build(&recs, options, codec);
        let batch = RecordBatchRef::new(&bytes).unwrap();
        prop_assert_eq!(batch.base_offset(), base);
        prop_assert_eq!(batch.record_count() as usize, recs.len());
        prop_assert_eq!(batch.is_transactional(), transactional);
        prop_assert_eq!(batch.max_timestamp(), recs.iter().map(|r| r.ts).max().unwrap());
        prop_assert_eq!(read(&bytes), recs);
    }

    #[test]
    fn prop_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut d = Decompressor::new(1 << 16);
        let mut scratch = Vec::new();
        for b in Batches::new(&bytes) {
            let Ok(b) = b else { break };
            let _ = b.verify_crc();
            if let Ok(records) = b.records(&mut d, &mut scratch) {
                for r in records.flatten() {
                    for h in r.headers() { let _ = h; }
                }
            }
        }
    }

    #[test]
    fn prop_mutated_batches_never_panic(
        recs in recs_strategy(),
        codec in proptest::sample::select(Compression::ALL.to_vec()),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let (mut bytes, _) = build(&recs, BatchOptions::default(), codec);
        for (i, x) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= x;
        }
        let mut d = Decompressor::new(1 << 20);
        let mut scratch = Vec::new();
        for b in Batches::new(&bytes) {
            let Ok(b) = b else { break };
            if let Ok(records) = b.records(&mut d, &mut scratch) {
                for r in records.flatten() {
                    for h in r.headers() { let _ = h; }
                }
            }
        }
    }
}
