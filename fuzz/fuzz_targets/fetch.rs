//! Fuzzes the consumer's fetch handling: the fetcher applies FetchResponses built from
//! the input (error codes, aborted-transaction lists, records with control batches and
//! cut trailing batches) and the partition reader reads every record, read_committed
//! or not, borrowed or owned. The harness (`kring::fuzzing::fetch`) documents the input
//! format and checks progress, positions, re-reported bad batches and the memory budget.
//! The run may hold at most 32 bytes per input byte at once, plus 32 MiB: the
//! decompression scratch (capped at 8 MiB, its allocation up to twice that) and a zstd
//! window of 8 MiB.
#![no_main]

#[path = "common/peak.rs"]
mod peak;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (result, held) = peak::peak_of(|| kring::fuzzing::fetch::run(data));
    if let Err(violation) = result {
        panic!("{violation}");
    }
    peak::check("fetch", data.len(), held, 32, 32 << 20);
});
