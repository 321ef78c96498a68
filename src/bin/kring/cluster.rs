//! `kring cluster`: the cluster id, the controller, every broker with its rack, the
//! feature levels, and (`--api-versions`) the API versions each broker supports.

use kring::admin::{Admin, Feature};

use crate::args::ClusterArgs;
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

/// `kring cluster`.
#[derive(Debug, clap::Args)]
pub struct ClusterCommandArgs {
    /// Also list each broker's API versions and the one kring uses
    #[arg(long)]
    api_versions: bool,
    /// One JSON object instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Runs `kring cluster`.
pub fn run(args: ClusterCommandArgs) -> CliResult {
    let versions = args.api_versions;
    let json = args.json;
    let cluster = args.cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let description = wait(admin.describe_cluster())?;
    let features = wait(admin.describe_features())?;
    let apis = if versions {
        wait(admin.broker_api_versions())?
    } else {
        Vec::new()
    };
    if json {
        let feature = |f: &Feature| obj! {"name" => &f.name, "min" => f.min, "max" => f.max};
        let value = obj! {
            "cluster_id" => &description.cluster_id,
            "controller" => description.controller_id,
            "brokers" => Json::Arr(description.brokers.iter().map(|b| obj! {
                "id" => b.id, "host" => &b.host, "port" => b.port, "rack" => b.rack.clone(),
            }).collect()),
            "features" => obj! {
                "epoch" => features.epoch,
                "finalized" => Json::Arr(features.finalized.iter().map(feature).collect()),
                "supported" => Json::Arr(features.supported.iter().map(feature).collect()),
            },
            "api_versions" => Json::Arr(apis.iter().map(|b| obj! {
                "broker" => b.broker,
                "apis" => Json::Arr(b.apis.iter().map(|a| obj! {
                    "key" => a.key, "name" => a.name, "min" => a.min, "max" => a.max,
                    "used" => a.used,
                }).collect()),
            }).collect()),
        };
        println!("{value}");
        return Ok(());
    }
    println!("cluster {}", description.cluster_id);
    println!("controller {}", description.controller_id);
    println!("brokers:");
    for b in &description.brokers {
        let rack = b.rack.as_deref().unwrap_or("-");
        let controller = if b.id == description.controller_id {
            "  (controller)"
        } else {
            ""
        };
        println!("  {:<4} {:<21} rack {rack}{controller}", b.id, b.addr());
    }
    println!("features (epoch {}):", features.epoch);
    for s in &features.supported {
        let level = features
            .finalized
            .iter()
            .find(|f| f.name == s.name)
            .map_or(0, |f| f.max);
        println!(
            "  {:<34} level {level:<3} supported {}-{}",
            s.name, s.min, s.max
        );
    }
    for b in &apis {
        println!("api versions of broker {} ({}):", b.broker, b.addr);
        for a in &b.apis {
            let used = a.used.map_or("none".to_string(), |v| v.to_string());
            println!(
                "  {:<4} {:<34} {}-{}  kring uses {used}",
                a.key,
                a.name.unwrap_or("(unknown)"),
                a.min,
                a.max
            );
        }
    }
    Ok(())
}
