//! Restart after a crash: analysis, redo, undo (seed 000 §3.7, Fig. 7).
//!
//! - **Analysis** ([`Analysis::read_for`]), on the recovery threads: each
//!   segment of every partition read, decoded and walked by the next free
//!   thread, then each partition decided in stream order: read every
//!   segment, stop at the torn tail (records that stop exactly where the
//!   next segment starts are that segment's end, followed by a recycled
//!   file's old bytes), refuse corruption in the middle and missing
//!   segments; collect page records, commit records (with their dependency
//!   vectors) and end-of-rollback records. Analysis only reads: what it
//!   decides to change on disk (cut the torn tail and a recycled file's old
//!   bytes, remove segments that were never synced, sync what it read) is
//!   applied by [`Analysis::apply`], after the caller has checked the log
//!   against the checkpoint metadata ([`Analysis::check_synced`]: a log
//!   that ends before its recorded synced position lost durable bytes and
//!   is refused), so a refused open leaves every file as it found it.
//! - **Winners**: a transaction with a commit record all of whose
//!   dependencies survived (every named partition reaches the named
//!   position).
//!   A structure modification cut short by the crash (its last image
//!   missing) is the torn tail; the log is truncated before it.
//! - **Redo** (`redo/`): per page, records follow the page's chain of
//!   `prev_gsn` from its on-disk GSN; a record whose predecessor is missing
//!   (it lived in another partition and was lost) marks a **gap**, nothing
//!   after it on that page is applied, and a structure modification is
//!   applied on all its pages or on none. Every transaction with a record
//!   not applied is a loser even if its commit survived (docs/decisions/
//!   022-recovery-and-the-gap-rule.md). Applying runs on threads over page-id ranges.
//! - **Undo**: each loser's applied tuple records are reverted logically,
//!   newest first, through its tree (a split may have moved the key),
//!   logged as compensation records and closed with an end record, so a
//!   crash during recovery recovers again. Structure modifications are not
//!   undone.
//!
//! Invariant 5: afterwards every transaction is wholly present or wholly
//! absent, and present only if its commit (and what it depends on) was
//! durable.
//!
//! Files: `report` (what recovery did, where each partition ends),
//! `partition_log` (one partition's analysis: segments, torn tails, the
//! records kept for redo and undo), `analysis` (all partitions, winners,
//! the synced-position check, the changes to the log's files), `undo`
//! (losers reverted in independent groups).

mod analysis;
mod partition_log;
mod report;
mod segment_walk;
#[cfg(test)]
mod tests;
mod undo;

pub use analysis::Analysis;
pub(crate) use partition_log::partition_ids;
pub(super) use partition_log::PartitionLog;
pub use report::{RecoveredPartition, RecoveryReport};
pub use undo::UndoLog;

use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::ids::Gsn;
use crate::io::Storage;
use rustc_hash::FxHashSet;
use std::path::Path;

fn corruption(path: &Path, offset: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: path.to_path_buf(),
        offset,
        detail: detail.into(),
    }
}

/// The result of analysis and redo, ready for undo.
pub struct Recovery {
    logs: Vec<PartitionLog>,
    /// Per partition, per record: was it applied (or already in the page)?
    applied: Vec<Vec<bool>>,
    losers: FxHashSet<u64>,
    pub report: RecoveryReport,
}

impl Recovery {
    /// Analysis, then its changes to the log's files, then redo (on
    /// `threads` threads), with no check against checkpoint metadata.
    /// Records with a GSN at or below `floor` are ignored.
    pub fn analyze_and_redo(
        storage: &dyn Storage,
        log_dir: &Path,
        pool: &BufferPool,
        threads: usize,
        floor: Gsn,
    ) -> Result<Recovery> {
        let analysis = Analysis::read_for(crate::persist::SchemeKind::PerWorker, storage, log_dir, floor, threads)?;
        analysis.apply(storage)?;
        analysis.redo(pool, threads)
    }
}
