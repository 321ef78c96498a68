//! The fuzz targets' seeds (`fuzz/seeds/`), written with kring's real encoders, and a
//! replay of every seed (and every input a fuzzer once crashed on, kept beside them)
//! through the harnesses the targets run (`kring::fuzzing`), so a regression shows in
//! the normal test suite without a nightly toolchain.
//!
//! `KRING_FUZZ_SEEDS=write cargo test --test fuzz_seeds` rewrites the generated seeds;
//! otherwise the committed files must equal what the encoders give (the input formats
//! and the seeds stay in step). The reports of the main seeds are checked exactly, so a
//! seed that stopped reaching deep code fails here.

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use kring::fuzzing::connection::{
    self, ConnectionScript, END_WITH_CLOSE, NO_HANDSHAKE, Op, READ_WITH, SASL_PLAIN, SASL_SCRAM,
};
use kring::fuzzing::decompress::{self, LEGACY_LZ4, RELEASE, op_of};
use kring::fuzzing::fetch::{
    self, CHECK_CRCS, FetchScript, OWNED, READ_COMMITTED, Round, SKIP_BAD,
};
use kring::protocol::messages::api_versions::ApiVersion;
use kring::protocol::messages::{
    ApiVersionsResponse, FetchResponse, MetadataResponse, ProduceResponse,
    SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kring::protocol::{ApiKey, ApiVersionsTable, KafkaCode, Response, encode_response_frame};
use kring::record::{
    BatchBuilder, BatchOptions, Compression, Compressor, ControlRecord, Header, LegacyWriter,
    TimestampType,
};

fn seeds_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target)
}

// ---- connection ------------------------------------------------------------------

fn frame<R: Response>(response: &R, version: i16, correlation_id: i32) -> Vec<u8> {
    let mut buf = BytesMut::new();
    encode_response_frame(&mut buf, response, version, correlation_id).expect("encodes");
    buf.to_vec()
}

/// Every API at its supported range, as a current broker answers.
fn all_versions() -> ApiVersionsResponse {
    let apis = ApiKey::ALL
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key())
                .with_min_version(a.versions().min)
                .with_max_version(a.max_stable_version())
        })
        .collect();
    ApiVersionsResponse::default().with_api_keys(apis)
}

fn negotiated(api: ApiKey) -> i16 {
    ApiVersionsTable::from_response(&all_versions())
        .version_for(api)
        .expect("every API is offered")
}

fn handshake_frame() -> Vec<u8> {
    let version = ApiKey::ApiVersions.max_stable_version();
    frame(&all_versions(), version, 0)
}

/// The `Op::Send` argument for request kind `which` at an explicit `version`.
fn explicit(which: usize, version: i16) -> u16 {
    let (api, _) = connection::request_kinds()[which];
    let n = connection::request_kinds().len();
    let step = usize::try_from(version - api.versions().min).expect("in range");
    u16::try_from(which + n * (2 * step + 1)).expect("fits")
}

fn small_fetch_response(version: i16) -> FetchResponse {
    FetchResponse::default().with_session_id(if version >= 7 { 1 } else { 0 })
}

fn connection_seeds() -> Vec<(&'static str, ConnectionScript)> {
    let metadata = negotiated(ApiKey::Metadata);
    let produce = negotiated(ApiKey::Produce);
    let mut seeds = Vec::new();

    // Handshake, then four pipelined requests (one acks=0) over a window of two,
    // answered in pieces that cut a size prefix and a body.
    let mut stream = handshake_frame();
    stream.extend(frame(&MetadataResponse::default(), metadata, 1));
    stream.extend(frame(&ProduceResponse::default(), produce, 2));
    stream.extend(frame(&MetadataResponse::default(), metadata, 4));
    seeds.push((
        "handshake_pipelined",
        ConnectionScript {
            flags: 0,
            max_in_flight: 1,
            read_chunk: 3,
            ops: vec![
                Op::Send(0),
                Op::Send(1),
                Op::Send(2),
                Op::Send(0),
                Op::Feed(3),
                Op::Feed(40),
                Op::FeedKiB(1),
            ],
            stream,
        },
    ));

    // KIP-511: an old broker answers ApiVersions v0 with UNSUPPORTED_VERSION and its
    // range; the client retries at v3.
    let old = ApiVersionsResponse::default()
        .with_error_code(KafkaCode::UNSUPPORTED_VERSION.code())
        .with_api_keys(vec![
            ApiVersion::default()
                .with_api_key(ApiKey::ApiVersions.key())
                .with_min_version(0)
                .with_max_version(3),
        ]);
    let mut stream = frame(&old, 0, 0);
    stream.extend(frame(&all_versions(), 3, 1));
    stream.extend(frame(&MetadataResponse::default(), metadata, 2));
    seeds.push((
        "kip511_fallback",
        ConnectionScript {
            flags: READ_WITH,
            max_in_flight: 4,
            read_chunk: 8,
            ops: vec![Op::Send(0)],
            stream,
        },
    ));

    // No handshake: explicit versions, read through the blocking path in 16-byte reads.
    let fetch_version = ApiKey::Fetch.max_stable_version();
    let metadata_v = ApiKey::Metadata.versions().min.max(4);
    let mut stream = frame(&MetadataResponse::default(), metadata_v, 0);
    stream.extend(frame(
        &small_fetch_response(fetch_version),
        fetch_version,
        1,
    ));
    seeds.push((
        "no_handshake_explicit",
        ConnectionScript {
            flags: NO_HANDSHAKE | READ_WITH,
            max_in_flight: 7,
            read_chunk: 0,
            ops: vec![
                Op::Send(explicit(0, metadata_v)),
                Op::Send(explicit(3, fetch_version)),
            ],
            stream,
        },
    ));

    // SASL PLAIN with a session lifetime: a request, then re-authentication (KIP-368)
    // once 58 s passed, then another request.
    let handshake_v = negotiated(ApiKey::SaslHandshake);
    let authenticate_v = negotiated(ApiKey::SaslAuthenticate);
    let mechanism = SaslHandshakeResponse::default().with_mechanisms(vec!["PLAIN".into()]);
    let mut first = handshake_frame();
    first.extend(frame(&mechanism, handshake_v, 1));
    first.extend(frame(
        &SaslAuthenticateResponse::default().with_session_lifetime_ms(60_000),
        authenticate_v,
        2,
    ));
    first.extend(frame(&MetadataResponse::default(), metadata, 3));
    let mut stream = first.clone();
    stream.extend(frame(&mechanism, handshake_v, 4));
    stream.extend(frame(
        &SaslAuthenticateResponse::default(),
        authenticate_v,
        5,
    ));
    stream.extend(frame(&MetadataResponse::default(), metadata, 6));
    seeds.push((
        "sasl_plain_reauth",
        ConnectionScript {
            flags: SASL_PLAIN,
            max_in_flight: 4,
            read_chunk: 6,
            ops: vec![
                Op::Send(0),
                Op::Feed(u16::try_from(first.len()).expect("small")),
                Op::Wait(5800),
                Op::Send(0),
            ],
            stream,
        },
    ));

    // SCRAM-SHA-256 up to a server-final whose signature is wrong.
    let mechanism = SaslHandshakeResponse::default().with_mechanisms(vec!["SCRAM-SHA-256".into()]);
    let server_first = format!(
        "r={}3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        connection::NONCE
    );
    let mut stream = handshake_frame();
    stream.extend(frame(&mechanism, handshake_v, 1));
    stream.extend(frame(
        &SaslAuthenticateResponse::default().with_auth_bytes(server_first.into_bytes().into()),
        authenticate_v,
        2,
    ));
    stream.extend(frame(
        &SaslAuthenticateResponse::default().with_auth_bytes(b"v=AAAA"[..].into()),
        authenticate_v,
        3,
    ));
    seeds.push((
        "sasl_scram_bad_signature",
        ConnectionScript {
            flags: SASL_SCRAM,
            max_in_flight: 4,
            read_chunk: 12,
            ops: vec![Op::Send(0)],
            stream,
        },
    ));

    // An HTTP server on the port.
    seeds.push((
        "not_kafka_http",
        ConnectionScript {
            flags: 0,
            max_in_flight: 0,
            read_chunk: 4,
            ops: vec![],
            stream: b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec(),
        },
    ));

    // A frame that claims nearly the whole cap and is cut off; the client closes and
    // the drain times out.
    let mut stream = frame(&MetadataResponse::default(), metadata_v, 0);
    let claimed = u32::try_from(connection::MAX_RESPONSE_SIZE - 1).expect("fits");
    stream.extend(claimed.to_be_bytes());
    stream.extend(1i32.to_be_bytes());
    stream.extend([0u8; 200]);
    seeds.push((
        "large_frame_cut_then_close",
        ConnectionScript {
            flags: NO_HANDSHAKE | END_WITH_CLOSE,
            max_in_flight: 3,
            read_chunk: 9,
            ops: vec![
                Op::Send(explicit(0, metadata_v)),
                Op::Send(explicit(3, fetch_version)),
            ],
            stream,
        },
    ));
    seeds
}

// ---- fetch -----------------------------------------------------------------------

const PRODUCER: i64 = 7;

fn batch(base: i64, count: usize, transactional: bool, codec: Compression) -> Vec<u8> {
    let options = BatchOptions::default()
        .with_base_offset(base)
        .with_producer(PRODUCER, 0, i32::try_from(base).unwrap_or(0))
        .with_transactional(transactional);
    let mut b = BatchBuilder::new(Vec::with_capacity(1 << 16), options).expect("arena");
    for i in 0..count {
        let offset = base + i as i64;
        let key = format!("k{offset}");
        let value = format!("value {offset} ").repeat(4);
        let headers = [Header::new("h", b"x")];
        b.append(
            i as i64,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &headers,
        )
        .expect("fits");
    }
    if codec == Compression::None {
        return b.seal().expect("seals").into_inner();
    }
    let (sealed, _) = b
        .seal_compressed(codec, &mut Compressor::new(), Vec::with_capacity(1 << 16))
        .expect("compresses");
    sealed.into_inner()
}

fn data(base: i64, count: usize) -> Vec<u8> {
    batch(base, count, false, Compression::None)
}

fn marker(offset: i64, commit: bool) -> Vec<u8> {
    let options = BatchOptions::default()
        .with_base_offset(offset)
        .with_producer(PRODUCER, 0, -1)
        .with_transactional(true)
        .with_control(true);
    let mut b = BatchBuilder::new(Vec::with_capacity(4096), options).expect("arena");
    b.append_control(0, ControlRecord::marker(commit, 0))
        .expect("fits");
    b.seal().expect("seals").into_inner()
}

fn round(high_watermark: i64, aborted: Vec<(i64, i64)>, batches: &[Vec<u8>]) -> Round {
    Round {
        error_code: 0,
        high_watermark,
        aborted,
        records: batches.concat(),
        claimed_len: None,
    }
}

/// The version selector for Fetch `version`.
fn fetch_version(version: i16) -> u8 {
    u8::try_from(version - ApiKey::Fetch.versions().min).expect("in range")
}

fn transactions() -> Vec<Vec<u8>> {
    vec![
        batch(0, 2, true, Compression::None),
        marker(2, false),
        batch(3, 2, true, Compression::None),
        marker(5, true),
        data(6, 1),
    ]
}

fn fetch_seeds() -> Vec<(&'static str, FetchScript)> {
    let newest = fetch_version(ApiKey::Fetch.max_stable_version());
    let mut seeds = Vec::new();

    // A batch cut at the end of the first response, fetched again whole.
    let cut = data(5, 2);
    let mut first = round(8, vec![], &[data(0, 3), data(3, 2)]);
    first.records.extend_from_slice(&cut[..30]);
    seeds.push((
        "partial_trailing_batch",
        FetchScript {
            flags: CHECK_CRCS,
            version: newest,
            start: 0,
            max_decompressed: 10,
            rounds: vec![first, round(8, vec![], &[cut, data(7, 1)])],
        },
    ));

    // An aborted transaction, a committed one and a plain batch, read_committed.
    seeds.push((
        "read_committed",
        FetchScript {
            flags: READ_COMMITTED | CHECK_CRCS,
            version: newest,
            start: 0,
            max_decompressed: 10,
            rounds: vec![round(7, vec![(PRODUCER, 0)], &transactions())],
        },
    ));
    // The same, read_uncommitted, owned, at the oldest version (topic names, no ids).
    seeds.push((
        "read_uncommitted_oldest_owned",
        FetchScript {
            flags: OWNED,
            version: 0,
            start: 0,
            max_decompressed: 10,
            rounds: vec![round(7, vec![(PRODUCER, 0)], &transactions())],
        },
    ));

    // Every codec, read as owned messages.
    seeds.push((
        "every_codec_owned",
        FetchScript {
            flags: OWNED | CHECK_CRCS,
            version: newest,
            start: 0,
            max_decompressed: 10,
            rounds: vec![round(
                12,
                vec![],
                &[
                    batch(0, 3, false, Compression::Gzip),
                    batch(3, 3, false, Compression::Snappy),
                    batch(6, 3, false, Compression::Lz4),
                    batch(9, 3, false, Compression::Zstd),
                ],
            )],
        },
    ));

    // A batch whose CRC fails between two good ones; the application skips it.
    let mut bad = data(2, 2);
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    seeds.push((
        "corrupt_batch_skipped",
        FetchScript {
            flags: CHECK_CRCS | SKIP_BAD,
            version: newest,
            start: 0,
            max_decompressed: 10,
            rounds: vec![round(6, vec![], &[data(0, 2), bad, data(4, 2)])],
        },
    ));

    // A zstd batch larger than the decompression cap (1 KiB), skipped, then a small one.
    seeds.push((
        "decompression_cap",
        FetchScript {
            flags: SKIP_BAD,
            version: newest,
            start: 0,
            max_decompressed: 0,
            rounds: vec![round(
                42,
                vec![],
                &[
                    batch(0, 40, false, Compression::Zstd),
                    batch(40, 2, false, Compression::Zstd),
                ],
            )],
        },
    ));

    // OFFSET_OUT_OF_RANGE, the reset, then data.
    let mut out_of_range = round(-1, vec![], &[]);
    out_of_range.error_code = KafkaCode::OFFSET_OUT_OF_RANGE.code();
    seeds.push((
        "out_of_range_reset",
        FetchScript {
            flags: CHECK_CRCS,
            version: newest,
            start: 0,
            max_decompressed: 10,
            rounds: vec![out_of_range, round(2, vec![], &[data(0, 2)])],
        },
    ));

    // Legacy message sets (v0, v1 with a gzip wrapper), then a v2 batch.
    let mut v0 = LegacyWriter::new(0).expect("magic 0");
    v0.append(0, 0, Some(b"k0"), Some(b"legacy zero"));
    let mut v1 = LegacyWriter::new(1).expect("magic 1");
    v1.append(1, 5, Some(b"k1"), Some(b"legacy one"));
    v1.append(2, 6, None, Some(b"legacy two"));
    let wrapped = v1
        .finish_compressed(Compression::Gzip, 6, TimestampType::CreateTime)
        .expect("compresses");
    seeds.push((
        "legacy_then_v2",
        FetchScript {
            flags: CHECK_CRCS,
            version: newest,
            start: 0,
            max_decompressed: 10,
            rounds: vec![round(5, vec![], &[v0.finish(), wrapped, data(3, 2)])],
        },
    ));
    seeds
}

// ---- decompress ------------------------------------------------------------------

fn compressed(codec: Compression, plain: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; Compressor::max_compressed_len(codec, plain.len())];
    let n = Compressor::new()
        .compress(codec, plain, &mut out)
        .expect("compresses")
        .expect("fits the bound");
    out.truncate(n);
    out
}

fn decompress_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let long = b"the bytes on the wire are the data structure; ".repeat(200);
    let short = b"kring".to_vec();
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let mut every = Vec::new();
    for codec in codecs {
        every.push((op_of(codec), compressed(codec, &long)));
        every.push((op_of(codec), compressed(codec, &short)));
    }
    every.push((
        op_of(Compression::Zstd) | RELEASE,
        compressed(Compression::Zstd, &long),
    ));
    every.push((
        op_of(Compression::Lz4) | LEGACY_LZ4,
        compressed(Compression::Lz4, &short),
    ));

    let zstd = compressed(Compression::Zstd, &long);
    let gzip = compressed(Compression::Gzip, &long);
    let two_members = [gzip.clone(), compressed(Compression::Gzip, &short)].concat();
    let cut_and_whole = vec![
        (op_of(Compression::Zstd), zstd[..zstd.len() / 2].to_vec()),
        (
            op_of(Compression::Zstd),
            compressed(Compression::Zstd, &short),
        ),
        (op_of(Compression::Gzip), gzip[..gzip.len() - 3].to_vec()),
        (op_of(Compression::Gzip), two_members),
        (op_of(Compression::Zstd), zstd),
    ];
    vec![
        ("every_codec", decompress::input_of(10, &every)),
        ("cut_then_whole", decompress::input_of(10, &cut_and_whole)),
        // A 1 KiB cap: the long inputs are refused, the short ones not.
        ("small_cap", decompress::input_of(0, &every)),
    ]
}

// ---- the seeds on disk -----------------------------------------------------------

fn generated() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut all = Vec::new();
    for (name, script) in connection_seeds() {
        all.push(("connection", name, script.to_bytes()));
    }
    for (name, script) in fetch_seeds() {
        all.push(("fetch", name, script.to_bytes()));
    }
    for (name, bytes) in decompress_seeds() {
        all.push(("decompress_reused", name, bytes));
    }
    all
}

#[test]
fn committed_seeds_are_what_the_encoders_write() {
    let write = std::env::var("KRING_FUZZ_SEEDS").is_ok_and(|v| v == "write");
    for (target, name, bytes) in generated() {
        let path = seeds_dir(target).join(format!("{name}.bin"));
        if write {
            std::fs::create_dir_all(seeds_dir(target)).expect("seed dir");
            std::fs::write(&path, &bytes).expect("writes the seed");
            continue;
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == bytes,
            "{} differs from what the encoders write: rerun with KRING_FUZZ_SEEDS=write",
            path.display()
        );
    }
}

/// Every file in `fuzz/seeds/TARGET` (generated seeds and kept crash inputs) through
/// `run`.
fn replay<R: std::fmt::Debug, E: std::fmt::Display>(
    target: &str,
    run: impl Fn(&[u8]) -> Result<R, E>,
) {
    let dir = seeds_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("dir entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    for path in files {
        let bytes = std::fs::read(&path).expect("reads the seed");
        if let Err(e) = run(&bytes) {
            panic!("{}: {e}", path.display());
        }
    }
}

#[test]
fn every_connection_seed_replays_cleanly() {
    replay("connection", connection::run);
}

#[test]
fn every_fetch_seed_replays_cleanly() {
    replay("fetch", fetch::run);
}

#[test]
fn every_decompress_seed_replays_cleanly() {
    replay("decompress_reused", decompress::run);
}

fn connection_report(name: &str) -> connection::ConnectionReport {
    let (_, script) = connection_seeds()
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a seed of that name");
    connection::run(&script.to_bytes()).expect("no violation")
}

fn fetch_report(name: &str) -> fetch::FetchReport {
    let (_, script) = fetch_seeds()
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a seed of that name");
    fetch::run(&script.to_bytes()).expect("no violation")
}

#[test]
fn connection_seeds_reach_answers_sasl_and_the_end() {
    let r = connection_report("handshake_pipelined");
    assert!(r.ready);
    assert_eq!((r.sent, r.answered, r.decoded), (5, 4, 3), "{r:?}");
    let r = connection_report("kip511_fallback");
    assert_eq!((r.ready, r.answered, r.decoded), (true, 1, 1), "{r:?}");
    let r = connection_report("no_handshake_explicit");
    assert_eq!((r.answered, r.decoded), (2, 2), "{r:?}");
    let r = connection_report("sasl_plain_reauth");
    assert_eq!((r.ready, r.answered, r.decoded), (true, 2, 2), "{r:?}");
    let r = connection_report("sasl_scram_bad_signature");
    assert!(!r.ready && r.ended.contains("SCRAM"), "{r:?}");
    let r = connection_report("not_kafka_http");
    assert!(r.ended.contains("HTTP"), "{r:?}");
    let r = connection_report("large_frame_cut_then_close");
    assert_eq!((r.answered, r.decoded), (1, 1), "{r:?}");
    assert!(r.ended.contains("before every response"), "{r:?}");
}

#[test]
fn fetch_seeds_reach_records_transactions_and_errors() {
    let r = fetch_report("partial_trailing_batch");
    assert_eq!(
        (r.fetches, r.chunks, r.records, r.position),
        (2, 2, 8, 8),
        "{r:?}"
    );
    let r = fetch_report("read_committed");
    assert_eq!(
        (r.records, r.position),
        (3, 7),
        "aborted ones left out: {r:?}"
    );
    let r = fetch_report("read_uncommitted_oldest_owned");
    assert_eq!((r.records, r.position), (5, 7), "{r:?}");
    let r = fetch_report("every_codec_owned");
    assert_eq!((r.batches, r.records, r.read_errors), (4, 12, 0), "{r:?}");
    let r = fetch_report("corrupt_batch_skipped");
    assert_eq!((r.records, r.read_errors, r.position), (4, 1, 6), "{r:?}");
    let r = fetch_report("decompression_cap");
    assert_eq!((r.records, r.read_errors, r.position), (2, 1, 42), "{r:?}");
    let r = fetch_report("out_of_range_reset");
    assert_eq!((r.resets, r.records, r.position), (1, 2, 2), "{r:?}");
    let r = fetch_report("legacy_then_v2");
    assert_eq!((r.records, r.position), (5, 5), "{r:?}");
}

#[test]
fn decompress_seeds_decode_on_a_reused_decompressor() {
    let seeds = decompress_seeds();
    let report = |name: &str| {
        let (_, bytes) = seeds.iter().find(|(n, _)| *n == name).expect("seed");
        decompress::run(bytes).expect("no violation")
    };
    let r = report("every_codec");
    assert_eq!((r.segments, r.decoded), (12, 12), "{r:?}");
    let r = report("cut_then_whole");
    assert_eq!((r.segments, r.decoded), (5, 3), "{r:?}");
    let r = report("small_cap");
    assert_eq!((r.segments, r.decoded), (12, 6), "{r:?}");
}
