//! Configurations out of range are refused before anything is opened or
//! created, with an error that names the field, its value and the range:
//! the driver's (workers, seconds, transactions, in-flight commits, and
//! the engine's options it carries), each workload's parameters, and the
//! `engine` and `updates` benchmarks' own.

use std::path::Path;
use waypoint_bench::driver::{self, DriverConfig};
use waypoint_bench::engine::{self, EngineConfig};
use waypoint_bench::tpcb::{Tpcb, TpcbConfig};
use waypoint_bench::updates::{self, UpdatesConfig};
use waypoint_bench::workload::Workload;
use waypoint_bench::ycsb::{Ycsb, YcsbConfig};

fn config(dir: &Path) -> DriverConfig {
    DriverConfig {
        dir: Some(dir.join("db")),
        workers: 1,
        duration_secs: 1.0,
        warmup_secs: 0,
        buffer_bytes: 8 << 20,
        ..DriverConfig::default()
    }
}

type Change = fn(&mut DriverConfig);
type EngineChange = fn(&mut EngineConfig);
type UpdatesChange = fn(&mut UpdatesConfig);

#[test]
fn a_driver_configuration_out_of_range_is_refused_naming_the_field() {
    let bad: &[(&str, Change)] = &[
        ("workers", |c| c.workers = 0),
        ("workers", |c| c.workers = 100_000),
        ("duration_secs", |c| c.duration_secs = f64::INFINITY),
        ("duration_secs", |c| c.duration_secs = f64::NAN),
        ("duration_secs", |c| c.duration_secs = 0.0),
        ("duration_secs", |c| c.duration_secs = -1.0),
        ("duration_secs", |c| c.duration_secs = 1e300),
        ("warmup_secs", |c| c.warmup_secs = u64::MAX),
        ("max_txns", |c| c.max_txns = Some(0)),
        ("in_flight", |c| c.in_flight = 0),
        ("rate", |c| c.rate = Some(0.0)),
        ("rate", |c| c.rate = Some(f64::NAN)),
        ("rate", |c| c.rate = Some(f64::INFINITY)),
        // The engine's options, as `Options::validate` names them.
        ("buffer_pool_bytes", |c| c.buffer_bytes = 99999 << 40),
        ("page_size", |c| c.page_size = 1000),
        ("wal_limit_bytes", |c| c.wal_limit_bytes = 1),
        ("wal_segment_bytes", |c| c.segment_bytes = 1),
        ("checkpoint_shards", |c| c.checkpoint_shards = 1_000_000),
        ("checkpoint_threads", |c| c.checkpoint_threads = 0),
        ("recovery_threads", |c| c.recovery_threads = 0),
        ("log_sync_interval", |c| c.sync_interval_us = u64::MAX),
    ];
    let tmp = tempfile::tempdir().unwrap();
    for (i, (field, change)) in bad.iter().enumerate() {
        let mut c = config(tmp.path());
        change(&mut c);
        let mut w = Tpcb::new(TpcbConfig::with_accounts(1, 100));
        let e = match driver::run(&c, &mut w, &|_| {}) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("case {i} ({field}) ran"),
        };
        assert!(
            e.starts_with(&format!("{field} = "))
                || e.starts_with(&format!("invalid options: {field} = ")),
            "case {i}: {e}"
        );
        assert!(e.contains("out of range"), "case {i}: {e}");
        assert_eq!(c.validate().unwrap_err().to_string(), e, "case {i}");
        assert!(
            !tmp.path().join("db").exists(),
            "case {i} ({field}) created the database"
        );
    }
    config(tmp.path()).validate().unwrap();
    DriverConfig::default().validate().unwrap();
}

#[test]
fn workload_parameters_out_of_range_are_refused_before_the_database_is_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let ycsb = |change: fn(&mut YcsbConfig)| {
        let mut c = YcsbConfig::preset('a', 100).unwrap();
        change(&mut c);
        Ycsb::new(c)
    };
    let bad: Vec<(&str, Box<dyn Workload>)> = vec![
        ("value_size", Box::new(ycsb(|c| c.value_size = 0))),
        ("value_size", Box::new(ycsb(|c| c.value_size = 4089))),
        ("records", Box::new(ycsb(|c| c.records = 0))),
        ("ops_per_txn", Box::new(ycsb(|c| c.ops_per_txn = 0))),
        (
            "branches",
            Box::new(Tpcb::new(TpcbConfig {
                branches: u64::MAX,
                ..TpcbConfig::with_scale(1)
            })),
        ),
        (
            "accounts_per_branch",
            Box::new(Tpcb::new(TpcbConfig {
                accounts_per_branch: 0,
                ..TpcbConfig::with_scale(1)
            })),
        ),
    ];
    for (i, (field, mut w)) in bad.into_iter().enumerate() {
        let e = match driver::run(&config(tmp.path()), w.as_mut(), &|_| {}) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("case {i} ({field}) ran"),
        };
        assert!(e.starts_with(&format!("{field} = ")), "case {i}: {e}");
        assert!(
            !tmp.path().join("db").exists(),
            "case {i} ({field}) created the database"
        );
    }
    // The largest value of a 16 KiB page is accepted.
    ycsb(|c| c.value_size = 4088).validate(16384).unwrap();
}

#[test]
fn engine_and_updates_configurations_out_of_range_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let engine_bad: &[(&str, EngineChange)] = &[
        ("workers", |c| c.workers = 0),
        ("workers", |c| c.workers = 100_000),
        ("duration_secs", |c| c.duration_secs = f64::INFINITY),
        ("value_size", |c| c.value_size = 0),
        ("value_size", |c| c.value_size = 1 << 20),
        ("records", |c| c.records = 0),
        ("buffer_pool_bytes", |c| c.buffer_bytes = usize::MAX),
    ];
    for (i, (field, change)) in engine_bad.iter().enumerate() {
        let mut c = EngineConfig {
            dir: Some(dir.clone()),
            ..EngineConfig::default()
        };
        change(&mut c);
        match engine::run(&c, &|_, _, _| {}) {
            Err(waypoint::Error::InvalidOptions(m)) => {
                assert!(
                    m.starts_with(&format!("{field} = ")),
                    "engine case {i}: {m}"
                )
            }
            Err(e) => panic!("engine case {i}: {e}"),
            Ok(_) => panic!("engine case {i} ({field}) ran"),
        }
        assert!(
            !dir.exists(),
            "engine case {i} ({field}) created the database"
        );
    }
    let updates_bad: &[(&str, UpdatesChange)] = &[
        ("workers", |c| c.workers = 0),
        ("duration_secs", |c| c.duration_secs = f64::NAN),
        ("value_size", |c| c.value_size = 0),
        ("updates_per_txn", |c| c.updates_per_txn = 0),
        ("pipeline", |c| c.pipeline = 0),
        ("records", |c| {
            c.disjoint = true;
            c.records = 1;
        }),
        ("log_sync_interval", |c| c.sync_interval_us = 2_000_000),
    ];
    for (i, (field, change)) in updates_bad.iter().enumerate() {
        let mut c = UpdatesConfig {
            dir: Some(dir.clone()),
            workers: 2,
            records: 100,
            value_size: 100,
            updates_per_txn: 4,
            disjoint: false,
            pipeline: 1,
            duration_secs: 1.0,
            scheme: waypoint::SchemeKind::PerWorker,
            commit: waypoint::CommitProtocol::RfaGroup,
            commit_name: "rfa-group".into(),
            sync_interval_us: 2000,
            wal_preallocate: true,
            wal_zero_fill: true,
            seed: 1,
        };
        c.validate().unwrap();
        change(&mut c);
        match updates::run(&c) {
            Err(waypoint::Error::InvalidOptions(m)) => {
                assert!(
                    m.starts_with(&format!("{field} = ")),
                    "updates case {i}: {m}"
                )
            }
            Err(e) => panic!("updates case {i}: {e}"),
            Ok(_) => panic!("updates case {i} ({field}) ran"),
        }
        assert!(
            !dir.exists(),
            "updates case {i} ({field}) created the directory"
        );
    }
}
