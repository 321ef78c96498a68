//! Harnesses for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, hidden from the
//! docs, no stability promise): each drives one crate-internal layer the way its real
//! driver does, from an input format simple enough that seeds can be written with the
//! real encoders (`tests/fuzz_seeds.rs`), and checks the layer's documented invariants.
//!
//! A harness returns a report of what the input reached (so tests can check that seeds
//! go deep), or the [`Violation`] of an invariant, which a fuzz target turns into a
//! crash. Panics inside the library are findings too: the harnesses never catch them.
//!
//! - [`connection`]: the connection engine (frame cutting, response matching, the
//!   ApiVersions handshake, SASL) fed arbitrary bytes in arbitrary chunkings.
//! - [`fetch`]: the fetcher's response handling and the partition reader, fed
//!   FetchResponses with aborted-transaction lists, control batches and cut batches.
//! - [`decompress`]: one decompressor and one scratch buffer reused across many
//!   inputs, checked against a fresh decompressor for each.

pub mod connection;
pub mod decompress;
pub mod fetch;

/// A broken invariant: what a fuzz target reports as a crash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct Violation(pub String);

fn violation(what: impl Into<String>) -> Violation {
    Violation(what.into())
}

/// Reads a harness's input front to back; past the end every read gives zeros or
/// nothing, so any byte string is a valid input.
#[derive(Debug)]
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8]) -> Self {
        Cursor { rest: data }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Up to `n` bytes (fewer at the end).
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.rest.split_at(n.min(self.rest.len()));
        self.rest = tail;
        head
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let head = self.take(N);
        out[..head.len()].copy_from_slice(head);
        out
    }

    fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.array())
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.array())
    }

    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.array())
    }

    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.array())
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }
}

#[cfg(test)]
mod tests {
    use super::Cursor;

    #[test]
    fn a_cursor_reads_zeros_past_the_end() {
        let mut c = Cursor::new(&[1, 2, 3]);
        assert_eq!(c.u16(), 0x0102);
        assert_eq!(c.u32(), 0x0300_0000);
        assert!(c.is_empty());
        assert_eq!(c.i64(), 0);
        assert!(c.take(5).is_empty());
    }
}
