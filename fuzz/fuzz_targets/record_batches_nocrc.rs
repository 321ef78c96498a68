//! Fuzzes the record reader past the CRC: the CRC is not checked (a fuzzer cannot
//! forge CRC-32C), so mutations reach the header fields, the record framing, the
//! codecs and the legacy message sets. Also reads every header field and control
//! record, and checks that what iterates cleanly agrees with the header's count.
#![no_main]

use kring::record::{BatchRef, Batches, Decompressor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut decompressor = Decompressor::new(1 << 20);
    let mut scratch = Vec::new();
    let mut batches = Batches::new(data);
    for batch in &mut batches {
        let Ok(batch) = batch else { break };
        if let BatchRef::V2(b) = batch {
            let _ = (
                b.base_offset(),
                b.last_offset(),
                b.next_offset(),
                b.max_timestamp(),
                b.producer_id(),
                b.producer_epoch(),
                b.base_sequence(),
                b.is_transactional(),
                b.timestamp_type(),
                b.compression(),
                b.compute_crc(),
            );
            let _ = b.control_record();
        }
        let Ok(records) = batch.records(&mut decompressor, &mut scratch) else {
            continue;
        };
        let mut clean = 0usize;
        let mut failed = false;
        for record in records {
            match record {
                Ok(r) => {
                    clean += 1;
                    let _ = r.control();
                    for h in r.headers() {
                        match h {
                            Ok(h) => {
                                let _ = h.key_str();
                            }
                            Err(_) => break,
                        }
                    }
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if let (BatchRef::V2(b), false) = (batch, failed) {
            assert_eq!(clean, b.record_count() as usize, "count agrees when clean");
        }
    }
    assert!(batches.remainder().len() <= data.len());
});
