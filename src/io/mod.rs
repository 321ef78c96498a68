//! The only layer with sockets.
//!
//! - [`transport`]: the completion-style transport traits (owned buffers in, owned
//!   buffers back), with an io_uring backend (`uring`, a ring of its own; Linux with the
//!   `io-uring` feature only) and an epoll backend ([`epoll`], tokio), chosen by
//!   [`backend`].
//! - [`connection`]: one broker connection driven by a task on its worker: framing,
//!   correlation ids, pipelining, batched vectored writes, timeouts, the ApiVersions
//!   handshake, reconnection with backoff.
//! - [`Broker`]: the public, `Send + Sync` handle to a connection (Sarama's Broker).
//! - [`blocking`]: a plain blocking connection for tools and tests that want no runtime.
//! - [`security`]: TLS configuration from PEM files, SASL credentials per connection.
//! - `sockopt`: the socket options std and tokio do not set (the read wake threshold).

pub mod backend;
pub mod blocking;
pub mod broker;
pub mod connection;
mod encrypted_key;
pub mod epoll;
pub mod security;
mod sockopt;
pub mod transport;
#[cfg(all(target_os = "linux", feature = "io-uring"))]
pub mod uring;

pub use crate::engine::error::IoError;
pub use backend::{Backend, BackendChoice};
pub use blocking::BlockingConnection;
pub use broker::{Broker, PendingResponse};
pub use connection::{ConnectionConfig, ConnectionState};
