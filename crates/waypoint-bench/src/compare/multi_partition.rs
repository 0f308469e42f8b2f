//! `waypoint compare multi-partition`: seed 001's Fig. 9 (§V-B). Command
//! logging pays for every multi-partition transaction: all partitions
//! meet at it, in the run and again in the replay, so its throughput
//! falls as their share grows, where physiological logging and no logging
//! only run the transaction.
//!
//! TPC-C as stored procedures with a chosen share of remote New-Orders
//! and Payments (`Tpcc::multi_partition`: each one a multi-partition
//! call) at 0, 10, 50 and 100%, under `none`, `command`, `command` on
//! executor threads and `silor` (the after-image log), a partition and a
//! warehouse per worker; ratios to `none` at the same share.

use super::command_logging::{series_driver, SERIES};
use super::experiments::{driver, resident_buffer};
use super::{Baseline, Experiment, Figure, Metric, RunSpec, Settings, WorkloadSpec};
use crate::error::{BenchError, BenchResult};
use crate::tpcc::TpccConfig;

/// The shares of remote New-Orders and Payments, in percent.
pub const SHARES: [u8; 4] = [0, 10, 50, 100];

pub fn build(s: &Settings) -> BenchResult<Experiment> {
    let workers = match s.workers.as_deref() {
        None => 2,
        Some([w]) if *w >= 2 => *w,
        Some(_) => {
            return Err(BenchError::Config(
                "multi-partition runs one worker count, at least 2 (a remote transaction needs a second warehouse)"
                    .into(),
            ))
        }
    };
    let config = TpccConfig {
        scale_down: if s.quick { 100 } else { 1 },
        ..TpccConfig::new(workers as u32)
    };
    let buffer = resident_buffer(workers, s);
    let mut runs = Vec::new();
    let mut baselines = Vec::new();
    for (series, settings, executors) in SERIES {
        baselines.push((series.to_string(), "none".to_string()));
        for pct in SHARES {
            let d = series_driver(driver(workers, workers, s), settings, executors, buffer);
            runs.push(RunSpec {
                label: format!("{series}, {pct}% multi-partition"),
                series: series.to_string(),
                x: f64::from(pct),
                workload: WorkloadSpec::TpccMultiPartition { config, pct },
                driver: d,
                crash: None,
                buffer_of_data: None,
                peer: None,
            });
        }
    }
    Ok(Experiment {
        name: "multi-partition",
        reproduces: super::experiments::reproduces("multi-partition"),
        why: format!(
            "TPC-C with {workers} warehouses as stored procedures, {workers} workers (a partition and a home \
             warehouse each under `command`), with 0, 10, 50 and 100% of the New-Orders and Payments made \
             remote (one order line from, or the customer of, another warehouse: a multi-partition call) instead \
             of the spec's 1% of lines and 15% of payments; the other transactions stay local. Under no logging \
             (`none`), command logging (`command`: a multi-partition call holds every partition; \
             `command-executors`: it is queued on every partition's executor and runs once all have reached \
             it) and after-image logging (`silor`): throughput and latency against the share, each against \
             `none` at the same share, as seed 001's Fig. 9."
        ),
        x_name: "multi-partition %",
        runs,
        baseline: Baseline::SeriesMapAtSameX(baselines),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::LatencyP50Us,
            Metric::LatencyP99Us,
            Metric::CpuUsPerTxn,
            Metric::AbortPct,
        ],
        figures: vec![Figure::Lines {
            file: "multi_partition_throughput.png",
            title: format!(
                "TPC-C as procedures, {workers} workers: throughput against the multi-partition share (seed 001 Fig. 9)"
            ),
            x_label: "remote New-Orders and Payments, %",
            y_label: "committed txn/s (all five types)",
            metrics: vec![Metric::TxnPerSec],
            log_x: false,
        }],
        notes: vec![
            "The paper plots New-Order throughput; this counts all five transaction types, whose mix is the \
             spec's. Order-Status, Delivery and Stock-Level stay single-partition at every share."
                .into(),
            "Under `none` and `silor` a remote transaction is an ordinary OCC transaction that touches two \
             warehouses; only `command` makes it wait for every partition."
                .into(),
        ],
        instructions: false,
        over_time: false,
    })
}
