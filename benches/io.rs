//! Pipelined request throughput and latency of one broker connection, io_uring against
//! epoll in the same run, against a local blackhole responder (which answers every
//! request at once with a canned response, so the client side dominates) and against the
//! real broker (`scripts/kafka up`).
//!
//! `cargo bench --bench io -- [--backend io_uring|epoll|both] [--target blackhole|broker|both]
//!  [--callers thread|worker|both] [--requests N] [--depth D] [--rounds R]`
//!
//! Each round sends N small Metadata requests (empty topic list) from D concurrent
//! callers, keeping up to D requests in flight on the one connection; it reports the
//! median round's requests/s and the p50/p99 latency over all rounds. The backends'
//! rounds alternate (each backend warmed up first, the order reversed every other
//! round), so a target whose pace drifts during the run weighs on both alike. The
//! callers run on a thread of their own (`thread`, the default: an application calling
//! in from outside, each request and answer crossing threads) or on the worker that owns
//! the socket (`worker`: the thread-per-core way, nothing crossing threads).
//! `--serve ADDR` runs only the responder (in its own process) and `--blackhole ADDR`
//! uses it, so that `scripts/bench-io` can count the client process's syscalls per
//! request with `perf stat`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kring::internals::{Backend, BackendChoice, Broker, ConnectionConfig};
use kring::internals::{Runtime, RuntimeConfig, spawn_on_worker};
use kring::protocol::messages::{
    ApiKey, ApiVersionsResponse, MetadataRequest, MetadataResponse, api_versions::ApiVersion,
    metadata::MetadataResponseBroker,
};
use kring::protocol::{Encode, decode_request_frame};

struct Args {
    backends: Vec<Backend>,
    targets: Vec<String>,
    callers: Vec<Callers>,
    requests: usize,
    depth: usize,
    rounds: usize,
    /// Use this responder instead of starting one in-process.
    blackhole: Option<String>,
    /// Only run a responder on this address, forever.
    serve: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        backends: vec![Backend::IoUring, Backend::Epoll],
        callers: vec![Callers::Thread],
        targets: vec!["blackhole".into(), "broker".into()],
        requests: 20_000,
        depth: 32,
        rounds: 5,
        blackhole: None,
        serve: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--backend" => {
                args.backends = match value().as_str() {
                    "io_uring" => vec![Backend::IoUring],
                    "epoll" => vec![Backend::Epoll],
                    _ => vec![Backend::IoUring, Backend::Epoll],
                }
            }
            "--target" => {
                args.targets = match value().as_str() {
                    "both" => vec!["blackhole".into(), "broker".into()],
                    t => vec![t.to_string()],
                }
            }
            "--callers" => {
                args.callers = match value().as_str() {
                    "both" => vec![Callers::Thread, Callers::Worker],
                    "thread" => vec![Callers::Thread],
                    "worker" => vec![Callers::Worker],
                    other => panic!("--callers thread|worker|both, not {other}"),
                }
            }
            "--requests" => args.requests = value().parse().expect("--requests N"),
            "--depth" => args.depth = value().parse().expect("--depth D"),
            "--rounds" => args.rounds = value().parse().expect("--rounds R"),
            "--blackhole" => args.blackhole = Some(value()),
            "--serve" => args.serve = Some(value()),
            // cargo bench passes --bench; ignore harness flags.
            _ => {}
        }
    }
    args
}

/// A responder that answers each request immediately with a canned body, reading and
/// writing in large chunks so it costs little CPU.
fn start_blackhole(bind: &str) -> SocketAddr {
    let listener = TcpListener::bind(bind).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            stream.set_nodelay(true).unwrap();
            std::thread::spawn(move || {
                let mut canned: HashMap<(i16, i16), Bytes> = HashMap::new();
                let mut buf = BytesMut::with_capacity(1 << 16);
                let mut out = BytesMut::with_capacity(1 << 16);
                let mut chunk = vec![0u8; 1 << 16];
                loop {
                    let n = match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    while buf.len() >= 4 {
                        let len = i32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
                        if buf.len() < 4 + len {
                            break;
                        }
                        let frame = buf.split_to(4 + len).freeze().slice(4..);
                        let Ok((header, _)) = decode_request_frame(frame) else {
                            return;
                        };
                        let key = (header.request_api_key, header.request_api_version);
                        let body = canned.entry(key).or_insert_with(|| canned_body(key));
                        let api = ApiKey::from_i16(key.0).unwrap();
                        let flexible_header = api.response_header_version(key.1) >= 1;
                        let size = 4 + usize::from(flexible_header) + body.len();
                        out.put_i32(size as i32);
                        out.put_i32(header.correlation_id);
                        if flexible_header {
                            out.put_u8(0);
                        }
                        out.put_slice(body);
                    }
                    if !out.is_empty() {
                        if stream.write_all(&out).is_err() {
                            return;
                        }
                        out.clear();
                    }
                }
            });
        }
    });
    addr
}

fn canned_body((key, version): (i16, i16)) -> Bytes {
    let mut b = BytesMut::new();
    if key == ApiKey::ApiVersions.key() {
        let keys = [(18, 0, 4), (3, 0, 12)]
            .into_iter()
            .map(|(k, a, z)| {
                ApiVersion::default()
                    .with_api_key(k)
                    .with_min_version(a)
                    .with_max_version(z)
            })
            .collect();
        ApiVersionsResponse::default()
            .with_api_keys(keys)
            .encode(&mut b, version)
            .unwrap();
    } else {
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(1)
                    .with_host("127.0.0.1".into())
                    .with_port(9092),
            ])
            .with_cluster_id(Some("blackhole".into()))
            .encode(&mut b, version)
            .unwrap();
    }
    b.freeze()
}

/// Where the bench's callers run.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Callers {
    /// A thread of their own (a current-thread tokio runtime).
    Thread,
    /// The worker thread that owns the connection.
    Worker,
}

impl std::fmt::Display for Callers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Callers::Thread => "thread",
            Callers::Worker => "worker",
        })
    }
}

struct Round {
    elapsed: Duration,
    latencies: Vec<Duration>,
}

fn run_round(
    rt: &Runtime,
    broker: &Broker,
    callers: Callers,
    requests: usize,
    depth: usize,
) -> Round {
    match callers {
        Callers::Thread => {
            let driver = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let local = tokio::task::LocalSet::new();
            driver.block_on(local.run_until(callers_round(broker.clone(), requests, depth)))
        }
        Callers::Worker => {
            let (tx, rx) = std::sync::mpsc::channel();
            let b = broker.clone();
            spawn_on_worker(rt, 0, move |_| async move {
                let _ = tx.send(callers_round(b, requests, depth).await);
            })
            .expect("spawn on the worker");
            rx.recv().expect("the round's result")
        }
    }
}

/// `depth` concurrent callers sending `requests` requests in all, on the current
/// thread (a current-thread runtime or the worker's own).
async fn callers_round(broker: Broker, requests: usize, depth: usize) -> Round {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let per_task = requests / depth;
    for _ in 0..depth {
        let b = broker.clone();
        tasks.spawn_local(async move {
            let mut lat = Vec::with_capacity(per_task);
            for _ in 0..per_task {
                let t = Instant::now();
                let m = b
                    .send(MetadataRequest::default().with_topics(Some(Vec::new())))
                    .await
                    .expect("metadata");
                assert!(!m.brokers.is_empty());
                lat.push(t.elapsed());
            }
            lat
        });
    }
    let mut latencies = Vec::with_capacity(requests);
    while let Some(l) = tasks.join_next().await {
        latencies.extend(l.unwrap());
    }
    Round {
        elapsed: started.elapsed(),
        latencies,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// One backend's runtime and connection, open for the rounds of one target and callers.
struct Setup {
    backend: Backend,
    rt: Runtime,
    broker: Broker,
}

impl Setup {
    fn open(backend: Backend, target: &str, addr: &str, args: &Args) -> Setup {
        let choice = match backend {
            Backend::IoUring => BackendChoice::IoUring,
            Backend::Epoll => BackendChoice::Epoll,
        };
        let rt = Runtime::new(RuntimeConfig {
            workers: 1,
            backend: choice,
            thread_name: "kring-bench".into(),
        })
        .expect("runtime");
        let config = ConnectionConfig {
            max_in_flight: args.depth,
            ..ConnectionConfig::default()
        };
        let broker = Broker::open(&rt, 1, addr.to_string(), config).expect("open");
        broker
            .connect_blocking()
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        Setup {
            backend,
            rt,
            broker,
        }
    }

    fn close(self) {
        drop(self.broker);
        self.rt.shutdown();
    }
}

/// Every backend's rounds, taken in turn (the order reversed every other round) after a
/// warm-up round each, so that a target whose pace drifts (the broker's JIT warming up,
/// the machine's other load) weighs on every backend alike.
fn interleaved_rounds(
    setups: &[Setup],
    callers: Callers,
    args: &Args,
) -> Vec<(Backend, Vec<Round>)> {
    for s in setups {
        run_round(&s.rt, &s.broker, callers, args.requests / 10, args.depth);
    }
    let mut rounds: Vec<Vec<Round>> = setups.iter().map(|_| Vec::new()).collect();
    for r in 0..args.rounds {
        let mut order: Vec<usize> = (0..setups.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let s = &setups[i];
            rounds[i].push(run_round(
                &s.rt,
                &s.broker,
                callers,
                args.requests,
                args.depth,
            ));
        }
    }
    setups.iter().map(|s| s.backend).zip(rounds).collect()
}

/// Prints one backend's row (median round's requests/s, latency over all rounds) and
/// returns that rate.
fn report(backend: Backend, target: &str, callers: Callers, mut rounds: Vec<Round>) -> f64 {
    rounds.sort_by_key(|r| r.elapsed);
    let median = &rounds[rounds.len() / 2];
    let rate = median.latencies.len() as f64 / median.elapsed.as_secs_f64();
    let mut all: Vec<Duration> = rounds.into_iter().flat_map(|r| r.latencies).collect();
    all.sort();
    println!(
        "| {backend} | {target} | {callers} | {rate:.0} | {:.1} µs | {:.1} µs |",
        percentile(&all, 0.50).as_secs_f64() * 1e6,
        percentile(&all, 0.99).as_secs_f64() * 1e6,
    );
    rate
}

fn main() {
    let args = parse_args();
    if let Some(bind) = &args.serve {
        let addr = start_blackhole(bind);
        eprintln!("blackhole responder on {addr}");
        loop {
            std::thread::park();
        }
    }
    let blackhole = match &args.blackhole {
        Some(a) => a.parse().expect("--blackhole HOST:PORT"),
        None => start_blackhole("127.0.0.1:0"),
    };
    println!(
        "| backend | target | callers | requests/s (median of {}) | p50 | p99 |",
        args.rounds
    );
    println!("|---|---|---|---:|---:|---:|");
    let mut rates: HashMap<(String, Callers, Backend), f64> = HashMap::new();
    for target in &args.targets {
        let addr = if target == "broker" {
            std::env::var("KRING_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
        } else {
            blackhole.to_string()
        };
        for &callers in &args.callers {
            let setups: Vec<Setup> = args
                .backends
                .iter()
                .map(|&backend| Setup::open(backend, target, &addr, &args))
                .collect();
            for (backend, rounds) in interleaved_rounds(&setups, callers, &args) {
                let rate = report(backend, target, callers, rounds);
                rates.insert((target.clone(), callers, backend), rate);
            }
            setups.into_iter().for_each(Setup::close);
        }
    }
    for target in &args.targets {
        for &callers in &args.callers {
            if let (Some(u), Some(e)) = (
                rates.get(&(target.clone(), callers, Backend::IoUring)),
                rates.get(&(target.clone(), callers, Backend::Epoll)),
            ) {
                println!(
                    "io_uring/epoll throughput ratio against {target}, callers on the {callers}: {:.2}",
                    u / e
                );
            }
        }
    }
}
