//! Cutting size-prefixed frames out of a byte stream, sans-IO: the one frame reader in
//! the tree, used by both ends of a connection (the client's connection engine and the
//! mock broker's server).
//!
//! Invariants:
//! - A frame's length is checked against the cap before any memory is reserved for it;
//!   a negative length or one above the cap is an error, and the offending bytes stay
//!   in [`FrameCutter::buffered`] so the caller can say what the peer really sent (an
//!   HTTP answer, a TLS alert).
//! - Frames are split off the buffer without copying (`BytesMut::split_to`); when every
//!   frame cut from a buffer has been dropped, its memory is reused for later reads.
//! - "Not enough bytes yet" is `Ok(None)`, never an error.

use bytes::{Buf, Bytes, BytesMut};

use crate::protocol::{DecodeError, FRAME_PREFIX, frame_length};

/// The most [`FrameCutter::fill_with`] asks one read for.
const FILL_MAX: usize = 1 << 20;

/// The most [`FrameCutter::lend`] reserves on a frame's claimed length alone: a frame up
/// to this size gets room for all of it at once (read straight into its final place, as
/// fetch responses of the default sizes are); a larger one gets room for this much or as
/// much again as has arrived, whichever is more, so its buffer doubles with what the peer
/// really sends (a copy at each doubling: about one extra copy in all) and a 4-byte prefix
/// claiming 100 MiB reserves no more than this.
const RESERVE_ON_CLAIM: usize = 8 << 20;

/// Cuts frames (the bytes after each 4-byte size prefix) out of what a connection reads.
#[derive(Debug)]
pub struct FrameCutter {
    buf: BytesMut,
    max_frame: usize,
    chunk: usize,
}

impl FrameCutter {
    /// A cutter accepting frames up to `max_frame` bytes, reading at least `chunk` bytes
    /// at a time.
    pub fn new(max_frame: usize, chunk: usize) -> Self {
        FrameCutter {
            buf: BytesMut::new(),
            max_frame,
            chunk: chunk.max(FRAME_PREFIX),
        }
    }

    /// The largest frame accepted.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Changes the largest frame accepted (a connection raises it once its handshake is
    /// done).
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    /// Bytes received and not yet cut into a frame.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// How many bytes the frame being read still needs (at least the size prefix); what
    /// a read should ask for.
    pub fn wanted(&self) -> usize {
        let total = match frame_length(&self.buf, self.max_frame) {
            Ok(Some(len)) => FRAME_PREFIX + len,
            _ => FRAME_PREFIX,
        };
        total.saturating_sub(self.buf.len()).max(1)
    }

    /// Lends the buffer to a read: the bytes already buffered stay at its front, and its
    /// spare capacity holds the rest of the frame being read (whole up to 8 MiB, so a
    /// frame is read straight into its final place; beyond that growing with what has
    /// arrived, see `RESERVE_ON_CLAIM`) or at least one read chunk. Give it back, with
    /// what was read appended, through [`FrameCutter::restore`].
    pub fn lend(&mut self) -> BytesMut {
        let room = self.wanted().min(RESERVE_ON_CLAIM.max(self.buf.len()));
        if self.buf.capacity() - self.buf.len() < room {
            self.buf.reserve(room.max(self.chunk));
        }
        std::mem::take(&mut self.buf)
    }

    /// Takes back the buffer lent by [`FrameCutter::lend`], with the bytes read appended.
    pub fn restore(&mut self, buf: BytesMut) {
        self.buf = buf;
    }

    /// Appends bytes read elsewhere (one copy; for readers that fill buffers of their own).
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Reads through `read`, which fills a zeroed slice and says how many bytes it wrote:
    /// for blocking readers (`std::io::Read`) that cannot write into spare capacity.
    pub fn fill_with<E>(
        &mut self,
        read: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        // At most a megabyte is zeroed per read: a large frame arriving in small pieces
        // costs no repeated zeroing of its whole remainder, and a claimed length alone
        // reserves nothing (the buffer grows with what arrives).
        let wanted = self.wanted().min(FILL_MAX).max(self.chunk);
        let start = self.buf.len();
        self.buf.resize(start + wanted, 0);
        let result = read(&mut self.buf[start..]);
        let n = *result.as_ref().unwrap_or(&0);
        self.buf.truncate(start + n.min(wanted));
        result
    }

    /// Appends bytes handed over in pieces by a reader that owns them (a TLS session's
    /// decrypted records): one copy, nothing zeroed, and room made for the rest of the
    /// frame being read by [`FrameCutter::lend`]'s rule (the whole frame up to 8 MiB,
    /// beyond that growing with what has arrived), so a fetch response arriving in
    /// 16 KiB records is copied once, not again at every growth step, and a claimed
    /// length alone reserves no more than the plaintext path would.
    pub fn extend_in_steps(&mut self, data: &[u8]) {
        if self.buf.capacity() - self.buf.len() < data.len() {
            let room = self.wanted().min(RESERVE_ON_CLAIM.max(self.buf.len()));
            self.buf.reserve(data.len().max(room));
        }
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame, after its size prefix; `Ok(None)` until all of it arrived.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let Some(len) = frame_length(&self.buf, self.max_frame)? else {
            return Ok(None);
        };
        let total = FRAME_PREFIX + len;
        if self.buf.len() < total {
            return Ok(None);
        }
        let mut frame = self.buf.split_to(total);
        frame.advance(FRAME_PREFIX);
        Ok(Some(frame.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    fn frames_of(cutter: &mut FrameCutter) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(f) = cutter.next_frame().unwrap() {
            out.push(f.to_vec());
        }
        out
    }

    #[test]
    fn frames_split_across_and_within_reads() {
        let mut all = frame(b"first");
        all.extend(frame(b"second!"));
        all.extend(frame(&[7u8; 300]));
        all.extend(frame(b""));
        let expected = vec![
            b"first".to_vec(),
            b"second!".to_vec(),
            vec![7u8; 300],
            Vec::new(),
        ];
        for step in [1, 3, 7, 64, all.len()] {
            let mut cutter = FrameCutter::new(1024, 16);
            let mut got = Vec::new();
            for piece in all.chunks(step) {
                let mut buf = cutter.lend();
                assert!(buf.capacity() - buf.len() >= 1, "room to read into");
                buf.extend_from_slice(piece);
                cutter.restore(buf);
                got.extend(frames_of(&mut cutter));
            }
            assert_eq!(got, expected, "reads of {step} bytes");
            assert!(cutter.buffered().is_empty());
        }
    }

    #[test]
    fn a_large_frame_gets_room_for_all_of_it_at_once() {
        let mut cutter = FrameCutter::new(1 << 20, 16);
        cutter.extend(&(100_000i32).to_be_bytes());
        let buf = cutter.lend();
        assert!(buf.capacity() - buf.len() >= 100_000);
        cutter.restore(buf);
    }

    #[test]
    fn a_claimed_length_alone_reserves_at_most_8_mib_and_a_larger_frame_still_arrives_whole() {
        let total = 20 << 20;
        let mut cutter = FrameCutter::new(100 << 20, 16);
        cutter.extend(&(total as i32).to_be_bytes());
        let buf = cutter.lend();
        assert!(
            buf.capacity() <= RESERVE_ON_CLAIM + 64,
            "{} reserved for a 4-byte prefix",
            buf.capacity()
        );
        cutter.restore(buf);
        let body: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        let mut rest = &body[..];
        while !rest.is_empty() {
            let mut buf = cutter.lend();
            let room = buf.capacity() - buf.len();
            assert!(room > 0);
            // Never more than what arrived, plus the 8 MiB a claim may reserve, over again.
            assert!(buf.capacity() <= 2 * (buf.len() + RESERVE_ON_CLAIM));
            let n = room.min(rest.len()).min(3 << 20);
            buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            cutter.restore(buf);
        }
        let frame = cutter.next_frame().unwrap().expect("the whole frame");
        assert_eq!(frame.len(), total);
        assert!(frame[..] == body[..], "the frame's bytes, in order");
    }

    /// Feeds a `total`-byte frame in 16 KiB records; returns the buffer's growths after
    /// the prefix and checks the frame arrives whole with capacity in proportion.
    fn feed_in_records(total: usize) -> usize {
        let mut cutter = FrameCutter::new(100 << 20, 16);
        cutter.extend_in_steps(&(total as i32).to_be_bytes());
        assert!(
            cutter.buf.capacity() <= RESERVE_ON_CLAIM + 64,
            "{} reserved for a 4-byte prefix",
            cutter.buf.capacity()
        );
        let body: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        let mut growths = 0;
        for record in body.chunks(16 << 10) {
            let capacity = cutter.buf.capacity();
            cutter.extend_in_steps(record);
            growths += usize::from(cutter.buf.capacity() != capacity);
            assert!(cutter.buf.capacity() <= 2 * (cutter.buf.len() + RESERVE_ON_CLAIM));
        }
        let frame = cutter.next_frame().unwrap().expect("the whole frame");
        assert!(frame[..] == body[..], "the frame's bytes, in order");
        growths
    }

    #[test]
    fn a_frame_handed_over_in_records_is_reserved_once_or_grows_with_what_arrives() {
        // A fetch response of the default sizes: room for all of it once its length is
        // known (one growth, at the first record, with only the prefix to move), so its
        // records are copied once, not again by later growth.
        assert_eq!(feed_in_records(3 << 20), 1);
        // A 20 MiB frame: 8 MiB on the claim, then growing with what arrived.
        let growths = feed_in_records(20 << 20);
        assert!(growths <= 3, "{growths} reallocations for 1280 records");
    }

    #[test]
    fn hostile_lengths_are_errors_before_allocation_and_stay_visible() {
        for (bytes, what) in [
            (vec![0x7f, 0xff, 0xff, 0xff], "oversized"),
            (vec![0xff, 0xff, 0xff, 0x00], "negative"),
            (b"HTTP/1.1 400 Bad Request".to_vec(), "http"),
        ] {
            let mut cutter = FrameCutter::new(1 << 20, 16);
            cutter.extend(&bytes);
            assert!(cutter.next_frame().is_err(), "{what}");
            assert_eq!(cutter.buffered(), &bytes[..], "{what}: bytes kept");
            let buf = cutter.lend();
            assert!(
                buf.capacity() < 1024,
                "{what}: nothing sized from the length"
            );
        }
    }

    #[test]
    fn fill_with_keeps_only_what_was_read() {
        let mut cutter = FrameCutter::new(64, 8);
        let data = frame(b"abc");
        let mut source = &data[..];
        while cutter.buffered().len() < data.len() {
            let n = cutter
                .fill_with(|out| std::io::Read::read(&mut source, out))
                .unwrap();
            assert!(n > 0);
        }
        assert_eq!(cutter.next_frame().unwrap().unwrap(), &b"abc"[..]);
        let failed: Result<usize, &str> = cutter.fill_with(|_| Err("boom"));
        assert!(failed.is_err());
        assert!(cutter.buffered().is_empty(), "a failed read leaves nothing");
    }
}
