//! EndTxn (API 26), v0-4 (transactions v1): commits or aborts the open transaction at
//! its coordinator. The markers are written and a commit's offsets applied before the
//! answer (see [`crate::cluster::txn`]). A retried end of a transaction that already
//! ended the same way is answered NONE, the other way INVALID_TXN_STATE, as Kafka does.

use kring::protocol::messages::{EndTxnRequest, EndTxnResponse};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::txn::{TxnStatus, fenced, now_ms};

/// EndTxn v5 is transactions v2 (KIP-890), which the fake does not model.
const MAX_VERSION: i16 = 4;

pub(crate) fn end_txn(cx: &Ctx<'_>, r: &EndTxnRequest) -> ResponseKind {
    let answer = |code: KafkaCode| {
        ResponseKind::EndTxn(
            EndTxnResponse::default()
                .with_error_code(code.code())
                .with_producer_id(-1)
                .with_producer_epoch(-1),
        )
    };
    if cx.request.version > MAX_VERSION {
        return answer(KafkaCode::UNSUPPORTED_VERSION);
    }
    let mut st = cx.lock();
    let status = match st.txn_for(
        cx.broker,
        &r.transactional_id,
        r.producer_id,
        r.producer_epoch,
        fenced(cx.request.version, 2),
    ) {
        Ok(txn) => txn.status,
        Err(code) => return answer(code),
    };
    let code = match (status, r.committed) {
        (TxnStatus::Ongoing, commit) => {
            st.end_txn(&r.transactional_id, commit, Some(cx.broker), now_ms());
            KafkaCode::NONE
        }
        (TxnStatus::CompleteCommit, true) | (TxnStatus::CompleteAbort, false) => KafkaCode::NONE,
        _ => KafkaCode::INVALID_TXN_STATE,
    };
    drop(st);
    cx.notify();
    answer(code)
}
