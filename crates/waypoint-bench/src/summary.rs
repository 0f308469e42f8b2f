//! The end-of-run summary: figures over the measured window (after the
//! warm-up), the table printed for people, and the files `summary.json`
//! and `series.csv`.

use crate::driver::{pin_name, DriverConfig};
use crate::error::{BenchError, BenchResult};
use crate::metrics::{csv_header, csv_row, Sample, Snapshot};
use crate::report::Latency;
use crate::workload::Loaded;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use waypoint::RecoveryReport;

/// Per transaction type, over the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct TypeSummary {
    pub name: String,
    pub committed: u64,
    pub txn_per_sec: f64,
    pub aborts: u64,
}

/// `summary.json`. Counts and bytes cover the measured window only.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The binary that ran: version and commit ([`crate::BUILD`]).
    pub build: String,
    pub workload: String,
    /// The driver's and the workload's configuration.
    pub config: serde_json::Value,
    /// True if this run created and loaded the data (false: reused).
    pub loaded_now: bool,
    pub records_loaded: u64,
    pub load_seconds: f64,
    /// Length of the measured window in seconds.
    pub seconds: f64,
    pub committed: u64,
    pub txn_per_sec: f64,
    pub aborts: u64,
    pub types: Vec<TypeSummary>,
    /// Microseconds from `begin` until the commit was durable: `overall`
    /// and one entry per transaction type.
    pub latency_us: BTreeMap<String, Latency>,
    pub wal_bytes: u64,
    pub wal_bytes_per_txn: f64,
    /// Largest log size on disk seen after the warm-up.
    pub wal_disk_max_bytes: u64,
    /// Log file syncs per second (all partitions): on a machine with few
    /// cores each one costs the workers CPU (docs/decisions/measurements.md, "2026-11-22:
    /// fewer writer wake-ups, GSN_flushed without locks").
    pub wal_syncs_per_sec: f64,
    /// Log segments started after the warm-up from a recycled segment file
    /// (no zeros written), and from a zero-filled spare.
    pub wal_segments_recycled: u64,
    pub wal_segments_zero_filled: u64,
    /// Share of commits that waited for other log partitions (RFA).
    pub remote_flush_fraction: f64,
    /// Which trees the workers contended for during the measured window:
    /// optimistic accesses tried again and reads that waited for a
    /// writer, per 1000 committed transactions, most first (trees with
    /// none left out; `Database::stats().contention`).
    pub contention: Vec<TreeContentionSummary>,
    /// Bytes of pages written by checkpoint increments (or full
    /// checkpoints).
    pub checkpoint_bytes: u64,
    /// Bytes written by the page provider (eviction writeback).
    pub evict_bytes: u64,
    /// Bytes written by explicit flushes (clean close excluded).
    pub flush_bytes: u64,
    /// Bytes of pages read into the buffer pool.
    pub read_bytes: u64,
    /// Time transactions waited at begin for the checkpointer, summed over
    /// workers, in milliseconds.
    pub backpressure_ms: u64,
    /// A central log's latch (seed 000 §4): acquisitions during the
    /// measured window, and the time sessions waited for it per committed
    /// transaction, in microseconds (zero for other schemes).
    pub log_latch_acquisitions: u64,
    pub log_latch_wait_us_per_txn: f64,
    /// The consolidation array (`aether`): inserts per group (per latch
    /// acquisition) during the measured window; zero for other schemes.
    pub log_group_size: f64,
    /// CPU time the hypervisor stole from the machine during the measured
    /// window, all CPUs, in milliseconds.
    pub steal_ms: u64,
    /// CPU time the process used during the measured window (workers and
    /// the engine's threads), in seconds, and per committed transaction in
    /// microseconds. With every CPU busy it mirrors throughput; when
    /// something else takes CPU (a build, a neighbour), it still compares.
    pub cpu_seconds: f64,
    pub cpu_us_per_txn: f64,
    /// How even the per-second throughput was after the warm-up.
    pub steadiness: Steadiness,
    /// Largest resident set sampled during the run (warm-up included).
    pub peak_rss_bytes: u64,
    /// The process's high-water mark (`VmHWM`), load included.
    pub process_peak_rss_bytes: u64,
    /// What the workload's invariant check found, if it ran.
    pub verify: Option<serde_json::Value>,
    pub close_seconds: f64,
    /// Files in the database directory after the clean close.
    pub data_dir_bytes: u64,
    /// What recovery did when the run opened an existing database that
    /// needed it (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoverySummary>,
    /// The `silor` scheme's checkpoints, pepoch and loggers (absent under
    /// another scheme).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silor: Option<SilorSummary>,
}

/// One tree's contention over the measured window ([`Summary::contention`]).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TreeContentionSummary {
    pub tree: String,
    pub retries_per_1000_txns: f64,
    pub waits_per_1000_txns: f64,
}

impl TreeContentionSummary {
    /// The trees' counts between two snapshots, per 1000 of `committed`.
    fn between(b: &Snapshot, e: &Snapshot, committed: u64) -> Vec<Self> {
        let per_1000 = |n: u64| n as f64 * 1000.0 / committed.max(1) as f64;
        let mut out: Vec<Self> = e
            .contention
            .iter()
            .filter_map(|(tree, end)| {
                let begin = b.contention.get(tree).copied().unwrap_or_default();
                let retries = end.retries.saturating_sub(begin.retries);
                let waits = end.waits.saturating_sub(begin.waits);
                (retries + waits > 0).then(|| TreeContentionSummary {
                    tree: tree.clone(),
                    retries_per_1000_txns: per_1000(retries),
                    waits_per_1000_txns: per_1000(waits),
                })
            })
            .collect();
        out.sort_by(|a, b| {
            let total = |t: &Self| t.retries_per_1000_txns + t.waits_per_1000_txns;
            total(b)
                .total_cmp(&total(a))
                .then_with(|| a.tree.cmp(&b.tree))
        });
        out
    }
}

/// What the `silor` scheme did: counts and bytes over the measured window,
/// the last checkpoint's figures and the pepoch lag at its end.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SilorSummary {
    pub loggers: usize,
    /// The trigger, as `--checkpoint` takes it.
    pub checkpoint: String,
    pub checkpointers: usize,
    pub checkpoints_started: u64,
    pub checkpoints_installed: u64,
    pub checkpoints_failed: u64,
    /// Given up before the install: a commit rolled back after its
    /// install began during the walk.
    pub checkpoints_abandoned: u64,
    /// Bytes of the checkpoint files installed in the window.
    pub checkpoint_bytes: u64,
    /// The last installed checkpoint (in the window or before): bytes,
    /// rows, and milliseconds from its start to its install.
    pub last_checkpoint_bytes: u64,
    pub last_checkpoint_rows: u64,
    pub last_checkpoint_ms: f64,
    /// Log bytes deleted after installs.
    pub log_bytes_deleted: u64,
    /// Epochs between the global epoch and pepoch at the end (each
    /// `waypoint::EPOCH_INTERVAL`): how far acknowledgement lagged.
    pub pepoch_lag: u64,
    pub pepoch_writes: u64,
    /// Per logger: bytes appended and syncs.
    pub logger_bytes: Vec<u64>,
    pub logger_syncs: Vec<u64>,
}

impl SilorSummary {
    /// The window from `b` to `e` under `options`.
    pub fn of(
        options: &waypoint::SilorOptions,
        b: &waypoint::SilorStats,
        e: &waypoint::SilorStats,
    ) -> Self {
        let per_logger = |f: fn(&waypoint::LoggerStats) -> u64| -> Vec<u64> {
            e.loggers
                .iter()
                .enumerate()
                .map(|(i, l)| f(l) - b.loggers.get(i).map_or(0, f))
                .collect()
        };
        SilorSummary {
            loggers: options.loggers,
            checkpoint: options.checkpoint.name(),
            checkpointers: options.checkpointers,
            checkpoints_started: e.checkpoints_started - b.checkpoints_started,
            checkpoints_installed: e.checkpoints_installed - b.checkpoints_installed,
            checkpoints_failed: e.checkpoints_failed - b.checkpoints_failed,
            checkpoints_abandoned: e.checkpoints_abandoned - b.checkpoints_abandoned,
            checkpoint_bytes: e.checkpoint_bytes - b.checkpoint_bytes,
            last_checkpoint_bytes: e.last_checkpoint_bytes,
            last_checkpoint_rows: e.last_checkpoint_rows,
            last_checkpoint_ms: e.last_checkpoint_duration.as_secs_f64() * 1e3,
            log_bytes_deleted: e.log_bytes_deleted - b.log_bytes_deleted,
            pepoch_lag: e.pepoch_lag,
            pepoch_writes: e.pepoch_writes - b.pepoch_writes,
            logger_bytes: per_logger(|l| l.appended_bytes),
            logger_syncs: per_logger(|l| l.syncs),
        }
    }

    /// Two lines for people.
    pub fn lines(&self) -> String {
        let loggers: Vec<String> = self
            .logger_bytes
            .iter()
            .zip(&self.logger_syncs)
            .map(|(b, s)| format!("{} / {s} syncs", mib(*b)))
            .collect();
        format!(
            "silor: {} loggers, checkpoint {} by {} threads; checkpoints {} started, {} installed, {} failed, {} abandoned, {} written; last {} ({} rows) in {:.1} ms; log deleted {}\n\
             silor: pepoch lag {} epochs at the end, {} pepoch writes; loggers {}\n",
            self.loggers,
            self.checkpoint,
            self.checkpointers,
            self.checkpoints_started,
            self.checkpoints_installed,
            self.checkpoints_failed,
            self.checkpoints_abandoned,
            mib(self.checkpoint_bytes),
            mib(self.last_checkpoint_bytes),
            self.last_checkpoint_rows,
            self.last_checkpoint_ms,
            mib(self.log_bytes_deleted),
            self.pepoch_lag,
            self.pepoch_writes,
            loggers.join(", ")
        )
    }
}

/// The per-second throughput after the warm-up against its median (issue
/// 4's target: no second below 90% of the median). Partial seconds (the
/// last interval) are left out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Steadiness {
    pub median_txn_per_sec: f64,
    pub lowest_txn_per_sec: f64,
    /// Lowest second / median.
    pub lowest_ratio: f64,
    pub seconds: usize,
    pub seconds_below_90pct: usize,
}

impl Steadiness {
    pub fn of(series: &[Sample]) -> Self {
        let mut rates: Vec<f64> = series
            .iter()
            .filter(|s| !s.warmup && s.interval_secs >= 0.9)
            .map(Sample::txn_per_sec)
            .collect();
        if rates.is_empty() {
            return Steadiness::default();
        }
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        let lowest = rates[0];
        Steadiness {
            median_txn_per_sec: median,
            lowest_txn_per_sec: lowest,
            lowest_ratio: if median > 0.0 { lowest / median } else { 0.0 },
            seconds: rates.len(),
            seconds_below_90pct: rates.iter().filter(|r| **r < 0.9 * median).count(),
        }
    }
}

pub(crate) struct Inputs<'a> {
    pub workload: &'a str,
    pub driver: &'a DriverConfig,
    pub workload_config: serde_json::Value,
    pub types: &'a [&'static str],
    pub loaded: Loaded,
    pub load_seconds: f64,
    pub measured_secs: f64,
    pub base: &'a Snapshot,
    pub end: &'a Snapshot,
    pub series: &'a [Sample],
    pub hists: &'a [Histogram<u64>],
    pub verify: Option<serde_json::Value>,
    pub close_seconds: f64,
    pub data_dir_bytes: u64,
    /// Whether the worker threads were pinned to cores.
    pub pinned: bool,
    pub recovery: Option<RecoverySummary>,
}

/// The engine's [`RecoveryReport`] for the summary: counts, per-phase
/// milliseconds, and the log read per second.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RecoverySummary {
    pub partitions: usize,
    pub segments: usize,
    /// Log records above the log floor (the ones recovery used).
    pub records: u64,
    /// Bytes of log read.
    pub bytes: u64,
    pub torn_tails: usize,
    pub winners: usize,
    pub losers: usize,
    pub pages_redone: usize,
    pub records_redone: u64,
    pub records_undone: u64,
    pub gaps: usize,
    pub repaired_torn_pages: usize,
    /// The memory-resident schemes' checkpoint or snapshot load, and its
    /// bytes (zero for the page-based schemes).
    pub load_ms: f64,
    pub load_bytes: u64,
    pub analysis_ms: f64,
    pub redo_ms: f64,
    pub undo_ms: f64,
    /// Load + analysis + redo + undo.
    pub total_ms: f64,
    /// Log (and checkpoint or snapshot) bytes recovered per second of
    /// recovery, in MB/s (10^6 bytes).
    pub mb_per_sec: f64,
    /// The whole `Database::open`, recovery included.
    pub open_ms: f64,
}

impl RecoverySummary {
    /// Whether opening had anything to recover: log records above the
    /// floor, or torn pages repaired from the double-write file.
    pub fn needed(r: &RecoveryReport) -> bool {
        r.records > 0 || r.repaired_torn_pages > 0 || r.torn_tails > 0
    }

    pub fn of(r: &RecoveryReport, open: Duration) -> Self {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let total = r.total().as_secs_f64();
        RecoverySummary {
            partitions: r.partitions,
            segments: r.segments,
            records: r.records,
            bytes: r.log_bytes,
            torn_tails: r.torn_tails,
            winners: r.winners,
            losers: r.losers,
            pages_redone: r.pages_redone,
            records_redone: r.records_redone,
            records_undone: r.records_undone,
            gaps: r.gaps,
            repaired_torn_pages: r.repaired_torn_pages,
            load_ms: ms(r.image_load),
            load_bytes: r.image_bytes,
            analysis_ms: ms(r.analysis),
            redo_ms: ms(r.redo),
            undo_ms: ms(r.undo),
            total_ms: ms(r.total()),
            mb_per_sec: if total > 0.0 {
                (r.log_bytes + r.image_bytes) as f64 / 1e6 / total
            } else {
                0.0
            },
            open_ms: ms(open),
        }
    }

    /// Two lines for people.
    pub fn lines(&self) -> String {
        // The checkpoint or snapshot load leads where there was one.
        let load = if self.load_bytes > 0 {
            format!(
                "{:.1} ms loading {} of checkpoint or snapshot, ",
                self.load_ms,
                mib(self.load_bytes)
            )
        } else {
            String::new()
        };
        format!(
            "recovery: {} records, {} of log in {} partitions ({} segments, {} torn tails); {} winners, {} losers, {} records redone on {} pages, {} undone, {} gaps, {} torn pages repaired\n\
             recovery: {load}analysis {:.1} ms, redo {:.1} ms, undo {:.1} ms = {:.1} ms ({:.0} MB/s); open {:.1} ms\n",
            self.records,
            mib(self.bytes),
            self.partitions,
            self.segments,
            self.torn_tails,
            self.winners,
            self.losers,
            self.records_redone,
            self.pages_redone,
            self.records_undone,
            self.gaps,
            self.repaired_torn_pages,
            self.analysis_ms,
            self.redo_ms,
            self.undo_ms,
            self.total_ms,
            self.mb_per_sec,
            self.open_ms
        )
    }
}

impl Summary {
    pub(crate) fn build(i: Inputs<'_>) -> Summary {
        let secs = i.measured_secs.max(1e-9);
        let (b, e) = (i.base, i.end);
        let committed = e.total_committed() - b.total_committed();
        let wal_bytes = e.wal_bytes - b.wal_bytes;
        let cpu_ms = e.cpu_ms.saturating_sub(b.cpu_ms);
        let wal_commits = e.wal_commits - b.wal_commits;
        let mut latency_us = BTreeMap::new();
        for (name, h) in i.types.iter().zip(i.hists) {
            latency_us.insert(name.to_string(), Latency::of(h));
        }
        latency_us.insert(
            "overall".to_string(),
            Latency::of(&overall_histogram(i.hists)),
        );
        let mut config = serde_json::to_value(i.driver).expect("config serializes");
        config["scheme"] = i.driver.scheme.name().into();
        config["commit"] = i.driver.commit.name().into();
        config["checkpoint"] = i.driver.checkpoint.name().into();
        if i.driver.scheme == waypoint::SchemeKind::Silor {
            // The per-worker log's options do not apply; silor's do.
            let o = &i.driver.silor;
            config["checkpoint"] = o.checkpoint.name().into();
            config["loggers"] = o.loggers.into();
            config["checkpointers"] = o.checkpointers.into();
        }
        config["pin"] = pin_name(i.driver.pin).into();
        config["pinned"] = i.pinned.into();
        config["workload"] = i.workload_config;
        let (loaded_now, records_loaded) = match i.loaded {
            Loaded::Fresh { records } => (true, records),
            Loaded::Existing { records } => (false, records),
        };
        Summary {
            build: crate::BUILD.to_string(),
            workload: i.workload.to_string(),
            config,
            loaded_now,
            records_loaded,
            load_seconds: i.load_seconds,
            seconds: i.measured_secs,
            committed,
            txn_per_sec: committed as f64 / secs,
            aborts: e.total_aborts() - b.total_aborts(),
            types: i
                .types
                .iter()
                .enumerate()
                .map(|(t, name)| {
                    let n = e.committed[t] - b.committed[t];
                    TypeSummary {
                        name: name.to_string(),
                        committed: n,
                        txn_per_sec: n as f64 / secs,
                        aborts: e.aborts[t] - b.aborts[t],
                    }
                })
                .collect(),
            latency_us,
            wal_bytes,
            wal_bytes_per_txn: wal_bytes as f64 / committed.max(1) as f64,
            wal_disk_max_bytes: i
                .series
                .iter()
                .filter(|s| !s.warmup)
                .map(|s| s.wal_disk_bytes)
                .max()
                .unwrap_or(0),
            wal_syncs_per_sec: (e.wal_syncs - b.wal_syncs) as f64 / secs,
            wal_segments_recycled: e.wal_segments_recycled - b.wal_segments_recycled,
            wal_segments_zero_filled: e.wal_segments_zero_filled - b.wal_segments_zero_filled,
            remote_flush_fraction: if wal_commits == 0 {
                0.0
            } else {
                (e.remote_flush_commits - b.remote_flush_commits) as f64 / wal_commits as f64
            },
            contention: TreeContentionSummary::between(b, e, committed),
            checkpoint_bytes: e.checkpoint_bytes - b.checkpoint_bytes,
            evict_bytes: e.evict_bytes - b.evict_bytes,
            backpressure_ms: e.backpressure_ms - b.backpressure_ms,
            log_latch_acquisitions: e.log_latch_acquisitions - b.log_latch_acquisitions,
            log_latch_wait_us_per_txn: (e.log_latch_wait_us - b.log_latch_wait_us) as f64
                / committed.max(1) as f64,
            log_group_size: match e.log_groups - b.log_groups {
                0 => 0.0,
                groups => (e.log_group_inserts - b.log_group_inserts) as f64 / groups as f64,
            },
            steal_ms: e.steal_ms.saturating_sub(b.steal_ms),
            cpu_seconds: cpu_ms as f64 / 1e3,
            cpu_us_per_txn: cpu_ms as f64 * 1e3 / committed.max(1) as f64,
            steadiness: Steadiness::of(i.series),
            flush_bytes: e.flush_bytes - b.flush_bytes,
            read_bytes: e.read_bytes - b.read_bytes,
            peak_rss_bytes: i.series.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
            process_peak_rss_bytes: crate::metrics::peak_rss_bytes(),
            verify: i.verify,
            close_seconds: i.close_seconds,
            data_dir_bytes: i.data_dir_bytes,
            recovery: i.recovery,
            silor: match (&b.silor, &e.silor) {
                (Some(b), Some(e)) => Some(SilorSummary::of(&i.driver.silor, b, e)),
                _ => None,
            },
        }
    }

    /// The table a person reads at the end of a run.
    pub fn table(&self) -> String {
        // Wide enough for the longest type name (`bad_contestant`).
        let w = self
            .types
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(0)
            .max(10);
        let mut out = format!(
            "{:<w$} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            "type", "committed", "txn/s", "aborts", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
        );
        let rows = self
            .types
            .iter()
            .map(|t| (t.name.as_str(), t.committed, t.txn_per_sec, t.aborts))
            .chain([("total", self.committed, self.txn_per_sec, self.aborts)]);
        for (name, committed, rate, aborts) in rows {
            let key = if name == "total" { "overall" } else { name };
            let l = self.latency_us[key];
            out += &format!(
                "{name:<w$} {committed:>11} {rate:>11.0} {aborts:>9} {:>9} {:>9} {:>9} {:>9}\n",
                l.p50, l.p99, l.p999, l.max
            );
        }
        out += &format!(
            "measured {:.1} s after warm-up; log {} ({:.0} bytes/txn, {:.0} syncs/s), on disk at most {}, new segments {} recycled / {} zero-filled; remote-flush fraction {:.3}\n",
            self.seconds,
            mib(self.wal_bytes),
            self.wal_bytes_per_txn,
            self.wal_syncs_per_sec,
            mib(self.wal_disk_max_bytes),
            self.wal_segments_recycled,
            self.wal_segments_zero_filled,
            self.remote_flush_fraction
        );
        if !self.contention.is_empty() {
            let trees: Vec<String> = self
                .contention
                .iter()
                .take(6)
                .map(|t| {
                    format!(
                        "{} {:.2} / {:.2}",
                        t.tree, t.retries_per_1000_txns, t.waits_per_1000_txns
                    )
                })
                .collect();
            out += &format!(
                "contention per 1000 txns (accesses retried / reads that waited for a latched page): {}\n",
                trees.join(", ")
            );
        }
        if self.log_latch_acquisitions > 0 {
            out += &format!(
                "log latch: {} acquisitions, {:.2} µs waited per transaction\n",
                self.log_latch_acquisitions, self.log_latch_wait_us_per_txn
            );
        }
        if self.log_group_size > 0.0 {
            out += &format!(
                "consolidation array: {:.2} inserts per group (per latch acquisition)\n",
                self.log_group_size
            );
        }
        out += &format!(
            "pages: {} written by eviction, {} by flushes, {} read; peak RSS {}; load {:.2} s ({}), clean close {:.2} s\n",
            mib(self.evict_bytes),
            mib(self.flush_bytes),
            mib(self.read_bytes),
            mib(self.peak_rss_bytes),
            self.load_seconds,
            if self.loaded_now { "loaded now" } else { "reused" },
            self.close_seconds
        );
        let st = &self.steadiness;
        out += &format!(
            "per second: median {:.0} txn/s, lowest {:.0} ({:.2}x), {} of {} seconds below 90% of the median; checkpoint writes {}, back-pressure {} ms, CPU steal {} ms; process CPU {:.1} s, {:.1} µs per transaction\n",
            st.median_txn_per_sec,
            st.lowest_txn_per_sec,
            st.lowest_ratio,
            st.seconds_below_90pct,
            st.seconds,
            mib(self.checkpoint_bytes),
            self.backpressure_ms,
            self.steal_ms,
            self.cpu_seconds,
            self.cpu_us_per_txn
        );
        if let Some(r) = &self.recovery {
            out += &r.lines();
        }
        if let Some(s) = &self.silor {
            out += &s.lines();
        }
        if let Some(v) = &self.verify {
            out += &format!("verified: {v}\n");
        }
        out += &format!("binary: waypoint {}\n", self.build);
        out
    }
}

/// All transaction types' latencies in one histogram.
pub(crate) fn overall_histogram(hists: &[Histogram<u64>]) -> Histogram<u64> {
    let mut overall = crate::report::new_histogram();
    for h in hists {
        overall.add(h).expect("same histogram bounds");
    }
    overall
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// Write `out/summary.json` and `out/series.csv` (creating `out`).
pub fn write_outputs(
    out: &Path,
    summary: &Summary,
    types: &[&str],
    series: &[Sample],
) -> BenchResult<()> {
    std::fs::create_dir_all(out).map_err(|e| BenchError::io(out, e))?;
    let path = out.join("summary.json");
    let json = serde_json::to_string_pretty(summary).expect("summary serializes");
    std::fs::write(&path, json + "\n").map_err(|e| BenchError::io(&path, e))?;
    let mut csv = csv_header(types);
    csv.push('\n');
    for s in series {
        csv += &csv_row(s);
        csv.push('\n');
    }
    let path = out.join("series.csv");
    std::fs::write(&path, csv).map_err(|e| BenchError::io(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contention_covers_the_window_per_1000_txns_most_first() {
        let counts = |pairs: &[(&str, u64, u64)]| Snapshot {
            contention: pairs
                .iter()
                .map(|&(tree, retries, waits)| {
                    (
                        tree.to_string(),
                        waypoint::TreeContention { retries, waits },
                    )
                })
                .collect(),
            ..Snapshot::default()
        };
        // Before the window: warm-up counts; "steady" gains nothing in it.
        let b = counts(&[("district", 10, 10), ("steady", 5, 5)]);
        let e = counts(&[
            ("district", 30, 50),
            ("steady", 5, 5),
            ("warehouse", 40, 0),
            ("stock", 1, 0),
        ]);
        let rates: Vec<(String, f64, f64)> = TreeContentionSummary::between(&b, &e, 2000)
            .into_iter()
            .map(|t| (t.tree, t.retries_per_1000_txns, t.waits_per_1000_txns))
            .collect();
        assert_eq!(
            rates,
            [
                ("district".to_string(), 10.0, 20.0),
                ("warehouse".to_string(), 20.0, 0.0),
                ("stock".to_string(), 0.5, 0.0),
            ]
        );
    }

    fn second(second: u64, warmup: bool, secs: f64, txn: u64) -> Sample {
        let mut s = Sample::between(
            second,
            warmup,
            secs,
            &Snapshot::default(),
            &Snapshot::default(),
        );
        s.txn = txn;
        s
    }

    #[test]
    fn steadiness_counts_full_measured_seconds_below_90pct_of_the_median() {
        let series = [
            second(1, true, 1.0, 10), // warm-up: ignored
            second(2, false, 1.0, 100),
            second(3, false, 1.0, 95),
            second(4, false, 1.0, 89),
            second(5, false, 1.0, 100),
            second(6, false, 1.0, 120),
            second(7, false, 0.3, 5), // partial last interval: ignored
        ];
        let st = Steadiness::of(&series);
        assert_eq!(st.seconds, 5);
        assert_eq!(st.median_txn_per_sec, 100.0);
        assert_eq!(st.lowest_txn_per_sec, 89.0);
        assert_eq!(st.seconds_below_90pct, 1);
        assert!((st.lowest_ratio - 0.89).abs() < 1e-9);
        assert_eq!(Steadiness::of(&[]).seconds, 0);
    }
}
