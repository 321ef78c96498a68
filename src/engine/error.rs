//! Errors of a broker connection: raised by the connection engine (handshake, framing,
//! deadlines) or by the I/O that drives it (connect, read, write, the worker runtime).
//! Each says which broker, which step and which API it concerns, and whether retrying
//! may help.

use std::time::Duration;

use crate::protocol::{ApiKey, DecodeError, EncodeError, KafkaCode};

/// An error from a broker connection or the runtime that drives it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The TCP connection could not be established.
    #[error("connecting to {addr}: {message}")]
    Connect {
        /// The broker's address.
        addr: String,
        /// What the OS said.
        message: String,
    },
    /// The connection broke (reset, EOF, write error, protocol violation); requests in
    /// flight on it failed. Retriable: the connection is re-established on demand.
    #[error("connection to {addr} lost: {reason}")]
    Disconnected {
        /// The broker's address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The connection is in reconnect backoff after a failure.
    #[error("not connected to {addr} (reconnecting in {retry_in:?})")]
    NotConnected {
        /// The broker's address.
        addr: String,
        /// Time until the next attempt.
        retry_in: Duration,
    },
    /// No response arrived within the request timeout; the connection was closed, since
    /// a pipelined connection cannot skip an answer.
    #[error("{api:?} request to {addr} timed out after {after:?}")]
    RequestTimedOut {
        /// The API.
        api: ApiKey,
        /// The broker's address.
        addr: String,
        /// The timeout.
        after: Duration,
    },
    /// The TCP connect took longer than the connect timeout.
    #[error("TCP connect to {addr} timed out after {after:?}")]
    ConnectTimedOut {
        /// The broker's address.
        addr: String,
        /// The timeout.
        after: Duration,
    },
    /// The TCP connection was made but the Kafka handshake (ApiVersions) got no answer
    /// in time: the port may not be a Kafka listener (or one that expects TLS first).
    #[error(
        "connected to {addr}, but the Kafka handshake (ApiVersions) got no answer within {after:?}: \
         the port may not be a Kafka listener, or it may expect TLS"
    )]
    HandshakeTimedOut {
        /// The broker's address.
        addr: String,
        /// The connection setup timeout.
        after: Duration,
    },
    /// The peer answered the Kafka handshake in another protocol (HTTP, TLS, SSH).
    #[error("{addr} is not a plaintext Kafka listener: {reason}")]
    NotKafka {
        /// The address connected to.
        addr: String,
        /// What it answered, and what to do about it.
        reason: String,
    },
    /// The TCP connection was made but a later setup step (the TLS handshake, SASL
    /// authentication) did not finish in time.
    #[error("connected to {addr}, but {step} did not finish within {after:?}")]
    SetupTimedOut {
        /// The broker's address.
        addr: String,
        /// The step that did not finish.
        step: String,
        /// The connection setup timeout.
        after: Duration,
    },
    /// TLS failed: an untrusted, expired or mismatched certificate, a refused client
    /// certificate, or a peer that does not speak TLS. Not retriable: the same
    /// settings fail the same way.
    #[error("TLS with {addr} failed: {reason}")]
    Tls {
        /// The broker's address.
        addr: String,
        /// What failed, and what to do about it.
        reason: String,
    },
    /// SASL authentication failed (wrong credentials, a mechanism the listener does not
    /// enable, a token the broker refused). Not retriable.
    #[error("authentication with {addr} failed: {reason}")]
    Authentication {
        /// The broker's address.
        addr: String,
        /// The mechanism and what the broker said (never the secret).
        reason: String,
    },
    /// The application's OAUTHBEARER token provider failed (or took longer than the
    /// connection setup timeout). Not retriable by the request that saw it; the next
    /// connection attempt asks the provider again.
    #[error("no OAUTHBEARER token for {addr}: the token provider failed: {reason}")]
    TokenProvider {
        /// The broker's address.
        addr: String,
        /// The provider's message.
        reason: String,
    },
    /// The request could not be encoded.
    #[error("encoding {api:?} request: {source}")]
    Encode {
        /// The API.
        api: ApiKey,
        /// The cause.
        #[source]
        source: EncodeError,
    },
    /// The broker's answer could not be decoded (or a frame was malformed).
    #[error("decoding {api:?} response from {addr}: {source}")]
    Decode {
        /// The API.
        api: ApiKey,
        /// The broker's address.
        addr: String,
        /// The cause.
        #[source]
        source: DecodeError,
    },
    /// No version of the API is supported by both sides.
    #[error("broker {addr} supports no version of {api:?} that kring speaks")]
    UnsupportedApi {
        /// The API.
        api: ApiKey,
        /// The broker's address.
        addr: String,
    },
    /// The ApiVersions handshake was refused.
    #[error("ApiVersions handshake with {addr} failed: {code}")]
    Handshake {
        /// The broker's address.
        addr: String,
        /// The error code.
        code: KafkaCode,
    },
    /// The request queue of the connection is full (only from the non-waiting calls).
    #[error("request queue to {addr} is full")]
    QueueFull {
        /// The broker's address.
        addr: String,
    },
    /// The broker handle was closed, or was never opened.
    #[error("broker {addr} is closed")]
    Closed {
        /// The broker's address.
        addr: String,
    },
    /// The runtime is shutting down.
    #[error("the I/O runtime is shutting down")]
    ShuttingDown,
    /// The runtime could not start.
    #[error("starting the I/O runtime: {0}")]
    Runtime(String),
    /// The task awaiting the broker's answer ended without one (it panicked, or was
    /// cancelled): the request may have been written. Not retriable: a defect, not a
    /// state of the broker, and it could fail the same way again.
    #[error("the answer to a {api:?} request to {addr} was lost: {reason}")]
    AnswerLost {
        /// The API.
        api: ApiKey,
        /// The broker's address.
        addr: String,
        /// How the task ended.
        reason: String,
    },
}

impl IoError {
    /// A short, stable name of the kind of failure (the `kind` label of
    /// `kring_broker_request_errors_total`).
    pub fn kind(&self) -> &'static str {
        match self {
            IoError::Connect { .. } => "connect",
            IoError::Disconnected { .. } => "disconnected",
            IoError::NotConnected { .. } => "not_connected",
            IoError::RequestTimedOut { .. } => "timeout",
            IoError::ConnectTimedOut { .. } => "connect_timeout",
            IoError::HandshakeTimedOut { .. } => "handshake_timeout",
            IoError::NotKafka { .. } => "not_kafka",
            IoError::SetupTimedOut { .. } => "setup_timeout",
            IoError::Tls { .. } => "tls",
            IoError::Authentication { .. } => "authentication",
            IoError::TokenProvider { .. } => "token_provider",
            IoError::Encode { .. } => "encode",
            IoError::Decode { .. } => "decode",
            IoError::UnsupportedApi { .. } => "unsupported_api",
            IoError::Handshake { .. } => "handshake",
            IoError::QueueFull { .. } => "queue_full",
            IoError::Closed { .. } => "closed",
            IoError::ShuttingDown => "shutting_down",
            IoError::Runtime(_) => "runtime",
            IoError::AnswerLost { .. } => "answer_lost",
        }
    }

    /// Whether the request may have reached the broker before this error ended it: a
    /// connection that broke or timed out with it on the wire, an answer that could not
    /// be read, a runtime that went away (or an answer task that ended) while it waited.
    /// False for the errors given only to requests not written yet (no connection, a
    /// failed set-up, a request that could not be encoded or queued, a closed handle);
    /// a TLS failure after the handshake is reported as `Disconnected`.
    pub fn may_have_reached_the_broker(&self) -> bool {
        matches!(
            self,
            IoError::Disconnected { .. }
                | IoError::RequestTimedOut { .. }
                | IoError::Decode { .. }
                | IoError::ShuttingDown
                | IoError::AnswerLost { .. }
        )
    }

    /// Whether the same request may succeed if sent again (after a metadata refresh or a
    /// reconnect, as the caller sees fit).
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            IoError::Connect { .. }
                | IoError::Disconnected { .. }
                | IoError::NotConnected { .. }
                | IoError::RequestTimedOut { .. }
                | IoError::ConnectTimedOut { .. }
                | IoError::HandshakeTimedOut { .. }
                | IoError::SetupTimedOut { .. }
                | IoError::QueueFull { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_of_requests_not_yet_written_say_the_broker_never_saw_them() {
        let addr = || "127.0.0.1:9".to_string();
        let before_writing = [
            IoError::Connect {
                addr: addr(),
                message: "refused".into(),
            },
            IoError::NotConnected {
                addr: addr(),
                retry_in: Duration::ZERO,
            },
            IoError::QueueFull { addr: addr() },
            IoError::Closed { addr: addr() },
            IoError::Tls {
                addr: addr(),
                reason: "untrusted".into(),
            },
            IoError::Runtime("no worker".into()),
        ];
        for e in before_writing {
            assert!(!e.may_have_reached_the_broker(), "{e}");
        }
        let after_writing = [
            IoError::Disconnected {
                addr: addr(),
                reason: "reset".into(),
            },
            IoError::RequestTimedOut {
                api: ApiKey::Produce,
                addr: addr(),
                after: Duration::from_secs(30),
            },
            IoError::Decode {
                api: ApiKey::Produce,
                addr: addr(),
                source: DecodeError::NegativeLength(-2),
            },
            IoError::ShuttingDown,
            IoError::AnswerLost {
                api: ApiKey::Produce,
                addr: addr(),
                reason: "panicked".into(),
            },
        ];
        for e in after_writing {
            assert!(e.may_have_reached_the_broker(), "{e}");
        }
    }
}
