//! InitProducerId (API 22): producer ids and epochs for idempotent and
//! transactional producers. A transactional id goes to its coordinator, which bumps the
//! id's epoch on every init (fencing the older producer) and aborts a transaction the
//! older one left open; see [`crate::cluster::txn`]. Without one, every init gets a new
//! producer id at epoch 0, as from Kafka, even one naming its current id and epoch.

use kring::protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::txn::{fenced, now_ms};

pub(crate) fn init_producer_id(cx: &Ctx<'_>, r: &InitProducerIdRequest) -> ResponseKind {
    let mut st = cx.lock();
    let fail = |code: KafkaCode| {
        ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code.code())
                .with_producer_id(-1)
                .with_producer_epoch(-1),
        )
    };
    let current =
        (r.producer_id >= 0 && r.producer_epoch >= 0).then_some((r.producer_id, r.producer_epoch));
    let (producer_id, producer_epoch) = match &r.transactional_id {
        // As Kafka's TransactionCoordinator: an empty id is not "no id".
        Some(txn) => match st.init_transactional(
            cx.broker,
            txn,
            r.transaction_timeout_ms,
            current,
            fenced(cx.request.version, 4),
            now_ms(),
        ) {
            Ok(id) => id,
            Err(code) => return fail(code),
        },
        // As Kafka: without a transactional id, always a new id at epoch 0, whatever id
        // and epoch the request names (an idempotent producer bumps its epoch itself).
        None => (st.allocate_producer_id(), 0),
    };
    drop(st);
    // An abort of an open transaction wrote markers: fetches waiting may answer.
    cx.notify();
    ResponseKind::InitProducerId(
        InitProducerIdResponse::default()
            .with_producer_id(producer_id)
            .with_producer_epoch(producer_epoch),
    )
}
