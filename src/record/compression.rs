//! The four codecs Kafka defines, with reusable state so that steady-state
//! compression and decompression allocate nothing.
//!
//! Wire formats (what the Java client reads and writes; `clients/.../common/compress/`):
//! - gzip: one RFC 1952 member (a 10-byte header, raw deflate, CRC-32 and size
//!   trailer). The header and trailer are written here around flate2's raw deflate so
//!   the deflate state can be reset and reused instead of reallocated per batch.
//!   Readers accept optional header fields and concatenated members, as Java's
//!   `GZIPInputStream` does.
//! - snappy: the raw snappy block format is written for v2 batches (as librdkafka and
//!   Sarama do); reading accepts both raw blocks and the xerial framing
//!   (`\x82SNAPPY\0`, version words, then big-endian length-prefixed raw blocks) that
//!   Java clients write with `SnappyOutputStream`.
//! - lz4: the LZ4 frame format v1.5.1 with independent 64 KiB blocks, no checksums
//!   (what Kafka's `Lz4BlockOutputStream` writes), framed here over lz4_flex's block
//!   API. Reading also handles block and content checksums, linked blocks, a content
//!   size field and, for magic-0 message sets, the wrong header checksum old Kafka
//!   versions wrote (KAFKA-3160).
//! - zstd: one zstd frame with the content size (KIP-110).
//!
//! Invariants: compression writes into a caller's slice and reports "does not fit"
//! as `Ok(None)` rather than growing anything; decompression never produces more
//! than the [`Decompressor`]'s cap (a decompression bomb is
//! [`CompressionError::OutputTooLarge`]), grows its output only as real output
//! arrives, and never panics on any input. A size the input states (snappy's length,
//! zstd's content size, an LZ4 block's room) is believed only up to what the format can
//! expand the input to (snappy 64/3×, LZ4 255×, zstd 128 KiB per 4-byte block) before
//! room is made for it: a few bytes claiming megabytes are corrupt, not a reservation.

use std::hash::Hasher as _;

use flate2::{Compress, Decompress, FlushCompress, FlushDecompress, Status};
use lz4_flex::block::{CompressTable, DecompressError};
use twox_hash::XxHash32;
use zstd::stream::raw::{DParameter, InBuffer, Operation, OutBuffer};

use super::Compression;

/// Errors from a codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompressionError {
    /// The compressed bytes are malformed.
    #[error("corrupt {codec} data: {reason}")]
    Corrupt {
        /// The codec's name.
        codec: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The compressed bytes ended before the stream did.
    #[error("truncated {codec} data")]
    Truncated {
        /// The codec's name.
        codec: &'static str,
    },
    /// Decompressing would produce more than the cap (a decompression bomb, or a cap
    /// set below the batch size).
    #[error("{codec} output exceeds the cap of {cap} bytes")]
    OutputTooLarge {
        /// The codec's name.
        codec: &'static str,
        /// The cap in bytes.
        cap: usize,
    },
    /// A valid but unsupported feature of the format (an LZ4 dictionary id).
    #[error("unsupported {codec} feature: {what}")]
    Unsupported {
        /// The codec's name.
        codec: &'static str,
        /// The feature.
        what: &'static str,
    },
    /// The codec library failed for a reason other than the data (allocation).
    #[error("{codec} codec failed: {reason}")]
    Codec {
        /// The codec's name.
        codec: &'static str,
        /// The library's message.
        reason: String,
    },
}

fn corrupt(codec: &'static str, reason: impl Into<String>) -> CompressionError {
    CompressionError::Corrupt {
        codec,
        reason: reason.into(),
    }
}

/// Compression levels (KIP-390's `compression.<codec>.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompressionLevels {
    /// gzip level 0..=9; Java's default is 6 (`Deflater.DEFAULT_COMPRESSION`).
    pub gzip: u32,
    /// zstd level; Java's default is 3.
    pub zstd: i32,
}

impl Default for CompressionLevels {
    fn default() -> Self {
        CompressionLevels { gzip: 6, zstd: 3 }
    }
}

impl CompressionLevels {
    /// Sets the gzip level (clamped to 0..=9).
    pub fn with_gzip(mut self, level: u32) -> Self {
        self.gzip = level.min(9);
        self
    }

    /// Sets the zstd level.
    pub fn with_zstd(mut self, level: i32) -> Self {
        self.zstd = level;
        self
    }
}

const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
const GZIP_TRAILER_LEN: usize = 8;
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
/// FLG: version 01, independent blocks, no checksums, no content size, no dict id.
const LZ4_FLG: u8 = 0x60;
/// BD: 64 KiB maximum block size.
const LZ4_BD: u8 = 0x40;
const LZ4_BLOCK: usize = 64 << 10;
const LZ4_UNCOMPRESSED: u32 = 0x8000_0000;
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;

/// Reusable compression state for every codec: one per worker thread. Each codec's
/// state is created on first use and reset, not reallocated, for each batch.
pub struct Compressor {
    levels: CompressionLevels,
    deflate: Option<Compress>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    snappy: snap::raw::Encoder,
    lz4_table: Option<Box<CompressTable>>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("levels", &self.levels)
            .finish_non_exhaustive()
    }
}

impl Default for Compressor {
    fn default() -> Self {
        Compressor::new()
    }
}

impl Compressor {
    /// A compressor with Java's default levels.
    pub fn new() -> Self {
        Compressor::with_levels(CompressionLevels::default())
    }

    /// A compressor with the given levels.
    pub fn with_levels(levels: CompressionLevels) -> Self {
        Compressor {
            levels,
            deflate: None,
            zstd: None,
            snappy: snap::raw::Encoder::new(),
            lz4_table: None,
            scratch: Vec::new(),
        }
    }

    /// The levels in use.
    pub fn levels(&self) -> CompressionLevels {
        self.levels
    }

    /// The largest output `codec` can produce from `input_len` bytes: an output
    /// buffer this large never makes [`Compressor::compress`] answer "does not fit".
    /// Size the pool of compressed arenas with it.
    pub fn max_compressed_len(codec: Compression, input_len: usize) -> usize {
        let n = input_len;
        match codec {
            Compression::None => n,
            Compression::Gzip => deflate_bound(n) + GZIP_HEADER.len() + GZIP_TRAILER_LEN,
            Compression::Snappy => 32 + n + n / 6,
            // Incompressible blocks are stored raw, so a block never grows.
            Compression::Lz4 => 7 + n + 4 * n.div_ceil(LZ4_BLOCK) + 4,
            Compression::Zstd => zstd::zstd_safe::compress_bound(n),
        }
    }

    /// Compresses `input` into the front of `output` in `codec`'s Kafka wire format.
    /// Returns the compressed length, or `Ok(None)` when the result would not fit in
    /// `output` (nothing useful is left in `output` then).
    pub fn compress(
        &mut self,
        codec: Compression,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<Option<usize>, CompressionError> {
        match codec {
            Compression::None => {
                if output.len() < input.len() {
                    return Ok(None);
                }
                output[..input.len()].copy_from_slice(input);
                Ok(Some(input.len()))
            }
            Compression::Gzip => self.gzip(input, output),
            Compression::Snappy => self.snappy(input, output),
            Compression::Lz4 => self.lz4(input, output),
            Compression::Zstd => self.zstd(input, output),
        }
    }

    fn gzip(&mut self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, CompressionError> {
        let frame = GZIP_HEADER.len() + GZIP_TRAILER_LEN;
        if output.len() < frame {
            return Ok(None);
        }
        let level = self.levels.gzip;
        let deflate = self
            .deflate
            .get_or_insert_with(|| Compress::new(flate2::Compression::new(level), false));
        deflate.reset();
        // The deflate stream must always be given room to finish: zlib-rs 0.6 leaves
        // its state subtly corrupt when reset after a stream that ran out of output,
        // and a reused state then panics hundreds of batches later. So when the
        // arena is tighter than deflate's worst case, compress aside and copy.
        let bound = deflate_bound(input.len());
        let body_room = output.len() - frame;
        let aside = body_room < bound;
        if aside && self.scratch.len() < bound {
            self.scratch.resize(bound, 0);
        }
        let target = if aside {
            &mut self.scratch[..bound]
        } else {
            &mut output[GZIP_HEADER.len()..GZIP_HEADER.len() + body_room]
        };
        let status = deflate
            .compress(input, target, FlushCompress::Finish)
            .map_err(|e| CompressionError::Codec {
                codec: "gzip",
                reason: e.to_string(),
            })?;
        let n = deflate.total_out() as usize;
        if status != Status::StreamEnd || deflate.total_in() != input.len() as u64 {
            // Cannot happen within the bound; never reuse a state that did not finish.
            self.deflate = None;
            return Ok(None);
        }
        if n > body_room {
            return Ok(None);
        }
        if aside {
            output[GZIP_HEADER.len()..GZIP_HEADER.len() + n].copy_from_slice(&self.scratch[..n]);
        }
        output[..GZIP_HEADER.len()].copy_from_slice(&GZIP_HEADER);
        let end = GZIP_HEADER.len() + n;
        output[end..end + 4].copy_from_slice(&crc32fast::hash(input).to_le_bytes());
        output[end + 4..end + 8].copy_from_slice(&(input.len() as u32).to_le_bytes());
        Ok(Some(end + GZIP_TRAILER_LEN))
    }

    fn snappy(
        &mut self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<Option<usize>, CompressionError> {
        let bound = snap::raw::max_compress_len(input.len());
        if bound == 0 && !input.is_empty() {
            return Err(CompressionError::Codec {
                codec: "snappy",
                reason: format!("input of {} bytes is too large", input.len()),
            });
        }
        let lib_err = |e: snap::Error| CompressionError::Codec {
            codec: "snappy",
            reason: e.to_string(),
        };
        if output.len() >= bound {
            return self
                .snappy
                .compress(input, output)
                .map(Some)
                .map_err(lib_err);
        }
        // snappy needs worst-case room up front; an arena sized like the input is
        // smaller than that, so compress aside and copy the (smaller) result.
        if self.scratch.len() < bound {
            self.scratch.resize(bound, 0);
        }
        let n = self
            .snappy
            .compress(input, &mut self.scratch)
            .map_err(lib_err)?;
        if n > output.len() {
            return Ok(None);
        }
        output[..n].copy_from_slice(&self.scratch[..n]);
        Ok(Some(n))
    }

    fn lz4(&mut self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, CompressionError> {
        let codec = "lz4";
        if output.len() < 7 {
            return Ok(None);
        }
        output[..4].copy_from_slice(&LZ4_MAGIC);
        output[4] = LZ4_FLG;
        output[5] = LZ4_BD;
        output[6] = lz4_header_checksum(&[LZ4_FLG, LZ4_BD]);
        let mut pos = 7;
        let table = self
            .lz4_table
            .get_or_insert_with(|| Box::new(CompressTable::large()));
        let lib_err = |e: lz4_flex::block::CompressError| CompressionError::Codec {
            codec,
            reason: e.to_string(),
        };
        for block in input.chunks(LZ4_BLOCK) {
            if output.len() - pos < 4 {
                return Ok(None);
            }
            let room = &mut output[pos + 4..];
            let bound = lz4_flex::block::get_maximum_output_size(block.len());
            let compressed = if room.len() >= bound {
                let n = lz4_flex::block::compress_into_with_table(block, room, table)
                    .map_err(lib_err)?;
                (n < block.len()).then_some(n)
            } else {
                // Near the end of the arena: lz4 needs worst-case room to start, so
                // compress aside and copy if the result fits.
                if self.scratch.len() < bound {
                    self.scratch.resize(bound, 0);
                }
                let n = lz4_flex::block::compress_into_with_table(block, &mut self.scratch, table)
                    .map_err(lib_err)?;
                if n < block.len() && n <= room.len() {
                    room[..n].copy_from_slice(&self.scratch[..n]);
                    Some(n)
                } else {
                    None
                }
            };
            let (len, word) = match compressed {
                Some(n) => (n, n as u32),
                None => {
                    if room.len() < block.len() {
                        return Ok(None);
                    }
                    room[..block.len()].copy_from_slice(block);
                    (block.len(), block.len() as u32 | LZ4_UNCOMPRESSED)
                }
            };
            output[pos..pos + 4].copy_from_slice(&word.to_le_bytes());
            pos += 4 + len;
        }
        if output.len() - pos < 4 {
            return Ok(None);
        }
        output[pos..pos + 4].copy_from_slice(&[0; 4]);
        Ok(Some(pos + 4))
    }

    fn zstd(&mut self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, CompressionError> {
        let codec = "zstd";
        let lib_err = |e: std::io::Error| CompressionError::Codec {
            codec,
            reason: e.to_string(),
        };
        if self.zstd.is_none() {
            self.zstd = Some(zstd::bulk::Compressor::new(self.levels.zstd).map_err(lib_err)?);
        }
        let Some(ctx) = self.zstd.as_mut() else {
            unreachable!("set above")
        };
        match ctx.compress_to_buffer(input, output) {
            Ok(n) => Ok(Some(n)),
            Err(_) if output.len() < zstd::zstd_safe::compress_bound(input.len()) => Ok(None),
            Err(e) => Err(lib_err(e)),
        }
    }
}

/// Worst-case raw deflate output for `n` input bytes: zlib's conservative
/// `deflateBound` (stored blocks), with slack.
fn deflate_bound(n: usize) -> usize {
    n + (n >> 3) + (n >> 6) + 5 + 64
}

/// The LZ4 frame descriptor checksum: the second byte of xxHash32 of the descriptor.
fn lz4_header_checksum(descriptor: &[u8]) -> u8 {
    (XxHash32::oneshot(0, descriptor) >> 8) as u8
}

/// Reusable decompression state for every codec, with the cap on output size that
/// makes decompression bombs an error. One per worker thread.
pub struct Decompressor {
    max_output: usize,
    inflate: Option<Decompress>,
    zstd: Option<zstd::zstd_safe::DCtx<'static>>,
    snappy: snap::raw::Decoder,
}

impl std::fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decompressor")
            .field("max_output", &self.max_output)
            .finish_non_exhaustive()
    }
}

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor::new(super::DEFAULT_MAX_DECOMPRESSED)
    }
}

impl Decompressor {
    /// A decompressor that refuses to produce more than `max_output` bytes from any
    /// one input.
    pub fn new(max_output: usize) -> Self {
        Decompressor {
            max_output,
            inflate: None,
            zstd: None,
            snappy: snap::raw::Decoder::new(),
        }
    }

    /// The output cap.
    pub fn max_output(&self) -> usize {
        self.max_output
    }

    /// Bytes the codecs' reusable state holds now (the zstd context with its window
    /// buffers, which keep the size of the largest window met; gzip's inflate state).
    pub fn state_bytes(&self) -> usize {
        let zstd = self.zstd.as_ref().map_or(0, |c| c.sizeof());
        // miniz_oxide's inflate state: a 32 KiB window and its tables.
        let inflate = if self.inflate.is_some() { 48 << 10 } else { 0 };
        zstd + inflate
    }

    /// Frees the codecs' reusable state (created again when next needed): after a
    /// batch whose zstd window was much larger than usual.
    pub fn release_state(&mut self) {
        self.zstd = None;
        self.inflate = None;
    }

    /// Decompresses `input` (in `codec`'s Kafka wire format) into `out`, returning
    /// the decompressed length `n`: the output is `out[..n]`.
    ///
    /// `out` is scratch space owned by the caller and reused across calls: bytes past
    /// `n` are left over from earlier calls (keeping them saves zeroing the buffer
    /// again). `out` grows only as output arrives, never past the cap.
    pub fn decompress(
        &mut self,
        codec: Compression,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize, CompressionError> {
        self.decompress_inner(codec, input, out, false)
    }

    /// As [`Decompressor::decompress`]; `legacy_lz4` skips the LZ4 frame descriptor
    /// checksum, which Kafka computed wrongly for magic-0 message sets.
    pub(crate) fn decompress_inner(
        &mut self,
        codec: Compression,
        input: &[u8],
        out: &mut Vec<u8>,
        legacy_lz4: bool,
    ) -> Result<usize, CompressionError> {
        let cap = self.max_output;
        match codec {
            Compression::None => {
                if input.len() > cap {
                    return Err(CompressionError::OutputTooLarge { codec: "none", cap });
                }
                ensure_len(out, input.len());
                out[..input.len()].copy_from_slice(input);
                Ok(input.len())
            }
            Compression::Gzip => self.gunzip(input, out),
            Compression::Snappy => self.unsnappy(input, out),
            Compression::Lz4 => unlz4(input, out, cap, legacy_lz4),
            Compression::Zstd => self.unzstd(input, out),
        }
    }

    fn gunzip(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressionError> {
        let codec = "gzip";
        let cap = self.max_output;
        let inflate = self.inflate.get_or_insert_with(|| Decompress::new(false));
        let mut rest = input;
        let mut written = 0;
        let mut first = true;
        loop {
            let body = match gzip_header_len(rest) {
                Ok(n) => &rest[n..],
                // Like GZIPInputStream, bytes after a complete member that do not
                // start another member are ignored.
                Err(_) if !first => break,
                Err(e) => return Err(e),
            };
            first = false;
            inflate.reset(false);
            let member_start = written;
            let mut consumed = 0;
            loop {
                let limit = out.len().min(cap);
                if written == limit {
                    grow(out, written, cap, body.len(), codec)?;
                }
                let limit = out.len().min(cap);
                let (in_before, out_before) = (inflate.total_in(), inflate.total_out());
                let status = inflate
                    .decompress(
                        &body[consumed..],
                        &mut out[written..limit],
                        FlushDecompress::None,
                    )
                    .map_err(|e| corrupt(codec, e.to_string()))?;
                let took = (inflate.total_in() - in_before) as usize;
                let made = (inflate.total_out() - out_before) as usize;
                consumed += took;
                written += made;
                if status == Status::StreamEnd {
                    break;
                }
                if took == 0 && made == 0 && written < limit {
                    // No progress with room to write: the input ran out.
                    return Err(CompressionError::Truncated { codec });
                }
            }
            let trailer = body
                .get(consumed..consumed + GZIP_TRAILER_LEN)
                .ok_or(CompressionError::Truncated { codec })?;
            let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
            let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
            let member = &out[member_start..written];
            if crc32fast::hash(member) != crc {
                return Err(corrupt(codec, "CRC-32 mismatch"));
            }
            if size != member.len() as u32 {
                return Err(corrupt(codec, "size mismatch"));
            }
            rest = &body[consumed + GZIP_TRAILER_LEN..];
            if rest.is_empty() {
                break;
            }
        }
        Ok(written)
    }

    fn unsnappy(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressionError> {
        let codec = "snappy";
        let cap = self.max_output;
        if !input.starts_with(&XERIAL_MAGIC) {
            return snappy_block(&mut self.snappy, input, out, 0, cap);
        }
        // xerial: magic, version (i32 BE), compatible version (i32 BE), then chunks.
        let mut rest = input
            .get(XERIAL_HEADER_LEN..)
            .ok_or(CompressionError::Truncated { codec })?;
        let mut written = 0;
        while !rest.is_empty() {
            let len = rest
                .get(..4)
                .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or(CompressionError::Truncated { codec })?;
            let len = usize::try_from(len).map_err(|_| corrupt(codec, "negative chunk length"))?;
            let chunk = rest
                .get(4..4 + len)
                .ok_or(CompressionError::Truncated { codec })?;
            written += snappy_block(&mut self.snappy, chunk, out, written, cap)?;
            rest = &rest[4 + len..];
        }
        Ok(written)
    }

    fn unzstd(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressionError> {
        let codec = "zstd";
        let cap = self.max_output;
        let lib_err = |e: std::io::Error| corrupt(codec, e.to_string());
        if self.zstd.is_none() {
            let mut context =
                zstd::zstd_safe::DCtx::try_create().ok_or(CompressionError::Codec {
                    codec,
                    reason: "cannot create a decompression context".into(),
                })?;
            // The window is the decoder's big allocation; a frame may claim up to 2 GiB.
            // No window needs to exceed the output cap (the smallest power of two at or
            // above it), but producers stream with windows of a few MiB regardless of
            // content, so allow at least 8 MiB.
            let window_log = cap
                .max(1)
                .next_power_of_two()
                .trailing_zeros()
                .clamp(23, 27);
            context
                .set_parameter(DParameter::WindowLogMax(window_log))
                .map_err(|code| corrupt(codec, zstd::zstd_safe::get_error_name(code)))?;
            self.zstd = Some(context);
        }
        let Some(context) = self.zstd.as_mut() else {
            unreachable!("set above")
        };
        // Starts a new session on the context (what a previous frame left is dropped).
        let mut decoder = zstd::stream::raw::Decoder::with_context(context);
        // A frame that states its size gets exactly that much room up front.
        if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(input) {
            if size > cap as u64 {
                return Err(CompressionError::OutputTooLarge { codec, cap });
            }
            if size > zstd_max_output(input.len()) {
                return Err(corrupt(
                    codec,
                    "content size exceeds what the frame can hold",
                ));
            }
            ensure_len(out, size as usize);
        }
        if input.is_empty() {
            return Err(CompressionError::Truncated { codec });
        }
        let mut src = InBuffer::around(input);
        let mut written = 0;
        loop {
            let limit = out.len().min(cap);
            if written == limit {
                grow(out, written, cap, input.len(), codec)?;
            }
            let limit = out.len().min(cap);
            let in_before = src.pos();
            let window = &mut out[written..limit];
            let mut dst = OutBuffer::around(window);
            let hint = decoder.run(&mut src, &mut dst).map_err(lib_err)?;
            let made = dst.pos();
            written += made;
            if hint == 0 && src.pos() == input.len() {
                return Ok(written);
            }
            if src.pos() == in_before && made == 0 && written < limit {
                return Err(CompressionError::Truncated { codec });
            }
        }
    }
}

/// Makes `out[..need]` addressable, zero-filling only bytes never used before.
fn ensure_len(out: &mut Vec<u8>, need: usize) {
    if out.len() < need {
        out.resize(need, 0);
    }
}

/// Grows the usable output window after `written` bytes filled it, geometrically and
/// never past `cap`.
fn grow(
    out: &mut Vec<u8>,
    written: usize,
    cap: usize,
    input_len: usize,
    codec: &'static str,
) -> Result<(), CompressionError> {
    if written >= cap {
        return Err(CompressionError::OutputTooLarge { codec, cap });
    }
    let guess = input_len.saturating_mul(4).max(16 << 10);
    let target = written.saturating_mul(2).max(guess).min(cap);
    ensure_len(out, target);
    Ok(())
}

/// Length of a gzip member header at the front of `input` (RFC 1952 section 2.3).
fn gzip_header_len(input: &[u8]) -> Result<usize, CompressionError> {
    let codec = "gzip";
    let truncated = CompressionError::Truncated { codec };
    if input.len() < 10 {
        return Err(truncated);
    }
    if input[0] != 0x1f || input[1] != 0x8b {
        return Err(corrupt(codec, "bad magic"));
    }
    if input[2] != 8 {
        return Err(corrupt(codec, "compression method is not deflate"));
    }
    let flags = input[3];
    if flags & 0xe0 != 0 {
        return Err(corrupt(codec, "reserved header flags set"));
    }
    let mut pos = 10;
    if flags & 0x04 != 0 {
        // FEXTRA: two-byte little-endian length, then that many bytes.
        let xlen = input.get(pos..pos + 2).ok_or(truncated.clone())?;
        pos += 2 + usize::from(u16::from_le_bytes([xlen[0], xlen[1]]));
    }
    for flag in [0x08, 0x10] {
        // FNAME, FCOMMENT: zero-terminated.
        if flags & flag != 0 {
            let text = input.get(pos..).ok_or(truncated.clone())?;
            let nul = text.iter().position(|&b| b == 0).ok_or(truncated.clone())?;
            pos += nul + 1;
        }
    }
    if flags & 0x02 != 0 {
        pos += 2; // FHCRC
    }
    if pos > input.len() {
        return Err(truncated);
    }
    Ok(pos)
}

/// Decompresses one raw snappy block into `out[at..]`, returning its length.
fn snappy_block(
    decoder: &mut snap::raw::Decoder,
    block: &[u8],
    out: &mut Vec<u8>,
    at: usize,
    cap: usize,
) -> Result<usize, CompressionError> {
    let codec = "snappy";
    let len = snap::raw::decompress_len(block).map_err(|e| corrupt(codec, e.to_string()))?;
    if len > cap.saturating_sub(at) {
        return Err(CompressionError::OutputTooLarge { codec, cap });
    }
    if len > snappy_max_output(block.len()) {
        return Err(corrupt(
            codec,
            "stated length exceeds what the block can hold",
        ));
    }
    if block.is_empty() {
        // Even empty input compresses to one byte (its zero length).
        return Err(CompressionError::Truncated { codec });
    }
    ensure_len(out, at + len);
    decoder
        .decompress(block, &mut out[at..at + len])
        .map_err(|e| corrupt(codec, e.to_string()))
}

/// The most a raw snappy block of `len` bytes can decompress to: no element yields more
/// than a 3-byte copy's 64 bytes.
fn snappy_max_output(len: usize) -> usize {
    len.saturating_mul(22)
}

/// The most an LZ4 block of `len` bytes can decompress to: a sequence's match grows by
/// at most 255 bytes per byte of length, and literals are copied one for one.
fn lz4_max_output(len: usize) -> usize {
    len.saturating_mul(255).saturating_add(64)
}

/// The most a zstd frame of `len` bytes can decompress to: every block takes at least
/// 4 bytes (a 3-byte header and one byte of content) and yields at most 128 KiB.
fn zstd_max_output(len: usize) -> u64 {
    (len as u64 / 4 + 1).saturating_mul(128 << 10)
}

/// Decompresses one LZ4 frame into `out`, returning the decompressed length.
fn unlz4(
    input: &[u8],
    out: &mut Vec<u8>,
    cap: usize,
    legacy: bool,
) -> Result<usize, CompressionError> {
    let codec = "lz4";
    let truncated = CompressionError::Truncated { codec };
    if input.len() < 7 {
        return Err(truncated);
    }
    if input[..4] != LZ4_MAGIC {
        return Err(corrupt(codec, "bad frame magic"));
    }
    let flg = input[4];
    let bd = input[5];
    if flg >> 6 != 1 {
        return Err(corrupt(codec, "unknown frame version"));
    }
    if flg & 0x02 != 0 || bd & 0x8f != 0 {
        return Err(corrupt(codec, "reserved frame bits set"));
    }
    let independent = flg & 0x20 != 0;
    let block_checksum = flg & 0x10 != 0;
    let has_content_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    if flg & 0x01 != 0 {
        return Err(CompressionError::Unsupported {
            codec,
            what: "dictionary id",
        });
    }
    let block_max = match (bd >> 4) & 0x07 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        _ => return Err(corrupt(codec, "invalid block maximum size")),
    };
    let mut pos = 6;
    if has_content_size {
        let raw = input.get(6..14).ok_or(truncated.clone())?;
        let mut size = [0u8; 8];
        size.copy_from_slice(raw);
        if u64::from_le_bytes(size) > cap as u64 {
            return Err(CompressionError::OutputTooLarge { codec, cap });
        }
        pos = 14;
    }
    let hc = *input.get(pos).ok_or(truncated.clone())?;
    if !legacy && hc != lz4_header_checksum(&input[4..pos]) {
        return Err(corrupt(codec, "frame descriptor checksum mismatch"));
    }
    pos += 1;

    let mut written = 0;
    loop {
        let word = input.get(pos..pos + 4).ok_or(truncated.clone())?;
        let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        pos += 4;
        if word == 0 {
            break;
        }
        let stored = word & LZ4_UNCOMPRESSED != 0;
        let size = (word & !LZ4_UNCOMPRESSED) as usize;
        if size > block_max {
            return Err(corrupt(codec, "block larger than the frame's maximum"));
        }
        let block = input.get(pos..pos + size).ok_or(truncated.clone())?;
        pos += size;
        if block_checksum {
            let sum = input.get(pos..pos + 4).ok_or(truncated.clone())?;
            if u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]) != XxHash32::oneshot(0, block) {
                return Err(corrupt(codec, "block checksum mismatch"));
            }
            pos += 4;
        }
        if stored {
            if size > cap - written {
                return Err(CompressionError::OutputTooLarge { codec, cap });
            }
            ensure_len(out, written + size);
            out[written..written + size].copy_from_slice(block);
            written += size;
            continue;
        }
        // Room for what this block can hold, not for the frame's largest block.
        let room = block_max.min(lz4_max_output(size));
        let limit = cap.min(written + room);
        ensure_len(out, limit);
        let result = if independent {
            lz4_flex::block::decompress_into(block, &mut out[written..limit])
        } else {
            let (dict, rest) = out.split_at_mut(written);
            let dict = &dict[dict.len().saturating_sub(64 << 10)..];
            lz4_flex::block::decompress_into_with_dict(block, &mut rest[..limit - written], dict)
        };
        match result {
            Ok(n) => written += n,
            Err(DecompressError::OutputTooSmall { .. }) if limit == cap => {
                return Err(CompressionError::OutputTooLarge { codec, cap });
            }
            Err(e) => return Err(corrupt(codec, e.to_string())),
        }
    }
    if content_checksum {
        let sum = input.get(pos..pos + 4).ok_or(truncated)?;
        let mut hasher = XxHash32::with_seed(0);
        hasher.write(&out[..written]);
        if u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]) != hasher.finish_32() {
            return Err(corrupt(codec, "content checksum mismatch"));
        }
    }
    // Bytes after the end mark are ignored, as Kafka's Lz4BlockInputStream does.
    Ok(written)
}

/// Writes `input` in the xerial snappy framing Java clients use (tests and the legacy
/// writer; v2 batches written here use raw snappy).
pub(crate) fn xerial_snappy(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    // xerial's default block size is 32 KiB.
    for chunk in input.chunks(32 << 10) {
        let at = out.len();
        out.resize(at + 4 + snap::raw::max_compress_len(chunk.len()), 0);
        let n =
            encoder
                .compress(chunk, &mut out[at + 4..])
                .map_err(|e| CompressionError::Codec {
                    codec: "snappy",
                    reason: e.to_string(),
                })?;
        out[at..at + 4].copy_from_slice(&(n as i32).to_be_bytes());
        out.truncate(at + 4 + n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CODECS: [Compression; 5] = Compression::ALL;

    fn round_trip(codec: Compression, input: &[u8]) -> Vec<u8> {
        let mut c = Compressor::new();
        let mut buf = vec![0u8; Compressor::max_compressed_len(codec, input.len())];
        let n = c
            .compress(codec, input, &mut buf)
            .unwrap()
            .expect("fits in bound");
        let mut d = Decompressor::new(1 << 20);
        let mut out = Vec::new();
        let m = d.decompress(codec, &buf[..n], &mut out).unwrap();
        out.truncate(m);
        out
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| ((i * 7) % 251) as u8 ^ (i / 97) as u8)
            .collect()
    }

    #[test]
    fn every_codec_round_trips_sizes_around_block_edges() {
        for codec in CODECS {
            for len in [
                0,
                1,
                15,
                4096,
                LZ4_BLOCK - 1,
                LZ4_BLOCK,
                LZ4_BLOCK + 1,
                200_000,
            ] {
                let input = sample(len);
                assert_eq!(round_trip(codec, &input), input, "{codec:?} len {len}");
            }
        }
    }

    #[test]
    fn incompressible_lz4_blocks_are_stored() {
        let mut x = 0x1234_5678u32;
        let input: Vec<u8> = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let bound = Compressor::max_compressed_len(Compression::Lz4, input.len());
        let mut buf = vec![0u8; bound];
        let n = Compressor::new()
            .compress(Compression::Lz4, &input, &mut buf)
            .unwrap()
            .unwrap();
        assert!(n <= bound);
        let first = u32::from_le_bytes(buf[7..11].try_into().unwrap());
        assert_ne!(first & LZ4_UNCOMPRESSED, 0, "random data stored raw");
        assert_eq!(round_trip(Compression::Lz4, &input), input);
    }

    #[test]
    fn too_small_output_is_none_not_error() {
        let input = sample(10_000);
        for codec in CODECS {
            let mut buf = vec![0u8; 20];
            assert_eq!(
                Compressor::new().compress(codec, &input, &mut buf).unwrap(),
                None,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn a_compressor_survives_outputs_that_do_not_fit() {
        // An unfinished stream (output too small) must not poison the reused state.
        let mut c = Compressor::new();
        let mut d = Decompressor::new(1 << 20);
        let mut out = Vec::new();
        for codec in CODECS {
            for round in 0..50 {
                let input = sample(50 + round * 37);
                for room in [18, 40, 88, 100, input.len(), input.len() + 64] {
                    let mut buf = vec![0u8; room];
                    if let Some(n) = c.compress(codec, &input, &mut buf).unwrap() {
                        let m = d.decompress(codec, &buf[..n], &mut out).unwrap();
                        assert_eq!(&out[..m], &input[..], "{codec:?} room {room}");
                    }
                }
            }
        }
    }

    #[test]
    fn gzip_state_survives_thousands_of_outputs_that_do_not_fit() {
        // zlib-rs 0.6.8 panicked here after ~800 reuses when a stream was cut short.
        let input = br#"{"id":0,"user":"user-4574","event":"purchase","path":"/items/62260"}"#;
        let mut c = Compressor::new();
        for room in [30, 60, 100] {
            let mut out = vec![0u8; room];
            for _ in 0..3000 {
                let _ = c.compress(Compression::Gzip, input, &mut out).unwrap();
            }
        }
    }

    #[test]
    fn compressor_state_is_reused_across_inputs() {
        let mut c = Compressor::new();
        let mut d = Decompressor::new(1 << 20);
        let mut buf = vec![0u8; 1 << 18];
        let mut out = Vec::new();
        for codec in CODECS {
            for round in 0..3 {
                let input = sample(1000 + round * 5000);
                let n = c.compress(codec, &input, &mut buf).unwrap().unwrap();
                let m = d.decompress(codec, &buf[..n], &mut out).unwrap();
                assert_eq!(&out[..m], &input[..], "{codec:?} round {round}");
            }
        }
    }

    #[test]
    fn our_lz4_frames_are_standard_and_we_read_standard_frames() {
        use std::io::{Read, Write};
        let input = sample(150_000);
        let mut buf = vec![0u8; Compressor::max_compressed_len(Compression::Lz4, input.len())];
        let n = Compressor::new()
            .compress(Compression::Lz4, &input, &mut buf)
            .unwrap()
            .unwrap();
        let mut decoded = Vec::new();
        lz4_flex::frame::FrameDecoder::new(&buf[..n])
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, input);

        // Frames from the reference encoder with checksums, content size, linked blocks.
        for (independent, checksums) in [(true, false), (false, true), (false, false)] {
            let mut info = lz4_flex::frame::FrameInfo::new()
                .block_checksums(checksums)
                .content_checksum(checksums)
                .content_size(Some(input.len() as u64));
            info.block_mode = if independent {
                lz4_flex::frame::BlockMode::Independent
            } else {
                lz4_flex::frame::BlockMode::Linked
            };
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(&input).unwrap();
            let frame = enc.finish().unwrap();
            let mut out = Vec::new();
            let m = Decompressor::new(1 << 20)
                .decompress(Compression::Lz4, &frame, &mut out)
                .unwrap();
            assert_eq!(
                &out[..m],
                &input[..],
                "independent {independent} checksums {checksums}"
            );
        }
    }

    #[test]
    fn legacy_lz4_header_checksum_is_only_tolerated_for_legacy() {
        let input = sample(1000);
        let mut buf = vec![0u8; 2000];
        let n = Compressor::new()
            .compress(Compression::Lz4, &input, &mut buf)
            .unwrap()
            .unwrap();
        // Kafka before 0.10 hashed the magic too (KAFKA-3160).
        buf[6] = (XxHash32::oneshot(0, &buf[..6]) >> 8) as u8;
        let mut out = Vec::new();
        let mut d = Decompressor::new(1 << 20);
        assert!(matches!(
            d.decompress(Compression::Lz4, &buf[..n], &mut out),
            Err(CompressionError::Corrupt { .. })
        ));
        let m = d
            .decompress_inner(Compression::Lz4, &buf[..n], &mut out, true)
            .unwrap();
        assert_eq!(&out[..m], &input[..]);
    }

    #[test]
    fn gzip_reads_what_flate2_writes_with_header_fields_and_members() {
        use std::io::Write;
        let input = sample(50_000);
        let mut two = Vec::new();
        for part in input.chunks(30_000) {
            let mut enc = flate2::GzBuilder::new()
                .filename("batch")
                .comment("kring")
                .extra(vec![1, 2, 3])
                .write(Vec::new(), flate2::Compression::fast());
            enc.write_all(part).unwrap();
            two.extend(enc.finish().unwrap());
        }
        two.extend_from_slice(b"trailing junk ignored");
        let mut out = Vec::new();
        let m = Decompressor::new(1 << 20)
            .decompress(Compression::Gzip, &two, &mut out)
            .unwrap();
        assert_eq!(&out[..m], &input[..]);

        // And flate2's reader accepts ours.
        let mut buf = vec![0u8; 60_000];
        let n = Compressor::new()
            .compress(Compression::Gzip, &input, &mut buf)
            .unwrap()
            .unwrap();
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&buf[..n]), &mut decoded)
            .unwrap();
        assert_eq!(decoded, input);
    }

    #[test]
    fn xerial_snappy_is_read() {
        let input = sample(100_000);
        let mut framed = Vec::new();
        xerial_snappy(&input, &mut framed).unwrap();
        let mut out = Vec::new();
        let m = Decompressor::new(1 << 20)
            .decompress(Compression::Snappy, &framed, &mut out)
            .unwrap();
        assert_eq!(&out[..m], &input[..]);
    }

    #[test]
    fn stated_sizes_beyond_what_the_input_can_hold_reserve_nothing() {
        let cap = 8 << 20;
        // Snappy: a raw block stating 1 MiB, then a one-byte literal.
        let mut snappy = Vec::new();
        let mut len = 1u32 << 20;
        while len >= 0x80 {
            snappy.push(len as u8 | 0x80);
            len >>= 7;
        }
        snappy.extend_from_slice(&[len as u8, 0x00, b'a']);
        // LZ4: a frame of 4 MiB blocks whose one block is three bytes (a match before
        // any output).
        let (flg, bd) = (0x60, 0x70);
        let mut lz4 = LZ4_MAGIC.to_vec();
        lz4.extend_from_slice(&[flg, bd, lz4_header_checksum(&[flg, bd])]);
        lz4.extend_from_slice(&3u32.to_le_bytes());
        lz4.extend_from_slice(&[0x0f, 0x05, 0x00, 0, 0, 0, 0]);
        // zstd: the header of a frame of 2 MiB, without its blocks.
        let zeros = vec![0u8; 2 << 20];
        let mut frame = vec![0u8; Compressor::max_compressed_len(Compression::Zstd, zeros.len())];
        let n = Compressor::new()
            .compress(Compression::Zstd, &zeros, &mut frame)
            .unwrap()
            .unwrap();
        assert!(n > 18);
        let zstd = frame[..18].to_vec();
        for (codec, input) in [
            (Compression::Snappy, snappy),
            (Compression::Lz4, lz4),
            (Compression::Zstd, zstd),
        ] {
            let mut out = Vec::new();
            let result = Decompressor::new(cap).decompress(codec, &input, &mut out);
            assert!(
                out.len() <= 255 * input.len() + 64,
                "{codec:?}: {} bytes of input made room for {}",
                input.len(),
                out.len()
            );
            assert!(
                matches!(result, Err(CompressionError::Corrupt { .. })),
                "{codec:?}: {result:?}"
            );
        }
    }

    #[test]
    fn decompression_bombs_hit_the_cap() {
        let zeros = vec![0u8; 1 << 20];
        for codec in CODECS {
            let mut buf = vec![0u8; Compressor::max_compressed_len(codec, zeros.len())];
            let n = Compressor::new()
                .compress(codec, &zeros, &mut buf)
                .unwrap()
                .unwrap();
            let mut out = Vec::new();
            let err = Decompressor::new(64 << 10)
                .decompress(codec, &buf[..n], &mut out)
                .unwrap_err();
            assert!(
                matches!(err, CompressionError::OutputTooLarge { cap: 65536, .. }),
                "{codec:?}: {err}"
            );
            assert!(out.len() <= 64 << 10, "{codec:?} grew to {}", out.len());
        }
        // A zstd frame without a content size is still capped while streaming.
        let mut enc = zstd::stream::raw::Encoder::new(3).unwrap();
        enc.set_parameter(zstd::stream::raw::CParameter::ContentSizeFlag(false))
            .unwrap();
        let mut frame = vec![0u8; 1 << 16];
        let mut src = InBuffer::around(&zeros);
        let mut dst = OutBuffer::around(&mut frame[..]);
        enc.run(&mut src, &mut dst).unwrap();
        enc.finish(&mut dst, true).unwrap();
        let n = dst.pos();
        let mut out = Vec::new();
        assert!(matches!(
            Decompressor::new(100_000).decompress(Compression::Zstd, &frame[..n], &mut out),
            Err(CompressionError::OutputTooLarge { .. })
        ));
        let m = Decompressor::new(2 << 20)
            .decompress(Compression::Zstd, &frame[..n], &mut out)
            .unwrap();
        assert_eq!(&out[..m], &zeros[..]);
    }

    #[test]
    fn truncated_and_corrupt_inputs_are_errors() {
        let input = sample(20_000);
        for codec in CODECS[1..].iter().copied() {
            let mut buf = vec![0u8; Compressor::max_compressed_len(codec, input.len())];
            let n = Compressor::new()
                .compress(codec, &input, &mut buf)
                .unwrap()
                .unwrap();
            let mut d = Decompressor::new(1 << 20);
            let mut out = Vec::new();
            for cut in [0, 1, 5, n / 2, n - 1] {
                assert!(
                    d.decompress(codec, &buf[..cut], &mut out).is_err(),
                    "{codec:?} cut at {cut} of {n}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn prop_round_trip(
            codec in proptest::sample::select(CODECS.to_vec()),
            input in proptest::collection::vec(
                prop_oneof![Just(0u8), Just(b'a'), any::<u8>()], 0..20_000),
        ) {
            prop_assert_eq!(round_trip(codec, &input), input);
        }

        #[test]
        fn prop_garbage_never_panics(
            codec in proptest::sample::select(CODECS.to_vec()),
            input in proptest::collection::vec(any::<u8>(), 0..2000),
        ) {
            let mut out = Vec::new();
            let _ = Decompressor::new(1 << 16).decompress(codec, &input, &mut out);
            prop_assert!(out.len() <= 1 << 16);
        }
    }
}
