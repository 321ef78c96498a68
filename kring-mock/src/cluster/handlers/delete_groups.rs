//! DeleteGroups (API 42): deletes empty groups and their offsets; a group with members
//! is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.

use kring::protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, delete_groups::DeletableGroupResult,
};
use kring::protocol::{KafkaCode, ResponseKind};

use crate::cluster::Ctx;
use crate::cluster::group::check_coordinator;

pub(crate) fn delete_groups(cx: &Ctx<'_>, r: &DeleteGroupsRequest) -> ResponseKind {
    let mut st = cx.lock();
    let results = r
        .groups_names
        .iter()
        .map(|id| {
            let code = match check_coordinator(&st, cx.broker, id) {
                Err(code) => code,
                Ok(()) => match st.groups.get(id) {
                    None => KafkaCode::GROUP_ID_NOT_FOUND,
                    Some(g) if !g.members.is_empty() => KafkaCode::NON_EMPTY_GROUP,
                    Some(_) => {
                        st.groups.remove(id);
                        KafkaCode::NONE
                    }
                },
            };
            DeletableGroupResult::default()
                .with_group_id(id.clone())
                .with_error_code(code.code())
        })
        .collect();
    drop(st);
    cx.notify();
    ResponseKind::DeleteGroups(DeleteGroupsResponse::default().with_results(results))
}
