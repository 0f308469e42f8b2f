//! What the driver samples once per second: the engine's counters
//! (`Database::stats()`), the process's resident memory, and the per-second
//! row of `series.csv` built from two consecutive snapshots.
//!
//! Byte counts the engine reports in pages are multiplied by the page size.
//! `checkpoint_bytes` counts pages written by checkpoint increments, or
//! under `silor` and `command` the bytes of their installed checkpoint
//! and snapshot files.
//! `backpressure_ms` is the time transactions waited at begin for the
//! checkpointer (summed over workers); `steal_ms` is the CPU time the
//! hypervisor took from this virtual machine (`/proc/stat`, all CPUs): a
//! second with much steal is slow for reasons outside the engine.

use serde::Serialize;
use std::path::Path;
use waypoint::{Database, Stats};

/// Resident set size of this process in bytes (`VmRSS`), 0 if unknown.
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

/// Peak resident set size of this process in bytes (`VmHWM`), 0 if unknown.
pub fn peak_rss_bytes() -> u64 {
    status_kib("VmHWM:") * 1024
}

fn status_kib(field: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// CPU time stolen by the hypervisor so far, summed over all CPUs, in
/// milliseconds (0 where `/proc/stat` has no steal column).
pub fn steal_ms() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    // "cpu  user nice system idle iowait irq softirq steal ..." in USER_HZ
    // ticks, which Linux fixes at 100 per second for this file.
    stat.lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |ticks| ticks * 10)
}

/// CPU time this process has used so far, user and system, all threads, in
/// milliseconds (0 if unknown). `/proc/self/stat` counts in USER_HZ ticks,
/// which Linux fixes at 100 per second.
pub fn process_cpu_ms() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // The command name (field 2) may hold spaces; fields after it do not.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok());
    match (ticks(14), ticks(15)) {
        (Some(user), Some(system)) => (user + system) * 10,
        _ => 0,
    }
}

/// Total size of the regular files below `dir` (0 if it does not exist).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// Cumulative counters at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Committed (durable) transactions per type.
    pub committed: Vec<u64>,
    /// Aborted transactions per type.
    pub aborts: Vec<u64>,
    pub wal_bytes: u64,
    pub wal_disk_bytes: u64,
    /// Log file syncs (`fdatasync`), by writer threads and committers.
    pub wal_syncs: u64,
    /// Log segments started from a recycled file, and from zeros.
    pub wal_segments_recycled: u64,
    pub wal_segments_zero_filled: u64,
    pub wal_commits: u64,
    pub remote_flush_commits: u64,
    pub evict_bytes: u64,
    pub checkpoint_bytes: u64,
    pub flush_bytes: u64,
    pub read_bytes: u64,
    pub rss_bytes: u64,
    pub backpressure_ms: u64,
    pub steal_ms: u64,
    /// CPU time of the whole process (workers and engine threads).
    pub cpu_ms: u64,
    /// A central log's latch: times taken, and time sessions waited for
    /// it (zero for other schemes).
    pub log_latch_acquisitions: u64,
    pub log_latch_wait_us: u64,
    /// A consolidation array's groups and the inserts they held (`aether`;
    /// zero for other schemes).
    pub log_groups: u64,
    pub log_group_inserts: u64,
    /// The `silor` scheme's figures (`None` under another scheme).
    pub silor: Option<waypoint::SilorStats>,
    /// Optimistic retries and waits for writers, by tree.
    pub contention: std::collections::BTreeMap<String, waypoint::TreeContention>,
}

impl Snapshot {
    pub fn take(db: &Database, committed: Vec<u64>, aborts: Vec<u64>) -> Self {
        let stats: Stats = db.stats();
        let page = stats.page_size as u64;
        Snapshot {
            committed,
            aborts,
            wal_bytes: stats.persistence.log.appended_bytes,
            wal_disk_bytes: stats.persistence.log.disk_bytes,
            wal_syncs: stats.persistence.log.syncs,
            wal_segments_recycled: stats.persistence.log.segments_recycled,
            wal_segments_zero_filled: stats.persistence.log.segments_zero_filled,
            wal_commits: stats.persistence.log.commits,
            remote_flush_commits: stats.persistence.log.remote_flush_commits,
            evict_bytes: stats.pool.pages_written_by_provider * page,
            // Pages written by checkpoints, or the memory-resident schemes'
            // checkpoint (`silor`) and snapshot (`command`) files.
            checkpoint_bytes: stats.pool.pages_written_by_checkpoint * page
                + stats.persistence.silor.checkpoint_bytes
                + stats.persistence.command.snapshot_bytes,
            flush_bytes: stats.pool.pages_written_by_flush * page,
            read_bytes: stats.pool.pages_read * page,
            rss_bytes: rss_bytes(),
            backpressure_ms: stats.persistence.backpressure.as_millis() as u64,
            steal_ms: steal_ms(),
            cpu_ms: process_cpu_ms(),
            log_latch_acquisitions: stats.persistence.log_latch.acquisitions,
            log_latch_wait_us: stats.persistence.log_latch.waited.as_micros() as u64,
            log_groups: stats.persistence.consolidation.groups,
            log_group_inserts: stats.persistence.consolidation.inserts,
            silor: (stats.persistence.scheme == waypoint::SchemeKind::Silor)
                .then(|| stats.persistence.silor.clone()),
            contention: stats.contention,
        }
    }

    /// The counters of an engine that is not waypoint (the peers of
    /// `waypoint compare peers`): the process's own figures, no engine
    /// statistics.
    pub fn of_process(committed: Vec<u64>, aborts: Vec<u64>) -> Self {
        Snapshot {
            committed,
            aborts,
            rss_bytes: rss_bytes(),
            steal_ms: steal_ms(),
            cpu_ms: process_cpu_ms(),
            ..Snapshot::default()
        }
    }

    pub fn total_committed(&self) -> u64 {
        self.committed.iter().sum()
    }

    pub fn total_aborts(&self) -> u64 {
        self.aborts.iter().sum()
    }
}

/// One row of `series.csv`: what happened during one second of the run
/// (levels such as `wal_disk_bytes` and `rss_bytes` are taken at its end).
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since the workers started (1 = the first second).
    pub second: u64,
    /// Part of the warm-up (not in the summary's figures).
    pub warmup: bool,
    /// Length of this interval in seconds (the last one may be shorter).
    pub interval_secs: f64,
    pub txn: u64,
    pub txn_by_type: Vec<u64>,
    pub aborts: u64,
    pub wal_bytes: u64,
    pub wal_disk_bytes: u64,
    pub checkpoint_bytes: u64,
    pub evict_bytes: u64,
    pub flush_bytes: u64,
    pub read_bytes: u64,
    pub rss_bytes: u64,
    pub backpressure_ms: u64,
    pub steal_ms: u64,
}

impl Sample {
    pub fn between(
        second: u64,
        warmup: bool,
        interval_secs: f64,
        a: &Snapshot,
        b: &Snapshot,
    ) -> Self {
        let txn_by_type: Vec<u64> = b
            .committed
            .iter()
            .zip(&a.committed)
            .map(|(b, a)| b - a)
            .collect();
        Sample {
            second,
            warmup,
            interval_secs,
            txn: txn_by_type.iter().sum(),
            txn_by_type,
            aborts: b.total_aborts() - a.total_aborts(),
            wal_bytes: b.wal_bytes - a.wal_bytes,
            wal_disk_bytes: b.wal_disk_bytes,
            checkpoint_bytes: b.checkpoint_bytes - a.checkpoint_bytes,
            evict_bytes: b.evict_bytes - a.evict_bytes,
            flush_bytes: b.flush_bytes - a.flush_bytes,
            read_bytes: b.read_bytes - a.read_bytes,
            rss_bytes: b.rss_bytes,
            backpressure_ms: b.backpressure_ms - a.backpressure_ms,
            steal_ms: b.steal_ms.saturating_sub(a.steal_ms),
        }
    }

    /// Committed transactions per second in this interval.
    pub fn txn_per_sec(&self) -> f64 {
        self.txn as f64 / self.interval_secs.max(1e-9)
    }
}

/// The CSV header for samples of a workload with these transaction types.
pub fn csv_header(types: &[&str]) -> String {
    let mut h = String::from(
        "second,warmup,interval_secs,txn,aborts,wal_bytes,wal_disk_bytes,checkpoint_bytes,evict_bytes,flush_bytes,read_bytes,rss_bytes,backpressure_ms,steal_ms",
    );
    for t in types {
        h.push_str(",txn_");
        h.push_str(t);
    }
    h
}

/// One CSV line (no newline) matching [`csv_header`].
pub fn csv_row(s: &Sample) -> String {
    let mut row = format!(
        "{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{}",
        s.second,
        u8::from(s.warmup),
        s.interval_secs,
        s.txn,
        s.aborts,
        s.wal_bytes,
        s.wal_disk_bytes,
        s.checkpoint_bytes,
        s.evict_bytes,
        s.flush_bytes,
        s.read_bytes,
        s.rss_bytes,
        s.backpressure_ms,
        s.steal_ms
    );
    for n in &s.txn_by_type {
        row.push(',');
        row.push_str(&n.to_string());
    }
    row
}
