//! `waypoint compare command-logging`: seed 001's trade (Malviya et al.,
//! ICDE 2014, §V). Logging only the calls of stored procedures costs
//! about what no logging costs at run time (1.5x the throughput of
//! physiological logging on TPC-C in the paper) and pays at recovery,
//! where every call runs again (1.5x slower than replaying after-images
//! on TPC-C, 5x on Voter).
//!
//! Voter and TPC-C, both as stored procedures under every scheme (the
//! same calls, so the comparison is like for like), under `none`,
//! `command`, `silor` (the after-image log: decision 030 §"Main-memory
//! physiological logging") and `per-worker` (seed 000's page log), on 1
//! and 2 workers (a partition per worker under `command`): throughput,
//! latency, log bytes per transaction, ratios to `none`. Then recovery:
//! the workload in a child process killed once it acknowledged the same
//! number of transactions under `command` (re-execution) and `silor`
//! (replay), the reopen timed; ratios to `silor`.

use super::experiments::{
    as_procedures, driver, resident_buffer, tpcc, with_scheme, Scheme, COMMAND, NONE, PER_WORKER,
    SILOR,
};
use super::{Baseline, CrashSpec, Experiment, Figure, Metric, RunSpec, Settings, WorkloadSpec};
use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use waypoint::{CommandSnapshot, SilorCheckpoint};

/// The series of seed 001's comparisons (this one and
/// `multi_partition`): name, scheme, and whether calls run on executor
/// threads.
pub(super) const SERIES: [(&str, Scheme, bool); 4] = [
    ("none", NONE, false),
    ("command", COMMAND, false),
    ("command-executors", COMMAND, true),
    ("silor", SILOR, false),
];

/// A run of one of [`SERIES`]: its scheme, executors, and a pool that
/// holds the whole database (the memory-resident schemes need it).
pub(super) fn series_driver(
    d: DriverConfig,
    scheme: Scheme,
    executors: bool,
    buffer: usize,
) -> DriverConfig {
    DriverConfig {
        buffer_bytes: buffer,
        executors,
        ..with_scheme(d, scheme)
    }
}

pub fn build(s: &Settings) -> BenchResult<Experiment> {
    let counts: Vec<usize> = match s.workers.as_deref() {
        None => vec![1, 2],
        Some(w) if !w.is_empty() => w.to_vec(),
        Some(_) => return Err(BenchError::Config("--workers needs a count".into())),
    };
    let most = counts.iter().copied().max().unwrap_or(1);
    let tpcc = as_procedures(tpcc(most, s));
    let voter = WorkloadSpec::Voter {
        phones: if s.quick { 10_000 } else { 1_000_000 },
    };
    // Acknowledged transactions before the kill of a recovery run.
    let (acked_voter, acked_tpcc) = if s.quick {
        (1_000, 500)
    } else {
        (1_000_000, 200_000)
    };
    let workloads = [("voter", voter, acked_voter), ("tpcc", tpcc, acked_tpcc)];
    let schemes = SERIES.iter().chain(&[("per-worker", PER_WORKER, false)]);
    let buffer = resident_buffer(most, s);
    let mut runs = Vec::new();
    let mut baselines = Vec::new();
    for (name, workload, _) in &workloads {
        for &(scheme, settings, executors) in schemes.clone() {
            let series = format!("{name} {scheme}");
            baselines.push((series.clone(), format!("{name} none")));
            for &w in &counts {
                let d = series_driver(driver(w, most, s), settings, executors, buffer);
                runs.push(RunSpec {
                    label: format!("{series}, {w} workers"),
                    series: series.clone(),
                    x: w as f64,
                    workload: *workload,
                    driver: d,
                    crash: None,
                    buffer_of_data: None,
                    peer: None,
                });
            }
        }
    }
    for (name, workload, acked) in &workloads {
        for (scheme, settings) in [("command", COMMAND), ("silor", SILOR)] {
            let series = format!("{name} {scheme} recovery");
            baselines.push((series.clone(), format!("{name} silor recovery")));
            let mut d = with_scheme(driver(most, most, s), settings);
            d.buffer_bytes = buffer;
            // Both replay the whole log since the load, as seed 001's
            // Fig. 8 compares log replay: no checkpoint or snapshot
            // shortens either side's log.
            d.silor.checkpoint = SilorCheckpoint::Off;
            d.command_snapshot = CommandSnapshot::Off;
            runs.push(RunSpec {
                label: format!("{series}, {most} workers"),
                series,
                x: most as f64,
                workload: *workload,
                driver: d,
                crash: Some(CrashSpec {
                    until_log_bytes: u64::MAX,
                    until_acked: Some(*acked),
                    max_secs: if s.quick { 10.0 } else { 600.0 },
                }),
                buffer_of_data: None,
                peer: None,
            });
        }
    }
    let counts_text = counts
        .iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    Ok(Experiment {
        name: "command-logging",
        reproduces: super::experiments::reproduces("command-logging"),
        why: format!(
            "{} and {}, each as stored procedures under every scheme (the same calls), with {counts_text} \
             workers (a partition per worker under `command`), under no logging (`none`), command logging \
             (`command`: the call's name and parameters; `command-executors`: the same with each partition's \
             calls run by an executor thread of its own, to which the workers hand them over), after-image logging (`silor`: the changed rows, the \
             main-memory physiological logging of seed 001 §IV) and the per-worker page log (`per-worker`): \
             throughput, commit latency and log bytes per transaction, each against `none` at the same workers. \
             Then recovery: the workload with {most} workers in a child process, killed (SIGKILL) once it \
             acknowledged {acked_voter} (Voter) or {acked_tpcc} (TPC-C) transactions, and reopened here: \
             `command` runs every logged call again, `silor` replays the after-images; time and acknowledged \
             transactions recovered per second, against `silor`.",
            voter.describe(),
            tpcc.describe(),
        ),
        x_name: "workers",
        runs,
        baseline: Baseline::SeriesMapAtSameX(baselines),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::LatencyP50Us,
            Metric::LatencyP99Us,
            Metric::WalBytesPerTxn,
            Metric::CpuUsPerTxn,
            Metric::RecoveryMs,
            Metric::RecoveryTxnPerSec,
            Metric::RunTxnPerSec,
            Metric::RecoveryVsRun,
            Metric::RecoveredLogMib,
            Metric::OpenMs,
        ],
        figures: vec![
            Figure::Lines {
                file: "command_logging_throughput.png",
                title: "Voter and TPC-C as procedures: throughput against workers (seed 001 Figs. 5, 7)"
                    .into(),
                x_label: "worker threads (partitions under command)",
                y_label: "committed txn/s",
                metrics: vec![Metric::TxnPerSec],
                log_x: false,
            },
            Figure::Lines {
                file: "command_logging_log_bytes.png",
                title: "Log bytes per transaction against workers".into(),
                x_label: "worker threads",
                y_label: "log bytes per transaction",
                metrics: vec![Metric::WalBytesPerTxn],
                log_x: false,
            },
            Figure::Bars {
                file: "command_logging_recovery.png",
                title: format!(
                    "Recovery after a kill, {most} workers: re-execution (command) against replay (silor) (seed 001 Fig. 8)"
                ),
                metric: Metric::RecoveryMs,
            },
        ],
        notes: vec![
            "Runs through the benchmark driver: each worker calls its procedures with up to 128 commits in \
             flight (`call_pipelined`; 65,536 under `silor`, which acknowledges once per 40 ms epoch). Under \
             `command` a call runs on the caller's thread holding its partition (a remote TPC-C New-Order or \
             Payment holds all of them); under `command-executors` the worker hands it to its partition's \
             executor thread (`Session::submit`; the 128 in flight then include calls queued, not yet run), and \
             a multi-partition call is queued on every executor and runs once all have reached it. \
             Each worker runs one partition's calls, as that partition's executor would: TPC-C's worker its home \
             warehouse's, Voter's worker the phones whose number modulo the workers is its own (under every scheme)."
                .into(),
            "`silor` is the after-image comparison: SiloR's value log has the shape of seed 001's physiological \
             log (table, key, new value per changed row), logged by its own logger threads with epoch group \
             commit rather than by the partitions' executors. The throughput runs keep each scheme's default \
             checkpointing (`silor`: continuous fuzzy checkpoints; `command`: a snapshot per 256 MiB of log); \
             the recovery runs switch both off, so both replay the whole log since the load, as the paper's \
             Fig. 8 compares log replay."
                .into(),
            "`command` replays its log by partition in parallel (a thread per partition, up to the recovery \
             threads), meeting at each call that must run alone: a remote TPC-C New-Order or Payment. A Voter \
             vote stays in its phone's partition (its vote row is keyed by the phone, and the count stripe it \
             bumps is numbered like the phone modulo the partitions), and the recovery runs' acknowledgement \
             rows go to an insert-only table, so neither makes a call a barrier. `silor` scans its value logs \
             on several threads and keeps each key's newest value."
                .into(),
            "Recovery time is the engine's own (log read + replay), without the data file's open; acknowledged \
             transactions recovered per second divide the child's acknowledged count by it (a few more calls \
             may be in the log than were acknowledged). The killed run's rate divides the same count by the \
             time from the child's start (once ready) to the kill, and recovery / run compares the two: seed \
             001's replayed transactions per second against the original rate."
                .into(),
        ],
        instructions: false,
        over_time: false,
    })
}
