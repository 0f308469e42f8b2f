//! `waypoint compare`: the papers' experiments as named sets of driver
//! runs, executed in interleaved rounds and written up as `report.md`,
//! `results.json` and PNG figures drawn like the paper's.
//!
//! - [`experiments`]: the registry, what each experiment runs and which
//!   result of which paper it reproduces (seed 000 §4.1–§4.3, §4.6), and
//!   the ones that wait for schemes not yet built ([`NOT_YET`]);
//!   [`peer_runs`]: the `peers` experiment (waypoint against the engines
//!   of [`crate::peers`]); [`command_logging`]: seed 001's trade (command
//!   logging against after-image logging and none, run time and recovery);
//!   [`silor_runs`]: seed 002's (SiloR against its log alone and no
//!   persistence over time; recovery, checkpoint load and replay apart).
//! - [`runner`]: rounds A B C, then C B A, ..., each run on a fresh copy
//!   of one load; Ctrl-C ends the current run early and the report says
//!   it is partial.
//! - [`results`] (`results.json`), [`markdown`] (`report.md`),
//!   [`figures`] (the PNGs), [`machine`] (CPU, memory, date), [`perf`]
//!   (instructions per transaction where `perf stat` can count them).
//!
//! Invariant: a number in a report is a median over completed rounds of
//! runs that ran to their end; a run cut short by Ctrl-C or an error is
//! left out and the report says so.

pub mod command_logging;
pub mod experiments;
pub mod figures;
pub mod machine;
pub mod markdown;
pub mod multi_partition;
pub mod peer_runs;
pub mod perf;
pub mod results;
pub mod runner;
pub mod silor_runs;

use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::peers::drive::PeerWorkload;
use crate::peers::{Durability, Peer};
use crate::tpcb::{Tpcb, TpcbConfig};
use crate::tpcc::{Tpcc, TpccConfig};
use crate::voter::{Voter, VoterConfig};
use crate::workload::Workload;
use crate::ycsb::{KeyDistribution, Ycsb, YcsbConfig};
use serde::Serialize;

pub use experiments::{build, NOT_YET};
pub use results::Results;
pub use runner::{run, Crasher, Event, Hooks};

/// What the command line chose for every experiment.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Seconds-long runs on tiny data, one round: for CI.
    pub quick: bool,
    pub rounds: usize,
    /// `--workers`: the worker counts of `scaling`, or the one worker
    /// count of the other experiments.
    pub workers: Option<Vec<usize>>,
    /// Cores this process may run on.
    pub cores: usize,
    /// The machine's memory in bytes (0 if unknown).
    pub memory_bytes: u64,
    /// `--peers`: the peers the `peers` experiment must run (each one
    /// missing is an error); None: every one this binary has.
    pub peers: Option<Vec<String>>,
}

/// The workload of a run.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(tag = "workload", rename_all = "lowercase")]
pub enum WorkloadSpec {
    Tpcc(TpccConfig),
    /// A YCSB core workload (`preset` a–f) with its key distribution.
    Ycsb {
        preset: char,
        distribution: KeyDistribution,
        records: u64,
    },
    /// TPC-B with `branches` branches sharing `accounts` accounts.
    Tpcb {
        branches: u64,
        accounts: u64,
    },
    /// TPC-C's transactions as stored procedures under every scheme
    /// (`Tpcc::with_procedures`): seed 001's like-for-like comparison.
    #[serde(rename = "tpcc-procedures")]
    TpccCalls(TpccConfig),
    /// [`WorkloadSpec::TpccCalls`] with `pct`% of the New-Orders and
    /// Payments remote (`Tpcc::multi_partition`): seed 001's Fig. 9.
    #[serde(rename = "tpcc-multi-partition")]
    TpccMultiPartition {
        config: TpccConfig,
        pct: u8,
    },
    /// Voter (its one stored procedure) with `phones` phone numbers and
    /// the paper's 6 contestants and 2 votes per phone.
    Voter {
        phones: u64,
    },
    /// SiloR's YCSB variant (seed 002 §6.2): 70% reads and 30% updates
    /// (YCSB A has 50/50), 100-byte values, keys drawn uniformly.
    #[serde(rename = "ycsb-silor")]
    SilorYcsb {
        records: u64,
    },
}

impl WorkloadSpec {
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadSpec::Tpcc(_)
            | WorkloadSpec::TpccCalls(_)
            | WorkloadSpec::TpccMultiPartition { .. } => "tpcc",
            WorkloadSpec::Ycsb { .. } | WorkloadSpec::SilorYcsb { .. } => "ycsb",
            WorkloadSpec::Tpcb { .. } => "tpcb",
            WorkloadSpec::Voter { .. } => "voter",
        }
    }

    fn ycsb_config(&self) -> BenchResult<Option<YcsbConfig>> {
        if let WorkloadSpec::SilorYcsb { records } = *self {
            use crate::ycsb::Op;
            return Ok(Some(YcsbConfig {
                mix: vec![(Op::Read, 0.7), (Op::Update, 0.3)],
                distribution: KeyDistribution::Uniform,
                value_size: 100,
                ..YcsbConfig::preset('a', records)?
            }));
        }
        let &WorkloadSpec::Ycsb {
            preset,
            distribution,
            records,
        } = self
        else {
            return Ok(None);
        };
        Ok(Some(YcsbConfig {
            distribution,
            ..YcsbConfig::preset(preset, records)?
        }))
    }

    /// The workload whose load this one runs on: the runs of one load
    /// share a template (the multi-partition share changes only the run).
    pub fn load(&self) -> WorkloadSpec {
        match *self {
            WorkloadSpec::TpccMultiPartition { config, .. } => WorkloadSpec::TpccCalls(config),
            other => other,
        }
    }

    /// A fresh workload object for the driver (nothing loaded).
    pub fn build(&self, seed: u64) -> BenchResult<Box<dyn Workload>> {
        Ok(match *self {
            WorkloadSpec::Tpcc(c) => Box::new(Tpcc::new(c, seed)),
            WorkloadSpec::Ycsb { .. } | WorkloadSpec::SilorYcsb { .. } => {
                Box::new(Ycsb::new(self.ycsb_config()?.expect("ycsb")))
            }
            WorkloadSpec::Tpcb { branches, accounts } => {
                Box::new(Tpcb::new(TpcbConfig::with_accounts(branches, accounts)))
            }
            WorkloadSpec::TpccCalls(c) => Box::new(Tpcc::new(c, seed).with_procedures(true)),
            WorkloadSpec::TpccMultiPartition { config, pct } => Box::new(
                Tpcc::new(config, seed)
                    .with_procedures(true)
                    .multi_partition(pct),
            ),
            WorkloadSpec::Voter { phones } => Box::new(Voter::new(VoterConfig {
                phones,
                ..VoterConfig::default()
            })),
        })
    }

    /// The same workload for the peers' client threads.
    pub fn peer_workload(&self) -> BenchResult<PeerWorkload> {
        Ok(match *self {
            WorkloadSpec::Tpcc(_)
            | WorkloadSpec::TpccCalls(_)
            | WorkloadSpec::TpccMultiPartition { .. }
            | WorkloadSpec::Voter { .. } => {
                return Err(BenchError::Config(format!(
                    "{} does not run on the peers (YCSB and TPC-B do)",
                    self.name()
                )))
            }
            WorkloadSpec::Ycsb { .. } | WorkloadSpec::SilorYcsb { .. } => {
                PeerWorkload::Ycsb(Ycsb::new(self.ycsb_config()?.expect("ycsb")))
            }
            WorkloadSpec::Tpcb { branches, accounts } => {
                PeerWorkload::Tpcb(Tpcb::new(TpcbConfig::with_accounts(branches, accounts)))
            }
        })
    }

    /// For people: "TPC-C, 4 warehouses (1/100 of the spec's items and
    /// customers)", "YCSB A zipfian, 10,000 records".
    pub fn describe(&self) -> String {
        match *self {
            WorkloadSpec::Tpcc(c) => {
                let scale = if c.scale_down > 1 {
                    format!(" (1/{} of the spec's items and customers)", c.scale_down)
                } else {
                    String::new()
                };
                format!("TPC-C, {} warehouses{scale}", c.warehouses)
            }
            WorkloadSpec::TpccCalls(c) => {
                format!("{} as stored procedures", WorkloadSpec::Tpcc(c).describe())
            }
            WorkloadSpec::TpccMultiPartition { config, pct } => format!(
                "{}, {pct}% of New-Orders and Payments remote",
                WorkloadSpec::TpccCalls(config).describe()
            ),
            WorkloadSpec::Voter { phones } => format!("Voter, {phones} phones"),
            WorkloadSpec::Ycsb {
                preset,
                distribution,
                records,
            } => format!(
                "YCSB {} {}, {records} records",
                preset.to_ascii_uppercase(),
                distribution.name()
            ),
            WorkloadSpec::Tpcb { branches, accounts } => {
                format!("TPC-B, {branches} branches, {accounts} accounts")
            }
            WorkloadSpec::SilorYcsb { records } => format!(
                "SiloR's YCSB (70% reads, 30% updates of 100-byte values, uniform keys), {records} records"
            ),
        }
    }
}

/// A run on an engine of [`crate::peers`] (waypoint among them) through
/// the [`crate::peers::KvEngine`] trait, with client threads that commit
/// one transaction at a time, instead of the driver.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PeerSpec {
    pub engine: Peer,
    pub durability: Durability,
}

/// One configuration of an experiment; it runs once per round.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Unique within the experiment: "per-worker rfa-group, 4 workers".
    pub label: String,
    /// The line (or bar) of the figures this run belongs to.
    pub series: String,
    /// Its place on the figures' x axis (workers, warehouses, ...).
    pub x: f64,
    pub workload: WorkloadSpec,
    /// Scheme, options, workers, duration; `dir`, `out` and `interrupt`
    /// are set by the runner.
    pub driver: DriverConfig,
    /// Run through a peer engine's client threads instead of the driver
    /// (`driver` then gives workers, seconds, seed and memory).
    pub peer: Option<PeerSpec>,
    /// Instead of measuring throughput: run the workload in a child
    /// process, kill it, and time the recovery.
    pub crash: Option<CrashSpec>,
    /// A buffer pool of this fraction of the loaded data file instead of
    /// `driver.buffer_bytes` (seed 000 Fig. 9 right: 40% of the data).
    pub buffer_of_data: Option<f64>,
}

/// When the child of a recovery run is killed.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CrashSpec {
    /// Once the log directory holds this many bytes ...
    pub until_log_bytes: u64,
    /// ... or, instead of the log's size, once the child acknowledged
    /// this many transactions (the same work for schemes whose logs
    /// differ in size: `command-logging`) ...
    pub until_acked: Option<u64>,
    /// ... or this many seconds passed, whichever comes first.
    pub max_secs: f64,
}

/// What each run's ratio is taken against.
#[derive(Debug, Clone, Serialize)]
pub enum Baseline {
    /// One run, by label.
    Run(String),
    /// The run of this series at the same x (the same worker count).
    SeriesAtSameX(String),
    /// Per series, (series, its baseline series): the baseline series'
    /// run at the same x; a series not listed has no baseline.
    SeriesMapAtSameX(Vec<(String, String)>),
    /// Per run, (label, its baseline run's label): for experiments whose
    /// runs differ in what their x counts; a run not listed has none.
    Labels(Vec<(String, String)>),
}

impl Baseline {
    /// For people.
    pub fn describe(&self) -> String {
        match self {
            Baseline::Run(label) => format!("`{label}`"),
            Baseline::SeriesAtSameX(series) => {
                format!("`{series}` at the same x (each row against that series' run with the same value)")
            }
            Baseline::SeriesMapAtSameX(map) => {
                let mut bases: Vec<&str> = map.iter().map(|(_, b)| b.as_str()).collect();
                bases.dedup();
                format!(
                    "per series, at the same x: {}",
                    bases
                        .iter()
                        .map(|b| format!("`{b}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            Baseline::Labels(map) => {
                let mut bases: Vec<&str> = map.iter().map(|(_, b)| b.as_str()).collect();
                bases.sort_unstable();
                bases.dedup();
                format!(
                    "per run: {}",
                    bases
                        .iter()
                        .map(|b| format!("`{b}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        }
    }

    /// The index of `run`'s baseline among `runs`.
    pub fn index_for(&self, runs: &[RunSpec], run: usize) -> Option<usize> {
        match self {
            Baseline::Run(label) => runs.iter().position(|r| &r.label == label),
            Baseline::SeriesAtSameX(series) => runs
                .iter()
                .position(|r| &r.series == series && r.x == runs[run].x),
            Baseline::SeriesMapAtSameX(map) => {
                let (_, base) = map.iter().find(|(s, _)| *s == runs[run].series)?;
                runs.iter()
                    .position(|r| &r.series == base && r.x == runs[run].x)
            }
            Baseline::Labels(map) => {
                let (_, base) = map.iter().find(|(l, _)| *l == runs[run].label)?;
                runs.iter().position(|r| &r.label == base)
            }
        }
    }
}

/// A number taken from every completed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    TxnPerSec,
    CpuUsPerTxn,
    InstructionsPerTxn,
    WalBytesPerTxn,
    RemoteFlushPct,
    /// Optimistic accesses retried and reads that waited for a page held exclusively,
    /// all trees, per 1000 committed transactions
    /// (`Summary::contention`).
    ContentionPer1000Txns,
    WalDiskMaxMib,
    CheckpointMibPerSec,
    LowestSecondRatio,
    LatencyP50Us,
    LatencyP99Us,
    AbortPct,
    RecoveredLogMib,
    /// The memory-resident schemes' checkpoint or snapshot, loaded.
    LoadedMib,
    LoadMs,
    AnalysisMs,
    RedoMs,
    UndoMs,
    RecoveryMs,
    RecoveryMbPerSec,
    RecoveryTxnPerSec,
    /// Acknowledged transactions per second of the run that was killed
    /// (from the child's first poll to the kill).
    RunTxnPerSec,
    /// `RecoveryTxnPerSec` / `RunTxnPerSec`: how fast recovery redoes
    /// the run's transactions against how fast the run made them.
    RecoveryVsRun,
    OpenMs,
}

impl Metric {
    /// The key in `results.json`.
    pub fn key(self) -> &'static str {
        match self {
            Metric::TxnPerSec => "txn_per_sec",
            Metric::CpuUsPerTxn => "cpu_us_per_txn",
            Metric::InstructionsPerTxn => "instructions_per_txn",
            Metric::WalBytesPerTxn => "wal_bytes_per_txn",
            Metric::RemoteFlushPct => "remote_flush_pct",
            Metric::ContentionPer1000Txns => "contention_per_1000_txns",
            Metric::WalDiskMaxMib => "wal_disk_max_mib",
            Metric::CheckpointMibPerSec => "checkpoint_mib_per_sec",
            Metric::LowestSecondRatio => "lowest_second_ratio",
            Metric::LatencyP50Us => "latency_p50_us",
            Metric::LatencyP99Us => "latency_p99_us",
            Metric::AbortPct => "abort_pct",
            Metric::RecoveredLogMib => "recovered_log_mib",
            Metric::LoadedMib => "loaded_mib",
            Metric::LoadMs => "load_ms",
            Metric::AnalysisMs => "analysis_ms",
            Metric::RedoMs => "redo_ms",
            Metric::UndoMs => "undo_ms",
            Metric::RecoveryMs => "recovery_ms",
            Metric::RecoveryMbPerSec => "recovery_mb_per_sec",
            Metric::RecoveryTxnPerSec => "recovery_txn_per_sec",
            Metric::RunTxnPerSec => "run_txn_per_sec",
            Metric::RecoveryVsRun => "recovery_vs_run",
            Metric::OpenMs => "open_ms",
        }
    }

    /// The table heading and axis label.
    pub fn title(self) -> &'static str {
        match self {
            Metric::TxnPerSec => "committed txn/s",
            Metric::CpuUsPerTxn => "CPU µs per transaction",
            Metric::InstructionsPerTxn => "instructions per transaction",
            Metric::WalBytesPerTxn => "log bytes per transaction",
            Metric::RemoteFlushPct => "remote flushes, % of commits",
            Metric::ContentionPer1000Txns => "B-tree retries + waits per 1000 txns",
            Metric::WalDiskMaxMib => "largest log on disk, MiB",
            Metric::CheckpointMibPerSec => "checkpoint writes, MiB/s",
            Metric::LowestSecondRatio => "lowest second / median second",
            Metric::LatencyP50Us => "commit latency p50, µs",
            Metric::LatencyP99Us => "commit latency p99, µs",
            Metric::AbortPct => "aborts, % of attempts",
            Metric::RecoveredLogMib => "log recovered, MiB",
            Metric::LoadedMib => "checkpoint or snapshot loaded, MiB",
            Metric::LoadMs => "checkpoint or snapshot load, ms",
            Metric::AnalysisMs => "analysis, ms",
            Metric::RedoMs => "redo, ms",
            Metric::UndoMs => "undo, ms",
            Metric::RecoveryMs => "recovery (load + analysis + redo + undo), ms",
            Metric::RecoveryMbPerSec => "log and checkpoint recovered per second, MB/s",
            Metric::RecoveryTxnPerSec => "acknowledged txns recovered per second of recovery",
            Metric::RunTxnPerSec => "acknowledged txn/s of the run that was killed",
            Metric::RecoveryVsRun => "recovery rate / the killed run's rate",
            Metric::OpenMs => "open (recovery included), ms",
        }
    }

    /// Digits after the point in tables.
    pub fn decimals(self) -> usize {
        match self {
            Metric::LowestSecondRatio | Metric::RecoveryVsRun => 2,
            Metric::RecoveryMbPerSec
            | Metric::RemoteFlushPct
            | Metric::ContentionPer1000Txns
            | Metric::AbortPct
            | Metric::CheckpointMibPerSec
            | Metric::WalDiskMaxMib
            | Metric::RecoveredLogMib
            | Metric::LoadedMib
            | Metric::LoadMs
            | Metric::CpuUsPerTxn
            | Metric::AnalysisMs
            | Metric::RedoMs
            | Metric::UndoMs
            | Metric::RecoveryMs
            | Metric::OpenMs => 1,
            _ => 0,
        }
    }

    /// "higher is better", "lower is better", or None for a quantity
    /// that describes a run rather than ranks it (log volume, say).
    pub fn better(self) -> Option<&'static str> {
        match self {
            Metric::TxnPerSec
            | Metric::LowestSecondRatio
            | Metric::RecoveryMbPerSec
            | Metric::RecoveryTxnPerSec
            | Metric::RunTxnPerSec
            | Metric::RecoveryVsRun => Some("higher is better"),
            Metric::RecoveredLogMib
            | Metric::LoadedMib
            | Metric::WalDiskMaxMib
            | Metric::CheckpointMibPerSec => None,
            _ => Some("lower is better"),
        }
    }
}

/// A figure of an experiment, drawn from its results ([`figures`]).
#[derive(Debug, Clone, Serialize)]
pub enum Figure {
    /// The medians of `metrics` against the runs' x: a line per series,
    /// or per metric when there are several (recovery phases).
    Lines {
        file: &'static str,
        title: String,
        x_label: &'static str,
        y_label: &'static str,
        metrics: Vec<Metric>,
        /// A base-2 logarithmic x axis (warehouses, WAL limits).
        log_x: bool,
    },
    /// A bar per run: the median of `metric`.
    Bars {
        file: &'static str,
        title: String,
        metric: Metric,
    },
    /// Per-second values of each series' first completed round against
    /// seconds since the workers started.
    OverTime {
        file: &'static str,
        title: String,
        field: TimeField,
        /// A dashed horizontal line: (label, value) in the field's unit.
        limit: Option<(String, f64)>,
        /// Only the series whose names start with this (one workload of
        /// an experiment that runs several); None: every series.
        only: Option<&'static str>,
    },
}

impl Figure {
    pub fn file(&self) -> &'static str {
        match self {
            Figure::Lines { file, .. }
            | Figure::Bars { file, .. }
            | Figure::OverTime { file, .. } => file,
        }
    }
}

/// A per-second value of a run ([`results::Second`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeField {
    TxnPerSec,
    WalDiskMib,
}

impl TimeField {
    pub fn title(self) -> &'static str {
        match self {
            TimeField::TxnPerSec => "committed txn/s",
            TimeField::WalDiskMib => "log on disk, MiB",
        }
    }
}

/// An experiment: what it runs, why, against which baseline, and how its
/// results are tabulated and drawn.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub name: &'static str,
    /// The paper result: "seed 000 Table 1 (§4.3): ...".
    pub reproduces: &'static str,
    /// What is run and why, a paragraph for the report.
    pub why: String,
    /// What the x of the runs counts ("workers", "warehouses", ...).
    pub x_name: &'static str,
    pub runs: Vec<RunSpec>,
    pub baseline: Baseline,
    /// A table per metric, in this order.
    pub metrics: Vec<Metric>,
    pub figures: Vec<Figure>,
    /// Remarks for the report (steps of the paper that have no switch
    /// here, and the like).
    pub notes: Vec<String>,
    /// Count instructions per transaction with `perf stat` where it can.
    pub instructions: bool,
    /// Keep the per-second values of every run (for [`Figure::OverTime`]).
    pub over_time: bool,
}

/// The files [`write`] wrote, and figures it could not draw.
pub struct Written {
    pub files: Vec<std::path::PathBuf>,
    pub warnings: Vec<String>,
}

/// Draw the figures, then write `results.json` and `report.md` into
/// `out`. A figure that cannot be drawn is a warning (and a note in the
/// report), not a lost report.
pub fn write(
    out: &std::path::Path,
    experiment: &Experiment,
    results: &mut Results,
) -> crate::BenchResult<Written> {
    let mut warnings = Vec::new();
    let mut files = Vec::new();
    match figures::draw(out, &experiment.figures, results) {
        Ok(paths) => {
            results.figures = experiment.figures.iter().map(|f| f.file().into()).collect();
            files.extend(paths);
        }
        Err(e) => {
            results
                .notes
                .push(format!("A figure could not be drawn: {e}."));
            warnings.push(format!("warning: {e}"));
        }
    }
    results.write(out)?;
    files.insert(0, out.join("results.json"));
    let report = out.join("report.md");
    std::fs::write(&report, markdown::render(results))
        .map_err(|e| crate::BenchError::io(&report, e))?;
    files.insert(0, report);
    Ok(Written { files, warnings })
}
