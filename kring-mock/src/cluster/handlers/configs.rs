//! What the config handlers share: resource types, broker names, and the check of one
//! resource's changes (every change valid, or none applied).

use kring::protocol::KafkaCode;

use crate::cluster::state::{State, TOPIC_CONFIG_DEFAULTS};

/// `ConfigResource.Type` of a topic.
pub(super) const RESOURCE_TOPIC: i8 = 2;
/// `ConfigResource.Type` of a broker.
pub(super) const RESOURCE_BROKER: i8 = 4;

/// The broker a resource name means: its id, or -1 for the empty name (every broker's
/// default); an id the cluster does not have is an error.
pub(super) fn broker_id(st: &State, name: &str) -> Result<i32, KafkaCode> {
    if name.is_empty() {
        return Ok(-1);
    }
    let id: i32 = name.parse().map_err(|_| KafkaCode::INVALID_REQUEST)?;
    if st.brokers.contains_key(&id) {
        Ok(id)
    } else {
        Err(KafkaCode::INVALID_REQUEST)
    }
}

/// One change to a resource's configs: set (`Some`) or remove (`None`).
pub(super) type Change = (String, Option<String>);

/// Applies `changes` to the resource, all or none; answers the error code and message.
pub(super) fn apply(
    st: &mut State,
    resource_type: i8,
    name: &str,
    changes: &[Change],
    replace: bool,
    validate_only: bool,
) -> Result<(), (KafkaCode, String)> {
    match resource_type {
        RESOURCE_TOPIC => {
            let topic = st.topics.get_mut(name).ok_or_else(|| {
                (
                    KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("topic {name:?} does not exist"),
                )
            })?;
            if let Some((k, _)) = changes
                .iter()
                .find(|(k, _)| !TOPIC_CONFIG_DEFAULTS.iter().any(|(d, _)| d == k))
            {
                return Err((
                    KafkaCode::INVALID_CONFIG,
                    format!("Unknown topic config name: {k}"),
                ));
            }
            if !validate_only {
                if replace {
                    topic.configs.clear();
                }
                for (k, v) in changes {
                    match v {
                        Some(v) => topic.configs.insert(k.clone(), v.clone()),
                        None => topic.configs.remove(k),
                    };
                }
            }
            Ok(())
        }
        RESOURCE_BROKER => {
            let id = broker_id(st, name).map_err(|code| (code, format!("no broker {name:?}")))?;
            if !validate_only {
                let configs = st.broker_configs.entry(id).or_default();
                if replace {
                    configs.clear();
                }
                for (k, v) in changes {
                    match v {
                        Some(v) => configs.insert(k.clone(), v.clone()),
                        None => configs.remove(k),
                    };
                }
            }
            Ok(())
        }
        other => Err((
            KafkaCode::INVALID_REQUEST,
            format!("resource type {other} has no configs here"),
        )),
    }
}
