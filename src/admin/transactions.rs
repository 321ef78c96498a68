//! Producers and transactions: the producers a partition's leader knows
//! (DescribeProducers, KIP-664, sent to each leader), the transactions coordinators
//! know (ListTransactions, sent to every broker; DescribeTransactions, to the
//! transactional id's coordinator), and aborting a hanging transaction (WriteTxnMarkers
//! to the partition's leader with an abort marker, as `kafka-transactions.sh abort`
//! does).

use super::partitions::{PartitionAnswer, TopicPartition};
use super::{Admin, Route, check, left_out};
use crate::client::Broker;
use crate::error::{Error, Result};
use crate::protocol::KafkaCode;
use crate::protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest,
    WriteTxnMarkersRequest,
    describe_producers::TopicRequest,
    write_txn_markers::{WritableTxnMarker, WritableTxnMarkerTopic},
};

/// A producer a partition's leader has state for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerInfo {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i32,
    /// The last sequence number it wrote.
    pub last_sequence: i32,
    /// The timestamp of its last write.
    pub last_timestamp: i64,
    /// The coordinator epoch of its last transaction marker, -1 if none.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction, `None` when none is open.
    pub open_transaction_start: Option<i64>,
}

/// A transaction as ListTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionListing {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its state (`Ongoing`, `CompleteCommit`, ...).
    pub state: String,
    /// The coordinator's id.
    pub coordinator: i32,
}

/// A transaction as DescribeTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// Its state.
    pub state: String,
    /// Its timeout.
    pub timeout_ms: i32,
    /// When the open transaction started (-1 when none is open).
    pub start_time_ms: i64,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The partitions in the open transaction, sorted.
    pub partitions: Vec<TopicPartition>,
    /// The coordinator's id.
    pub coordinator: i32,
}

/// What aborting a hanging transaction needs: the partition and the producer, from
/// [`Admin::describe_producers`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortTransaction {
    /// The partition the transaction hangs on.
    pub partition: TopicPartition,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The coordinator epoch of the producer's last marker.
    pub coordinator_epoch: i32,
}

impl Admin {
    /// The producers each partition's leader has state for.
    pub async fn describe_producers(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Vec<ProducerInfo>)>> {
        let found = self
            .on_leaders(ApiKey::DescribeProducers, partitions, describe_producers_on)
            .await?;
        Ok(found.into_iter().collect())
    }

    /// Every transaction the coordinators know, sorted by id (ListTransactions on every
    /// broker), optionally only in the given states.
    pub async fn list_transactions(&self, states: &[&str]) -> Result<Vec<TransactionListing>> {
        self.client.refresh_metadata(&[]).await?;
        let ids: Vec<i32> = self.client.metadata().brokers.keys().copied().collect();
        let filters: Vec<String> = states.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        for id in ids {
            let filters = &filters;
            let listed = self
                .run(Route::Node(id), |broker| async move {
                    let request =
                        ListTransactionsRequest::default().with_state_filters(filters.clone());
                    let response = broker.send(request).await?;
                    check(
                        ApiKey::ListTransactions,
                        &format!("broker {id}"),
                        response.error_code,
                        None,
                    )?;
                    if let Some(unknown) = response.unknown_state_filters.first() {
                        return Err(Error::InvalidArgument(format!(
                            "{unknown:?} is not a transaction state broker {id} knows"
                        )));
                    }
                    Ok(response.transaction_states)
                })
                .await?;
            out.extend(listed.into_iter().map(|t| TransactionListing {
                transactional_id: t.transactional_id,
                producer_id: t.producer_id,
                state: t.transaction_state,
                coordinator: id,
            }));
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }

    /// Describes the transaction of `transactional_id` (at its coordinator); an unknown
    /// id is TRANSACTIONAL_ID_NOT_FOUND naming it.
    pub async fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionDescription> {
        let label = format!("transactional id {transactional_id}");
        let label = &label;
        self.run(
            Route::Transaction(transactional_id.to_string()),
            |broker| async move {
                let request = DescribeTransactionsRequest::default()
                    .with_transactional_ids(vec![transactional_id.to_string()]);
                let response = broker.send(request).await?;
                let t = response
                    .transaction_states
                    .into_iter()
                    .find(|t| t.transactional_id == transactional_id)
                    .ok_or_else(|| left_out(ApiKey::DescribeTransactions, label))?;
                check(ApiKey::DescribeTransactions, label, t.error_code, None)?;
                let mut partitions: Vec<TopicPartition> = t
                    .topics
                    .iter()
                    .flat_map(|d| d.partitions.iter().map(|p| (d.topic.clone(), *p)))
                    .collect();
                partitions.sort();
                Ok(TransactionDescription {
                    transactional_id: t.transactional_id,
                    state: t.transaction_state,
                    timeout_ms: t.transaction_timeout_ms,
                    start_time_ms: t.transaction_start_time_ms,
                    producer_id: t.producer_id,
                    producer_epoch: t.producer_epoch,
                    partitions,
                    coordinator: broker.id(),
                })
            },
        )
        .await
    }

    /// Aborts a transaction left open on a partition (its producer gone, its
    /// coordinator unaware): writes an abort marker there, as the coordinator would.
    pub async fn abort_transaction(&self, abort: &AbortTransaction) -> Result<()> {
        let marker = WritableTxnMarker::default()
            .with_producer_id(abort.producer_id)
            .with_producer_epoch(abort.producer_epoch)
            .with_transaction_result(false)
            .with_coordinator_epoch(abort.coordinator_epoch)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(abort.partition.0.clone())
                    .with_partition_indexes(vec![abort.partition.1]),
            ]);
        let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
        let request = &request;
        self.on_leaders(
            ApiKey::WriteTxnMarkers,
            std::slice::from_ref(&abort.partition),
            |broker, _| async move {
                let response = broker.send(request.clone()).await?;
                let mut out = Vec::new();
                for m in response.markers {
                    for t in m.topics {
                        for p in t.partitions {
                            let answer = if p.error_code == 0 {
                                Ok(())
                            } else {
                                Err(KafkaCode(p.error_code))
                            };
                            out.push(((t.name.clone(), p.partition_index), answer));
                        }
                    }
                }
                Ok(out)
            },
        )
        .await?;
        Ok(())
    }
}

async fn describe_producers_on(
    broker: Broker,
    batch: Vec<TopicPartition>,
) -> Result<Vec<(TopicPartition, PartitionAnswer<Vec<ProducerInfo>>)>> {
    let mut topics: Vec<TopicRequest> = Vec::new();
    for (t, p) in &batch {
        match topics.iter_mut().find(|r| r.name == *t) {
            Some(r) => r.partition_indexes.push(*p),
            None => topics.push(
                TopicRequest::default()
                    .with_name(t.clone())
                    .with_partition_indexes(vec![*p]),
            ),
        }
    }
    let response = broker
        .send(DescribeProducersRequest::default().with_topics(topics))
        .await?;
    let mut out = Vec::new();
    for t in response.topics {
        for p in t.partitions {
            let answer = if p.error_code != 0 {
                Err(KafkaCode(p.error_code))
            } else {
                Ok(p.active_producers
                    .into_iter()
                    .map(|s| ProducerInfo {
                        producer_id: s.producer_id,
                        producer_epoch: s.producer_epoch,
                        last_sequence: s.last_sequence,
                        last_timestamp: s.last_timestamp,
                        coordinator_epoch: s.coordinator_epoch,
                        open_transaction_start: (s.current_txn_start_offset >= 0)
                            .then_some(s.current_txn_start_offset),
                    })
                    .collect())
            };
            out.push(((t.name.clone(), p.partition_index), answer));
        }
    }
    Ok(out)
}
