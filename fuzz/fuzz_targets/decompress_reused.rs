//! Fuzzes one decompressor and one scratch buffer reused across many inputs in a row
//! (every codec, state released now and then), each answer checked against a fresh
//! decompressor's: state carried between batches shows as a difference. The harness
//! (`kring::fuzzing::decompress`) documents the input format.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(violation) = kring::fuzzing::decompress::run(data) {
        panic!("{violation}");
    }
});
