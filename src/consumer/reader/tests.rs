//! The partition reader driven by hand with chunks built in the test.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::buf::MemoryBudget;
use crate::record::{BatchBuilder, BatchOptions, ControlRecord};

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
    b.append_control(1, ControlRecord::marker(commit, 0)).unwrap();
    b.seal().unwrap().into_inner()
}

/// A chunk of the concatenated `batches`, with the spans the fetcher would find.
fn chunk(batches: &[Vec<u8>], aborted: Vec<(i64, i64)>) -> Chunk {
    let records = Bytes::from(batches.concat());
    let mut spans = VecDeque::new();
    let mut rest: &[u8] = &records;
    while let Some((b, tail)) = RecordBatchRef::parse(rest).unwrap() {
        spans.push_back(b.span_in(&records).unwrap());
        rest = tail;
    }
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
    let mut reader = PartitionReader::new(0, true, true);
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
