//! The per-worker scheme's options (seed 000): the commit protocol, the
//! checkpointing that bounds the log, and the log files.

use crate::checkpoint::CheckpointMode;
use crate::db::options::{format_bytes, out_of_range};
use crate::error::Result;
use crate::wal::CommitProtocol;
use std::path::PathBuf;

/// Options of the per-worker WAL (`Persistence::PerWorker`). Every field
/// has a range, given in its documentation, checked by
/// `Options::validate` before anything is opened.
#[derive(Debug, Clone, PartialEq)]
pub struct PerWorkerOptions {
    /// How commits become durable (see [`CommitProtocol`]).
    pub commit: CommitProtocol,
    /// How dirty pages are written and the log pruned while running.
    pub checkpoint: CheckpointMode,
    /// The WAL limit: with checkpoints on, the log on disk stays near it
    /// (continuous) or below it plus one burst (full); see
    /// docs/decisions/020-checkpointing-and-the-prune-rule.md.
    ///
    /// Range: at least `checkpoint_shards` × 4 KiB, at most 1 PiB. A
    /// checkpoint increment follows every `wal_limit_bytes /
    /// checkpoint_shards` bytes of log and costs synced page and metadata
    /// writes, and back-pressure holds new transactions while the log is
    /// more than two increments ahead. With at least one 4 KiB log block
    /// per increment the checkpointer needs no more increments than the
    /// log writes blocks, so commits slow down but go on; with 1 byte per
    /// increment (a 1-byte limit) every commit waited for thousands of
    /// increments and a TPC-B load stood still for over 90 s.
    pub wal_limit_bytes: u64,
    /// Buffer shards of continuous checkpointing (one per increment).
    /// Range: 1 to 4096.
    pub checkpoint_shards: usize,
    /// Checkpoint increments that may run at once on distinct shards, each
    /// on its own thread, when the checkpointer falls behind (never more
    /// at once than `checkpoint_shards`, nor than the increments due: a
    /// checkpointer that keeps up runs one at a time). Range: 1 to 256.
    /// Default: a quarter of the cores the process may use, 1 to 8
    /// (`default_checkpoint_threads`).
    pub checkpoint_threads: usize,
    /// A log segment file is closed and a new one started beyond this size
    /// (with checkpoints on, at most the larger of 1/32 of `wal_limit_bytes`
    /// and 64 KiB, so pruning whole segments can follow the limit).
    ///
    /// Range: 4 KiB (one log block: a smaller segment is closed after
    /// almost every log write, a file per write) to 1 GiB (preallocation
    /// writes up to three segments ahead of each partition's log).
    pub wal_segment_bytes: u64,
    /// Stage 3 of the log: move log segments that are no longer needed to
    /// this directory (relative paths are below the database directory)
    /// instead of deleting them. Nothing removes them from there.
    pub wal_archive_dir: Option<PathBuf>,
    /// Sync pacing: while commits stream in and no thread is blocked
    /// waiting for durability, a log partition starts a sync at most this
    /// often (or once 128 KiB or 32 commits are waiting), so pipelined
    /// commits share syncs. A commit that waits (`Transaction::commit`, or
    /// a pipelined handle's `wait`) ends the pause at once, so an isolated
    /// commit is not delayed; and while the process leaves half the cores
    /// idle, so does the oldest waiting commit once it has waited two
    /// syncs' time (decision 034). Zero syncs whenever anything is waiting
    /// to be synced.
    /// Range: 0 to 1 s (longer would leave pipelined commits unacknowledged
    /// for longer than any commit should wait).
    pub log_sync_interval: std::time::Duration,
    /// Segment preallocation: each log partition keeps its next segment
    /// ready, written and synced, so log syncs overwrite written blocks
    /// instead of growing a file (on ext4 about half the `fdatasync` time).
    /// A pruned segment is recycled into a later one (without
    /// `wal_archive_dir`); until pruning starts, and whenever no pruned
    /// segment is at hand, the next segment is zero-filled first, which
    /// writes its place twice. Reserves up to three segments of space per
    /// partition ahead of the log. Off: segments grow by appends and
    /// pruned ones are deleted.
    pub wal_preallocate: bool,
    /// With `wal_preallocate`: while no pruned segment is queued for reuse
    /// (until pruning starts: the first `wal_limit_bytes` of log after an
    /// open), zero-fill the next segment ahead of the log (on) or let new
    /// segments grow as they fill (off). Leave it on where growing a file
    /// costs a journal commit per sync (ext4 with a journal): there a
    /// sync into zero-filled blocks took half the time. Turn it off where
    /// it does not (ext4 without a journal, as on this project's VM): the
    /// zeros then only double the log's bytes and queue their syncs ahead
    /// of the log's (TPC-C commit p99 24 ms against 14 ms; docs/decisions/measurements.md,
    /// the zero-fill A/B of 2026-11-23).
    pub wal_zero_fill: bool,
    /// Write the log's segment files with `O_DIRECT`, in whole 4 KiB
    /// blocks (the partial last block is rewritten with the next write),
    /// bypassing the page cache's copy and writeback; the zero-filling of
    /// spare segments too. A file system that refuses `O_DIRECT` gets
    /// buffered log files (with a warning). Only the real file system
    /// reads this; the simulated disk (`SimStorage`) has its own switch. On by
    /// default: 2-worker TPC-C ran 7.7% faster (docs/decisions/measurements.md, the
    /// page-cache bypass A/B of 2026-11-23).
    pub log_direct_io: bool,
}

/// A quarter of the cores the process may use, 1 to 8: one increment at a
/// time on 2 to 7 cores, 4 on 16. Increments run in parallel only while
/// more than one is due, so the extra threads work only when the log
/// outruns a single checkpointer, as on 16 cores, where one checkpointer
/// held TPC-C's workers back 29% of the time at the 1 GiB limit
/// (issue 32); the cap keeps their page writes from crowding the log's.
pub fn default_checkpoint_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() / 4)
        .clamp(1, 8)
}

impl Default for PerWorkerOptions {
    fn default() -> Self {
        PerWorkerOptions {
            commit: CommitProtocol::RfaGroup,
            checkpoint: CheckpointMode::Continuous,
            wal_limit_bytes: 1 << 30,
            checkpoint_shards: 64,
            checkpoint_threads: default_checkpoint_threads(),
            wal_segment_bytes: crate::logstore::stream::SEGMENT_SIZE,
            wal_archive_dir: None,
            log_sync_interval: crate::logstore::stream::SYNC_INTERVAL,
            wal_preallocate: true,
            wal_zero_fill: true,
            log_direct_io: true,
        }
    }
}

impl PerWorkerOptions {
    /// Fewest log bytes per checkpoint increment (`wal_limit_bytes /
    /// checkpoint_shards`): one log block.
    pub const MIN_LOG_PER_INCREMENT: u64 = 4096;
    pub const MAX_WAL_LIMIT_BYTES: u64 = 1 << 50;
    pub const MIN_WAL_SEGMENT_BYTES: u64 = 4096;
    pub const MAX_WAL_SEGMENT_BYTES: u64 = 1 << 30;
    pub const MAX_CHECKPOINT_SHARDS: usize = 4096;
    pub const MAX_CHECKPOINT_THREADS: usize = 256;
    pub const MAX_LOG_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

    /// Check every option against its documented range, and the options
    /// that constrain each other together.
    pub fn validate(&self) -> Result<()> {
        let segment = Self::MIN_WAL_SEGMENT_BYTES..=Self::MAX_WAL_SEGMENT_BYTES;
        if !segment.contains(&self.wal_segment_bytes) {
            return Err(out_of_range(
                "wal_segment_bytes",
                format_bytes(self.wal_segment_bytes),
                format!(
                    "{} to {}",
                    format_bytes(*segment.start()),
                    format_bytes(*segment.end())
                ),
            ));
        }
        if !(1..=Self::MAX_CHECKPOINT_SHARDS).contains(&self.checkpoint_shards) {
            return Err(out_of_range(
                "checkpoint_shards",
                self.checkpoint_shards,
                format!("1 to {}", Self::MAX_CHECKPOINT_SHARDS),
            ));
        }
        if !(1..=Self::MAX_CHECKPOINT_THREADS).contains(&self.checkpoint_threads) {
            return Err(out_of_range(
                "checkpoint_threads",
                self.checkpoint_threads,
                format!("1 to {}", Self::MAX_CHECKPOINT_THREADS),
            ));
        }
        let min_limit = self.checkpoint_shards as u64 * Self::MIN_LOG_PER_INCREMENT;
        if !(min_limit..=Self::MAX_WAL_LIMIT_BYTES).contains(&self.wal_limit_bytes) {
            return Err(out_of_range(
                "wal_limit_bytes",
                format_bytes(self.wal_limit_bytes),
                format!(
                    "{} (checkpoint_shards {} x {} of log per checkpoint increment) to {}",
                    format_bytes(min_limit),
                    self.checkpoint_shards,
                    format_bytes(Self::MIN_LOG_PER_INCREMENT),
                    format_bytes(Self::MAX_WAL_LIMIT_BYTES)
                ),
            ));
        }
        if self.log_sync_interval > Self::MAX_LOG_SYNC_INTERVAL {
            return Err(out_of_range(
                "log_sync_interval",
                format!("{:?}", self.log_sync_interval),
                format!("at most {:?}", Self::MAX_LOG_SYNC_INTERVAL),
            ));
        }
        Ok(())
    }
}
