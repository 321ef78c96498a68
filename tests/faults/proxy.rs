//! A loopback fault proxy for the fault catalog: it listens where `scripts/kafka`
//! advertises each node's FAULTS listener (127.0.0.1:9791+N) and forwards every
//! connection to the node's real FAULTS port (9691+N), so each connection a client makes
//! to the cluster through it (metadata included) can be delayed, black-holed, reset or
//! refused on command, per node.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a node's proxy does with the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything at once.
    Pass,
    /// Forward every chunk after this delay.
    Delay(Duration),
    /// Carry nothing either way, keeping the connections open (and new ones accepted
    /// into the same hole); what was held goes on, in order, when the mode changes: a
    /// network that drops every packet for a while, as TCP (which retransmits) shows it.
    BlackHole,
    /// Reset (RST) every connection open now, and each new one as it arrives.
    Refuse,
    /// Forward until the next chunk from the client, forward half of it and reset the
    /// connection: a connection reset in the middle of a request. Back to `Pass` after.
    ResetMidRequest,
}

/// Connections the proxy has reset (every node, since start).
static RESETS: AtomicU64 = AtomicU64::new(0);

/// The proxies of every node, on their own runtime thread.
pub struct FaultProxy {
    nodes: Vec<NodeProxy>,
    _runtime: tokio::runtime::Runtime,
}

struct NodeProxy {
    mode: watch::Sender<Mode>,
}

impl FaultProxy {
    /// Starts a proxy for nodes 1..=`nodes`: 127.0.0.1:(9791+N) → 127.0.0.1:(9691+N).
    pub fn start(nodes: u16) -> FaultProxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .expect("fault proxy runtime");
        let nodes = (1..=nodes)
            .map(|n| {
                let listen = format!("127.0.0.1:{}", 9791 + n);
                let upstream = format!("127.0.0.1:{}", 9691 + n);
                let listener = runtime
                    .block_on(TcpListener::bind(&listen))
                    .unwrap_or_else(|e| panic!("fault proxy: bind {listen}: {e}"));
                let (mode, _) = watch::channel(Mode::Pass);
                runtime.spawn(accept_loop(listener, upstream, mode.clone()));
                NodeProxy { mode }
            })
            .collect();
        FaultProxy {
            nodes,
            _runtime: runtime,
        }
    }

    /// The bootstrap servers through the proxy.
    pub fn bootstrap(&self) -> Vec<String> {
        (1..=self.nodes.len())
            .map(|n| format!("127.0.0.1:{}", 9791 + n))
            .collect()
    }

    /// Sets node `n`'s mode (for connections open now and later).
    pub fn set(&self, n: i32, mode: Mode) {
        self.node(n).mode.send_replace(mode);
    }

    /// Every node back to `Pass`.
    pub fn heal(&self) {
        for node in &self.nodes {
            node.mode.send_replace(Mode::Pass);
        }
    }

    /// Connections reset so far (every node).
    pub fn resets(&self) -> u64 {
        RESETS.load(Ordering::Relaxed)
    }

    fn node(&self, n: i32) -> &NodeProxy {
        &self.nodes[usize::try_from(n - 1).expect("node from 1")]
    }
}

async fn accept_loop(listener: TcpListener, upstream: String, mode: watch::Sender<Mode>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let _ = client.set_nodelay(true);
        if *mode.borrow() == Mode::Refuse {
            reset_now(client);
            continue;
        }
        let (upstream, mode) = (upstream.clone(), mode.clone());
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                reset_now(client);
                return;
            };
            let _ = server.set_nodelay(true);
            carry(client, server, mode).await;
        });
    }
}

/// Closes `stream` with a reset (SO_LINGER 0) rather than a FIN.
fn reset_now(stream: TcpStream) {
    // Deprecated because a non-zero linger blocks the thread at drop; zero never does.
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// Carries one connection both ways under the node's mode until either side closes or
/// the mode resets it.
async fn carry(mut client: TcpStream, mut server: TcpStream, mode: watch::Sender<Mode>) {
    let (mut up, mut down) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    let mut changes = mode.subscribe();
    let reset_both = loop {
        hold_while_black_holed(&mode).await;
        let (mut client_read, mut client_write) = client.split();
        let (mut server_read, mut server_write) = server.split();
        tokio::select! {
            n = client_read.read(&mut up) => {
                let Ok(n @ 1..) = n else { break false };
                let current = *mode.borrow();
                if current == Mode::ResetMidRequest {
                    let _ = server_write.write_all(&up[..n.div_ceil(2)]).await;
                    mode.send_replace(Mode::Pass);
                    break true;
                }
                if !forward(&mode, &mut server_write, &up[..n]).await {
                    break false;
                }
            }
            _ = changes.changed() => {
                if *changes.borrow_and_update() == Mode::Refuse {
                    break true;
                }
            }
            n = server_read.read(&mut down) => {
                let Ok(n @ 1..) = n else { break false };
                if !forward(&mode, &mut client_write, &down[..n]).await {
                    break false;
                }
            }
        }
    };
    if reset_both {
        RESETS.fetch_add(1, Ordering::Relaxed);
        reset_now(client);
        reset_now(server);
    }
}

/// Waits while the mode is `BlackHole`.
async fn hold_while_black_holed(mode: &watch::Sender<Mode>) {
    let mut changes = mode.subscribe();
    let _ = changes.wait_for(|m| *m != Mode::BlackHole).await;
}

/// Writes `bytes` on as the mode says (held while black-holed); false when the write
/// failed.
async fn forward(
    mode: &watch::Sender<Mode>,
    to: &mut tokio::net::tcp::WriteHalf<'_>,
    bytes: &[u8],
) -> bool {
    hold_while_black_holed(mode).await;
    let current = *mode.borrow();
    match current {
        Mode::Delay(d) => {
            tokio::time::sleep(d).await;
            to.write_all(bytes).await.is_ok()
        }
        _ => to.write_all(bytes).await.is_ok(),
    }
}
