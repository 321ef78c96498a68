//! DescribeGroups (API 15).

use kring::protocol::ResponseKind;
use kring::protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse,
    describe_groups::{DescribedGroup, DescribedGroupMember},
};

use crate::cluster::Ctx;
use crate::cluster::group::check_coordinator;

pub(crate) fn describe(cx: &Ctx<'_>, r: &DescribeGroupsRequest) -> ResponseKind {
    let st = cx.lock();
    let groups = r
        .groups
        .iter()
        .map(|id| {
            if let Err(code) = check_coordinator(&st, cx.broker, id) {
                return DescribedGroup::default()
                    .with_error_code(code.code())
                    .with_group_id(id.clone());
            }
            let Some(group) = st.groups.get(id) else {
                return DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_group_state("Dead".into());
            };
            DescribedGroup::default()
                .with_group_id(id.clone())
                .with_group_state(group.state.name().into())
                .with_protocol_type(group.protocol_type.clone().unwrap_or_default())
                .with_protocol_data(group.protocol.clone().unwrap_or_default())
                .with_members(
                    group
                        .members
                        .iter()
                        .map(|(member_id, m)| {
                            DescribedGroupMember::default()
                                .with_member_id(member_id.clone())
                                .with_group_instance_id(m.instance_id.clone())
                                .with_client_id(m.client_id.clone())
                                .with_client_host(m.client_host.clone())
                                .with_member_metadata(m.metadata(group.protocol.as_deref()))
                                .with_member_assignment(m.assignment.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups))
}
