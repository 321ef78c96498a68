//! AddOffsetsToTxn (API 25): makes a group's offsets part of the open transaction, at
//! the transaction coordinator (Kafka adds the group's `__consumer_offsets`
//! partition; here the group is remembered, and TxnOffsetCommit needs it).

use kring::protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::txn::{TxnStatus, fenced};

pub(crate) fn add_offsets_to_txn(cx: &Ctx<'_>, r: &AddOffsetsToTxnRequest) -> ResponseKind {
    let mut st = cx.lock();
    let code = if r.group_id.is_empty() {
        KafkaCode::INVALID_GROUP_ID
    } else {
        match st.txn_for(
            cx.broker,
            &r.transactional_id,
            r.producer_id,
            r.producer_epoch,
            fenced(cx.request.version, 2),
        ) {
            Ok(txn) => {
                txn.groups.insert(r.group_id.clone());
                txn.status = TxnStatus::Ongoing;
                KafkaCode::NONE
            }
            Err(code) => code,
        }
    };
    ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code.code()))
}
