//! DescribeConfigs (API 32): a topic's configs (its overrides, then Kafka's defaults
//! for the rest) and a broker's (its id and the dynamic configs set on it or on every
//! broker).

use kring::protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse,
    describe_configs::{DescribeConfigsResourceResult, DescribeConfigsResult},
};
use kring::protocol::{KafkaCode, ResponseKind};

use super::configs::{RESOURCE_BROKER, RESOURCE_TOPIC, broker_id};
use crate::cluster::Ctx;
use crate::cluster::state::{State, TOPIC_CONFIG_DEFAULTS};

/// DescribeConfigs `config_source` values.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

fn entry(name: &str, value: &str, source: i8) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(name.to_string())
        .with_value(Some(value.to_string()))
        .with_config_source(source)
}

/// v0 says "default" with a flag, v1+ with the source; each field exists only there.
fn for_version(
    mut e: DescribeConfigsResourceResult,
    version: i16,
) -> DescribeConfigsResourceResult {
    if version == 0 {
        e.is_default = e.config_source == SOURCE_DEFAULT;
        e.config_source = -1;
    }
    e
}

fn topic_entries(st: &State, name: &str) -> Result<Vec<DescribeConfigsResourceResult>, KafkaCode> {
    let topic = st
        .topics
        .get(name)
        .ok_or(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION)?;
    Ok(TOPIC_CONFIG_DEFAULTS
        .iter()
        .map(|(k, default)| match topic.configs.get(*k) {
            Some(v) => entry(k, v, SOURCE_TOPIC),
            None => entry(k, default, SOURCE_DEFAULT),
        })
        .collect())
}

fn broker_entries(st: &State, name: &str) -> Result<Vec<DescribeConfigsResourceResult>, KafkaCode> {
    let id = broker_id(st, name)?;
    let mut out = Vec::new();
    if id >= 0 {
        out.push(entry("broker.id", &id.to_string(), SOURCE_STATIC_BROKER));
    }
    let defaults = st.broker_configs.get(&-1);
    let own = (id >= 0).then(|| st.broker_configs.get(&id)).flatten();
    let mut names: Vec<&String> = defaults
        .into_iter()
        .chain(own)
        .flat_map(|m| m.keys())
        .collect();
    names.sort();
    names.dedup();
    for n in names {
        match own.and_then(|m| m.get(n)) {
            Some(v) => out.push(entry(n, v, SOURCE_DYNAMIC_BROKER)),
            None => {
                if let Some(v) = defaults.and_then(|m| m.get(n)) {
                    out.push(entry(n, v, SOURCE_DYNAMIC_DEFAULT_BROKER));
                }
            }
        }
    }
    Ok(out)
}

pub(crate) fn describe_configs(cx: &Ctx<'_>, r: &DescribeConfigsRequest) -> ResponseKind {
    let st = cx.lock();
    let results = r
        .resources
        .iter()
        .map(|res| {
            let found = match res.resource_type {
                RESOURCE_TOPIC => topic_entries(&st, &res.resource_name),
                RESOURCE_BROKER => broker_entries(&st, &res.resource_name),
                _ => Err(KafkaCode::INVALID_REQUEST),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name.clone());
            match found {
                Ok(mut configs) => {
                    if let Some(keys) = &res.configuration_keys {
                        configs.retain(|c| keys.contains(&c.name));
                    }
                    let version = cx.request.version;
                    result.with_configs(
                        configs
                            .into_iter()
                            .map(|c| for_version(c, version))
                            .collect(),
                    )
                }
                Err(code) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(format!("{} {:?}", code.name(), res.resource_name))),
            }
        })
        .collect();
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}
