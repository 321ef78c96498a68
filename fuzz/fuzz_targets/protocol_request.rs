//! Fuzzes request frame decoding (header + body by the header's key and version), as a
//! broker or the mock broker sees it: never a panic, and a decoded request re-encodes.
//! Decoding may hold at most 32 bytes per input byte plus 64 KiB at once.
#![no_main]

#[path = "common/peak.rs"]
mod peak;

use bytes::{Bytes, BytesMut};
use kring::protocol::decode_request_frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    let (decoded, held) = peak::peak_of(|| decode_request_frame(frame));
    peak::check("request frame", data.len(), held, 32, 64 << 10);
    let Ok((header, body)) = decoded else {
        return;
    };
    let mut out = BytesMut::new();
    body.encode(&mut out, header.request_api_version)
        .expect("a decoded request re-encodes");
});
