//! Fuzzes response decoding by (API key, version): the first two bytes pick the API,
//! the next two the version, the rest is the body. Decoding must never panic; whatever
//! decodes must re-encode, and that encoding must be a fixed point of decode+encode.
#![no_main]

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
    let Ok(decoded) = ResponseKind::decode(api, &mut body, version) else {
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
