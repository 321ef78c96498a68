//! A reused decompressor under fuzzing: one [`Decompressor`] and one scratch buffer
//! take many inputs in a row, as a partition's reader does batch after batch, and each
//! answer is checked against a fresh decompressor's for the same input. State carried
//! from one input to the next (a zstd session not reset, an inflate window, scratch
//! bytes left from a longer output) shows up as a difference.
//!
//! Input: `cap`, then segments `op, len: u24, len bytes`. The cap on output is
//! 1 KiB << (`cap` % 11); `op`'s low three bits pick the codec (none, gzip, snappy,
//! lz4, zstd, then gzip, lz4, zstd again), bit 3 releases the codec state first
//! (as the reader does after an unusually large batch), bit 4 reads lz4 as a legacy
//! (magic 0) message set does.
//!
//! Checked: the reused and the fresh decompressor agree (both fail, or give the same
//! bytes); the scratch never grows past the cap; the codec state stays within the
//! window the cap allows.

use super::{Cursor, Violation, violation};
use crate::record::{Compression, Decompressor};

/// Flag in a segment's op: release the codec state before it.
pub const RELEASE: u8 = 8;
/// Flag in a segment's op: lz4 as in a magic-0 message set.
pub const LEGACY_LZ4: u8 = 16;

/// The codec an op's low bits pick.
pub fn codec_of(op: u8) -> Compression {
    match op & 7 {
        0 => Compression::None,
        1 | 5 => Compression::Gzip,
        2 => Compression::Snappy,
        3 | 6 => Compression::Lz4,
        _ => Compression::Zstd,
    }
}

/// The op byte for `codec` (no flags).
pub fn op_of(codec: Compression) -> u8 {
    match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// The input bytes for `segments` of (op, compressed bytes) under `cap`.
pub fn input_of(cap: u8, segments: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![cap];
    for (op, data) in segments {
        let len = data.len().min(0xff_ffff) as u32;
        out.push(*op);
        out.extend_from_slice(&len.to_be_bytes()[1..]);
        out.extend_from_slice(&data[..len as usize]);
    }
    out
}

/// What an input reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecompressReport {
    /// Segments decompressed.
    pub segments: usize,
    /// Segments that decompressed cleanly.
    pub decoded: usize,
    /// Bytes they decompressed to.
    pub output: usize,
}

/// The zstd window a decompressor with output cap `cap` accepts, as `unzstd` sets it,
/// and the context's tables beside it.
fn state_bound(cap: usize) -> usize {
    let window_log = cap
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .clamp(23, 27);
    (2usize << window_log) + (1 << 20)
}

/// Runs one input; see the module docs for the format and what is checked.
pub fn run(data: &[u8]) -> Result<DecompressReport, Violation> {
    let mut c = Cursor::new(data);
    let cap = 1024usize << (c.u8() % 11);
    let mut reused = Decompressor::new(cap);
    let mut scratch = Vec::new();
    let mut fresh_out = Vec::new();
    let mut report = DecompressReport::default();
    while !c.is_empty() {
        let op = c.u8();
        let [a, b, d] = c.array::<3>();
        let len = u32::from_be_bytes([0, a, b, d]) as usize;
        let input = c.take(len);
        let codec = codec_of(op);
        let legacy = op & LEGACY_LZ4 != 0;
        if op & RELEASE != 0 {
            reused.release_state();
        }
        let got = reused.decompress_inner(codec, input, &mut scratch, legacy);
        let want = Decompressor::new(cap).decompress_inner(codec, input, &mut fresh_out, legacy);
        report.segments += 1;
        if scratch.len() > cap {
            return Err(violation(format!(
                "the scratch grew to {} bytes, past the cap of {cap}",
                scratch.len()
            )));
        }
        if reused.state_bytes() > state_bound(cap) {
            return Err(violation(format!(
                "codec state of {} bytes under a cap of {cap}",
                reused.state_bytes()
            )));
        }
        match (got, want) {
            (Ok(n), Ok(m)) if scratch.get(..n) == fresh_out.get(..m) => {
                report.decoded += 1;
                report.output += n;
            }
            (Ok(n), Ok(m)) => {
                return Err(violation(format!(
                    "segment {}: {codec:?} gave {n} bytes reused, {m} fresh, not the same",
                    report.segments
                )));
            }
            (Err(_), Err(_)) => {}
            (got, want) => {
                return Err(violation(format!(
                    "segment {}: {codec:?} reused gave {:?}, fresh {:?}",
                    report.segments,
                    got.map(|n| format!("{n} bytes")),
                    want.map(|n| format!("{n} bytes")),
                )));
            }
        }
    }
    Ok(report)
}
