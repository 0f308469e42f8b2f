//! `waypoint compare silor`: seed 002's evaluation (Zheng et al., OSDI
//! 2014, §6) on this engine.
//!
//! - Figs. 1 and 5 (§6.2, §6.3): throughput over time of SiloR (value
//!   log, epoch group commit, continuous fuzzy checkpoints: the `silor`
//!   scheme), LogSilo (the same log without checkpoints) and MemSilo (no
//!   persistence: `none`), on SiloR's YCSB variant and on TPC-C, with
//!   the log on disk over time (checkpoints keep it bounded, LogSilo's
//!   grows) and latency to durability.
//! - §6.4: recovery after a kill, the checkpoint load and the log replay
//!   apart, on one recovery thread and on every core.

use super::experiments::{
    driver, fixed_workers, reproduces, resident_buffer, tpcc, with_scheme, NONE, SILOR,
};
use super::{
    Baseline, CrashSpec, Experiment, Figure, Metric, RunSpec, Settings, TimeField, WorkloadSpec,
};
use crate::error::BenchResult;
use waypoint::{SilorCheckpoint, SilorOptions};

pub fn build(s: &Settings) -> BenchResult<Experiment> {
    let workers = fixed_workers(s, "silor")?;
    let records = if s.quick { 10_000 } else { 1_000_000 };
    let workloads = [
        ("ycsb", WorkloadSpec::SilorYcsb { records }),
        ("tpcc", tpcc(workers, s)),
    ];
    // (series suffix, scheme, silor's checkpoints): SiloR, LogSilo, MemSilo.
    let designs = [
        ("silor", SILOR, SilorOptions::default().checkpoint),
        ("silor, no checkpoints", SILOR, SilorCheckpoint::Off),
        ("none", NONE, SilorCheckpoint::Off),
    ];
    let buffer = resident_buffer(workers, s);
    let mut runs = Vec::new();
    let mut baselines = Vec::new();
    for (name, workload) in &workloads {
        for (design, scheme, checkpoint) in &designs {
            let series = format!("{name} {design}");
            let label = format!("{series}, {workers} workers");
            baselines.push((label.clone(), format!("{name} none, {workers} workers")));
            let mut d = with_scheme(driver(workers, workers, s), *scheme);
            d.buffer_bytes = buffer;
            d.silor.checkpoint = *checkpoint;
            // From the first second, long enough for several checkpoints.
            d.duration_secs = if s.quick { 2.0 } else { 30.0 };
            d.warmup_secs = 0;
            runs.push(RunSpec {
                label,
                series,
                x: workers as f64,
                workload: *workload,
                driver: d,
                crash: None,
                buffer_of_data: None,
                peer: None,
            });
        }
    }
    let mut threads = vec![1];
    if s.cores > 1 {
        threads.push(s.cores);
    }
    let run_secs = if s.quick { 3.0 } else { 20.0 };
    for (name, workload) in &workloads {
        for &t in &threads {
            let series = format!("{name} silor recovery");
            let label =
                |t: usize| format!("{series} on {t} thread{}", if t == 1 { "" } else { "s" });
            // Against the same recovery on one thread.
            baselines.push((label(t), label(1)));
            let mut d = with_scheme(driver(workers, workers, s), SILOR);
            d.buffer_bytes = buffer;
            d.recovery_threads = t;
            runs.push(RunSpec {
                label: label(t),
                series,
                x: t as f64,
                workload: *workload,
                driver: d,
                crash: Some(CrashSpec {
                    until_log_bytes: u64::MAX,
                    until_acked: None,
                    max_secs: run_secs,
                }),
                buffer_of_data: None,
                peer: None,
            });
        }
    }
    let threads_text = threads
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    let ycsb = workloads[0].1;
    let tpcc = workloads[1].1;
    Ok(Experiment {
        name: "silor",
        reproduces: reproduces("silor"),
        why: format!(
            "{} and {}, {workers} workers, durable, from the first second for 30 s, under SiloR (`silor`: value \
             log written by logger threads, epoch group commit, continuous fuzzy checkpoints), LogSilo (the same \
             log, checkpoints off) and MemSilo (`none`: no persistence), as in seed 002 Figs. 1 and 5: what \
             logging and checkpointing cost against no persistence, per second and in latency to durability, and \
             whether checkpoints keep the log on disk bounded. Then §6.4: the workload run for {run_secs} s under \
             SiloR in a child process, killed (SIGKILL), and reopened here on {threads_text} recovery threads: \
             the checkpoint load and the log scan and replay, apart.",
            ycsb.describe(),
            tpcc.describe(),
        ),
        x_name: "workers (recovery runs: recovery threads)",
        runs,
        baseline: Baseline::Labels(baselines),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::LatencyP50Us,
            Metric::LatencyP99Us,
            Metric::LowestSecondRatio,
            Metric::WalDiskMaxMib,
            Metric::CheckpointMibPerSec,
            Metric::WalBytesPerTxn,
            Metric::LoadedMib,
            Metric::LoadMs,
            Metric::RecoveredLogMib,
            Metric::AnalysisMs,
            Metric::RedoMs,
            Metric::RecoveryMs,
            Metric::RecoveryMbPerSec,
        ],
        figures: vec![
            Figure::OverTime {
                file: "silor_ycsb_throughput.png",
                title: format!(
                    "SiloR's YCSB, {workers} workers: throughput over time (seed 002 Fig. 1)"
                ),
                field: TimeField::TxnPerSec,
                limit: None,
                only: Some("ycsb"),
            },
            Figure::OverTime {
                file: "silor_tpcc_throughput.png",
                title: format!("TPC-C, {workers} workers: throughput over time (seed 002 Fig. 5)"),
                field: TimeField::TxnPerSec,
                limit: None,
                only: Some("tpcc"),
            },
            Figure::OverTime {
                file: "silor_tpcc_log.png",
                title: format!(
                    "TPC-C, {workers} workers: log on disk over time, with and without checkpoints"
                ),
                field: TimeField::WalDiskMib,
                limit: None,
                only: Some("tpcc silor"),
            },
            Figure::Lines {
                file: "silor_recovery.png",
                title: "Recovery after a kill: checkpoint load, log scan and replay against threads (seed 002 §6.4)"
                    .into(),
                x_label: "recovery threads",
                y_label: "ms",
                metrics: vec![Metric::LoadMs, Metric::AnalysisMs, Metric::RedoMs],
                log_x: false,
            },
        ],
        notes: vec![
            "SiloR's figures are 10-minute runs on 32 cores with a logger and a checkpointer per disk; here the \
             loggers (one by default) and the checkpointer share the machine's cores with the workers, as the \
             paper's 32-worker run of Fig. 3 does. `silor` runs with 65,536 commits in flight per worker: it \
             acknowledges once per 40 ms epoch, so latency is time to durability, as the paper measures it."
                .into(),
            "Recovery runs: `analysis` is the log scan (every logger's files read and decoded on the recovery \
             threads) and `redo` the replay (each key's newest value installed); the checkpoint load reads the \
             installed checkpoint's files (16 key ranges at least) on the recovery threads. The kill lands wherever the continuous \
             checkpointer is, not just before a checkpoint completes as in the paper, so the log replayed varies \
             from round to round (its size is in the table). The child runs YCSB as `crash-test` does (YCSB A: 50% \
             reads, zipfian keys) on the same loaded records."
                .into(),
            "The figures over time show each series' first completed round; the tables take medians over rounds."
                .into(),
        ],
        instructions: false,
        over_time: true,
    })
}
