//! The broker connection suite, run once per I/O backend (io_uring and epoll): against
//! the real Kafka on loopback (`scripts/kafka up`, or `KRING_BOOTSTRAP`), and against a
//! scripted fake broker for faults a real one will not show on demand (closing
//! mid-response, never answering, hostile frame lengths, garbage, trickling, not reading).
//! After each fault the error must be clear and retriable where it should be, and no
//! in-flight entry, task or thread may be left behind.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use common::threads_named;
use kring::internals::{Backend, BackendChoice, Broker, ConnectionConfig, IoError};
use kring::internals::{Runtime, RuntimeConfig};
use kring::protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, api_versions::ApiVersion, metadata::MetadataResponseBroker,
};
use kring::protocol::{
    Encode, FrameCutter, RequestHeader, RequestKind, decode_request_frame,
    encode_response_frame_with,
};

fn bootstrap() -> String {
    std::env::var("KRING_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

fn runtime(backend: Backend, name: &str) -> Runtime {
    let choice = match backend {
        #[cfg(all(target_os = "linux", feature = "io-uring"))]
        Backend::IoUring => BackendChoice::IoUring,
        Backend::Epoll => BackendChoice::Epoll,
    };
    let rt = Runtime::new(RuntimeConfig {
        workers: 2,
        backend: choice,
        thread_name: name.into(),
    })
    .unwrap_or_else(|e| panic!("{backend} runtime: {e}"));
    assert_eq!(rt.backend(), backend);
    rt
}

fn quick_config() -> ConnectionConfig {
    ConnectionConfig {
        request_timeout: Duration::from_millis(1500),
        connect_timeout: Duration::from_secs(5),
        reconnect_backoff: Duration::from_millis(10),
        reconnect_backoff_max: Duration::from_millis(50),
        drain_timeout: Duration::from_millis(500),
        ..ConnectionConfig::default()
    }
}

/// Shuts `rt` down and checks that nothing it started is left.
fn assert_clean_shutdown(rt: Runtime, name: &str) {
    rt.shutdown();
    assert_eq!(rt.live_tasks(), 0, "tasks left after shutdown");
    drop(rt);
    // Thread names are cut to 15 bytes by the kernel.
    let prefix: String = name.chars().take(15).collect();
    // A joined thread's /proc entry can outlive the join by a moment: allow it that.
    let deadline = Instant::now() + Duration::from_secs(2);
    while threads_named(&prefix) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        threads_named(&prefix),
        0,
        "worker threads left after shutdown"
    );
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---------------------------------------------------------------- fake broker

/// What the fake broker does with a request after the handshake.
type Script = dyn Fn(usize, usize, &RequestHeader, &mut TcpStream) -> bool + Send + Sync;

struct FakeBroker {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

fn read_frame(stream: &mut TcpStream, cutter: &mut FrameCutter) -> Option<Bytes> {
    loop {
        if let Some(frame) = cutter.next_frame().ok()? {
            return Some(frame);
        }
        match cutter.fill_with(|buf| stream.read(buf)) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// Writes `body` as a response frame to `header`'s request, with the right header version.
fn respond<M: Encode>(stream: &mut TcpStream, header: &RequestHeader, body: &M) {
    let api = ApiKey::from_i16(header.request_api_key).unwrap();
    let version = header.request_api_version;
    let mut buf = BytesMut::new();
    encode_response_frame_with(&mut buf, api, version, header.correlation_id, |b| {
        body.encode(b, version)
    })
    .unwrap();
    let _ = stream.write_all(&buf);
}

fn metadata_answer(port: u16) -> MetadataResponse {
    MetadataResponse::default().with_brokers(vec![
        MetadataResponseBroker::default()
            .with_node_id(1)
            .with_host("127.0.0.1".into())
            .with_port(port as i32),
    ])
}

impl FakeBroker {
    fn start(script: Arc<Script>) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let index = count.fetch_add(1, Ordering::SeqCst);
                let script = script.clone();
                std::thread::spawn(move || {
                    let mut nth = 0;
                    let mut cutter = FrameCutter::new(1 << 20, 4096);
                    while let Some(frame) = read_frame(&mut stream, &mut cutter) {
                        let Ok((header, body)) = decode_request_frame(frame) else {
                            return;
                        };
                        if let RequestKind::ApiVersions(_) = body {
                            let keys = [(18, 0, 4), (3, 0, 12), (0, 3, 11)]
                                .into_iter()
                                .map(|(k, a, b)| {
                                    ApiVersion::default()
                                        .with_api_key(k)
                                        .with_min_version(a)
                                        .with_max_version(b)
                                })
                                .collect();
                            respond(
                                &mut stream,
                                &header,
                                &ApiVersionsResponse::default().with_api_keys(keys),
                            );
                            continue;
                        }
                        if !script(index, nth, &header, &mut stream) {
                            return;
                        }
                        nth += 1;
                    }
                });
            }
        });
        FakeBroker { addr, connections }
    }
}

// ---------------------------------------------------------------- the suite

fn real_broker_round_trip(backend: Backend) {
    let name = format!("kr-rt-{backend}");
    let rt = runtime(backend, &name);
    let broker = Broker::open(&rt, 1, bootstrap(), ConnectionConfig::default()).unwrap();
    assert!(!broker.connected(), "connections are made on demand");
    broker.connect_blocking().expect("connect");
    assert!(broker.connected());
    let versions = broker.api_versions().expect("negotiated versions");
    assert!(versions.version_for(ApiKey::Metadata).is_some());
    let metadata = broker
        .send_blocking(MetadataRequest::default().with_topics(None))
        .expect("metadata");
    assert!(!metadata.brokers.is_empty());
    assert!(metadata.cluster_id.is_some());
    assert_eq!(broker.connect_count(), 1);
    assert_clean_shutdown(rt, &name);
}

fn real_broker_pipelined_from_threads_and_a_foreign_runtime(backend: Backend) {
    let name = format!("kr-pipe-{backend}");
    let rt = runtime(backend, &name);
    let broker = Broker::open(&rt, 1, bootstrap(), ConnectionConfig::default()).unwrap();

    // Plain threads, blocking.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let b = broker.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let r = b
                        .send_blocking(
                            ApiVersionsRequest::default()
                                .with_client_software_name("t".into())
                                .with_client_software_version("1".into()),
                        )
                        .unwrap();
                    assert_eq!(r.error_code, 0);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }

    // A tokio multi-thread runtime: 200 requests pipelined at once.
    let foreign = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let b = broker.clone();
    let answered = foreign.block_on(async move {
        let mut pending = Vec::new();
        for _ in 0..200 {
            pending.push(
                b.enqueue(
                    MetadataRequest::default().with_topics(Some(Vec::new())),
                    None,
                )
                .await
                .unwrap(),
            );
        }
        let mut ok = 0;
        for p in pending {
            let m = p.await.unwrap();
            assert!(!m.brokers.is_empty());
            ok += 1;
        }
        ok
    });
    assert_eq!(answered, 200);
    assert_eq!(
        broker.connect_count(),
        1,
        "one connection served everything"
    );
    assert_eq!(broker.in_flight(), 0);
    drop(foreign);
    assert_clean_shutdown(rt, &name);
}

fn closes_mid_response_then_reconnects(backend: Backend) {
    let name = format!("kr-mid-{backend}");
    let rt = runtime(backend, &name);
    let fake = FakeBroker::start(Arc::new(|conn, _, header, stream| {
        if conn == 0 {
            // Half a response, then close.
            stream.write_all(&[0, 0, 0, 100, 0, 0]).unwrap();
            let _ = header;
            return false;
        }
        let port = stream.local_addr().unwrap().port();
        respond(stream, header, &metadata_answer(port));
        true
    }));
    let broker = Broker::open(&rt, 1, fake.addr.to_string(), quick_config()).unwrap();
    let err = broker
        .send_blocking(MetadataRequest::default())
        .expect_err("the broker closed mid-response");
    assert!(matches!(err, IoError::Disconnected { .. }), "{err}");
    assert!(err.is_retriable());
    assert!(err.to_string().contains("mid-response"), "{err}");
    assert_eq!(broker.in_flight(), 0);
    // The next request reconnects (after a short backoff) and succeeds.
    let deadline = Instant::now() + Duration::from_secs(5);
    let answer = loop {
        match broker.send_blocking(MetadataRequest::default()) {
            Ok(m) => break m,
            Err(IoError::NotConnected { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("reconnect failed: {e}"),
        }
    };
    assert_eq!(answer.brokers[0].node_id, 1);
    assert_eq!(broker.connect_count(), 2);
    assert_eq!(fake.connections.load(Ordering::SeqCst), 2);
    assert_clean_shutdown(rt, &name);
}

fn response_never_comes(backend: Backend) {
    let name = format!("kr-silent-{backend}");
    let rt = runtime(backend, &name);
    let fake = FakeBroker::start(Arc::new(|_, _, _, _| true));
    let config = ConnectionConfig {
        request_timeout: Duration::from_millis(300),
        ..quick_config()
    };
    let broker = Broker::open(&rt, 1, fake.addr.to_string(), config).unwrap();
    let started = Instant::now();
    let err = broker
        .send_blocking(MetadataRequest::default())
        .expect_err("no answer");
    assert!(
        matches!(
            err,
            IoError::RequestTimedOut {
                api: ApiKey::Metadata,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_retriable());
    assert!(started.elapsed() >= Duration::from_millis(300));
    wait_until("disconnect after timeout", || !broker.connected());
    assert_eq!(broker.in_flight(), 0);
    assert_clean_shutdown(rt, &name);
}

fn hostile_frames(backend: Backend) {
    for (label, bytes) in [
        ("oversized", vec![0x7f, 0xff, 0xff, 0xff]),
        ("negative", vec![0xff, 0xff, 0xff, 0x00]),
        // A well-framed answer whose correlation id is wrong.
        (
            "garbage",
            vec![0, 0, 0, 8, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4],
        ),
        // A frame too short to hold a response header.
        ("short", vec![0, 0, 0, 2, 0xab, 0xcd]),
    ] {
        let name = format!("kr-{label}-{}", backend.name());
        let rt = runtime(backend, &name);
        let fake = FakeBroker::start(Arc::new(move |_, _, _, stream| {
            let _ = stream.write_all(&bytes);
            std::thread::sleep(Duration::from_millis(200));
            false
        }));
        let config = ConnectionConfig {
            max_response_size: 1 << 20,
            ..quick_config()
        };
        let broker = Broker::open(&rt, 1, fake.addr.to_string(), config).unwrap();
        let err = broker
            .send_blocking(MetadataRequest::default())
            .expect_err(label);
        match label {
            "oversized" => assert!(
                err.to_string().contains("exceeds the cap"),
                "{label}: {err}"
            ),
            "negative" => assert!(err.to_string().contains("negative"), "{label}: {err}"),
            "garbage" => assert!(
                err.to_string().contains("correlation id") || matches!(err, IoError::Decode { .. }),
                "{label}: {err}"
            ),
            _ => assert!(matches!(err, IoError::Decode { .. }), "{label}: {err}"),
        }
        assert_eq!(broker.in_flight(), 0, "{label}");
        assert_clean_shutdown(rt, &name);
    }
}

fn trickled_response_arrives_whole(backend: Backend) {
    let name = format!("kr-trickle-{backend}");
    let rt = runtime(backend, &name);
    let fake = FakeBroker::start(Arc::new(|_, _, header, stream| {
        let mut out = Vec::new();
        let port = stream.local_addr().unwrap().port();
        // Encode into a buffer, then send it a byte at a time.
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        buf.put_i32(header.correlation_id);
        buf.put_u8(0);
        metadata_answer(port)
            .encode(&mut buf, header.request_api_version)
            .unwrap();
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&buf);
        for b in out {
            if stream.write_all(&[b]).is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        true
    }));
    let broker = Broker::open(&rt, 1, fake.addr.to_string(), quick_config()).unwrap();
    let m = broker
        .send_blocking(MetadataRequest::default())
        .expect("trickled answer");
    assert_eq!(m.brokers.len(), 1);
    assert_clean_shutdown(rt, &name);
}

fn broker_that_stops_reading(backend: Backend) {
    let name = format!("kr-stall-{backend}");
    let rt = runtime(backend, &name);
    // After the handshake the fake reads nothing more; our writes fill the socket
    // buffers and must give up at the request timeout instead of hanging.
    let fake = FakeBroker::start(Arc::new(|_, _, _, _| {
        std::thread::sleep(Duration::from_secs(30));
        false
    }));
    let config = ConnectionConfig {
        request_timeout: Duration::from_millis(500),
        max_in_flight: 64,
        ..quick_config()
    };
    let broker = Broker::open(&rt, 1, fake.addr.to_string(), config).unwrap();
    broker.connect_blocking().unwrap();
    let big_topic = "x".repeat(30_000);
    let foreign = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let errors = foreign.block_on(async {
        let mut pending = Vec::new();
        for _ in 0..400 {
            let request = MetadataRequest::default().with_topics(Some(vec![
                kring::protocol::messages::metadata::MetadataRequestTopic::default()
                    .with_name(Some(big_topic.clone())),
            ]));
            match broker.enqueue(request, None).await {
                Ok(p) => pending.push(p),
                Err(e) => panic!("enqueue: {e}"),
            }
        }
        let mut errors = Vec::new();
        for p in pending {
            errors.push(p.await.expect_err("nobody answers"));
        }
        errors
    });
    assert!(errors.iter().all(IoError::is_retriable));
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("stalled")
                || matches!(e, IoError::RequestTimedOut { .. })),
        "{:?}",
        errors.first()
    );
    assert_eq!(broker.in_flight(), 0);
    assert_clean_shutdown(rt, &name);
}

fn acks_zero_produce_expects_no_answer(backend: Backend) {
    let name = format!("kr-acks0-{backend}");
    let rt = runtime(backend, &name);
    let seen = Arc::new(AtomicUsize::new(0));
    let seen_in_fake = seen.clone();
    let fake = FakeBroker::start(Arc::new(move |_, _, header, stream| {
        if header.request_api_key == ApiKey::Produce.key() {
            seen_in_fake.fetch_add(1, Ordering::SeqCst);
            return true; // acks=0: no answer
        }
        let port = stream.local_addr().unwrap().port();
        respond(stream, header, &metadata_answer(port));
        true
    }));
    let broker = Broker::open(&rt, 1, fake.addr.to_string(), quick_config()).unwrap();
    let produced = broker
        .send_blocking(ProduceRequest::default().with_acks(0).with_timeout_ms(1000))
        .expect("acks=0 resolves when written");
    assert!(produced.responses.is_empty());
    // The next request's answer is matched correctly after the unanswered one.
    let m = broker.send_blocking(MetadataRequest::default()).unwrap();
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_clean_shutdown(rt, &name);
}

fn refused_connection_backs_off(backend: Backend) {
    let name = format!("kr-refused-{backend}");
    let rt = runtime(backend, &name);
    // A port with nothing listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let broker = Broker::open(
        &rt,
        1,
        format!("127.0.0.1:{port}"),
        ConnectionConfig {
            reconnect_backoff: Duration::from_secs(5),
            reconnect_backoff_max: Duration::from_secs(5),
            ..quick_config()
        },
    )
    .unwrap();
    let first = broker
        .send_blocking(MetadataRequest::default())
        .unwrap_err();
    assert!(matches!(first, IoError::Connect { .. }), "{first}");
    let second = broker
        .send_blocking(MetadataRequest::default())
        .unwrap_err();
    assert!(
        matches!(second, IoError::NotConnected { .. }),
        "in backoff: {second}"
    );
    assert!(second.is_retriable());
    assert_clean_shutdown(rt, &name);
}

fn shutdown_fails_later_requests(backend: Backend) {
    let name = format!("kr-down-{backend}");
    let rt = runtime(backend, &name);
    let fake = FakeBroker::start(Arc::new(|_, _, header, stream| {
        let port = stream.local_addr().unwrap().port();
        respond(stream, header, &metadata_answer(port));
        true
    }));
    let broker = Broker::open(&rt, 1, fake.addr.to_string(), quick_config()).unwrap();
    broker.send_blocking(MetadataRequest::default()).unwrap();
    broker.close();
    let err = broker
        .send_blocking(MetadataRequest::default())
        .unwrap_err();
    assert!(matches!(err, IoError::Closed { .. }), "{err}");
    let other = Broker::open(&rt, 2, fake.addr.to_string(), quick_config()).unwrap();
    other.send_blocking(MetadataRequest::default()).unwrap();
    rt.shutdown();
    let err = other.send_blocking(MetadataRequest::default()).unwrap_err();
    assert!(
        matches!(err, IoError::ShuttingDown | IoError::Closed { .. }),
        "{err}"
    );
    assert!(Broker::open(&rt, 3, fake.addr.to_string(), quick_config()).is_err());
    assert_clean_shutdown(rt, &name);
}

/// A listener that answers whatever it is sent with `answer` (nothing at all when
/// empty, keeping the connection open) and then closes.
fn stranger(answer: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 512];
                let _ = stream.read(&mut buf);
                if answer.is_empty() {
                    // Hold the connection open, silent, until the client gives up.
                    let _ = stream.read(&mut buf);
                    return;
                }
                let _ = stream.write_all(answer);
            });
        }
    });
    addr
}

fn strangers_on_the_port_are_named(backend: Backend) {
    let cases: [(&'static [u8], &str); 3] = [
        (
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
            "HTTP server",
        ),
        (&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a], "expects TLS"),
        (b"", "got no answer within"),
    ];
    for (answer, expected) in cases {
        let name = format!("kr-stranger-{backend}");
        let rt = runtime(backend, &name);
        let addr = stranger(answer);
        let config = ConnectionConfig {
            connect_timeout: Duration::from_millis(600),
            ..quick_config()
        };
        let broker = Broker::open(&rt, 1, addr.to_string(), config.clone()).unwrap();
        let err = broker
            .send_blocking(MetadataRequest::default())
            .expect_err(expected);
        let text = err.to_string();
        assert!(text.contains(expected), "{expected}: {text}");
        assert!(
            !text.contains("TCP connect"),
            "{expected}: the TCP connect worked: {text}"
        );
        if answer.is_empty() {
            assert!(matches!(err, IoError::HandshakeTimedOut { .. }), "{err:?}");
        } else {
            assert!(matches!(err, IoError::NotKafka { .. }), "{err:?}");
        }
        // The blocking connection says the same, through the same engine.
        let blocking = kring::client::BlockingConnection::connect(&addr.to_string(), config)
            .expect_err(expected)
            .to_string();
        assert!(
            blocking.contains(expected),
            "blocking, {expected}: {blocking}"
        );
        assert_clean_shutdown(rt, &name);
    }
}

/// A listener that accepts every connection and never answers, holding each open (so
/// the client's read never ends by itself) until `release`d.
struct SilentListener {
    addr: SocketAddr,
    held: Arc<std::sync::Mutex<Vec<TcpStream>>>,
    /// The socket inodes of the listener and of every connection it holds.
    own: Arc<std::sync::Mutex<Vec<u64>>>,
}

/// The socket inode behind descriptor `fd` of this process.
fn socket_inode(fd: i32) -> Option<u64> {
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

impl SilentListener {
    fn start() -> Self {
        use std::os::fd::AsRawFd;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let held = Arc::new(std::sync::Mutex::new(Vec::new()));
        let own = Arc::new(std::sync::Mutex::new(
            socket_inode(listener.as_raw_fd())
                .into_iter()
                .collect::<Vec<u64>>(),
        ));
        let (keep, keep_own) = (held.clone(), own.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                if let Some(inode) = socket_inode(stream.as_raw_fd()) {
                    keep_own.lock().unwrap().push(inode);
                }
                keep.lock().unwrap().push(stream);
            }
        });
        SilentListener { addr, held, own }
    }

    fn held(&self) -> usize {
        self.held.lock().unwrap().len()
    }

    /// Closes the server side of every connection accepted so far.
    fn release(&self) {
        self.held.lock().unwrap().clear();
    }

    /// Open sockets of this process that are not this listener's own: the client sides
    /// (and whatever other tests running meanwhile hold).
    fn other_sockets(&self) -> usize {
        let own = self.own.lock().unwrap().clone();
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(socket_inode)
            .filter(|inode| !own.contains(inode))
            .count()
    }
}

/// Descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// One of these tests at a time: each holds hundreds of sockets, which the other's
/// counts must not see.
static COUNTING_FDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// 200 connection attempts to a listener that accepts and never answers, each ending in
/// a handshake timeout: every client socket (and its read buffer) must be released, on
/// io_uring too, where an abandoned read keeps its descriptor until it completes.
fn abandoned_handshakes_leak_no_socket(backend: Backend) {
    const ATTEMPTS: usize = 200;
    const ROUND: usize = 20;
    // Tests running beside this one open a few sockets and descriptors of their own; a
    // leak is one per attempt.
    const SLACK: usize = 24;
    let _alone = COUNTING_FDS.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("kr-silent-{backend}");
    let rt = runtime(backend, &name);
    let silent = SilentListener::start();
    let config = ConnectionConfig {
        connect_timeout: Duration::from_millis(200),
        ..quick_config()
    };
    let (fds_before, sockets_before) = (open_fds(), silent.other_sockets());
    for round in 0..ATTEMPTS / ROUND {
        let attempts: Vec<_> = (0..ROUND)
            .map(|i| {
                let id = (round * ROUND + i) as i32;
                let broker =
                    Broker::open(&rt, id, silent.addr.to_string(), config.clone()).unwrap();
                let pending = broker.try_send(MetadataRequest::default()).unwrap();
                (broker, pending)
            })
            .collect();
        for (broker, pending) in attempts {
            let err = pending.wait().expect_err("nothing answers");
            assert!(matches!(err, IoError::HandshakeTimedOut { .. }), "{err:?}");
            broker.close();
        }
    }
    assert_eq!(silent.held(), ATTEMPTS, "every attempt connected");
    // A socket is closed asynchronously on io_uring: wait for the count to settle (a
    // leaked one never does).
    let settled = |s: &SilentListener| s.other_sockets() <= sockets_before + SLACK;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !settled(&silent) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let sockets_after = silent.other_sockets();
    // The listener still holds the server side of every connection. The count is the
    // process's: other tests of this binary running meanwhile open descriptors too, so
    // it is waited for to settle as well (theirs close; a leak never does).
    let fds_now = |s: &SilentListener| open_fds().saturating_sub(s.held());
    let deadline = Instant::now() + Duration::from_secs(10);
    while fds_now(&silent) > fds_before + SLACK && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let fds_after = fds_now(&silent);
    silent.release();
    assert!(
        sockets_after <= sockets_before + SLACK,
        "client sockets: {sockets_before} before, {sockets_after} after {ATTEMPTS} attempts"
    );
    assert!(
        fds_after <= fds_before + SLACK,
        "descriptors: {fds_before} before, {fds_after} after {ATTEMPTS} attempts"
    );
    assert_clean_shutdown(rt, &name);
}

/// The runtime shuts down while connections wait mid-handshake on a silent peer, with
/// reads in flight: every one ends (io_uring ends them by shutting the socket down and
/// awaits them rather than dropping them), the requests fail, and the sockets close.
fn shutdown_mid_handshake_ends_every_read(backend: Backend) {
    const CONNECTIONS: usize = 20;
    let _alone = COUNTING_FDS.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("kr-midshake-{backend}");
    let rt = runtime(backend, &name);
    let silent = SilentListener::start();
    let sockets_before = silent.other_sockets();
    let pending: Vec<_> = (0..CONNECTIONS)
        .map(|i| {
            let broker =
                Broker::open(&rt, i as i32, silent.addr.to_string(), quick_config()).unwrap();
            broker.try_send(MetadataRequest::default()).unwrap()
        })
        .collect();
    wait_until("every connection accepted", || silent.held() == CONNECTIONS);
    let rt = guarded("runtime shutdown", move || {
        rt.shutdown();
        rt
    });
    for p in pending {
        let err = p.wait().expect_err("shut down before any answer");
        assert!(
            matches!(err, IoError::ShuttingDown | IoError::Closed { .. }),
            "{err:?}"
        );
    }
    let sockets_after = silent.other_sockets();
    silent.release();
    assert!(
        sockets_after <= sockets_before + 8,
        "client sockets: {sockets_before} before, {sockets_after} after shutdown"
    );
    assert_clean_shutdown(rt, &name);
}

macro_rules! suite {
    ($($test:ident),* $(,)?) => {
        #[cfg(all(target_os = "linux", feature = "io-uring"))]
        mod io_uring {
            $(#[test] fn $test() { super::$test(kring::internals::Backend::IoUring); })*
        }
        mod epoll {
            $(#[test] fn $test() { super::$test(kring::internals::Backend::Epoll); })*
        }
    };
}

suite!(
    real_broker_round_trip,
    real_broker_pipelined_from_threads_and_a_foreign_runtime,
    closes_mid_response_then_reconnects,
    response_never_comes,
    hostile_frames,
    trickled_response_arrives_whole,
    broker_that_stops_reading,
    acks_zero_produce_expects_no_answer,
    refused_connection_backs_off,
    shutdown_fails_later_requests,
    strangers_on_the_port_are_named,
    abandoned_handshakes_leak_no_socket,
    shutdown_mid_handshake_ends_every_read,
);

/// Runs `f` on a thread and waits for it with a hang guard (a call that never returns
/// fails the test instead of hanging it; not a timing assertion).
fn guarded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: still blocked after 60 s (hung)"))
}

/// A listener whose connections run `serve` on their own thread.
fn fake_listener(serve: fn(TcpStream)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || serve(stream));
        }
    });
    addr
}

#[test]
fn blocking_connection_times_out_per_response_when_the_answer_trickles() {
    // Reads the request, then sends a frame that never completes, a byte at a time:
    // each read gets something, so only a deadline per response ends the call.
    let addr = fake_listener(|mut stream| {
        let mut buf = [0u8; 4096];
        let _ = stream.read(&mut buf);
        let _ = stream.write_all(&1000i32.to_be_bytes());
        for _ in 0..2000 {
            if stream.write_all(&[0]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let config = ConnectionConfig {
        request_timeout: Duration::from_millis(500),
        ..quick_config()
    };
    let result = guarded("a trickled answer", move || {
        let mut conn =
            kring::client::BlockingConnection::connect_raw(&addr.to_string(), config).unwrap();
        conn.send_version(&MetadataRequest::default(), 1)
    });
    let err = result.expect_err("the answer never completes");
    assert!(matches!(err, IoError::RequestTimedOut { .. }), "{err:?}");
}

#[test]
fn blocking_connection_times_out_when_the_broker_stops_reading() {
    // Never reads: a large request fills the socket buffers and the write blocks.
    let addr = fake_listener(|stream| {
        std::thread::sleep(Duration::from_secs(120));
        drop(stream);
    });
    let config = ConnectionConfig {
        request_timeout: Duration::from_millis(500),
        ..quick_config()
    };
    let result = guarded("a write nobody reads", move || {
        let mut conn =
            kring::client::BlockingConnection::connect_raw(&addr.to_string(), config).unwrap();
        let topic = kring::protocol::messages::metadata::MetadataRequestTopic::default()
            .with_name(Some("x".repeat(30_000)));
        let request = MetadataRequest::default().with_topics(Some(vec![topic; 2000]));
        conn.send_version(&request, 1)
    });
    let err = result.expect_err("nobody reads");
    assert!(matches!(err, IoError::RequestTimedOut { .. }), "{err:?}");
}
