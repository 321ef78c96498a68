//! Record batch benches: kring's in-place `BatchBuilder` and borrowed reader against
//! the `kafka-protocol` crate doing the same work in the same run, plus the raw
//! lz4/zstd codecs on the same bytes.
//!
//! Workloads: 1, 100 and 10,000 records of 100 B and 1 KiB (an 8-byte key plus a
//! JSON-like value), without and with two headers (`+h`), uncompressed and with each
//! codec. Every benchmark's throughput is the uncompressed batch size, so criterion's
//! bytes/s are comparable across codecs and libraries; records/s follow from the
//! record count in the name. `benches/records_report.py` turns a run into the table.
//!
//! Groups:
//! - `encode/<codec>`: build and seal one batch (compressing on seal). kring appends
//!   borrowed slices into reused arenas; kafka-protocol encodes prebuilt `Record`s
//!   into a reused `BytesMut` (its best case: building the `Record`s is not timed).
//!   `kafka-protocol+build` (uncompressed only) also times building those `Record`s
//!   from the same `Bytes`-backed data, as a user holding the data would.
//! - `decode/<codec>`: check the CRC, decompress, and iterate every record, touching
//!   key, value and each header. Both libraries read the same bytes.
//! - `iterate`: kring's borrowed iteration alone (no CRC), for ns per record.
//! - `encode/lz4` and `encode/zstd` also hold `raw-*` entries for the 10,000-record
//!   workloads: the codec crate alone compressing the records section of the same
//!   batch, benched right after the batch encode, for the "batch vs raw codec" ratio.
//!
//! Run: `cargo bench --bench records` (about 15 minutes on 2 cores); filter with a
//! substring, e.g. `cargo bench --bench records -- encode/none`.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records as kp;
use kring::record::{
    BatchBuilder, BatchOptions, Batches, Compression, Compressor, Decompressor, Header,
    RecordBatchRef,
};

const COUNTS: [usize; 3] = [1, 100, 10_000];
const SIZES: [usize; 2] = [100, 1024];
const KEY_LEN: usize = 8;
const BASE_TS: i64 = 1_700_000_000_000;
const TRACE: &[u8] = b"4bf92f3577b34da6";
const CONTENT_TYPE: &[u8] = b"application/json";

struct Workload {
    n: usize,
    size: usize,
    headers: bool,
    /// Every key and value, back to back.
    flat: Bytes,
    /// (key start, value start, value end) of each record in `flat`.
    spans: Vec<(usize, usize, usize)>,
    /// The same records as kafka-protocol wants them.
    peer: Vec<kp::Record>,
}

impl Workload {
    fn new(n: usize, size: usize, headers: bool) -> Self {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let keys: Vec<[u8; KEY_LEN]> = (0..n).map(|_| (next() % 100_000).to_be_bytes()).collect();
        let values: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                // Log-event-like JSON: compressible, but not trivially.
                let mut v = format!(
                    r#"{{"id":{i},"user":"user-{}","event":"{}","path":"/items/{}","latency_ms":{},"ok":{}"#,
                    next() % 5000,
                    ["click", "view", "purchase", "scroll"][(next() % 4) as usize],
                    next() % 100_000,
                    next() % 2000,
                    next() % 2 == 0,
                )
                .into_bytes();
                while v.len() < size - KEY_LEN {
                    let pad = format!(r#","k{}":"{:x}""#, v.len() % 97, next());
                    v.extend_from_slice(pad.as_bytes());
                }
                v.truncate(size - KEY_LEN - 1);
                v.push(b'}');
                v
            })
            .collect();
        // Keys and values live back to back in one buffer, as records parsed out of an
        // input stream do (10,000 separate small allocations would make both libraries
        // wait on cache misses rather than encode). kafka-protocol gets slices of it.
        let mut flat = Vec::with_capacity(n * size);
        let mut spans = Vec::with_capacity(n);
        for (k, v) in keys.iter().zip(&values) {
            let at = flat.len();
            flat.extend_from_slice(k);
            flat.extend_from_slice(v);
            spans.push((at, at + KEY_LEN, at + KEY_LEN + v.len()));
        }
        let flat = Bytes::from(flat);
        let peer = spans
            .iter()
            .enumerate()
            .map(|(i, &(k, v, end))| peer_record(i, flat.slice(k..v), flat.slice(v..end), headers))
            .collect();
        Workload {
            n,
            size,
            headers,
            flat,
            spans,
            peer,
        }
    }

    fn name(&self) -> String {
        format!(
            "{}x{}{}",
            self.n,
            self.size,
            if self.headers { "+h" } else { "" }
        )
    }

    fn headers(&self) -> &'static [Header<'static>] {
        const H: [Header<'static>; 2] = [
            Header {
                key: "trace-id",
                value: Some(TRACE),
            },
            Header {
                key: "content-type",
                value: Some(CONTENT_TYPE),
            },
        ];
        if self.headers { &H } else { &[] }
    }

    fn arena_capacity(&self) -> usize {
        self.n * (self.size + 80) + 4096
    }
}

/// kring's reusable encode state: two arenas and the codec contexts.
struct Encoder {
    arena: Vec<u8>,
    out: Vec<u8>,
    compressor: Compressor,
}

impl Encoder {
    fn new(w: &Workload) -> Self {
        Encoder {
            arena: Vec::with_capacity(w.arena_capacity()),
            out: Vec::with_capacity(w.arena_capacity()),
            compressor: Compressor::new(),
        }
    }

    /// Builds and seals one batch; returns its encoded length.
    fn encode(&mut self, w: &Workload, codec: Compression) -> usize {
        let arena = std::mem::take(&mut self.arena);
        let mut b = BatchBuilder::new(arena, BatchOptions::default()).unwrap();
        let headers = w.headers();
        for (i, &(k, v, end)) in w.spans.iter().enumerate() {
            b.append(
                BASE_TS + i as i64,
                Some(&w.flat[k..v]),
                Some(&w.flat[v..end]),
                headers,
            )
            .unwrap();
        }
        let out = std::mem::take(&mut self.out);
        let (sealed, spare) = b.seal_compressed(codec, &mut self.compressor, out).unwrap();
        let len = sealed.len();
        self.arena = sealed.into_inner();
        self.out = spare;
        len
    }

    fn batch(&mut self, w: &Workload, codec: Compression) -> Vec<u8> {
        let len = self.encode(w, codec);
        self.arena[..len].to_vec()
    }
}

/// One record as kafka-protocol wants it.
fn peer_record(i: usize, key: Bytes, value: Bytes, headers: bool) -> kp::Record {
    let mut h = IndexMap::new();
    if headers {
        h.insert(
            StrBytes::from_static_str("trace-id"),
            Some(Bytes::from_static(TRACE)),
        );
        h.insert(
            StrBytes::from_static_str("content-type"),
            Some(Bytes::from_static(CONTENT_TYPE)),
        );
    }
    kp::Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: kp::TimestampType::Creation,
        offset: i as i64,
        // kafka-protocol starts a new batch when offset - sequence changes.
        sequence: i as i32,
        timestamp: BASE_TS + i as i64,
        key: Some(key),
        value: Some(value),
        headers: h,
    }
}

fn peer_codec(codec: Compression) -> kp::Compression {
    match codec {
        Compression::Gzip => kp::Compression::Gzip,
        Compression::Snappy => kp::Compression::Snappy,
        Compression::Lz4 => kp::Compression::Lz4,
        Compression::Zstd => kp::Compression::Zstd,
        _ => kp::Compression::None,
    }
}

fn peer_encode(w: &Workload, codec: Compression, buf: &mut BytesMut) -> usize {
    buf.clear();
    let options = kp::RecordEncodeOptions {
        version: 2,
        compression: peer_codec(codec),
    };
    kp::RecordBatchEncoder::encode(buf, w.peer.iter(), &options).unwrap();
    buf.len()
}

/// CRC check, decompression and a touch of every field; returns a checksum.
fn kring_read(bytes: &[u8], decompressor: &mut Decompressor, scratch: &mut Vec<u8>) -> u64 {
    let mut sum = 0u64;
    for batch in Batches::new(bytes).verify_crc(true) {
        let batch = batch.unwrap();
        for r in batch.records(decompressor, scratch).unwrap() {
            let r = r.unwrap();
            sum = sum.wrapping_add(r.offset() as u64 ^ r.timestamp() as u64);
            sum += r.key().map_or(0, |k| k.len() as u64);
            sum += r.value().map_or(0, |v| v.len() as u64);
            for h in r.headers() {
                let h = h.unwrap();
                sum += h.key.len() as u64 + h.value.map_or(0, |v| v.len() as u64);
            }
        }
    }
    sum
}

fn peer_read(bytes: &Bytes) -> u64 {
    let mut buf = bytes.clone();
    let mut sum = 0u64;
    for set in kp::RecordBatchDecoder::decode_all(&mut buf).unwrap() {
        for r in &set.records {
            sum = sum.wrapping_add(r.offset as u64 ^ r.timestamp as u64);
            sum += r.key.as_ref().map_or(0, |k| k.len() as u64);
            sum += r.value.as_ref().map_or(0, |v| v.len() as u64);
            for (k, v) in &r.headers {
                sum += k.len() as u64 + v.as_ref().map_or(0, |v| v.len() as u64);
            }
        }
    }
    sum
}

fn workloads() -> Vec<Workload> {
    let mut all = Vec::new();
    for &n in &COUNTS {
        for &size in &SIZES {
            for headers in [false, true] {
                all.push(Workload::new(n, size, headers));
            }
        }
    }
    all
}

fn benches(c: &mut Criterion) {
    let workloads = workloads();

    for codec in Compression::ALL {
        let mut group = c.benchmark_group(format!("encode/{}", codec.name()));
        group.sampling_mode(SamplingMode::Flat);
        for w in &workloads {
            let mut enc = Encoder::new(w);
            let uncompressed = enc.encode(w, Compression::None);
            group.throughput(Throughput::Bytes(uncompressed as u64));
            group.bench_function(BenchmarkId::new("kring", w.name()), |b| {
                b.iter(|| black_box(enc.encode(black_box(w), codec)))
            });
            let mut buf = BytesMut::with_capacity(w.arena_capacity());
            group.bench_function(BenchmarkId::new("kafka-protocol", w.name()), |b| {
                b.iter(|| black_box(peer_encode(black_box(w), codec, &mut buf)))
            });
            if matches!(codec, Compression::Lz4 | Compression::Zstd) && w.n == 10_000 {
                // The codec crate alone on the same records section, benched next to the
                // batch encode so that both see the same machine state.
                let batch = enc.batch(w, Compression::None);
                bench_raw(&mut group, codec, w, &batch[61..]);
            }
            if codec == Compression::None {
                // kafka-protocol encodes owned `Record`s: starting from the same
                // `Bytes`-backed data kring appends from, a user builds them first.
                let mut records = Vec::with_capacity(w.n);
                group.bench_function(BenchmarkId::new("kafka-protocol+build", w.name()), |b| {
                    b.iter(|| {
                        records.clear();
                        records.extend(w.spans.iter().enumerate().map(|(i, &(k, v, end))| {
                            peer_record(i, w.flat.slice(k..v), w.flat.slice(v..end), w.headers)
                        }));
                        buf.clear();
                        let options = kp::RecordEncodeOptions {
                            version: 2,
                            compression: kp::Compression::None,
                        };
                        kp::RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
                        black_box(buf.len())
                    })
                });
            }
        }
        group.finish();
    }

    for codec in Compression::ALL {
        let mut group = c.benchmark_group(format!("decode/{}", codec.name()));
        group.sampling_mode(SamplingMode::Flat);
        for w in &workloads {
            let mut enc = Encoder::new(w);
            let uncompressed = enc.encode(w, Compression::None);
            let batch = Bytes::from(enc.batch(w, codec));
            let mut decompressor = Decompressor::default();
            let mut scratch = Vec::new();
            // Both libraries read these bytes to the same sum.
            assert_eq!(
                kring_read(&batch, &mut decompressor, &mut scratch),
                peer_read(&batch),
                "{codec:?} {}",
                w.name()
            );
            group.throughput(Throughput::Bytes(uncompressed as u64));
            group.bench_function(BenchmarkId::new("kring", w.name()), |b| {
                b.iter(|| {
                    black_box(kring_read(
                        black_box(&batch),
                        &mut decompressor,
                        &mut scratch,
                    ))
                })
            });
            group.bench_function(BenchmarkId::new("kafka-protocol", w.name()), |b| {
                b.iter(|| black_box(peer_read(black_box(&batch))))
            });
        }
        group.finish();
    }

    {
        let mut group = c.benchmark_group("iterate");
        for w in workloads.iter().filter(|w| w.n == 10_000) {
            let mut enc = Encoder::new(w);
            let batch = enc.batch(w, Compression::None);
            group.throughput(Throughput::Elements(w.n as u64));
            group.bench_function(BenchmarkId::new("kring", w.name()), |b| {
                b.iter(|| {
                    let batch = RecordBatchRef::new(black_box(&batch)).unwrap();
                    let mut sum = 0usize;
                    for r in batch.records().unwrap() {
                        let r = r.unwrap();
                        sum += r.key().map_or(0, <[u8]>::len) + r.value().map_or(0, <[u8]>::len);
                        for h in r.headers() {
                            sum += h.unwrap().key.len();
                        }
                    }
                    black_box(sum)
                })
            });
        }
        group.finish();
    }
}

/// The raw codec on `records`: lz4_flex's block compressor over the 64 KiB blocks a
/// frame is made of (what the batch encoder calls), lz4_flex's own frame encoder,
/// and zstd's one-shot compressor at the same level.
fn bench_raw(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    codec: Compression,
    w: &Workload,
    records: &[u8],
) {
    match codec {
        Compression::Lz4 => {
            let mut out = vec![0u8; lz4_flex::block::get_maximum_output_size(64 << 10) + 16];
            let mut table = lz4_flex::block::CompressTable::large();
            group.bench_function(BenchmarkId::new("raw-lz4_flex-block", w.name()), |b| {
                b.iter(|| {
                    let mut total = 0;
                    for block in records.chunks(64 << 10) {
                        total +=
                            lz4_flex::block::compress_into_with_table(block, &mut out, &mut table)
                                .unwrap();
                    }
                    black_box(total)
                })
            });
            let mut frame = Vec::with_capacity(records.len() + 4096);
            group.bench_function(BenchmarkId::new("raw-lz4_flex-frame", w.name()), |b| {
                b.iter(|| {
                    use std::io::Write;
                    frame.clear();
                    let mut e = lz4_flex::frame::FrameEncoder::new(&mut frame);
                    e.write_all(records).unwrap();
                    e.finish().unwrap();
                    black_box(frame.len())
                })
            });
        }
        _ => {
            let mut ctx = zstd::bulk::Compressor::new(3).unwrap();
            let mut out = vec![0u8; zstd::zstd_safe::compress_bound(records.len())];
            group.bench_function(BenchmarkId::new("raw-zstd-bulk", w.name()), |b| {
                b.iter(|| black_box(ctx.compress_to_buffer(records, &mut out[..]).unwrap()))
            });
        }
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args()
}

criterion_group! {
    name = records;
    config = config();
    targets = benches
}
criterion_main!(records);
