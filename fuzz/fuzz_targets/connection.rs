//! Fuzzes the connection engine as its drivers run it: the ApiVersions handshake (and
//! SASL PLAIN or SCRAM), requests of several APIs, the broker's bytes in the input's
//! chunking through either read path, timeouts, EOF and close; every answer decoded.
//! The harness (`kring::fuzzing::connection`) documents the input format and checks
//! that every request gets exactly one outcome, in order, and nothing follows the end.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(violation) = kring::fuzzing::connection::run(data) {
        panic!("{violation}");
    }
});
