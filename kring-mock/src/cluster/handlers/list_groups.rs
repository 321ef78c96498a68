//! ListGroups (API 16).

use kring::protocol::ResponseKind;
use kring::protocol::messages::{ListGroupsRequest, ListGroupsResponse, list_groups::ListedGroup};

use crate::cluster::Ctx;

pub(crate) fn list(cx: &Ctx<'_>, r: &ListGroupsRequest) -> ResponseKind {
    let st = cx.lock();
    let classic = r.types_filter.is_empty()
        || r.types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case("classic"));
    let groups = st
        .groups
        .iter()
        .filter(|(id, _)| classic && st.coordinator(id) == Some(cx.broker))
        .filter(|(_, g)| {
            r.states_filter.is_empty()
                || r.states_filter
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(g.state.name()))
        })
        .map(|(id, g)| {
            ListedGroup::default()
                .with_group_id(id.clone())
                .with_protocol_type(g.protocol_type.clone().unwrap_or_default())
                .with_group_state(g.state.name().into())
                .with_group_type("classic".into())
        })
        .collect();
    ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(groups))
}
