//! Engines: the sans-IO state machines between the wire protocol and the I/O drivers.
//!
//! Every engine has one shape (see `ENGINES.md` in the project's shared folder):
//! inputs are plain data with the time passed in (`handle_*(…, now)`), outputs are
//! polled (`poll_transmit`, `poll_timeout`, `poll_event` or their kin). An engine never
//! reads the clock, sleeps, spawns, does I/O or locks anything shared between workers;
//! so it can be driven by the async driver on a worker, by a blocking driver, and by the
//! deterministic simulation in one thread with virtual time.
//!
//! - [`connection`]: one broker connection — correlation ids, the in-flight window and
//!   its deadlines, the ApiVersions handshake, frame cutting, failure classification.
//! - [`backoff`]: reconnect and retry delays with seeded jitter.
//! - [`error`]: the connection errors callers see ([`IoError`]).
//! - [`tls`]: TLS over the connection's bytes (rustls, itself sans-IO).
//! - [`sasl`]: the SASL mechanisms' client side (PLAIN, SCRAM, OAUTHBEARER).
//! - `fetch`: the fetcher's decisions for one broker (what to fetch, the session, the
//!   memory to reserve, what each partition gets).
//! - `group`: a classic consumer group member (join, sync, heartbeat, leave).
//! - `produce`: the producer's partitions (batching, sequences, retries) and its
//!   per-broker sinks.
//! - `txn`: the transactional producer's states, partitions and error classes.

pub mod backoff;
pub mod connection;
pub mod error;
pub(crate) mod fetch;
pub(crate) mod group;
pub(crate) mod produce;
pub mod sasl;
#[cfg(test)]
mod sim;
pub mod tls;
pub(crate) mod txn;
