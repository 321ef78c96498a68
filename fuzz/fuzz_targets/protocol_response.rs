//! Fuzzes response decoding by (API key, version): the first two bytes pick the API,
//! the next two the version, the rest is the body. Decoding must never panic; whatever
//! decodes must re-encode, and that encoding must be a fixed point of decode+encode.
//! Decoding may hold at most 32 bytes per input byte plus 64 KiB at once (decoded data
//! takes up to 24x for arrays of empty strings; a reservation sized by a count beyond
//! what the bytes can back breaks the bound at any input size).
#![no_main]

#[path = "common/peak.rs"]
mod peak;

use bytes::{Bytes, BytesMut};
use kring::protocol::{ApiKey, ResponseKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let keys = ApiKey::ALL;
    let api = keys[usize::from(u16::from_be_bytes([data[0], data[1]])) % keys.len()];
    let range = api.versions();
    let span = (range.max - range.min + 1) as u16;
    let version = range.min + (u16::from_be_bytes([data[2], data[3]]) % span) as i16;
    let mut body = Bytes::copy_from_slice(&data[4..]);
    let (decoded, held) = peak::peak_of(|| ResponseKind::decode(api, &mut body, version));
    peak::check(
        &format!("{api:?} v{version}"),
        data.len(),
        held,
        32,
        64 << 10,
    );
    let Ok(decoded) = decoded else {
        return;
    };
    let mut first = BytesMut::new();
    decoded
        .encode(&mut first, version)
        .expect("a decoded response re-encodes");
    let mut again = first.clone().freeze();
    let redecoded = ResponseKind::decode(api, &mut again, version).expect("re-decodes");
    assert!(again.is_empty(), "re-decode consumed everything");
    let mut second = BytesMut::new();
    redecoded.encode(&mut second, version).expect("re-encodes");
    assert_eq!(first, second, "{api:?} v{version}");
});
