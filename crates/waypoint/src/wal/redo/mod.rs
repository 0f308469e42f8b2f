//! Redo: which logged page changes recovery re-applies, and applying them
//! (seed 000 §3.7, with the gap rule of
//! docs/decisions/022-recovery-and-the-gap-rule.md).
//!
//! Each page record names the page GSN it was made on (`prev_gsn`), so the
//! records of one page form chains. Redo of a page follows the chain from
//! the GSN its copy on disk has; a record whose predecessor is missing (it
//! lived in another partition and was lost) is not applied, nor is anything
//! chained after it: a **gap**. Transactions with a record that is not
//! applied are losers even if their commit survived.
//!
//! A structure modification is a **group** of records, one per page (split,
//! merge, root change; `RecordHeader::smo_more`): page images, and for a
//! split the kept page's `split` and the parent's `separator` records. Half
//! a split is not a tree, so a group is applied all or nothing: if one of
//! its pages cannot take its record, none of them does, and that stops the
//! chains of the other pages too. The decision for a group depends only
//! on records with lower GSNs (every GSN of a group is above every
//! previous GSN of its pages, see `WalSessionLog::log_pages`), so one
//! sweep over all records in GSN order decides every record exactly once
//! (`decide::serial`).
//!
//! That sweep is serial; recovery must use every thread it is given. So
//! the records are first split into page shards (`shards`: each thread
//! scatters a slice of every partition, each shard sorts its records by
//! page and GSN and reads its pages' GSNs on disk), and each shard decides
//! its pages' chains on its own, taking every structure modification as
//! applied where its page can take it (`decide::per_page`). If every page
//! of every group can take it, that is exactly what the sweep decides: a
//! page's chain depends only on its own records and on the groups that
//! touch it, and each of those is applied on all its pages. Only a group
//! that some page cannot take (a gap inside a structure modification,
//! which only a crash leaves) sends the decision to the serial sweep.
//! Applying the decisions then runs shard by shard in parallel.
//!
//! Invariants checked here:
//! - a group is never half on disk and half not redoable (the WAL rule plus
//!   the GSN ordering of groups make that impossible; finding it is
//!   corruption);
//! - records of a page are applied in chain order, each to the exact state
//!   it was made on.
//!
//! Records below the superblock's log floor are not in the log: every page
//! state at or below the floor is on disk. A record made on such a state
//! (`prev_gsn <= floor`) therefore continues any on-disk state at or below
//! the floor (a page freed before a clean close and reused after it starts
//! from GSN 0).
//!
//! Records that were not applied stay in the log. A later recovery decides
//! them the same way (the log prefix is synced before anything new is
//! appended, and the surviving records do not change), and records written
//! after a recovery carry GSNs above every record that survived it, so they
//! chain from the recovered page states and never collide with the
//! abandoned records.


mod apply;
mod decide;
mod shards;
#[cfg(test)]
mod tests;

use super::recovery::PartitionLog;
use crate::buffer::page;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::ids::Gsn;
use crate::parallel::taking_turns;
use rustc_hash::FxHashSet;
use shards::Shard;

/// What redo decided and did.
pub(super) struct RedoOutcome {
    /// Per partition, per record: applied now or already in the page on disk.
    pub applied: Vec<Vec<bool>>,
    /// Transactions with a record that was not applied.
    pub beyond_gap: FxHashSet<u64>,
    /// Records or groups that could not be applied.
    pub gaps: usize,
    pub pages: usize,
    pub records_redone: u64,
    /// The decision fell back to the serial sweep.
    pub serially: bool,
}

/// A record's relation to the page it changes, before any decision.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OnDisk {
    /// The page on disk already contains it.
    Contained,
    /// Its GSN is at or below the page's on-disk GSN but the page never had
    /// it: an abandoned record of an earlier recovery.
    Abandoned,
    /// Above the on-disk GSN: redo may apply it.
    Above,
}

/// A record of the log partition `log` is wrong in itself; the error
/// names the partition's directory (the record's place in it is no longer
/// known here, so its GSN stands for the offset).
fn log_corruption(log: &PartitionLog, gsn: Gsn, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: log.dir.clone(),
        offset: gsn.get(),
        detail: format!("record GSN {gsn}: {}", detail.into()),
    }
}

fn page_corruption(pool: &BufferPool, pid: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: pool.file().path().to_path_buf(),
        offset: pid * pool.page_size() as u64,
        detail: detail.into(),
    }
}

/// Does a record made on page GSN `prev` continue a page now at `current`?
fn continues(prev: Gsn, current: Gsn, floor: Gsn) -> bool {
    prev == current || (prev <= floor && current <= floor)
}

pub(super) fn redo(
    logs: &[PartitionLog],
    pool: &BufferPool,
    threads: usize,
    floor: Gsn,
) -> Result<RedoOutcome> {
    let t0 = std::time::Instant::now();
    let shards = shards::build(logs, pool, threads.max(1))?;
    let t1 = std::time::Instant::now();
    let decided = decide::decide(logs, &shards, pool, threads.max(1), floor)?;
    let t2 = std::time::Instant::now();
    let redone: u64 = taking_turns("redo", threads.max(1), shards.iter().collect(), |s, shard| {
        apply_shard(logs, pool, shard, &decided.by_entry[s], floor)
    })?
    .into_iter()
    .sum();
    tracing::debug!(
        shards_ms = (t1 - t0).as_millis() as u64,
        decide_ms = (t2 - t1).as_millis() as u64,
        apply_ms = t2.elapsed().as_millis() as u64,
        serially = decided.serially,
        "redo phases"
    );
    Ok(RedoOutcome {
        applied: decided.applied,
        beyond_gap: decided.beyond_gap,
        gaps: decided.gaps,
        pages: shards.iter().map(|s| s.pages.len()).sum(),
        records_redone: redone,
        serially: decided.serially,
    })
}

/// Apply a shard's decided records, page by page, each page's in chain
/// order onto the exact state it was made on. Returns the records applied.
fn apply_shard(
    logs: &[PartitionLog],
    pool: &BufferPool,
    shard: &Shard,
    applied: &[bool],
    floor: Gsn,
) -> Result<u64> {
    let page_size = pool.page_size();
    let mut redone = 0;
    for run in &shard.pages {
        let (pid, d) = (run.page, run.disk);
        let mut guard = pool.exclusive_for_redo(pid)?;
        let mut at = page::page_gsn(guard.data());
        if at != d {
            return Err(page_corruption(
                pool,
                pid,
                format!("page GSN changed from {d} to {at} between redo passes"),
            ));
        }
        for i in run.entries.clone() {
            let e = shard.entries[i];
            let log = &logs[e.part as usize];
            let r = &log.records[e.rec as usize];
            if !applied[i] || r.gsn <= d {
                continue;
            }
            debug_assert!(continues(r.prev, at, floor), "redo follows the page chain");
            let rec = log.record_of(r)?;
            let data = guard.data_mut();
            apply::apply(data, &rec).map_err(|detail| Error::Corruption {
                path: pool.file().path().to_path_buf(),
                offset: pid * page_size as u64,
                detail: format!(
                    "redo of record GSN {} of log partition {} (made on page GSN {}) on page {pid} at GSN {at} (on disk {d}, log floor {floor}): {detail}",
                    r.gsn,
                    log.dir.display(),
                    r.prev
                ),
            })?;
            page::set_page_gsn(data, r.gsn);
            at = r.gsn;
            redone += 1;
        }
    }
    Ok(redone)
}
