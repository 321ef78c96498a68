//! IncrementalAlterConfigs (API 44): SET and DELETE on topic and broker configs, each
//! resource all or nothing; APPEND and SUBTRACT (list configs) are refused as the fake
//! cluster keeps no list configs.

use kring::protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    incremental_alter_configs::AlterConfigsResourceResponse,
};
use kring::protocol::{KafkaCode, ResponseKind};

use super::configs::{Change, apply};
use crate::cluster::Ctx;

pub(crate) fn incremental_alter_configs(
    cx: &Ctx<'_>,
    r: &IncrementalAlterConfigsRequest,
) -> ResponseKind {
    let mut st = cx.lock();
    let responses = r
        .resources
        .iter()
        .map(|res| {
            let changes: Result<Vec<Change>, (KafkaCode, String)> = res
                .configs
                .iter()
                .map(|c| match c.config_operation {
                    0 => Ok((c.name.clone(), Some(c.value.clone().unwrap_or_default()))),
                    1 => Ok((c.name.clone(), None)),
                    op => Err((
                        KafkaCode::INVALID_REQUEST,
                        format!("operation {op} on {} is not supported here", c.name),
                    )),
                })
                .collect();
            let outcome = changes.and_then(|changes| {
                apply(
                    &mut st,
                    res.resource_type,
                    &res.resource_name,
                    &changes,
                    false,
                    r.validate_only,
                )
            });
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name.clone());
            match outcome {
                Ok(()) => response,
                Err((code, message)) => response
                    .with_error_code(code.code())
                    .with_error_message(Some(message)),
            }
        })
        .collect();
    ResponseKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse::default().with_responses(responses),
    )
}
