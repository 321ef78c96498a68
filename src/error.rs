//! The crate's public error type: what a caller of the client, producer, consumer or
//! admin sees. Broker error codes are data ([`KafkaCode`]) carried with the API, topic
//! and partition they concern.

use crate::config::ConfigurationError;
pub use crate::engine::error::IoError;
use crate::protocol::{ApiKey, DecodeError, EncodeError, KafkaCode};

/// Result alias with kring's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error from kring's client roles.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
// A word-sized tag: every `Result<T, Error>` then keeps `T` word-aligned after it. With
// the two-byte tag the compiler chose, results were copied in pieces at odd offsets and
// read back across them, which stalls (measured on the producer's per-record path:
// about 10 ns of 170 per record on the sending thread).
#[repr(u64)]
pub enum Error {
    /// The client was closed; nothing more can be done with it.
    #[error("the client is closed")]
    ClosedClient,
    /// No broker could be reached; each attempt is listed.
    #[error("no broker answered: {0}")]
    OutOfBrokers(String),
    /// The broker is not connected (and a request needed it to be).
    #[error("not connected to broker {0}")]
    NotConnected(i32),
    /// A record or request is larger than allowed.
    #[error("message of {size} bytes exceeds the limit of {max} bytes")]
    MessageTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A partition that the topic does not have.
    #[error("topic {topic} has no partition {partition} (it has {count})")]
    InvalidPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// How many partitions the topic has.
        count: usize,
    },
    /// The partition is already being consumed by this consumer.
    #[error("{topic}-{partition} is already being consumed")]
    AlreadyConsumed {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// The client is shutting down.
    #[error("shutting down")]
    ShuttingDown,
    /// The producer was dropped without `close()`: records it had not sent yet were
    /// failed with this error (records already on the wire got their broker's answer).
    #[error("the producer was dropped without close(); records not yet sent were dropped")]
    ProducerDropped,
    /// A configuration problem.
    #[error(transparent)]
    Configuration(#[from] ConfigurationError),
    /// A response could not be decoded.
    #[error("protocol decode error: {0}")]
    Decode(#[from] DecodeError),
    /// A request could not be encoded.
    #[error("protocol encode error: {0}")]
    Encode(#[from] EncodeError),
    /// A broker refused a request about one resource (a topic to create, a config to
    /// read), with the explanation it gave, if any.
    #[error("{api:?} on {resource}: {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Rejected {
        /// The API.
        api: ApiKey,
        /// The topic (or other resource) concerned.
        resource: String,
        /// The broker's error code.
        code: KafkaCode,
        /// The broker's error message.
        message: Option<String>,
    },
    /// A broker answered without the resource it was asked about.
    #[error("{api:?} answered without {resource}")]
    Incomplete {
        /// The API.
        api: ApiKey,
        /// The resource the answer left out.
        resource: String,
    },
    /// A broker's answer holds something that does not parse, said with what it concerns.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// A broker id the cluster's metadata does not list.
    #[error("broker {0} is not in the cluster's metadata")]
    UnknownBroker(i32),
    /// An argument the request can't be built from, said in words (checked before
    /// anything is sent).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A broker answered with an error code.
    #[error("{api:?}{}: {code}", context(.topic, .partition))]
    Broker {
        /// The code.
        code: KafkaCode,
        /// The API that failed.
        api: ApiKey,
        /// The topic, where the error concerns one.
        topic: Option<String>,
        /// The partition, where the error concerns one.
        partition: Option<i32>,
    },
    /// A connection or runtime error.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A record batch could not be built or read.
    #[error("record batch: {0}")]
    Batch(String),
    /// A fetched batch is corrupt (CRC, codec, a record that does not decode). The
    /// partition consumer stays at it and reports it again on every read, as the Java
    /// client does, until the application skips it
    /// (`PartitionConsumer::skip_bad_batch`); records before it are handed out first.
    #[error("corrupt record batch at offsets {base_offset}..={last_offset}: {error}")]
    CorruptBatch {
        /// Its first offset (for a legacy wrapper, its last: see `BatchRef::span_in`).
        base_offset: i64,
        /// Its last offset.
        last_offset: i64,
        /// What is wrong with it.
        #[source]
        error: crate::record::RecordError,
    },
    /// The consumer group member ended (fenced instance, refused by the coordinator, a
    /// payload that does not decode); the group consumer can't go on.
    #[error(transparent)]
    Group(#[from] crate::engine::group::GroupError),

    /// A transactional call refused, or a transaction (or the transactional producer)
    /// failed.
    #[error(transparent)]
    Transaction(#[from] crate::engine::txn::TransactionError),
    /// A commit was refused because this member's generation is over (a rebalance
    /// started, or the member was fenced): the member rejoins, and what it consumed
    /// since its last commit may be consumed again by the partitions' next owner.
    #[error("group {group}: commit refused: {code} (the member's generation is over)")]
    CommitFenced {
        /// The group.
        group: String,
        /// The coordinator's answer.
        code: KafkaCode,
    },
    /// A group consumer was asked about a partition it is not assigned.
    #[error("{topic}-{partition} is not assigned to this group member")]
    NotAssigned {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A partition consumer's error, as a group consumer reports it.
    #[error(transparent)]
    Partition(Box<crate::consumer::ConsumerError>),
    /// The partition's log was truncated below the consumer's position (an unclean
    /// leader election, KIP-320) and `auto.offset.reset` is `none`, so the consumer does
    /// not move on by itself: Java's `LogTruncationException`. The records from
    /// `divergent_offset` on that the consumer fetched are not in the log any more.
    #[error(
        "{topic}-{partition}: log truncated below the fetch position {position}{}; auto.offset.reset is none",
        divergent_offset.map(|o| format!(" (the logs diverge from offset {o})")).unwrap_or_default()
    )]
    LogTruncation {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The fetch position that was found truncated.
        position: i64,
        /// The first offset known to diverge, when the leader said.
        divergent_offset: Option<i64>,
    },
    /// An operation did not finish in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// A producer's flush (or close) found records that failed for good since the
    /// previous flush; each record's delivery future holds its own error.
    #[error(
        "{records} record(s) in {batches} batch(es) failed since the previous flush; the first failure: {first}"
    )]
    DeliveryFailed {
        /// Records that failed.
        records: u64,
        /// Batches they were in.
        batches: u64,
        /// The first failure.
        #[source]
        first: Box<Error>,
    },
}

fn context(topic: &Option<String>, partition: &Option<i32>) -> String {
    match (topic, partition) {
        (Some(t), Some(p)) => format!(" on {t}-{p}"),
        (Some(t), None) => format!(" on {t}"),
        (None, Some(p)) => format!(" on partition {p}"),
        (None, None) => String::new(),
    }
}

impl Error {
    /// A broker error for `api`, optionally naming a topic and partition.
    pub fn broker(
        code: KafkaCode,
        api: ApiKey,
        topic: Option<&str>,
        partition: Option<i32>,
    ) -> Self {
        Error::Broker {
            code,
            api,
            topic: topic.map(str::to_owned),
            partition,
        }
    }

    /// Whether retrying the operation may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Broker { code, .. } | Error::Rejected { code, .. } => code.is_retriable(),
            Error::Io(e) => e.is_retriable(),
            Error::NotConnected(_) | Error::OutOfBrokers(_) | Error::Timeout(_) => true,
            _ => false,
        }
    }

    /// The broker error code, if this is a broker error.
    pub fn code(&self) -> Option<KafkaCode> {
        match self {
            Error::Broker { code, .. } | Error::Rejected { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// A short, stable name of the error: the broker's code name (`NOT_LEADER_OR_FOLLOWER`)
    /// for broker errors, the connection failure's kind for I/O errors, otherwise the
    /// kind of error (the `error` label of kring's error metrics).
    pub fn kind(&self) -> &'static str {
        if let Some(code) = self.code() {
            return code.name();
        }
        match self {
            Error::ClosedClient => "closed_client",
            Error::OutOfBrokers(_) => "out_of_brokers",
            Error::NotConnected(_) => "not_connected",
            Error::MessageTooLarge { .. } => "message_too_large",
            Error::InvalidPartition { .. } => "invalid_partition",
            Error::AlreadyConsumed { .. } => "already_consumed",
            Error::ShuttingDown => "shutting_down",
            Error::ProducerDropped => "producer_dropped",
            Error::Configuration(_) => "configuration",
            Error::Decode(_) => "decode",
            Error::Encode(_) => "encode",
            Error::Incomplete { .. } => "incomplete",
            Error::Malformed(_) => "malformed",
            Error::UnknownBroker(_) => "unknown_broker",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::Io(e) => e.kind(),
            Error::Batch(_) => "batch",
            Error::CorruptBatch { .. } => "corrupt_batch",
            Error::Group(_) => "group",
            Error::Transaction(_) => "transaction",
            Error::CommitFenced { .. } => "commit_fenced",
            Error::NotAssigned { .. } => "not_assigned",
            Error::Partition(_) => "partition",
            Error::LogTruncation { .. } => "log_truncation",
            Error::Timeout(_) => "timeout",
            Error::DeliveryFailed { .. } => "delivery_failed",
            _ => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_errors_name_their_context() {
        let e = Error::broker(
            KafkaCode::NOT_LEADER_OR_FOLLOWER,
            ApiKey::Produce,
            Some("orders"),
            Some(3),
        );
        assert!(
            e.to_string()
                .starts_with("Produce on orders-3: NOT_LEADER_OR_FOLLOWER (6)")
        );
        assert!(e.is_retriable());
        assert!(
            !Error::broker(
                KafkaCode::TOPIC_AUTHORIZATION_FAILED,
                ApiKey::Fetch,
                None,
                None
            )
            .is_retriable()
        );
    }
}
