//! Fuzzes the consumer's fetch handling: the fetcher applies FetchResponses built from
//! the input (error codes, aborted-transaction lists, records with control batches and
//! cut trailing batches) and the partition reader reads every record, read_committed
//! or not, borrowed or owned. The harness (`kring::fuzzing::fetch`) documents the input
//! format and checks progress, positions, re-reported bad batches and the memory budget.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(violation) = kring::fuzzing::fetch::run(data) {
        panic!("{violation}");
    }
});
