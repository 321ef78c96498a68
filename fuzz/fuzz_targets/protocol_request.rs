//! Fuzzes request frame decoding (header + body by the header's key and version), as a
//! broker or the mock broker sees it: never a panic, and a decoded request re-encodes.
#![no_main]

use bytes::{Bytes, BytesMut};
use kring::protocol::decode_request_frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok((header, body)) = decode_request_frame(Bytes::copy_from_slice(data)) else {
        return;
    };
    let mut out = BytesMut::new();
    body.encode(&mut out, header.request_api_version)
        .expect("a decoded request re-encodes");
});
