//! Byte-for-byte interoperability with two other Kafka clients through the real broker
//! (`scripts/kafka up`), for every codec kring supports (none, gzip, snappy, lz4, zstd):
//!
//! - kring → kcat (librdkafka, CRC checks on): binary keys and values (every byte value,
//!   `\n`, `\t`, NUL), null and empty keys and values, a 100 KiB value, duplicate, empty,
//!   null and non-ASCII headers, explicit (also decreasing) timestamps. kcat prints each
//!   record as `%o %T %K %S %h\n%k%s\n`, so keys and values are cut out by length.
//! - kring → the Java `ConsoleConsumer`: the same cases in printable UTF-8 (the console
//!   consumer prints text); its whole output is compared with the expected rendering.
//! - kcat → kring and the Java `ConsoleProducer` → kring: what each tool was fed is read
//!   back with kring's consumer (borrowed records from `next_batch`), and every batch's
//!   attributes must name the codec the tool was asked for, so each codec was really
//!   decoded (Java writes snappy in xerial framing, librdkafka raw snappy).
//!
//! In the directions out of kring, kring's own batches are read back first and must carry
//! the codec too. kcat must be on PATH (scripts/test installs it): without it these tests
//! fail. The Java tools run through `scripts/kafka run-class`; every external command is
//! killed if it runs over [`TOOL_TIMEOUT`].

mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Fetched, bootstrap, client, config, create_topic, unique};
use kring::Client;
use kring::config::Compression;
use kring::consumer::{Consumer, Offset};
use kring::producer::{Payload, Producer, ProducerRecord};
use kring::record::{Compression as WireCompression, Header};

/// How long an external tool (or a read of what it wrote) may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// A codec as kring's producer config, the batch attributes and the tools name it.
#[derive(Debug, Clone, Copy)]
struct Codec {
    kring: Compression,
    wire: WireCompression,
    name: &'static str,
}

const CODECS: [Codec; 5] = [
    Codec {
        kring: Compression::None,
        wire: WireCompression::None,
        name: "none",
    },
    Codec {
        kring: Compression::Gzip,
        wire: WireCompression::Gzip,
        name: "gzip",
    },
    Codec {
        kring: Compression::Snappy,
        wire: WireCompression::Snappy,
        name: "snappy",
    },
    Codec {
        kring: Compression::Lz4,
        wire: WireCompression::Lz4,
        name: "lz4",
    },
    Codec {
        kring: Compression::Zstd,
        wire: WireCompression::Zstd,
        name: "zstd",
    },
];

// ------------------------------------------------------------------ external tools

/// A running external command: stdin is fed and stdout/stderr drained on threads, so
/// neither side can block the other on a full pipe. Dropped unfinished (a test failed
/// first), it is killed.
struct Tool {
    what: String,
    child: Child,
    /// Until `finish` joins them.
    pipes: Option<Pipes>,
}

/// The threads feeding a tool's stdin and draining its stdout and stderr.
struct Pipes {
    stdin: JoinHandle<()>,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
}

impl Drop for Tool {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn drain(mut from: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = from.read_to_end(&mut out);
        out
    })
}

fn spawn(what: impl Into<String>, mut command: Command, input: Vec<u8>) -> Tool {
    let what = what.into();
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let stdin = std::thread::spawn(move || {
        // A tool that exits early closes its end; its exit status tells why.
        let _ = stdin.write_all(&input);
    });
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    Tool {
        what,
        child,
        pipes: Some(Pipes {
            stdin,
            stdout,
            stderr,
        }),
    }
}

impl Tool {
    /// Waits for the command (killing it after [`TOOL_TIMEOUT`]), requires a zero exit
    /// status and returns its stdout. Its stderr goes to the test's captured output,
    /// shown when a later assertion fails.
    fn finish(mut self) -> Vec<u8> {
        let deadline = Instant::now() + TOOL_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for tool") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let pipes = self.pipes.take().expect("finished once");
        pipes.stdin.join().expect("stdin writer");
        let stdout = pipes.stdout.join().expect("stdout reader");
        let stderr = pipes.stderr.join().expect("stderr reader");
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        match status {
            None => panic!(
                "{}: still running after {TOOL_TIMEOUT:?}, killed; stderr:\n{stderr}",
                self.what
            ),
            Some(s) if !s.success() => panic!("{}: {s}; stderr:\n{stderr}", self.what),
            Some(_) => {
                if !stderr.is_empty() {
                    eprintln!("{} stderr:\n{stderr}", self.what);
                }
                stdout
            }
        }
    }
}

/// `kcat`, failing the test with a clear message when it is not installed.
fn kcat() -> Command {
    match Command::new("kcat").arg("-V").output() {
        Ok(out) if out.status.success() => Command::new("kcat"),
        Ok(out) => panic!(
            "`kcat -V` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "kcat is required by tests/interop.rs but cannot be run ({e}): scripts/test \
             installs it, or install it yourself (Debian/Ubuntu: apt-get install kcat)"
        ),
    }
}

/// A Kafka Java tool class through this repository's `scripts/kafka run-class`, in a
/// UTF-8 locale so that the JVM reads stdin and prints header keys as UTF-8.
fn kafka_tool(class: &str) -> Command {
    let mut c = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"));
    c.arg("run-class")
        .arg(class)
        .env("LC_ALL", "C.UTF-8")
        .env("LANG", "C.UTF-8");
    c
}

// ------------------------------------------------------------------ kring side

/// Produces `records` to partition 0 of `topic` with their keys, values, headers and
/// timestamps, and checks that they landed at their `offset`s.
fn produce(client: &Client, topic: &str, records: &[Fetched]) {
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let deliveries: Vec<_> = records
        .iter()
        .map(|r| {
            let mut record = ProducerRecord::new(topic)
                .with_partition(0)
                .with_timestamp(r.timestamp);
            record.key = r.key.as_deref().map(Payload::Borrowed);
            record.value = r.value.as_deref().map(Payload::Borrowed);
            record.headers = r
                .headers
                .iter()
                .map(|(key, value)| Header {
                    key: key.as_str(),
                    value: value.as_deref(),
                })
                .collect();
            producer.send_blocking(record).unwrap()
        })
        .collect();
    producer.flush_blocking().unwrap();
    for (r, d) in records.iter().zip(deliveries) {
        assert_eq!(d.wait().expect("delivered").offset, r.offset, "{topic}");
    }
    producer.close_blocking().unwrap();
}

/// Reads `count` records from partition 0 of `topic` with kring's consumer (borrowed
/// records of each fetched batch); returns them with every batch's codec and framing.
/// The partition must hold exactly `count` records.
fn consume(client: &Client, topic: &str, count: usize) -> (Vec<Fetched>, Vec<BatchCodec>) {
    let consumer = Consumer::new(client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(topic, 0, Offset::Oldest)
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut records = Vec::new();
    let mut codecs = Vec::new();
    runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + TOOL_TIMEOUT;
        while records.len() < count {
            let batch = match tokio::time::timeout_at(deadline, pc.next_batch()).await {
                Ok(Some(Ok(batch))) => batch,
                Ok(Some(Err(e))) => panic!("{topic}: {e:?}"),
                Ok(None) => panic!("{topic}: consumer ended"),
                Err(_) => panic!(
                    "{topic}: read {} of {count} records in {TOOL_TIMEOUT:?}",
                    records.len()
                ),
            };
            let header = batch.header().expect("a v2 batch");
            codecs.push(BatchCodec {
                codec: header.compression().expect("known codec"),
                xerial: header.records_bytes().starts_with(XERIAL_MAGIC),
            });
            for r in batch.records() {
                let r = r.expect("record");
                records.push(Fetched::of(&r));
            }
        }
    });
    assert_eq!(records.len(), count, "{topic}: records read");
    assert_eq!(
        pc.high_watermark(),
        count as i64,
        "{topic}: holds exactly the records sent"
    );
    pc.close();
    (records, codecs)
}

/// The start of a snappy stream in xerial framing (what Java's `SnappyOutputStream`
/// writes); a raw snappy block starts with its length as a varint instead.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\0";

/// How a fetched batch was compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchCodec {
    /// The codec in the batch attributes.
    codec: WireCompression,
    /// Whether the records section starts with the xerial snappy magic.
    xerial: bool,
}

/// Every batch (there is at least one) carries `codec`; snappy batches come in xerial
/// framing exactly when `xerial_snappy`.
fn assert_codec(what: &str, batches: &[BatchCodec], codec: Codec, xerial_snappy: bool) {
    let want = BatchCodec {
        codec: codec.wire,
        xerial: codec.wire == WireCompression::Snappy && xerial_snappy,
    };
    assert!(!batches.is_empty(), "{what}: no batches");
    assert!(
        batches.iter().all(|b| *b == want),
        "{what}: batches {batches:?}, want {want:?} in all"
    );
}

/// kring reads what another tool wrote between `written.0` and `written.1` (ms): every
/// batch carries `codec` (xerial-framed snappy when `xerial_snappy`), and the records are
/// `want`, with timestamps the tool set within a second of that window.
fn read_back(
    client: &Client,
    topic: &str,
    what: &str,
    want: &[Fetched],
    codec: Codec,
    xerial_snappy: bool,
    written: (i64, i64),
) {
    let (got, codecs) = consume(client, topic, want.len());
    assert_codec(what, &codecs, codec, xerial_snappy);
    assert_records(
        what,
        &got,
        want,
        Timestamps::Between(written.0 - 1_000, written.1 + 1_000),
    );
}

/// kring's own batches: at least one carries `codec` (so the codec was exercised) and
/// every other one is uncompressed — kring, like librdkafka, sends a batch as it is when
/// compressing would not shrink it (a small first batch of incompressible bytes, before
/// the partition's arenas grow to batch.size).
fn assert_kring_codec(what: &str, batches: &[BatchCodec], codec: Codec) {
    let want = BatchCodec {
        codec: codec.wire,
        xerial: false,
    };
    let plain = BatchCodec {
        codec: WireCompression::None,
        xerial: false,
    };
    assert!(
        batches.contains(&want),
        "{what}: batches {batches:?}, want {want:?} in one at least"
    );
    assert!(
        batches.iter().all(|b| *b == want || *b == plain),
        "{what}: batches {batches:?}, want {want:?} or uncompressed"
    );
}

// ------------------------------------------------------------------ comparing

fn describe(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) if b.len() <= 80 => format!("{} bytes {:?}", b.len(), String::from_utf8_lossy(b)),
        Some(b) => format!(
            "{} bytes starting {:?}",
            b.len(),
            String::from_utf8_lossy(&b[..80])
        ),
    }
}

/// Panics with a short account (lengths, first differing byte) unless equal.
fn same_bytes(what: &str, got: Option<&[u8]>, want: Option<&[u8]>) {
    if got == want {
        return;
    }
    let first_difference = match (got, want) {
        (Some(g), Some(w)) => {
            let at = g.iter().zip(w).position(|(a, b)| a != b);
            format!(
                "; first difference at byte {}",
                at.unwrap_or(g.len().min(w.len()))
            )
        }
        _ => String::new(),
    };
    panic!(
        "{what}: got {}, want {}{first_difference}",
        describe(got),
        describe(want)
    );
}

/// How a record's timestamp is checked.
#[derive(Debug, Clone, Copy)]
enum Timestamps {
    /// As sent.
    Exact,
    /// Set by the producing tool to its clock: within these bounds (ms).
    Between(i64, i64),
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn assert_records(what: &str, got: &[Fetched], want: &[Fetched], timestamps: Timestamps) {
    assert_eq!(got.len(), want.len(), "{what}: record count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.offset, w.offset, "{what}: record {i} offset");
        match timestamps {
            Timestamps::Exact => assert_eq!(g.timestamp, w.timestamp, "{what}: record {i}"),
            Timestamps::Between(lo, hi) => assert!(
                (lo..=hi).contains(&g.timestamp),
                "{what}: record {i} timestamp {} not in {lo}..={hi}",
                g.timestamp
            ),
        }
        same_bytes(
            &format!("{what}: record {i} key"),
            g.key.as_deref(),
            w.key.as_deref(),
        );
        same_bytes(
            &format!("{what}: record {i} value"),
            g.value.as_deref(),
            w.value.as_deref(),
        );
        assert_eq!(
            g.headers.len(),
            w.headers.len(),
            "{what}: record {i} header count: got {:?}",
            g.headers
        );
        for (j, (gh, wh)) in g.headers.iter().zip(&w.headers).enumerate() {
            same_bytes(
                &format!("{what}: record {i} header {j} key"),
                Some(gh.0.as_bytes()),
                Some(wh.0.as_bytes()),
            );
            same_bytes(
                &format!("{what}: record {i} header {j} ({}) value", wh.0),
                gh.1.as_deref(),
                wh.1.as_deref(),
            );
        }
    }
}

// ------------------------------------------------------------------ record sets

/// Fixed timestamps (so expected output is the same every run), years in the past.
const BASE_TS: i64 = 1_700_000_000_000;

/// Time retention off: the broker's retention check (every minute under scripts/kafka)
/// would otherwise delete records stamped [`BASE_TS`], more than 7 days old, while a tool
/// is still starting up to read them.
const TOPIC_CONFIG: &[(&str, &str)] = &[("retention.ms", "-1")];

fn record(
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&str, Option<&[u8]>)],
) -> Fetched {
    Fetched {
        offset,
        // Not monotonic: record 3 is older than record 0, a negative timestamp delta.
        timestamp: if offset == 3 {
            BASE_TS - 86_400_000
        } else {
            BASE_TS + offset * 1_000 + 7
        },
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(<[u8]>::to_vec)))
            .collect(),
    }
}

fn every_byte() -> Vec<u8> {
    (0..=255u8).collect()
}

/// 100 KiB holding every byte value, with runs that repeat: compressible, since kring
/// (like librdkafka) seals a batch uncompressed when the codec would not shrink it.
fn big_binary() -> Vec<u8> {
    (0..100 * 1024usize)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect()
}

/// About 100 KiB of printable UTF-8 text with multibyte characters.
fn big_text() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 100 * 1024 {
        s.push_str(&format!("{i} ünïcödé ✓ 😀 "));
        i += 1;
    }
    s
}

/// Records with arbitrary bytes: for kcat, which prints keys and values by length.
/// Header keys and values avoid `,`, `=` and `\n`, which kcat's `%h` prints unescaped.
fn binary_records() -> Vec<Fetched> {
    let every = every_byte();
    let reversed: Vec<u8> = every.iter().rev().copied().collect();
    let big = big_binary();
    let header_bytes: Vec<u8> = (1..=255u8).filter(|b| !b",=\n".contains(b)).collect();
    let mut records = vec![
        record(0, None, Some(b"null key"), &[]),
        record(1, Some(b"k1"), Some(&every), &[]),
        record(2, Some(b""), Some(b""), &[]),
        record(3, Some(&reversed), Some(b"line1\nline2\tcol\r\n\0end"), &[]),
        record(4, Some(b"tombstone"), None, &[]),
        record(5, None, None, &[]),
        record(6, Some(b"big"), Some(&big), &[]),
        record(
            7,
            Some(b"with headers"),
            Some(b"h"),
            &[
                ("dup", Some(b"first")),
                ("dup", Some(b"second")),
                ("empty", Some(b"")),
                ("null", None),
                ("ключ", Some("värde ✓\tx".as_bytes())),
                ("bytes", Some(&header_bytes)),
            ],
        ),
    ];
    for i in 8..48i64 {
        let key = format!("key-{i}");
        let value = format!("value-{i}-{}", "x".repeat(i as usize));
        let n = i.to_string();
        records.push(record(
            i,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[("i", Some(n.as_bytes()))],
        ));
    }
    records
}

/// Printable UTF-8 records: for the Java console consumer, which prints text. Tabs only
/// inside values; no `|`, `,`, `:` or newlines in keys and headers.
fn text_records() -> Vec<Fetched> {
    let big = big_text();
    let mut records = vec![
        record(0, None, Some(b"null key: plain ASCII"), &[]),
        record(
            1,
            Some("ключ-1".as_bytes()),
            Some("значение ✓ — 😀 (four-byte UTF-8)".as_bytes()),
            &[
                ("dup", Some(b"first")),
                ("dup", Some(b"second")),
                ("empty", Some(b"")),
                ("null", None),
                ("ключ", Some("värde ✓".as_bytes())),
            ],
        ),
        record(2, Some(b""), Some(b""), &[]),
        record(
            3,
            Some(b"tabs"),
            Some(b"col1\tcol2\t\tcol4"),
            &[("h", Some(b"1"))],
        ),
        record(4, Some(b"tombstone"), None, &[]),
        record(5, None, None, &[]),
        record(6, Some(b"big"), Some(big.as_bytes()), &[]),
    ];
    records.extend(numbered_records(7..40));
    records
}

// ------------------------------------------------------------------ kring → kcat

/// A record as kcat printed it with `%o %T %K %S %h\n%k%s\n`.
#[derive(Debug)]
struct KcatRecord {
    offset: i64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<u8>,
}

const KCAT_FORMAT: &str = r"%o %T %K %S %h\n%k%s\n";

fn parse_kcat(mut out: &[u8]) -> Vec<KcatRecord> {
    let mut records = Vec::new();
    while !out.is_empty() {
        let nl = out
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or_else(|| panic!("kcat output: no line end in {:?}", describe(Some(out))));
        let line = &out[..nl];
        out = &out[nl + 1..];
        let mut fields = line.splitn(5, |&b| b == b' ');
        let mut number = |what: &str| -> i64 {
            let field = fields
                .next()
                .unwrap_or_else(|| panic!("kcat line: no {what}"));
            std::str::from_utf8(field)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("kcat line: bad {what} {:?}", describe(Some(field))))
        };
        let offset = number("offset");
        let timestamp = number("timestamp");
        let key_len = number("key length");
        let value_len = number("value length");
        let headers = fields.next().expect("kcat line: headers").to_vec();
        let mut take = |len: i64| -> Option<Vec<u8>> {
            let len = usize::try_from(len).ok()?;
            assert!(out.len() >= len, "kcat output ends inside a record");
            let (bytes, rest) = out.split_at(len);
            out = rest;
            Some(bytes.to_vec())
        };
        let key = take(key_len);
        let value = take(value_len);
        assert_eq!(
            out.first(),
            Some(&b'\n'),
            "kcat: newline after record {offset}"
        );
        out = &out[1..];
        records.push(KcatRecord {
            offset,
            timestamp,
            key,
            value,
            headers,
        });
    }
    records
}

/// Headers as kcat's `%h` prints them: `name=value` joined by `,`, null as `NULL`.
fn kcat_headers(headers: &[(String, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (key, value)) in headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(key.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_deref().unwrap_or(b"NULL"));
    }
    out
}

/// A fresh topic holding `records` produced by kring with `codec`, checked first by
/// reading kring's own batches back: the codec is in use, and the records are intact.
fn produced_by_kring(prefix: &str, codec: Codec, records: &[Fetched]) -> String {
    let mut c = config();
    c.producer.compression = codec.kring;
    c.producer.linger = Duration::from_millis(20);
    let client = client(c);
    let topic = unique(&format!("{prefix}-{}", codec.name));
    create_topic(&client, &topic, 1, 1, TOPIC_CONFIG);
    produce(&client, &topic, records);
    let (own, codecs) = consume(&client, &topic, records.len());
    assert_kring_codec(&format!("kring batches, {topic}"), &codecs, codec);
    assert_records(&topic, &own, records, Timestamps::Exact);
    client.close();
    topic
}

#[test]
fn kring_to_kcat_every_codec() {
    kcat();
    let want = binary_records();
    for codec in CODECS {
        let topic = produced_by_kring("kring-interop-to-kcat", codec, &want);

        let mut command = kcat();
        command
            .args(["-C", "-b", &bootstrap(), "-t", &topic, "-p", "0"])
            .args(["-o", "beginning", "-e", "-c", &want.len().to_string()])
            .args(["-X", "check.crcs=true", "-f", KCAT_FORMAT]);
        let out = spawn(format!("kcat -C {topic}"), command, Vec::new()).finish();
        let got = parse_kcat(&out);
        let what = format!("kcat reading {topic} ({})", codec.name);
        assert_eq!(got.len(), want.len(), "{what}: record count");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.offset, w.offset, "{what}: record {i} offset");
            assert_eq!(g.timestamp, w.timestamp, "{what}: record {i} timestamp");
            same_bytes(
                &format!("{what}: record {i} key"),
                g.key.as_deref(),
                w.key.as_deref(),
            );
            same_bytes(
                &format!("{what}: record {i} value"),
                g.value.as_deref(),
                w.value.as_deref(),
            );
            same_bytes(
                &format!("{what}: record {i} headers"),
                Some(g.headers.as_slice()),
                Some(kcat_headers(&w.headers).as_slice()),
            );
        }
    }
}

// ------------------------------------------------------------------ kring → Java

const NULL_LITERAL: &str = "<null>";

/// What the console consumer prints for `records` with print.timestamp, print.offset,
/// print.headers and print.key on, `|` between columns and `,` between headers.
fn console_consumer_rendering(records: &[Fetched]) -> Vec<u8> {
    let text = |b: Option<&[u8]>| -> String {
        b.map_or(NULL_LITERAL.to_string(), |b| {
            String::from_utf8(b.to_vec()).expect("text record")
        })
    };
    let mut out = String::new();
    for r in records {
        let headers = if r.headers.is_empty() {
            "NO_HEADERS".to_string()
        } else {
            r.headers
                .iter()
                .map(|(k, v)| format!("{k}:{}", text(v.as_deref())))
                .collect::<Vec<_>>()
                .join(",")
        };
        out.push_str(&format!(
            "CreateTime:{}|Offset:{}|{headers}|{}|{}\n",
            r.timestamp,
            r.offset,
            text(r.key.as_deref()),
            text(r.value.as_deref())
        ));
    }
    out.into_bytes()
}

/// Compares text output line by line (one record a line), reporting the first
/// differing line.
fn same_lines(what: &str, got: &[u8], want: &[u8]) {
    if got == want {
        return;
    }
    let got_lines: Vec<&[u8]> = got.split(|&b| b == b'\n').collect();
    let want_lines: Vec<&[u8]> = want.split(|&b| b == b'\n').collect();
    for (i, (g, w)) in got_lines.iter().zip(&want_lines).enumerate() {
        same_bytes(&format!("{what}: line {}", i + 1), Some(g), Some(w));
    }
    panic!(
        "{what}: {} lines, want {}",
        got_lines.len(),
        want_lines.len()
    );
}

#[test]
fn kring_to_java_console_consumer_every_codec() {
    let want = text_records();
    let rendering = console_consumer_rendering(&want);
    let mut topics = Vec::new();
    for codec in CODECS {
        let topic = produced_by_kring("kring-interop-to-java", codec, &want);
        topics.push((codec, topic));
    }
    // One JVM per codec, all at once: each takes seconds to start.
    let tools = common::java_tools();
    let consumers: Vec<_> = topics
        .into_iter()
        .map(|(codec, topic)| {
            let mut command = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer");
            command
                .args(["--bootstrap-server", &bootstrap(), "--topic", &topic])
                .args(["--partition", "0", "--offset", "earliest"])
                .args(["--max-messages", &want.len().to_string()])
                .args(["--timeout-ms", "30000"]);
            for property in [
                "print.timestamp=true",
                "print.offset=true",
                "print.headers=true",
                "print.key=true",
                "print.value=true",
                "key.separator=|",
                "headers.separator=,",
                &format!("null.literal={NULL_LITERAL}"),
            ] {
                command.args([tools.formatter_property, property]);
            }
            let what = format!("Java ConsoleConsumer reading {topic} ({})", codec.name);
            (what.clone(), spawn(what, command, Vec::new()))
        })
        .collect();
    for (what, consumer) in consumers {
        let out = consumer.finish();
        same_lines(&what, &out, &rendering);
    }
}

// ------------------------------------------------------------------ kcat → kring

/// kcat's delimiters (`-D`, `-K`): byte sequences absent from the records below.
const KCAT_RECORD_DELIMITER: &[u8] = b"\xff\xfe\xfd\xfc";
const KCAT_KEY_DELIMITER: &[u8] = b"\xfe\xfd\xfc";

/// `-H` arguments and the headers they give every record (no `=`: a null value).
const KCAT_HEADERS: [(&str, &str, Option<&[u8]>); 5] = [
    ("dup=first", "dup", Some(b"first")),
    ("dup=second", "dup", Some(b"second")),
    ("empty=", "empty", Some(b"")),
    ("null", "null", None),
    ("ключ=värde ✓\tx", "ключ", Some("värde ✓\tx".as_bytes())),
];

/// Records for kcat's producer (offsets as they will land; timestamps are kcat's).
fn kcat_input_records() -> Vec<Fetched> {
    let every = every_byte();
    // Bytes 0..=250 only: never part of a delimiter.
    let big: Vec<u8> = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
    let headers: Vec<(&str, Option<&[u8]>)> =
        KCAT_HEADERS.iter().map(|(_, k, v)| (*k, *v)).collect();
    let mut records = vec![
        record(0, None, Some(b"no key delimiter: null key"), &headers),
        record(1, Some(b""), Some(b"empty key"), &headers),
        record(2, Some(b"key\0\n\t\x01\x7f\x80"), Some(&every), &headers),
        record(3, Some(b"empty value"), Some(b""), &headers),
        record(4, Some(b"big"), Some(&big), &headers),
    ];
    for i in 5..30i64 {
        let key = format!("key-{i}");
        let value = format!("value-{i}\n\t{}", "z".repeat(i as usize));
        records.push(record(
            i,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &headers,
        ));
    }
    records
}

#[test]
fn kcat_to_kring_every_codec() {
    kcat();
    let want = kcat_input_records();
    let mut input = Vec::new();
    for r in &want {
        if let Some(key) = &r.key {
            input.extend_from_slice(key);
            input.extend_from_slice(KCAT_KEY_DELIMITER);
        }
        input.extend_from_slice(r.value.as_deref().expect("kcat input has values"));
        input.extend_from_slice(KCAT_RECORD_DELIMITER);
    }
    let escape = |d: &[u8]| d.iter().map(|b| format!("\\x{b:02x}")).collect::<String>();
    for codec in CODECS {
        let client = client(config());
        let topic = unique(&format!("kring-interop-from-kcat-{}", codec.name));
        create_topic(&client, &topic, 1, 1, TOPIC_CONFIG);
        let mut command = kcat();
        command
            .args(["-P", "-b", &bootstrap(), "-t", &topic, "-p", "0"])
            .args(["-z", codec.name])
            .args(["-D", &escape(KCAT_RECORD_DELIMITER)])
            .args(["-K", &escape(KCAT_KEY_DELIMITER)])
            // One batch: librdkafka sends a batch uncompressed when compression would
            // not make it smaller, which a batch of only small records might not.
            .args(["-X", "linger.ms=200"]);
        for (arg, _, _) in KCAT_HEADERS {
            command.args(["-H", arg]);
        }
        let before = now_ms();
        spawn(format!("kcat -P {topic}"), command, input.clone()).finish();
        let after = now_ms();
        let what = format!("kring reading kcat's {topic} ({})", codec.name);
        read_back(&client, &topic, &what, &want, codec, false, (before, after));
        client.close();
    }
}

// ------------------------------------------------------------------ Java → kring

/// The console producer's null marker for keys, values, header values and "no headers".
const NULL_MARKER: &str = "<N>";

/// Records for the console producer (offsets as they will land; timestamps are Java's).
fn console_producer_records() -> Vec<Fetched> {
    let big = big_text();
    let mut records = vec![
        record(
            0,
            Some(b"key-0"),
            Some("value with\ttab and ünïcödé 😀".as_bytes()),
            &[
                ("dup", Some(b"1")),
                ("dup", Some(b"2")),
                ("empty", Some(b"")),
                ("null", None),
                ("ключ", Some("значение ✓".as_bytes())),
            ],
        ),
        record(1, None, Some(b"null key, no headers"), &[]),
        record(2, Some(b""), Some(b""), &[]),
        record(3, Some(b"null value"), None, &[("h", Some(b"x"))]),
        record(4, Some(b"big"), Some(big.as_bytes()), &[]),
    ];
    records.extend(numbered_records(5..30));
    records
}

/// Plain records `key-i` → `value-i ✓` with a header `i`, at offsets `range`.
fn numbered_records(range: std::ops::Range<i64>) -> impl Iterator<Item = Fetched> {
    range.map(|i| {
        let key = format!("key-{i}");
        let value = format!("value-{i} ✓");
        let n = i.to_string();
        record(
            i,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[("i", Some(n.as_bytes()))],
        )
    })
}

/// The console producer's input for `records` with parse.headers and parse.key:
/// `h1:v1,h2:v2<TAB>key<TAB>value`, null (and no headers) as [`NULL_MARKER`].
fn console_producer_input(records: &[Fetched]) -> Vec<u8> {
    let text = |b: Option<&[u8]>| -> String {
        b.map_or(NULL_MARKER.to_string(), |b| {
            String::from_utf8(b.to_vec()).expect("text record")
        })
    };
    let mut out = String::new();
    for r in records {
        let headers = if r.headers.is_empty() {
            NULL_MARKER.to_string()
        } else {
            r.headers
                .iter()
                .map(|(k, v)| format!("{k}:{}", text(v.as_deref())))
                .collect::<Vec<_>>()
                .join(",")
        };
        out.push_str(&format!(
            "{headers}\t{}\t{}\n",
            text(r.key.as_deref()),
            text(r.value.as_deref())
        ));
    }
    out.into_bytes()
}

#[test]
fn java_console_producer_to_kring_every_codec() {
    let want = console_producer_records();
    let input = console_producer_input(&want);
    let client = client(config());
    let mut topics = Vec::new();
    for codec in CODECS {
        let topic = unique(&format!("kring-interop-from-java-{}", codec.name));
        create_topic(&client, &topic, 1, 1, TOPIC_CONFIG);
        topics.push((codec, topic));
    }
    // One JVM per codec, all at once.
    let tools = common::java_tools();
    let before = now_ms();
    let producers: Vec<_> = topics
        .into_iter()
        .map(|(codec, topic)| {
            let mut command = kafka_tool(tools.console_producer);
            command
                .args(["--bootstrap-server", &bootstrap(), "--topic", &topic])
                .args(["--compression-codec", codec.name]);
            for property in [
                "parse.headers=true",
                "parse.key=true",
                &format!("null.marker={NULL_MARKER}"),
            ] {
                command.args([tools.reader_property, property]);
            }
            let tool = spawn(
                format!("Java ConsoleProducer writing {topic}"),
                command,
                input.clone(),
            );
            (codec, topic, tool)
        })
        .collect();
    let mut written = Vec::new();
    for (codec, topic, tool) in producers {
        tool.finish();
        written.push((codec, topic));
    }
    let after = now_ms();
    for (codec, topic) in written {
        let what = format!("kring reading Java's {topic} ({})", codec.name);
        read_back(&client, &topic, &what, &want, codec, true, (before, after));
    }
    client.close();
}
