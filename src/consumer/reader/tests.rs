//! The partition reader driven by hand with chunks built in the test.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::buf::MemoryBudget;
use crate::record::{
    BatchBuilder, BatchOptions, Compression, Compressor, ControlRecord, LegacyWriter, TimestampType,
};

const PRODUCER: i64 = 7;

/// A data batch of `count` records from `base`, values "v{offset}".
fn data(base: i64, count: usize, transactional: bool) -> Vec<u8> {
    let options = BatchOptions::default()
        .with_base_offset(base)
        .with_producer(PRODUCER, 0, 0)
        .with_transactional(transactional);
    let mut b = BatchBuilder::new(Vec::with_capacity(4096), options).unwrap();
    for i in 0..count {
        let value = format!("v{}", base + i as i64);
        b.append(1, None, Some(value.as_bytes()), &[]).unwrap();
    }
    b.seal().unwrap().into_inner()
}

/// A transaction marker of `PRODUCER` at `offset`.
fn marker(offset: i64, commit: bool) -> Vec<u8> {
    let options = BatchOptions::default()
        .with_base_offset(offset)
        .with_producer(PRODUCER, 0, -1)
        .with_transactional(true)
        .with_control(true);
    let mut b = BatchBuilder::new(Vec::with_capacity(4096), options).unwrap();
    b.append_control(1, ControlRecord::marker(commit, 0))
        .unwrap();
    b.seal().unwrap().into_inner()
}

/// A chunk of the concatenated `batches`, with the spans the fetcher would find.
fn chunk(batches: &[Vec<u8>], aborted: Vec<(i64, i64)>) -> Chunk {
    let records = Bytes::from(batches.concat());
    // The spans as the fetcher finds them.
    let (spans, complete) = crate::engine::fetch::complete_batches(&records, |e| panic!("{e}"));
    assert_eq!(complete, records.len());
    Chunk {
        records,
        batches: spans,
        aborted,
        _permit: Arc::new(MemoryBudget::unlimited().try_acquire(1).unwrap()),
    }
}

/// Every value the reader hands out until it needs another chunk.
fn read_values(reader: &mut PartitionReader) -> Vec<String> {
    let mut values = Vec::new();
    loop {
        match reader.advance() {
            Advance::NeedChunk => return values,
            Advance::Error(e) => panic!("reader failed: {e}"),
            Advance::Ready => {
                let batch = reader.take_ready().unwrap().unwrap();
                for r in batch.records() {
                    let r = r.unwrap();
                    values.push(String::from_utf8(r.value().unwrap().to_vec()).unwrap());
                }
            }
        }
    }
}

#[test]
fn a_reset_forgets_aborted_transactions() {
    let mut reader = PartitionReader::new(0, true, true, 1 << 20, MemoryBudget::unlimited());
    // A transaction of PRODUCER opens at 0 and is aborted; the abort marker lies past
    // what this chunk holds.
    reader.push_chunk(chunk(&[data(0, 2, true)], vec![(PRODUCER, 0)]));
    assert_eq!(read_values(&mut reader), Vec::<String>::new());
    // OFFSET_OUT_OF_RANGE: the reset policy moves the position past the abort marker.
    reader.reset(10);
    // The same producer's next transaction is committed: it must be read.
    reader.push_chunk(chunk(&[data(10, 2, true), marker(12, true)], vec![]));
    assert_eq!(read_values(&mut reader), ["v10", "v11"]);
    assert_eq!(reader.position(), 13);
}

/// A batch of `values` from `base`, compressed with `codec` when it is not `None`.
fn batch_of(base: i64, values: &[&[u8]], codec: Compression) -> Vec<u8> {
    let options = BatchOptions::default().with_base_offset(base);
    let size: usize = values.iter().map(|v| v.len() + 32).sum();
    let mut b = BatchBuilder::new(Vec::with_capacity(size + 4096), options).unwrap();
    for v in values {
        b.append(1, None, Some(v), &[]).unwrap();
    }
    if codec == Compression::None {
        return b.seal().unwrap().into_inner();
    }
    let (sealed, _) = b
        .seal_compressed(codec, &mut Compressor::new(), Vec::with_capacity(1 << 20))
        .unwrap();
    assert_eq!(sealed.compression(), codec);
    sealed.into_inner()
}

/// Recomputes a v2 batch's CRC after the test changed its bytes.
fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// What one read gives: the values handed out, or the corrupt batch's offsets.
fn read_once(reader: &mut PartitionReader) -> Result<Vec<String>, (i64, i64)> {
    match reader.advance() {
        Advance::NeedChunk => Ok(Vec::new()),
        Advance::Error(Error::CorruptBatch {
            base_offset,
            last_offset,
            ..
        }) => Err((base_offset, last_offset)),
        Advance::Error(e) => panic!("unexpected error: {e}"),
        Advance::Ready => match reader.take_messages(&Arc::from("t"), 0, |_| {}).unwrap() {
            Ok(messages) => Ok(messages
                .iter()
                .map(|m| String::from_utf8(m.value.clone().unwrap().to_vec()).unwrap())
                .collect()),
            Err(Error::CorruptBatch {
                base_offset,
                last_offset,
                ..
            }) => Err((base_offset, last_offset)),
            Err(e) => panic!("unexpected error: {e}"),
        },
    }
}

#[test]
fn a_batch_failing_its_crc_is_reported_until_skipped() {
    let mut bad = batch_of(2, &[b"v2", b"v3"], Compression::None);
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    let good = [
        batch_of(0, &[b"v0", b"v1"], Compression::None),
        bad,
        batch_of(4, &[b"v4"], Compression::None),
    ];
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&good, vec![]));
    assert_eq!(read_once(&mut reader), Ok(vec!["v0".into(), "v1".into()]));
    for _ in 0..3 {
        assert_eq!(read_once(&mut reader), Err((2, 3)));
        assert_eq!(reader.position(), 2);
    }
    assert_eq!(reader.skip_bad_batch(), Some((2, 3)));
    assert_eq!(reader.position(), 4);
    assert_eq!(read_once(&mut reader), Ok(vec!["v4".into()]));
    assert_eq!(read_once(&mut reader), Ok(vec![]));
    // Nothing reported bad: nothing to skip.
    assert_eq!(reader.skip_bad_batch(), None);
}

#[test]
fn a_batch_that_inflates_past_the_cap_is_reported_until_skipped() {
    let big = vec![b'x'; 64 << 10];
    let batches = [
        batch_of(0, &[b"v0"], Compression::None),
        batch_of(1, &[&big], Compression::Zstd),
        batch_of(2, &[b"v2"], Compression::None),
    ];
    // The cap (the consumer's fetch_max_decompressed_bytes) is below 64 KiB.
    let mut reader = PartitionReader::new(0, false, true, 16 << 10, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&batches, vec![]));
    assert_eq!(read_once(&mut reader), Ok(vec!["v0".into()]));
    for _ in 0..3 {
        assert_eq!(read_once(&mut reader), Err((1, 1)));
        assert_eq!(reader.position(), 1);
    }
    assert_eq!(reader.skip_bad_batch(), Some((1, 1)));
    assert_eq!(read_once(&mut reader), Ok(vec!["v2".into()]));

    // With a cap above its size the same batch reads.
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&batches, vec![]));
    assert_eq!(read_once(&mut reader), Ok(vec!["v0".into()]));
    assert_eq!(read_once(&mut reader).unwrap()[0].len(), big.len());
}

#[test]
fn owned_messages_before_a_bad_record_come_first_then_the_error() {
    let mut b = batch_of(0, &[b"AAAA", b"BBBB", b"CCCC"], Compression::None);
    // The second record claims a header it does not have; the CRC still matches.
    let at = b.windows(4).position(|w| w == b"BBBB").unwrap() + 4;
    assert_eq!(b[at], 0, "header count of the second record");
    b[at] = 2; // zigzag varint 1
    fix_crc(&mut b);
    let batches = [b, batch_of(3, &[b"DDDD"], Compression::None)];
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&batches, vec![]));
    assert_eq!(read_once(&mut reader), Ok(vec!["AAAA".into()]));
    assert_eq!(reader.position(), 1);
    for _ in 0..3 {
        assert_eq!(read_once(&mut reader), Err((0, 2)));
        assert_eq!(reader.position(), 1);
    }
    assert_eq!(reader.skip_bad_batch(), Some((0, 2)));
    assert_eq!(reader.position(), 3);
    assert_eq!(read_once(&mut reader), Ok(vec!["DDDD".into()]));
}

/// Offset, timestamp, key and value of each message.
type Seen = Vec<(i64, i64, Option<Vec<u8>>, Option<Vec<u8>>)>;

fn read_messages(reader: &mut PartitionReader) -> Seen {
    let mut seen = Vec::new();
    loop {
        match reader.advance() {
            Advance::NeedChunk => return seen,
            Advance::Error(e) => panic!("reader failed: {e}"),
            Advance::Ready => {
                for m in reader
                    .take_messages(&Arc::from("t"), 0, |_| {})
                    .unwrap()
                    .unwrap()
                {
                    assert!(m.headers.is_empty());
                    let bytes = |b: Option<Bytes>| b.map(|b| b.to_vec());
                    seen.push((m.offset, m.timestamp, bytes(m.key), bytes(m.value)));
                }
            }
        }
    }
}

/// Legacy message sets as an old log segment holds them, then a v2 batch: magic 0
/// plain messages, a magic 1 gzip wrapper (relative inner offsets), a magic 0 lz4
/// wrapper (absolute inner offsets, the KAFKA-3160 checksum) and a magic 1 snappy
/// wrapper with log-append time.
fn legacy_log() -> (Vec<Vec<u8>>, Seen) {
    let mut sets = Vec::new();
    let mut want: Seen = Vec::new();
    let mut v0 = LegacyWriter::new(0).unwrap();
    for o in 0..3 {
        let key = (o == 1).then(|| b"k1".to_vec());
        v0.append(o, 0, key.as_deref(), Some(format!("m{o}").as_bytes()));
        want.push((o, -1, key, Some(format!("m{o}").into_bytes())));
    }
    sets.push(v0.finish());
    let mut gzip = LegacyWriter::new(1).unwrap();
    for o in 3..6 {
        gzip.append(o, 1000 + o, Some(b"k"), Some(format!("m{o}").as_bytes()));
        want.push((
            o,
            1000 + o,
            Some(b"k".to_vec()),
            Some(format!("m{o}").into_bytes()),
        ));
    }
    sets.push(
        gzip.finish_compressed(Compression::Gzip, 1, TimestampType::CreateTime)
            .unwrap(),
    );
    let mut lz4 = LegacyWriter::new(0).unwrap();
    for o in 6..8 {
        lz4.append(o, 0, None, Some(format!("m{o}").as_bytes()));
        want.push((o, -1, None, Some(format!("m{o}").into_bytes())));
    }
    sets.push(
        lz4.finish_compressed(Compression::Lz4, 0, TimestampType::CreateTime)
            .unwrap(),
    );
    let mut snappy = LegacyWriter::new(1).unwrap();
    for o in 8..10 {
        snappy.append(o, 5, None, None);
        want.push((o, 777, None, None));
    }
    sets.push(
        snappy
            .finish_compressed(Compression::Snappy, 777, TimestampType::LogAppendTime)
            .unwrap(),
    );
    sets.push(batch_of(10, &[b"v10"], Compression::None));
    want.push((10, 1, None, Some(b"v10".to_vec())));
    (sets, want)
}

#[test]
fn legacy_message_sets_read_like_batches() {
    let (sets, want) = legacy_log();
    let mut reader = PartitionReader::new(0, true, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&sets, vec![]));
    assert_eq!(read_messages(&mut reader), want);
    assert_eq!(reader.position(), 11);

    // Starting inside a wrapper hands out only what is at or after the position.
    let mut reader = PartitionReader::new(4, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&sets, vec![]));
    assert_eq!(read_messages(&mut reader), want[4..]);

    // Borrowed, uncompressed legacy records point into the fetch buffer (zero copy).
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    let c = chunk(&sets, vec![]);
    let buffer = c.records.clone();
    reader.push_chunk(c);
    assert!(matches!(reader.advance(), Advance::Ready));
    let batch = reader.take_ready().unwrap().unwrap();
    assert!(batch.header().is_none());
    let first = batch.records().next().unwrap().unwrap();
    let value = first.value().unwrap();
    assert_eq!(value, b"m0");
    assert!(buffer.as_ptr_range().contains(&value.as_ptr()));
}

#[test]
fn a_corrupt_legacy_message_is_reported_until_skipped() {
    let (mut sets, want) = legacy_log();
    let gzip = &mut sets[1];
    let last = gzip.len() - 1;
    gzip[last] ^= 1;
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&sets, vec![]));
    assert_eq!(read_messages_until_error(&mut reader), want[..3]);
    // The wrapper's span carries its own offset, that of its last inner message.
    for _ in 0..2 {
        assert_eq!(read_once(&mut reader), Err((5, 5)));
    }
    assert_eq!(reader.skip_bad_batch(), Some((5, 5)));
    assert_eq!(read_messages(&mut reader), want[6..]);
}

fn read_messages_until_error(reader: &mut PartitionReader) -> Seen {
    let mut seen = Vec::new();
    loop {
        match reader.advance() {
            Advance::Ready => {
                for m in reader
                    .take_messages(&Arc::from("t"), 0, |_| {})
                    .unwrap()
                    .unwrap()
                {
                    let bytes = |b: Option<Bytes>| b.map(|b| b.to_vec());
                    seen.push((m.offset, m.timestamp, bytes(m.key), bytes(m.value)));
                }
            }
            _ => return seen,
        }
    }
}

/// A batch of one record `value`, zstd-compressed the way a streaming producer writes
/// it: no content size in the frame, a `window_log` window.
fn streamed_zstd_batch(base: i64, value: &[u8], window_log: u32) -> Vec<u8> {
    use zstd::stream::raw::{CParameter, Encoder, InBuffer, Operation, OutBuffer};
    let plain = batch_of(base, &[value], Compression::None);
    let records = &plain[61..];
    let mut encoder = Encoder::new(3).unwrap();
    encoder
        .set_parameter(CParameter::ContentSizeFlag(false))
        .unwrap();
    encoder
        .set_parameter(CParameter::WindowLog(window_log))
        .unwrap();
    let mut frame = vec![0u8; zstd::zstd_safe::compress_bound(records.len())];
    let mut src = InBuffer::around(records);
    let mut dst = OutBuffer::around(&mut frame[..]);
    while src.pos() < records.len() {
        encoder.run(&mut src, &mut dst).unwrap();
    }
    while encoder.finish(&mut dst, true).unwrap() > 0 {}
    let n = dst.pos();
    let mut batch = plain[..61].to_vec();
    batch[22] |= Compression::Zstd.id();
    batch.extend_from_slice(&frame[..n]);
    let length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    fix_crc(&mut batch);
    batch
}

/// Reads one batch and drops it, answering its first record's value length.
fn read_one_batch(reader: &mut PartitionReader) -> usize {
    assert!(matches!(reader.advance(), Advance::Ready));
    let batch = reader.take_ready().unwrap().unwrap();
    let first = batch.records().next().unwrap().unwrap();
    first.value().unwrap().len()
}

#[test]
fn a_huge_batch_leaves_no_memory_behind() {
    let budget = MemoryBudget::new(64 << 20);
    let huge = vec![0u8; 32 << 20];
    let batches = [
        streamed_zstd_batch(0, &huge, 25),
        batch_of(1, &[&[b'a'; 1000]], Compression::Zstd),
    ];
    assert!(
        batches[0].len() < 64 << 10,
        "a small batch: {}",
        batches[0].len()
    );
    let mut reader = PartitionReader::new(0, false, true, 64 << 20, budget.clone());
    reader.push_chunk(chunk(&batches, vec![]));
    assert_eq!(read_one_batch(&mut reader), huge.len());
    let in_use = reader.decompression_memory();
    assert!(in_use >= 2 * huge.len(), "output and window: {in_use}");
    assert_eq!(read_one_batch(&mut reader), 1000);
    assert!(matches!(reader.advance(), Advance::NeedChunk));
    let kept = reader.decompression_memory();
    assert!(
        kept <= 2 * FREE_MEMORY,
        "kept {kept} bytes after the huge batch"
    );
    assert_eq!(
        budget.available(),
        budget.capacity() - kept.saturating_sub(FREE_MEMORY),
        "what is kept beyond the free allowance is charged"
    );
    drop(reader);
    assert_eq!(budget.available(), budget.capacity());
}

#[test]
fn steady_large_batches_keep_their_memory_only_within_the_budget() {
    let large = vec![0u8; 4 << 20];
    let batches: Vec<Vec<u8>> = (0..3)
        .map(|o| batch_of(o, &[&large], Compression::Zstd))
        .collect();
    // A budget with room: scratch for the typical (4 MiB) batch stays, charged.
    let budget = MemoryBudget::new(64 << 20);
    let mut reader = PartitionReader::new(0, false, true, 64 << 20, budget.clone());
    reader.push_chunk(chunk(&batches, vec![]));
    for _ in 0..3 {
        assert_eq!(read_one_batch(&mut reader), large.len());
    }
    assert!(matches!(reader.advance(), Advance::NeedChunk));
    let kept = reader.decompression_memory();
    assert!(kept >= large.len(), "kept {kept}");
    assert_eq!(budget.available(), budget.capacity() - (kept - FREE_MEMORY));
    // A reset keeps it too (it only moves the position).
    reader.reset(100);
    assert_eq!(budget.available(), budget.capacity() - (kept - FREE_MEMORY));
    drop(reader);
    assert_eq!(budget.available(), budget.capacity());

    // A budget without room: nothing beyond the free allowance stays.
    let tight = MemoryBudget::new(2 << 20);
    let _held = tight.try_acquire(2 << 20).unwrap();
    let mut reader = PartitionReader::new(0, false, true, 64 << 20, tight.clone());
    reader.push_chunk(chunk(&batches, vec![]));
    for _ in 0..3 {
        assert_eq!(read_one_batch(&mut reader), large.len());
    }
    assert!(matches!(reader.advance(), Advance::NeedChunk));
    let kept = reader.decompression_memory();
    assert!(kept <= FREE_MEMORY, "kept {kept} with no budget left");
}

#[test]
fn a_malformed_transaction_marker_is_reported_until_skipped() {
    let mut bad = marker(2, false);
    // The marker's key version turns negative; the CRC still matches.
    let key = bad.len() - 1 - 6 - 1 - 4; // ... key (4), value length, value (6), headers
    assert_eq!(&bad[key..key + 4], &[0, 0, 0, 0], "an abort marker's key");
    bad[key] = 0xff;
    fix_crc(&mut bad);
    let batches = [data(0, 2, true), bad, data(3, 1, false)];
    let mut reader = PartitionReader::new(0, true, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&batches, vec![(PRODUCER, 0)]));
    for _ in 0..2 {
        assert_eq!(read_once(&mut reader), Err((2, 2)));
    }
    assert_eq!(reader.skip_bad_batch(), Some((2, 2)));
    assert_eq!(read_once(&mut reader), Ok(vec!["v3".into()]));
}

#[test]
fn a_bad_record_after_the_last_offset_is_still_reported() {
    let mut b = batch_of(0, &[b"AAAA", b"BBBB"], Compression::None);
    // One record more than the batch holds (its last offset delta still says 1).
    let count = i32::from_be_bytes(b[57..61].try_into().unwrap());
    b[57..61].copy_from_slice(&(count + 1).to_be_bytes());
    fix_crc(&mut b);
    let batches = [b, batch_of(2, &[b"CCCC"], Compression::None)];
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&batches, vec![]));
    assert_eq!(
        read_once(&mut reader),
        Ok(vec!["AAAA".into(), "BBBB".into()])
    );
    assert_eq!(read_once(&mut reader), Err((0, 1)));
    assert_eq!(read_once(&mut reader), Ok(vec!["CCCC".into()]));
}

/// `batch` (from [`batch_of`]) with the offset delta of the record whose value is
/// `value` set to `delta` (a one-byte zigzag varint), its CRC fixed.
fn with_offset_delta(mut batch: Vec<u8>, value: &[u8], delta: u8) -> Vec<u8> {
    let at = batch.windows(value.len()).position(|w| w == value).unwrap();
    // [offset delta][key: null][value length] value
    assert_eq!(&batch[at - 2..at], &[0x01, (value.len() as u8) * 2]);
    batch[at - 3] = delta * 2;
    fix_crc(&mut batch);
    batch
}

#[test]
fn a_record_repeating_an_offset_is_bad_not_read_again_and_again() {
    // Found by the fetch fuzz target: the second record repeats offset 0 and its header
    // does not parse. The owned read handed out "AAAA", went back to offset 0 for the
    // bad record, and handed out "AAAA" again on every read, never reporting the error.
    let mut b = BatchBuilder::new(Vec::with_capacity(4096), BatchOptions::default()).unwrap();
    b.append(1, None, Some(b"AAAA"), &[]).unwrap();
    b.append(
        1,
        None,
        Some(b"BBBB"),
        &[crate::record::Header::new("h", b"x")],
    )
    .unwrap();
    b.append(1, None, Some(b"CCCC"), &[]).unwrap();
    let mut b = with_offset_delta(b.seal().unwrap().into_inner(), b"BBBB", 0);
    let at = b.windows(4).position(|w| w == b"BBBB").unwrap() + 4;
    // [header count 1][key length 1] "h" [value length 1] "x": the key now claims 63 bytes.
    assert_eq!(&b[at..at + 3], &[2, 2, b'h']);
    b[at + 1] = 0x7e;
    fix_crc(&mut b);
    let batches = [b, batch_of(3, &[b"DDDD"], Compression::None)];
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&batches, vec![]));
    assert_eq!(read_once(&mut reader), Ok(vec!["AAAA".into()]));
    for _ in 0..3 {
        assert_eq!(
            read_once(&mut reader),
            Err((0, 2)),
            "AAAA is not handed out twice"
        );
        assert_eq!(reader.position(), 1);
    }
    assert_eq!(reader.skip_bad_batch(), Some((0, 2)));
    assert_eq!(read_once(&mut reader), Ok(vec!["DDDD".into()]));
}

#[test]
fn borrowed_records_out_of_offset_order_end_the_batch_with_an_error() {
    // Offsets 0, 0, 2: the repeated offset is an error, not a second record at 0.
    let b = with_offset_delta(
        batch_of(0, &[b"AAAA", b"BBBB", b"CCCC"], Compression::None),
        b"BBBB",
        0,
    );
    let mut reader = PartitionReader::new(0, false, true, 1 << 20, MemoryBudget::unlimited());
    reader.push_chunk(chunk(&[b], vec![]));
    assert!(matches!(reader.advance(), Advance::Ready));
    let batch = reader.take_ready().unwrap().unwrap();
    let offsets: Vec<Result<i64, RecordError>> =
        batch.records().map(|r| r.map(|r| r.offset())).collect();
    assert_eq!(offsets.len(), 2, "{offsets:?}");
    assert_eq!(offsets[0], Ok(0));
    assert!(
        matches!(
            offsets[1],
            Err(RecordError::OffsetDelta {
                delta: 0,
                min: 1,
                last: 2
            })
        ),
        "{offsets:?}"
    );
}

/// `batch` with the leader epoch the broker stamps (bytes 12..16, outside the CRC).
fn stamped(mut batch: Vec<u8>, epoch: i32) -> Vec<u8> {
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
    batch
}

#[test]
fn the_position_carries_the_epoch_of_the_batch_it_moved_past_and_a_reset_forgets_it() {
    let mut reader = PartitionReader::new(0, true, true, 1 << 20, MemoryBudget::unlimited());
    assert_eq!(reader.position_epoch(), None, "nothing read yet");
    reader.push_chunk(chunk(
        &[stamped(data(0, 2, false), 3), stamped(data(2, 1, false), 5)],
        vec![],
    ));
    assert!(matches!(reader.advance(), Advance::Ready));
    reader.take_ready().unwrap().unwrap();
    assert_eq!((reader.position(), reader.position_epoch()), (2, Some(3)));
    assert!(matches!(reader.advance(), Advance::Ready));
    reader.take_ready().unwrap().unwrap();
    assert_eq!((reader.position(), reader.position_epoch()), (3, Some(5)));
    // A control batch passed over moves the position, and its epoch comes along.
    reader.push_chunk(chunk(&[stamped(marker(3, true), 6)], vec![]));
    assert!(matches!(reader.advance(), Advance::NeedChunk));
    assert_eq!((reader.position(), reader.position_epoch()), (4, Some(6)));
    reader.reset(10);
    assert_eq!(reader.position_epoch(), None, "unknown after a jump");
}
