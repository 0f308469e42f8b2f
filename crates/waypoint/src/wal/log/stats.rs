//! The log's counters: per log and per partition, and the share of
//! commits RFA could not keep local.

use super::commit::CommitProtocol;
use super::Wal;

/// Counters of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalStats {
    pub partitions: usize,
    pub appended_bytes: u64,
    pub records: u64,
    pub syncs: u64,
    pub disk_bytes: u64,
    /// Segments started from a recycled segment file (no zeros written),
    /// and from a zero-filled spare.
    pub segments_recycled: u64,
    pub segments_zero_filled: u64,
    pub commits: u64,
    /// Commits that needed other partitions flushed: they touched a page or
    /// read a commit another partition had not made durable.
    pub remote_flush_commits: u64,
    /// Commits that needed nothing remote themselves but waited for an
    /// earlier pipelined commit of their session's remote flush (to the
    /// positions that commit recorded, not further).
    pub chained_commits: u64,
    /// The commit protocol the counts were taken under.
    pub protocol: CommitProtocol,
    /// Per log partition (= session slot): its own counters.
    pub per_partition: Vec<PartitionLogStats>,
}

/// The counters of one log partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionLogStats {
    pub partition: u32,
    pub appended_bytes: u64,
    pub durable_bytes: u64,
    pub disk_bytes: u64,
    pub records: u64,
    pub syncs: u64,
    /// Writes and syncs a blocking committer did itself
    /// (`Partition::sync_to`), not the partition's writer thread.
    pub committer_syncs: u64,
}

impl WalStats {
    /// Share of commits that had to wait for other partitions (RFA).
    pub fn remote_flush_fraction(&self) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            self.remote_flush_commits as f64 / self.commits as f64
        }
    }
}

impl Wal {
    pub fn stats(&self) -> WalStats {
        let parts = self.all();
        let mut s = WalStats {
            partitions: parts.len(),
            commits: self.commits.sum(),
            remote_flush_commits: self.remote_commits.sum(),
            chained_commits: self.chained_commits.sum(),
            protocol: self.protocol,
            ..Default::default()
        };
        for p in parts.iter() {
            let ps = p.stats();
            let disk = p.disk_bytes();
            s.appended_bytes += ps.appended_bytes;
            s.records += ps.records;
            s.syncs += ps.syncs;
            s.disk_bytes += disk;
            s.segments_recycled += ps.segments_recycled;
            s.segments_zero_filled += ps.segments_zero_filled;
            s.per_partition.push(PartitionLogStats {
                partition: p.id(),
                appended_bytes: ps.appended_bytes,
                durable_bytes: ps.durable_bytes,
                disk_bytes: disk,
                records: ps.records,
                syncs: ps.syncs,
                committer_syncs: ps.committer_syncs,
            });
        }
        s
    }
}
