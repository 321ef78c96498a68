//! Fuzzes the snappy decoder under a 1 MiB output cap: it must never panic or grow its
//! output past the cap, and whatever decodes must survive our own encoder: compress
//! and decompress again to the same bytes.
#![no_main]

use kring::record::{Compression, Compressor, Decompressor};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut decompressor = Decompressor::new(CAP);
    let mut out = Vec::new();
    let Ok(n) = decompressor.decompress(Compression::Snappy, data, &mut out) else {
        assert!(out.len() <= CAP, "output grew past the cap");
        return;
    };
    assert!(n <= CAP && out.len() <= CAP);
    let plain = out[..n].to_vec();
    let mut packed = vec![0u8; Compressor::max_compressed_len(Compression::Snappy, n)];
    let m = Compressor::new()
        .compress(Compression::Snappy, &plain, &mut packed)
        .expect("compresses")
        .expect("fits in the bound");
    let k = decompressor
        .decompress(Compression::Snappy, &packed[..m], &mut out)
        .expect("our own output decodes");
    assert_eq!(&out[..k], &plain[..]);
});
