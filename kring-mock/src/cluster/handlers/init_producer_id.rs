//! InitProducerId (API 22): producer ids and epochs for idempotent and
//! transactional producers. A transactional id goes to its coordinator, which bumps the
//! id's epoch on every init (fencing the older producer) and aborts a transaction the
//! older one left open; see [`crate::cluster::txn`].

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
        // KIP-360: an idempotent producer may ask to bump its epoch.
        None if current.is_some_and(|(_, e)| e < i16::MAX - 1) => {
            (r.producer_id, r.producer_epoch + 1)
        }
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
