//! FindCoordinator (API 10): group and transaction coordinators.

use kring::protocol::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, find_coordinator::Coordinator,
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;

pub(crate) fn find_coordinator(cx: &Ctx<'_>, r: &FindCoordinatorRequest) -> ResponseKind {
    let st = cx.lock();
    let lookup = |key: &str| -> Result<(i32, String, i32), KafkaCode> {
        if !matches!(r.key_type, 0 | 1) {
            return Err(KafkaCode::INVALID_REQUEST);
        }
        let id = st
            .coordinator(key)
            .ok_or(KafkaCode::COORDINATOR_NOT_AVAILABLE)?;
        let b = &st.brokers[&id];
        Ok((id, b.host.clone(), b.port))
    };
    let message = |code: KafkaCode| Some(code.name().to_string());
    if cx.request.version >= 4 {
        let coordinators = r
            .coordinator_keys
            .iter()
            .map(|k| match lookup(k) {
                Ok((node_id, host, port)) => Coordinator::default()
                    .with_key(k.clone())
                    .with_node_id(node_id)
                    .with_host(host)
                    .with_port(port)
                    .with_error_message(None),
                Err(code) => Coordinator::default()
                    .with_key(k.clone())
                    .with_node_id(-1)
                    .with_host(String::new())
                    .with_port(-1)
                    .with_error_code(code.code())
                    .with_error_message(message(code)),
            })
            .collect();
        return ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_coordinators(coordinators),
        );
    }
    ResponseKind::FindCoordinator(match lookup(&r.key) {
        Ok((node_id, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(node_id)
            .with_host(host)
            .with_port(port)
            .with_error_message(None),
        Err(code) => FindCoordinatorResponse::default()
            .with_error_code(code.code())
            .with_error_message(message(code))
            .with_node_id(-1)
            .with_host(String::new())
            .with_port(-1),
    })
}
