//! The registry of `waypoint compare`: each experiment named after the
//! paper result it reproduces (seed 000 §4.1 Fig. 8 and its remote-flush
//! table, §4.2 Fig. 9 a/b, §4.3 Table 1, §4.6), built for the machine and
//! the command line's settings; and the experiments of issue 31 that wait
//! for schemes or peers not built yet, listed with what they wait for.
//!
//! Every experiment runs TPC-C with the driver's defaults (128 commits in
//! flight per worker, 16 KiB pages) unless it says otherwise; `--quick`
//! shrinks the data to 1/100 of the spec's items and customers and the
//! runs to a second.

use super::{
    Baseline, CrashSpec, Experiment, Figure, Metric, RunSpec, Settings, TimeField, WorkloadSpec,
};
use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::tpcc::TpccConfig;
use waypoint::{CheckpointMode, CommitProtocol, SchemeKind};

/// The experiments that run today, in `--list` order.
pub const NAMES: &[&str] = &[
    "logging-cost",
    "scaling",
    "remote-flush",
    "recovery",
    "wal-bound",
    "out-of-memory",
    "peers",
    "checkpoint-dips",
    "command-logging",
    "multi-partition",
    "silor",
];

/// Experiments of issue 31 that cannot run yet: (name, the result, what
/// it waits for).
pub const NOT_YET: &[(&str, &str, &str)] = &[
    (
        "decoupled",
        "seed 003: decoupled persistence services",
        "the decoupled checkpoint and page-cleaner scheme",
    ),
    (
        "vtc-memory",
        "seed 004: validity-tracking compaction",
        "the validity-tracking compaction scheme",
    ),
];

/// The result each available experiment reproduces, for `--list`.
pub fn reproduces(name: &str) -> &'static str {
    match name {
        "logging-cost" => "seed 000 Table 1 (§4.3): TPC-C throughput and CPU per transaction as the logging components are switched on one by one",
        "scaling" => "seed 000 Fig. 8 (§4.1): TPC-C txn/s against workers for every scheme and commit protocol",
        "remote-flush" => "seed 000 §4.1, the remote-flush table: share of commits that flush other logs against TPC-C warehouses at a fixed worker count",
        "recovery" => "seed 000 §4.6: recovery time per phase against the WAL limit",
        "wal-bound" => "seed 000 Fig. 9 a/b (§4.2): log on disk and throughput over time under each checkpointing design",
        "out-of-memory" => "seed 000 Fig. 9 right (§4.2): TPC-C txn/s against workers with a buffer pool of 40% of the data, per-worker against the central log",
        "peers" => super::peer_runs::REPRODUCES,
        "checkpoint-dips" => super::peer_runs::DIPS_REPRODUCES,
        "silor" => "seed 002 Figs. 1, 5 and §6.4: SiloR (value log, epochs, fuzzy checkpoints) against its log alone and no persistence, throughput and log on disk over time; recovery, checkpoint load and log replay apart, against threads",
        "multi-partition" => "seed 001 Fig. 9 (§V-B): TPC-C throughput against the share of multi-partition New-Orders and Payments, under command logging (callers and executors), after-image logging and no logging",
        "command-logging" => "seed 001 Figs. 5-8 (§V): Voter and TPC-C throughput, latency and log bytes under command logging, physiological (after-image) logging and no logging; recovery by re-execution against replay",
        _ => "",
    }
}

/// The experiment `name` for these settings; an unknown name or one that
/// is not available yet is a configuration error naming the choices.
pub fn build(name: &str, s: &Settings) -> BenchResult<Experiment> {
    let experiment = match name {
        "logging-cost" => logging_cost(s)?,
        "scaling" => scaling(s)?,
        "remote-flush" => remote_flush(s)?,
        "recovery" => recovery(s)?,
        "wal-bound" => wal_bound(s)?,
        "out-of-memory" => out_of_memory(s)?,
        "command-logging" => super::command_logging::build(s)?,
        "multi-partition" => super::multi_partition::build(s)?,
        "silor" => super::silor_runs::build(s)?,
        "peers" => {
            let workers = fixed_workers(s, "peers")?;
            super::peer_runs::build(s, workers, driver(workers, workers, s))?
        }
        "checkpoint-dips" => {
            let workers = fixed_workers(s, "checkpoint-dips")?;
            super::peer_runs::checkpoint_dips(s, workers, driver(workers, workers, s))?
        }
        other => {
            if let Some((_, _, waits)) = NOT_YET.iter().find(|(n, _, _)| *n == other) {
                return Err(BenchError::Config(format!(
                    "experiment {other:?} is not available yet: it needs {waits} (see `waypoint compare --list`)"
                )));
            }
            return Err(BenchError::Config(format!(
                "unknown experiment {other:?}; available: {}",
                NAMES.join(", ")
            )));
        }
    };
    for run in &experiment.runs {
        run.driver.validate()?;
    }
    Ok(experiment)
}

/// TPC-C at the spec's sizes, or 1/100 of them with `--quick`.
pub(super) fn tpcc(warehouses: usize, s: &Settings) -> WorkloadSpec {
    WorkloadSpec::Tpcc(TpccConfig {
        scale_down: if s.quick { 100 } else { 1 },
        ..TpccConfig::new(warehouses as u32)
    })
}

/// A buffer pool that holds the data of `warehouses` TPC-C warehouses
/// and what a run adds (the paper's in-memory setting): 256 MiB per
/// warehouse, at least 1 GiB, at most half the machine's memory; 32 MiB
/// with `--quick`.
pub(super) fn buffer_for(warehouses: usize, s: &Settings) -> usize {
    if s.quick {
        return 32 << 20;
    }
    let want = (warehouses << 28).max(1 << 30);
    match s.memory_bytes {
        0 => want,
        m => want.min((m / 2) as usize),
    }
}

/// The driver's defaults with the experiment's timing: 10 s measured
/// after 2 s of warm-up, or 1 s without warm-up with `--quick`.
pub(super) fn driver(workers: usize, warehouses: usize, s: &Settings) -> DriverConfig {
    let d = DriverConfig::default();
    DriverConfig {
        workers,
        duration_secs: if s.quick { 1.0 } else { 10.0 },
        warmup_secs: if s.quick { 0 } else { 2 },
        buffer_bytes: buffer_for(warehouses, s),
        recovery_threads: s.cores.clamp(1, 1024),
        ..d
    }
}

/// The one worker count of an experiment: `--workers N`, or every core
/// (at least 2: one worker has no other log to flush).
pub(super) fn fixed_workers(s: &Settings, name: &str) -> BenchResult<usize> {
    match s.workers.as_deref() {
        None => Ok(s.cores.max(2)),
        Some([w]) => Ok(*w),
        Some(_) => Err(BenchError::Config(format!(
            "--workers takes one count for {name} (a list is for scaling)"
        ))),
    }
}

/// A persistence setting of a run: (scheme, commit, checkpoint).
pub(super) type Scheme = (SchemeKind, CommitProtocol, CheckpointMode);

/// No log: the baseline of the memory-resident schemes' experiments.
pub(super) const NONE: Scheme = (
    SchemeKind::None,
    CommitProtocol::RfaGroup,
    CheckpointMode::None,
);

/// SiloR's value log with its default continuous fuzzy checkpoints.
pub(super) const SILOR: Scheme = (
    SchemeKind::Silor,
    CommitProtocol::RfaGroup,
    CheckpointMode::None,
);

/// VoltDB's command log with its default snapshots.
pub(super) const COMMAND: Scheme = (
    SchemeKind::Command,
    CommitProtocol::RfaGroup,
    CheckpointMode::None,
);

/// TPC-C's transactions as stored procedures (what `command` logs).
pub(super) fn as_procedures(w: WorkloadSpec) -> WorkloadSpec {
    match w {
        WorkloadSpec::Tpcc(c) => WorkloadSpec::TpccCalls(c),
        other => other,
    }
}

/// The per-worker scheme as configured by default.
pub(super) const PER_WORKER: Scheme = (
    SchemeKind::PerWorker,
    CommitProtocol::RfaGroup,
    CheckpointMode::Continuous,
);

/// The ARIES baseline as seed 000 §4 configures it: one log, group
/// commit, a full checkpoint whenever the log reaches its limit.
const ARIES: Scheme = (
    SchemeKind::Aries,
    CommitProtocol::Group,
    CheckpointMode::Full,
);

/// Aether's central log, configured as the ARIES baseline.
const AETHER: Scheme = (
    SchemeKind::Aether,
    CommitProtocol::Group,
    CheckpointMode::Full,
);

/// `d` under `scheme`, with the scheme's default window of commits in
/// flight (`silor` acknowledges once per epoch: the general window of 128
/// would cap it by Little's law, [`DriverConfig::default_in_flight`]).
pub(super) fn with_scheme(
    mut d: DriverConfig,
    (scheme, commit, checkpoint): Scheme,
) -> DriverConfig {
    d.scheme = scheme;
    d.commit = commit;
    d.checkpoint = checkpoint;
    d.in_flight = DriverConfig::default_in_flight(scheme);
    d
}

/// A buffer pool for the memory-resident schemes (`silor`, `command`),
/// which keep every change in the pool, so a run must not fill it: what
/// [`buffer_for`] gives, at least 4 GiB (256 MiB with `--quick`, whose
/// runs last seconds), at most half the machine's memory.
pub(super) fn resident_buffer(warehouses: usize, s: &Settings) -> usize {
    let least = if s.quick { 256 << 20 } else { 4 << 30 };
    let want = buffer_for(warehouses, s).max(least);
    match s.memory_bytes {
        0 => want,
        m => want.min((m / 2) as usize),
    }
}

fn logging_cost(s: &Settings) -> BenchResult<Experiment> {
    let workers = fixed_workers(s, "logging-cost")?;
    use CheckpointMode as K;
    use CommitProtocol as C;
    let pw = SchemeKind::PerWorker;
    let steps: [(&str, Scheme); 5] = [
        ("1 no logging", (SchemeKind::None, C::RfaGroup, K::None)),
        (
            "2 + log records, staged to the log files (async commits)",
            (pw, C::Async, K::None),
        ),
        (
            "3 + durable commits, flushing every log (flush-all)",
            (pw, C::FlushAll, K::None),
        ),
        ("4 + RFA (rfa-group)", (pw, C::RfaGroup, K::None)),
        (
            "5 + continuous checkpoints",
            (pw, C::RfaGroup, K::Continuous),
        ),
    ];
    let runs = steps
        .iter()
        .enumerate()
        .map(|(i, (label, scheme))| RunSpec {
            label: label.to_string(),
            series: label.to_string(),
            x: (i + 1) as f64,
            workload: tpcc(workers, s),
            driver: with_scheme(driver(workers, workers, s), *scheme),
            crash: None,
            buffer_of_data: None,
            peer: None,
        })
        .collect();
    Ok(Experiment {
        name: "logging-cost",
        reproduces: reproduces("logging-cost"),
        why: format!(
            "TPC-C with {workers} workers on {workers} warehouses, the logging components switched on one at a time, \
             as in seed 000 Table 1: what each costs in throughput and in CPU time per transaction (process CPU time, \
             workers and engine threads, over the measured window). Steps 1 to 4 run without checkpoints (the log \
             grows until the clean close), step 5 is the default configuration."
        ),
        x_name: "step",
        runs,
        baseline: Baseline::Run(steps[0].0.to_string()),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::CpuUsPerTxn,
            Metric::InstructionsPerTxn,
            Metric::WalBytesPerTxn,
            Metric::LatencyP99Us,
        ],
        figures: vec![
            Figure::Bars {
                file: "logging_cost_throughput.png",
                title: format!("TPC-C, {workers} workers: throughput per logging step (seed 000 Table 1)"),
                metric: Metric::TxnPerSec,
            },
            Figure::Bars {
                file: "logging_cost_cpu.png",
                title: format!("TPC-C, {workers} workers: CPU time per transaction per logging step"),
                metric: Metric::CpuUsPerTxn,
            },
        ],
        notes: vec![
            "The paper's steps 2 (create log records) and 3 (stage them to SSD) are one step here: the per-worker \
             scheme has no switch that writes log records without its writer staging them to the log files. \
             Step 2 is the `async` commit protocol: records written and staged, commits acknowledged without \
             waiting for a sync."
                .into(),
            "The paper's step 5 is RFA on persistent memory; there is none here, so step 4 is RFA with group \
             commit on the SSD (`rfa-group`, the default), and the paper's step 4 (flush all logs on every \
             commit) is `flush-all`."
                .into(),
        ],
        instructions: true,
        over_time: false,
    })
}

/// 1, 2, 4, ... up to the cores, and the core count itself.
fn worker_counts(s: &Settings) -> Vec<usize> {
    if let Some(w) = &s.workers {
        return w.clone();
    }
    if s.quick {
        return vec![1, 2];
    }
    let mut counts = Vec::new();
    let mut w = 1;
    while w < s.cores {
        counts.push(w);
        w *= 2;
    }
    counts.push(s.cores.max(1));
    counts
}

fn scaling(s: &Settings) -> BenchResult<Experiment> {
    let counts = worker_counts(s);
    let warehouses = counts.iter().copied().max().unwrap_or(1);
    let mut series: Vec<(String, Scheme)> = vec![(
        "none".into(),
        (
            SchemeKind::None,
            CommitProtocol::RfaGroup,
            CheckpointMode::None,
        ),
    )];
    for commit in [
        CommitProtocol::RfaGroup,
        CommitProtocol::Group,
        CommitProtocol::Rfa,
        CommitProtocol::FlushAll,
        CommitProtocol::Async,
    ] {
        series.push((
            format!("per-worker {}", commit.name()),
            (SchemeKind::PerWorker, commit, CheckpointMode::Continuous),
        ));
    }
    series.push(("aries".into(), ARIES));
    series.push(("aether".into(), AETHER));
    series.push(("silor".into(), SILOR));
    series.push(("command".into(), COMMAND));
    let mut runs = Vec::new();
    for (name, scheme) in &series {
        for &w in &counts {
            let mut d = with_scheme(driver(w, warehouses, s), *scheme);
            let mut workload = tpcc(warehouses, s);
            if matches!(scheme.0, SchemeKind::Silor | SchemeKind::Command) {
                d.buffer_bytes = resident_buffer(warehouses, s);
            }
            if scheme.0 == SchemeKind::Command {
                // Command logging logs calls: TPC-C as stored procedures,
                // a partition per worker.
                workload = as_procedures(workload);
            }
            runs.push(RunSpec {
                label: format!("{name}, {w} workers"),
                series: name.clone(),
                x: w as f64,
                workload,
                driver: d,
                crash: None,
                buffer_of_data: None,
                peer: None,
            });
        }
    }
    Ok(Experiment {
        name: "scaling",
        reproduces: reproduces("scaling"),
        why: format!(
            "TPC-C on {warehouses} warehouses (fixed, as the paper's 500) with {} workers, for the scheme without a \
             log, for the per-worker scheme under each commit protocol (continuous checkpoints) and for the central-log \
             baselines, ARIES (one log under one latch) and Aether (the same log with a consolidation array, \
             decoupled buffer fill and flush pipelining), both with group commit and full checkpoints, as in seed \
             000 Fig. 8; for the paper's SiloR-style competitor, SiloR's value log (`silor`: epochs, loggers, \
             continuous fuzzy checkpoints; seed 002); and, beyond the paper's figure, VoltDB's command log \
             (`command`: TPC-C as stored procedures, a partition per worker, snapshots; seed 001): how throughput scales with \
             workers, and what each design's synchronisation costs.",
            counts
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        x_name: "workers",
        runs,
        baseline: Baseline::SeriesAtSameX("per-worker rfa-group".into()),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::CpuUsPerTxn,
            Metric::RemoteFlushPct,
            Metric::ContentionPer1000Txns,
            Metric::LatencyP99Us,
        ],
        figures: vec![Figure::Lines {
            file: "scaling.png",
            title: format!("TPC-C, {warehouses} warehouses: throughput against workers (seed 000 Fig. 8)"),
            x_label: "worker threads",
            y_label: "committed txn/s",
            metrics: vec![Metric::TxnPerSec],
            log_x: false,
        }],
        notes: vec![
            "`silor` and `command` keep every row in memory (a buffer pool of at least 4 GiB); `silor` runs with \
             65,536 commits in flight per worker, as it acknowledges once per 40 ms epoch, the others with 128. \
             Under `command` a remote New-Order or Payment holds every partition."
                .into(),
        ],
        instructions: false,
        over_time: false,
    })
}

fn remote_flush(s: &Settings) -> BenchResult<Experiment> {
    let workers = fixed_workers(s, "remote-flush")?;
    let mut counts = vec![1usize];
    let most = if s.quick { 4 } else { 4 * workers };
    while counts.last().is_some_and(|&w| w < most) {
        counts.push((counts.last().copied().unwrap_or(1) * 2).min(most));
    }
    if !counts.contains(&workers) {
        counts.push(workers);
        counts.sort_unstable();
    }
    let runs = counts
        .iter()
        .map(|&w| RunSpec {
            label: format!("{w} warehouses"),
            series: "per-worker rfa-group".into(),
            x: w as f64,
            workload: tpcc(w, s),
            driver: driver(workers, w, s),
            crash: None,
            buffer_of_data: None,
            peer: None,
        })
        .collect();
    Ok(Experiment {
        name: "remote-flush",
        reproduces: reproduces("remote-flush"),
        why: format!(
            "TPC-C with {workers} workers (rfa-group commits, continuous checkpoints) on 1 to {most} warehouses, as \
             the table in seed 000 §4.1: fewer warehouses than workers make transactions touch pages that other \
             workers' logs changed last, so more commits must wait for other logs (a remote flush)."
        ),
        x_name: "warehouses",
        runs,
        baseline: Baseline::Run(format!("{workers} warehouses")),
        metrics: vec![
            Metric::RemoteFlushPct,
            Metric::TxnPerSec,
            Metric::LatencyP99Us,
        ],
        figures: vec![
            Figure::Lines {
                file: "remote_flush.png",
                title: format!("TPC-C, {workers} workers: remote flushes against warehouses (seed 000, section 4.1)"),
                x_label: "warehouses (log scale)",
                y_label: "remote flushes, % of commits",
                metrics: vec![Metric::RemoteFlushPct],
                log_x: true,
            },
            Figure::Lines {
                file: "remote_flush_throughput.png",
                title: format!("TPC-C, {workers} workers: throughput against warehouses"),
                x_label: "warehouses (log scale)",
                y_label: "committed txn/s",
                metrics: vec![Metric::TxnPerSec],
                log_x: true,
            },
        ],
        notes: Vec::new(),
        instructions: false,
        over_time: false,
    })
}

fn recovery(s: &Settings) -> BenchResult<Experiment> {
    let workers = fixed_workers(s, "recovery")?;
    let limits_mib: &[u64] = if s.quick {
        &[1, 4]
    } else {
        &[64, 128, 256, 512, 1024]
    };
    let schemes = [
        ("per-worker", PER_WORKER),
        ("aries", ARIES),
        ("aether", AETHER),
    ];
    let mut runs = Vec::new();
    for (series, scheme) in schemes {
        for &mib in limits_mib {
            let mut d = with_scheme(driver(workers, workers, s), scheme);
            d.wal_limit_bytes = mib << 20;
            runs.push(RunSpec {
                label: format!("{series}, WAL limit {mib} MiB"),
                series: series.into(),
                x: mib as f64,
                workload: tpcc(workers, s),
                driver: d,
                crash: Some(CrashSpec {
                    until_log_bytes: mib << 20,
                    until_acked: None,
                    max_secs: if s.quick { 3.0 } else { 180.0 },
                }),
                buffer_of_data: None,
                peer: None,
            });
        }
    }
    Ok(Experiment {
        name: "recovery",
        reproduces: reproduces("recovery"),
        why: format!(
            "TPC-C with {workers} workers in a child process, killed (SIGKILL) once its log directory holds the WAL \
             limit (or after {} s), then opened here: recovery's analysis, redo and undo, timed by the engine, with \
             {} redo/undo threads, as seed 000 §4.6 measures recovery for a bounded WAL. The per-worker scheme \
             (rfa-group commits, continuous checkpoints, a partition per worker analysed in parallel) against the \
             central-log baselines ARIES and Aether (one log, full checkpoints).",
            if s.quick { 3 } else { 180 },
            s.cores.clamp(1, 1024)
        ),
        x_name: "WAL limit, MiB",
        runs,
        baseline: Baseline::SeriesAtSameX("per-worker".into()),
        metrics: vec![
            Metric::RecoveryMs,
            Metric::AnalysisMs,
            Metric::RedoMs,
            Metric::UndoMs,
            Metric::RecoveredLogMib,
            Metric::RecoveryMbPerSec,
            Metric::OpenMs,
        ],
        figures: vec![
            Figure::Lines {
                file: "recovery.png",
                title: format!("TPC-C, {workers} workers, killed: recovery time against the WAL limit (seed 000, section 4.6)"),
                x_label: "WAL limit, MiB (log scale)",
                y_label: "milliseconds",
                metrics: vec![Metric::RecoveryMs],
                log_x: true,
            },
            Figure::Lines {
                file: "recovery_phases.png",
                title: format!("TPC-C, {workers} workers, killed: recovery time per phase against the WAL limit"),
                x_label: "WAL limit, MiB (log scale)",
                y_label: "milliseconds",
                metrics: vec![Metric::AnalysisMs, Metric::RedoMs, Metric::UndoMs],
                log_x: true,
            },
        ],
        notes: vec![
            "The log directory's size (spare segments included) decides the kill, so the log recovered is near \
             the limit but not at it; the table of log recovered says how much each run replayed."
                .into(),
            "The scheme without a log has nothing to recover; SiloR joins once its checkpoints land.".into(),
        ],
        instructions: false,
        over_time: false,
    })
}

/// Seed 000 Fig. 9 right: the data outgrows the buffer pool (40% of the
/// loaded data file), so every scheme writes and evicts pages while it
/// runs; the central log's latch and full checkpoints against the
/// per-worker logs with continuous checkpoints.
fn out_of_memory(s: &Settings) -> BenchResult<Experiment> {
    let counts = worker_counts(s);
    let warehouses = counts.iter().copied().max().unwrap_or(1);
    let schemes = [
        ("per-worker", PER_WORKER),
        ("aries", ARIES),
        ("aether", AETHER),
        (
            "none",
            (
                SchemeKind::None,
                CommitProtocol::RfaGroup,
                CheckpointMode::None,
            ),
        ),
    ];
    let mut runs = Vec::new();
    for (series, scheme) in schemes {
        for &w in &counts {
            runs.push(RunSpec {
                label: format!("{series}, {w} workers"),
                series: series.into(),
                x: w as f64,
                workload: tpcc(warehouses, s),
                driver: with_scheme(driver(w, warehouses, s), scheme),
                crash: None,
                buffer_of_data: Some(0.4),
                peer: None,
            });
        }
    }
    Ok(Experiment {
        name: "out-of-memory",
        reproduces: reproduces("out-of-memory"),
        why: format!(
            "TPC-C on {warehouses} warehouses with {} workers and a buffer pool of 40% of the loaded data file, as \
             seed 000 Fig. 9 (right): pages are evicted and read back while the schemes log, so the per-worker \
             scheme's steal behind its flush gate and continuous checkpoints meet the central logs' (ARIES, \
             Aether) full checkpoints under I/O. The scheme without a log writes pages freely.",
            counts
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        x_name: "workers",
        runs,
        baseline: Baseline::SeriesAtSameX("per-worker".into()),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::CpuUsPerTxn,
            Metric::LatencyP99Us,
            Metric::WalBytesPerTxn,
        ],
        figures: vec![Figure::Lines {
            file: "out_of_memory.png",
            title: format!("TPC-C, {warehouses} warehouses, buffer pool 40% of the data (seed 000 Fig. 9 right)"),
            x_label: "worker threads",
            y_label: "committed txn/s",
            metrics: vec![Metric::TxnPerSec],
            log_x: false,
        }],
        notes: vec![
            "The pool is sized from the data file of the load every run copies, before the run grows it; TPC-C \
             inserts orders as it runs, so the share in memory falls during a run."
                .into(),
            "The SiloR-style baseline has no out-of-memory support (seed 000 §4: no steal), here as in the \
             paper: `silor` fails writes with MemoryFull once the pool is full of changes."
                .into(),
        ],
        instructions: false,
        over_time: false,
    })
}

fn wal_bound(s: &Settings) -> BenchResult<Experiment> {
    let workers = fixed_workers(s, "wal-bound")?;
    let limit_mib: u64 = if s.quick { 1 } else { 64 };
    let runs = [
        CheckpointMode::Continuous,
        CheckpointMode::Full,
        CheckpointMode::None,
    ]
    .iter()
    .map(|&mode| {
        let mut d = driver(workers, workers, s);
        d.checkpoint = mode;
        d.wal_limit_bytes = limit_mib << 20;
        d.duration_secs = if s.quick { 2.0 } else { 30.0 };
        d.warmup_secs = 0;
        RunSpec {
            label: format!("checkpoint {}", mode.name()),
            series: format!("checkpoint {}", mode.name()),
            x: 0.0,
            workload: tpcc(workers, s),
            driver: d,
            crash: None,
            buffer_of_data: None,
            peer: None,
        }
    })
    .collect();
    Ok(Experiment {
        name: "wal-bound",
        reproduces: reproduces("wal-bound"),
        why: format!(
            "TPC-C with {workers} workers and a WAL limit of {limit_mib} MiB, from the first second (no warm-up), \
             under continuous checkpoints (seed 000 §3.4), full checkpoints each time the log reaches the limit \
             (the baseline design of the paper's competitors) and no checkpoints, as in seed 000 Fig. 9 a/b: \
             whether the log on disk stays at the limit, and what each design does to throughput over time."
        ),
        x_name: "checkpointing",
        runs,
        baseline: Baseline::Run("checkpoint continuous".into()),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::WalDiskMaxMib,
            Metric::CheckpointMibPerSec,
            Metric::LowestSecondRatio,
            Metric::LatencyP99Us,
        ],
        figures: vec![
            Figure::OverTime {
                file: "wal_bound_wal.png",
                title: format!("TPC-C, {workers} workers: log on disk over time (seed 000 Fig. 9a)"),
                field: TimeField::WalDiskMib,
                limit: Some((format!("WAL limit ({limit_mib} MiB)"), limit_mib as f64)),
                only: None,
            },
            Figure::OverTime {
                file: "wal_bound_throughput.png",
                title: format!("TPC-C, {workers} workers: throughput over time (seed 000 Fig. 9b)"),
                field: TimeField::TxnPerSec,
                limit: None,
                only: None,
            },
        ],
        notes: vec![
            "The figures show each design's first completed round; the tables take the median over rounds.".into(),
        ],
        instructions: false,
        over_time: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(quick: bool, cores: usize) -> Settings {
        Settings {
            quick,
            rounds: 1,
            workers: None,
            cores,
            memory_bytes: 24 << 30,
            peers: None,
        }
    }

    #[test]
    fn every_named_experiment_builds_with_unique_labels_and_its_baseline() {
        for quick in [true, false] {
            for name in NAMES {
                let e = build(name, &settings(quick, 6)).unwrap();
                let mut labels: Vec<&str> = e.runs.iter().map(|r| r.label.as_str()).collect();
                labels.sort_unstable();
                labels.dedup();
                assert_eq!(labels.len(), e.runs.len(), "{name}: duplicate labels");
                for i in 0..e.runs.len() {
                    assert!(
                        e.baseline.index_for(&e.runs, i).is_some(),
                        "{name}: run {i} has no baseline"
                    );
                }
                assert!(!reproduces(name).is_empty());
            }
        }
    }

    #[test]
    fn scaling_counts_powers_of_two_up_to_the_cores() {
        assert_eq!(worker_counts(&settings(false, 6)), [1, 2, 4, 6]);
        assert_eq!(worker_counts(&settings(false, 8)), [1, 2, 4, 8]);
        assert_eq!(worker_counts(&settings(false, 1)), [1]);
        let mut s = settings(false, 2);
        s.workers = Some(vec![1, 2, 4, 8, 16]);
        assert_eq!(worker_counts(&s), [1, 2, 4, 8, 16]);
        assert!(build("remote-flush", &s).is_err(), "a list is for scaling");
    }

    /// Seed 001's Fig. 8 compares log replay: a checkpoint or snapshot
    /// taken during the recovery runs would shorten one side's log.
    #[test]
    fn command_loggings_recovery_runs_replay_the_whole_log_on_both_sides() {
        let e = build("command-logging", &settings(false, 2)).unwrap();
        let recoveries: Vec<_> = e.runs.iter().filter(|r| r.crash.is_some()).collect();
        assert_eq!(
            recoveries.len(),
            4,
            "voter and tpcc under command and silor"
        );
        for r in recoveries {
            assert_eq!(
                r.driver.silor.checkpoint,
                waypoint::SilorCheckpoint::Off,
                "{}",
                r.label
            );
            assert_eq!(
                r.driver.command_snapshot,
                waypoint::CommandSnapshot::Off,
                "{}",
                r.label
            );
        }
    }

    /// Only the `command-executors` series hands calls to executor
    /// threads; it runs the `command` scheme like the `command` series.
    #[test]
    fn command_logging_runs_executors_in_their_own_series_only() {
        let e = build("command-logging", &settings(false, 2)).unwrap();
        for r in &e.runs {
            let executors = r.series.ends_with("command-executors");
            assert_eq!(r.driver.executors, executors, "{}", r.label);
            if executors {
                assert_eq!(
                    r.driver.scheme,
                    waypoint::SchemeKind::Command,
                    "{}",
                    r.label
                );
            }
        }
        assert_eq!(
            e.runs.iter().filter(|r| r.driver.executors).count(),
            4,
            "voter and tpcc on 1 and 2 workers"
        );
    }

    #[test]
    fn unknown_and_not_yet_experiments_are_refused_by_name() {
        let e = build("nosuch", &settings(true, 2)).unwrap_err().to_string();
        assert!(
            e.contains("unknown experiment \"nosuch\"; available: logging-cost"),
            "{e}"
        );
        let e = build("decoupled", &settings(true, 2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not available yet"), "{e}");
    }
}
