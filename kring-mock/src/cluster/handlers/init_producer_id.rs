//! InitProducerId (API 22): producer ids and epochs for idempotent and
//! transactional producers.

use kring::protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;

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
    let (producer_id, producer_epoch) = match &r.transactional_id {
        // As Kafka's TransactionCoordinator: an empty id is not "no id".
        Some(txn) if txn.is_empty() => return fail(KafkaCode::INVALID_REQUEST),
        Some(txn) => {
            if st.coordinator(txn) != Some(cx.broker) {
                return fail(KafkaCode::NOT_COORDINATOR);
            }
            match st.transactional_ids.get(txn).copied() {
                Some((pid, epoch)) if epoch < i16::MAX - 1 => (pid, epoch + 1),
                _ => (st.allocate_producer_id(), 0),
            }
        }
        // KIP-360: an idempotent producer may ask to bump its epoch.
        None if r.producer_id >= 0 && r.producer_epoch >= 0 && r.producer_epoch < i16::MAX - 1 => {
            (r.producer_id, r.producer_epoch + 1)
        }
        None => (st.allocate_producer_id(), 0),
    };
    if let Some(txn) = &r.transactional_id {
        st.transactional_ids
            .insert(txn.clone(), (producer_id, producer_epoch));
    }
    ResponseKind::InitProducerId(
        InitProducerIdResponse::default()
            .with_producer_id(producer_id)
            .with_producer_epoch(producer_epoch),
    )
}
