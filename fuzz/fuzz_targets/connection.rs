//! Fuzzes the connection engine as its drivers run it: the ApiVersions handshake (and
//! SASL PLAIN or SCRAM), requests of several APIs, the broker's bytes in the input's
//! chunking through either read path, timeouts, EOF and close; every answer decoded.
//! The harness (`kring::fuzzing::connection`) documents the input format and checks
//! that every request gets exactly one outcome, in order, and nothing follows the end.
//! The run may hold at most 32 bytes per input byte at once, plus room for a frame up to
//! the response cap (the read buffer is sized for the frame being read, as designed).
#![no_main]

#[path = "common/peak.rs"]
mod peak;

use kring::fuzzing::connection::{MAX_RESPONSE_SIZE, run};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (result, held) = peak::peak_of(|| run(data));
    if let Err(violation) = result {
        panic!("{violation}");
    }
    peak::check(
        "connection",
        data.len(),
        held,
        32,
        4 * MAX_RESPONSE_SIZE + (1 << 20),
    );
});
