//! The only layer with sockets. For now it holds [`blocking`], a plain blocking TCP
//! connection that speaks framed Kafka requests one at a time (used by the command line
//! and by the protocol integration tests). The thread-per-core io_uring/epoll transport
//! with pipelining comes in beside it.

pub mod blocking;

pub use blocking::{BlockingConnection, ConnectionError, ConnectionOptions};
