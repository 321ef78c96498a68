//! AlterConfigs (API 33): replaces a topic's or broker's whole set of overrides, all
//! or nothing per resource.

use kring::protocol::ResponseKind;
use kring::protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, alter_configs::AlterConfigsResourceResponse,
};

use super::configs::{Change, apply};
use crate::cluster::Ctx;

pub(crate) fn alter_configs(cx: &Ctx<'_>, r: &AlterConfigsRequest) -> ResponseKind {
    let mut st = cx.lock();
    let responses = r
        .resources
        .iter()
        .map(|res| {
            let changes: Vec<Change> = res
                .configs
                .iter()
                .map(|c| (c.name.clone(), c.value.clone()))
                .collect();
            let outcome = apply(
                &mut st,
                res.resource_type,
                &res.resource_name,
                &changes,
                true,
                r.validate_only,
            );
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
    ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(responses))
}
