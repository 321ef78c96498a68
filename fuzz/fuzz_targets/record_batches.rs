//! Fuzzes the record reader as a consumer runs it: walk the batches of a `records`
//! field with CRC checks on (Java's `check.crcs`), decompress under a cap and iterate
//! every record and header. Nothing may panic, allocate past the cap, or loop.
#![no_main]

use kring::record::{Batches, Decompressor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut decompressor = Decompressor::new(1 << 20);
    let mut scratch = Vec::new();
    for batch in Batches::new(data).verify_crc(true) {
        let Ok(batch) = batch else { break };
        let Ok(records) = batch.records(&mut decompressor, &mut scratch) else {
            continue;
        };
        for record in records {
            let Ok(record) = record else { break };
            for header in record.headers() {
                if header.is_err() {
                    break;
                }
            }
        }
    }
    assert!(scratch.len() <= 1 << 20, "scratch grew past the cap");
});
