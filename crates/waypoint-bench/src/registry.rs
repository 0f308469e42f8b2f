//! The driver workloads by name, and rebuilding one from a database: a
//! load records the workload's parameters in the `bench_meta` table
//! ([`crate::load::record_params`]), so `waypoint verify` and `waypoint
//! crash-test` can check or run a database without being told its scale
//! again.

use crate::error::{BenchError, BenchResult};
use crate::load;
use crate::tpcb::{Tpcb, TpcbConfig};
use crate::tpcc::{Tpcc, TpccConfig};
use crate::voter::{Voter, VoterConfig};
use crate::workload::{Loaded, Workload};
use crate::ycsb::{Ycsb, YcsbConfig};
use waypoint::Database;

/// The workloads [`reopen`] knows.
pub const NAMES: &[&str] = &["tpcc", "tpcb", "ycsb", "voter"];

/// `Err` for a name not in [`NAMES`]: "unknown workload ...; available: ...".
pub fn check_name(name: &str) -> BenchResult<()> {
    if NAMES.contains(&name) {
        Ok(())
    } else {
        Err(BenchError::Config(format!(
            "unknown workload {name:?}; available: {}",
            NAMES.join(", ")
        )))
    }
}

/// The workload `name` with the parameters `db` was loaded with, set up on
/// `db` (tables opened, nothing loaded or changed). Fails if `db` holds no
/// `name` data.
pub fn reopen(db: &Database, name: &str) -> BenchResult<Box<dyn Workload>> {
    check_name(name)?;
    let Some(params) = load::loaded_params(db, name)? else {
        let mut tables = db.table_names();
        tables.retain(|t| t != "bench_meta");
        return Err(BenchError::Config(format!(
            "{} holds no {name} data (tables: {})",
            db.path().display(),
            if tables.is_empty() {
                "none".to_string()
            } else {
                tables.join(", ")
            }
        )));
    };
    let bad = |e: String| {
        BenchError::Config(format!(
            "{}: the {name} parameters recorded at load, {params}, cannot be read: {e}",
            db.path().display()
        ))
    };
    let mut workload: Box<dyn Workload> = match name {
        "tpcc" => Box::new(Tpcc::new(
            serde_json::from_value::<TpccConfig>(params.clone()).map_err(|e| bad(e.to_string()))?,
            0,
        )),
        "tpcb" => Box::new(Tpcb::new(
            serde_json::from_value::<TpcbConfig>(params.clone()).map_err(|e| bad(e.to_string()))?,
        )),
        "ycsb" => {
            let (Some(records), Some(value_size)) =
                (params["records"].as_u64(), params["value_size"].as_u64())
            else {
                return Err(bad("no records or value_size".into()));
            };
            let mut config = YcsbConfig::preset('a', records)?;
            config.value_size = value_size as usize;
            Box::new(Ycsb::new(config))
        }
        "voter" => Box::new(Voter::new(
            serde_json::from_value::<VoterConfig>(params.clone())
                .map_err(|e| bad(e.to_string()))?,
        )),
        other => unreachable!("checked name {other}"),
    };
    match workload.setup(db, 1)? {
        Loaded::Existing { .. } => Ok(workload),
        Loaded::Fresh { .. } => Err(bad("the setup loaded it again".into())),
    }
}
