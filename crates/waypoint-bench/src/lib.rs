//! Workloads and the benchmark driver behind `waypoint bench`.
//!
//! - [`engine`] and [`updates`]: the engine benchmark (load, point reads,
//!   range scans, verified reopen) and the commit-path benchmark.
//! - [`driver`]: N workers with pipelined commits, warm-up, per-second
//!   [`metrics`], the [`summary`] and its files, and the PNG [`plots`];
//!   runs any [`workload`].
//! - Workloads: [`tpcc`] (TPC-C, with consistency conditions 1–10 and 12),
//!   [`tpcb`] (with its balance invariant), [`ycsb`] (A–F) and [`voter`]
//!   (seed 001's phone-in election with a vote limit per phone).
//!   [`registry`] rebuilds a workload from what a database was loaded with
//!   (for `waypoint verify` and `crash-test`).
//! - [`compare`]: the papers' experiments as sets of driver runs in
//!   interleaved rounds, with their report, results and figures
//!   (`waypoint compare`).

/// The binary's version and the git commit it was built from
/// (`build.rs`), as reports name it: `0.1.0 (commit 4be4cd3f0a1b)`.
pub const BUILD: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("WAYPOINT_COMMIT"),
    ")"
);

pub mod compare;
pub mod driver;
pub mod engine;
pub mod error;
pub mod kv;
pub mod load;
pub mod metrics;
pub mod peers;
pub mod plots;
pub mod registry;
pub mod report;
pub mod summary;
pub mod tpcb;
pub mod tpcc;
pub mod updates;
pub mod voter;
pub mod workload;
pub mod ycsb;

/// Every stored procedure of the workloads (Voter's `vote`, TPC-C's five
/// transactions and its indexes' extractors, the loaders' `bench_put`),
/// under their own names: a database run under the `command` scheme is
/// reopened with all of them, whatever it ran.
pub fn procedures() -> waypoint::Procedures {
    let procedures = load::register(waypoint::Procedures::new()).expect("bench_put registers");
    tpcc::procedures::register(voter::register(procedures).expect("vote registers"))
        .expect("the workloads' procedure names are distinct")
}

pub use error::{BenchError, BenchResult};
