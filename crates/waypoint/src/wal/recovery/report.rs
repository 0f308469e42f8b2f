//! What recovery reports: its counts and timings ([`RecoveryReport`], for
//! `waypoint recover` and the logs) and where each partition's log ends
//! ([`RecoveredPartition`], what the log manager continues from) (seed 000
//! §3.7).

use crate::ids::{Gsn, LogPos};
use std::time::Duration;

/// What recovery did, for `waypoint recover` and the logs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryReport {
    pub partitions: usize,
    pub segments: usize,
    pub records: u64,
    pub log_bytes: u64,
    pub torn_tails: usize,
    pub winners: usize,
    pub losers: usize,
    pub pages_redone: usize,
    pub records_redone: u64,
    pub records_undone: u64,
    /// Groups of losers with no key in common, undone in parallel.
    pub undo_groups: usize,
    pub gaps: usize,
    /// Transactions whose commit record survived but which had a record
    /// beyond a gap: never an acknowledged one (the commit protocols wait
    /// for every dependency), so non-zero only after an unacknowledged
    /// commit was cut short.
    pub committed_beyond_gap: usize,
    pub repaired_torn_pages: usize,
    /// Redo could not decide page shard by page shard (a structure
    /// modification some page cannot take, after a crash cut a log) and
    /// swept all records in GSN order on one thread instead.
    pub redo_decided_serially: bool,
    /// The memory-resident schemes (`silor`, `command`): time loading the
    /// installed checkpoint or snapshot into the trees before the log is
    /// replayed, and its bytes; zero for the page-based schemes, whose
    /// data file needs no loading.
    pub image_load: Duration,
    pub image_bytes: u64,
    /// Reading the log (`analysis`; the memory-resident schemes' log
    /// scan), applying it (`redo`; their replay or re-execution) and
    /// rolling back losers (`undo`).
    pub analysis: Duration,
    pub redo: Duration,
    pub undo: Duration,
}

impl RecoveryReport {
    /// The whole recovery: image load, analysis, redo and undo.
    pub fn total(&self) -> Duration {
        self.image_load + self.analysis + self.redo + self.undo
    }

    /// Recovery data (log, and checkpoint or snapshot) read per second of
    /// recovery, in GB/s: the inverse of seed 002 §6.4's seconds per GB.
    pub fn gb_per_sec(&self) -> f64 {
        let secs = self.total().as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        (self.log_bytes + self.image_bytes) as f64 / 1e9 / secs
    }
}

/// Where a partition's log ends after recovery, for the log manager.
#[derive(Debug, Clone)]
pub struct RecoveredPartition {
    pub id: u32,
    pub end: LogPos,
    pub clock: Gsn,
    /// (start position, length, max GSN) of each segment.
    pub segments: Vec<(LogPos, u64, Gsn)>,
}
