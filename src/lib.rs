//! kring: an Apache Kafka client for high-throughput ingest pipelines.
//!
//! The design (see `DESIGN.md` in the project's shared folder) puts the bytes on the
//! wire at the centre: the [`protocol`] layer is sans-IO and decodes byte fields as
//! zero-copy slices of the buffer the socket filled.
//!
//! Layers, each depending only on those above it:
//! - [`protocol`]: primitives, every message type (generated), headers, framing,
//!   version negotiation and error codes.
//! - [`record`]: record batches v2 written in place and read lazily without copying,
//!   the four compression codecs, and the legacy v0/v1 message sets.
//! - `buf` (internal): pooled fixed-size arenas, a memory budget with backpressure,
//!   and buffers lent to I/O that cannot be reused until I/O hands them back.
//! - `engine` (internal): the sans-IO state machines — the connection core, the
//!   producer's per-broker sinks, the fetcher's decisions — with time passed in.
//! - `io` (internal): the only code with sockets: io_uring and epoll transports, the
//!   drivers that run the engines on them.
//! - `runtime` (internal): thread-per-core workers that own the broker connections.
//! - [`client`]: bootstrap, the cluster metadata cache, leader routing, coordinators,
//!   and the [`client::Broker`] handle for raw requests; [`config`] holds every
//!   setting, [`Error`] is the error callers see.
//! - [`consumer`]: partition consumers over lazily parsed fetches, borrowed records,
//!   fetch sessions, follower fetching (`client.rack`, KIP-392), and the offset manager.
//! - [`producer`]: async and sync producers: in-place batching, Java-compatible
//!   partitioning, compression, idempotence, ordered retries, transactions.
//! - [`group`]: consumer groups: the [`GroupConsumer`](group::GroupConsumer) (classic
//!   protocol with the four Java-compatible assignors, and KIP-848), rebalance
//!   listeners, commits tied to the member's generation.
//! - [`metrics`]: what kring records through the `metrics` crate's facade, every name
//!   in one table.
//! - [`admin`]: what Sarama's `ClusterAdmin` does: topics, partitions, configs,
//!   records, offsets, consumer groups, ACLs, reassignments, log dirs, quotas, SCRAM
//!   credentials, producers and transactions, the cluster and its features.
//!
//! Where to start: [`Client::connect`] with a [`Config`], then
//! [`Producer`](producer::Producer) (or [`SyncProducer`](producer::SyncProducer) from
//! plain threads), [`Consumer`](consumer::Consumer) and its
//! [`PartitionConsumer::next_batch`](consumer::PartitionConsumer::next_batch) for
//! borrowed records, [`GroupConsumer`](group::GroupConsumer) for a group member, and
//! [`Admin`](admin::Admin). Each role also has a builder over a shared client
//! (`Producer::builder(&client)`, `Consumer::builder(&client)`,
//! `GroupConsumer::builder(&client)`). For plain threads the client, producer and
//! partition consumer have `_blocking` twins of their main calls (`connect_blocking`,
//! `send_blocking`, `next_batch_blocking`, ...), and [`client::block_on`] waits for
//! any other future. The crate's README has
//! complete programs, and `examples/` more.
//!
//! ```no_run
//! use kring::producer::{Producer, ProducerRecord};
//! use kring::{Client, Config};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
//! let producer = Producer::new(client.clone()).await?;
//! let delivery = producer.send(ProducerRecord::new("orders").with_value("hello")).await?;
//! let written = delivery.await?; // acknowledged: partition and offset
//! println!("{}@{}", written.partition, written.offset);
//! producer.close().await?;
//! client.close();
//! # Ok(()) }
//! ```
//!
//! Cargo features: `cli` (default) builds the `kring` command line and its dependencies
//! (clap, clap_complete, memchr); `io-uring` (default, Linux only) the io_uring backend,
//! without which, or off Linux, the epoll backend (tokio) is the only one.
//!
//! Test doubles live in their own crate, `kring-mock` (a dev-dependency for users'
//! tests): `MockBroker` and `FakeCluster`, brokers on loopback sockets that speak the
//! real protocol, and socket-free mock producers and consumers.

#![deny(unsafe_code)]

pub mod admin;
pub(crate) mod buf;
pub mod client;
pub mod config;
pub mod consumer;
pub(crate) mod engine;
pub mod error;
/// Harnesses for the fuzz targets (`fuzz/`): not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod group;
pub(crate) mod io;
pub mod metrics;
pub mod producer;
pub mod protocol;
pub mod record;
pub(crate) mod runtime;

/// The README's code blocks, compiled and run as doctests (against the broker at
/// `KRING_BOOTSTRAP`, default 127.0.0.1:9092), so its examples stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use client::Client;
pub use config::Config;
pub use error::{Error, IoError, Result};

/// The layers underneath the public API (buffers, broker connections, the worker
/// runtime), for kring's own integration tests and benches. Not part of the API: no
/// stability promise, not documented.
#[doc(hidden)]
pub mod internals {
    pub use crate::buf::{BufferPool, MemoryBudget};
    pub use crate::io::{Backend, BackendChoice, Broker, ConnectionConfig, IoError};
    pub use crate::runtime::{Runtime, RuntimeConfig};

    /// Tasks alive on `client`'s workers (connections, sinks, fetchers, the metadata task).
    pub fn live_tasks(client: &crate::Client) -> usize {
        client.runtime().live_tasks()
    }

    /// Starts the future `make` returns on worker `index` of `runtime`, the thread that
    /// owns that worker's sockets (for the I/O bench's callers on the worker).
    pub fn spawn_on_worker<F, Fut>(runtime: &Runtime, index: usize, make: F) -> Result<(), IoError>
    where
        F: FnOnce(Backend) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        runtime.spawn_on(index, make)
    }

    /// The connection settings `config` implies (security files read).
    pub fn connection_config(
        config: &crate::Config,
    ) -> Result<ConnectionConfig, crate::config::ConfigurationError> {
        config.connection_config()
    }
}
