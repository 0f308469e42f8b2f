//! A session's own copy of the list of open partitions, for the commit
//! path: Remote Flush Avoidance's look-up of a writer's partition,
//! GSN_flushed at a transaction's first write, the targets of a commit
//! that flushes other partitions, and every commit ticket.
//!
//! Why a copy: reading the log manager's list took a shared lock and
//! cloned a shared `Arc` on every commit, and a ticket cloned an
//! `Arc<Partition>` per target that other sessions cloned too. Each of
//! those is an atomic read-modify-write on a cache line every worker
//! writes, a cache miss per operation that grows with the cores (found by
//! profiling YCSB-A: about a tenth of the workers' CPU went to such
//! lines; docs/decisions/032-no-shared-writes-on-the-commit-path.md).
//! A view's `Arc` is cloned only by its own session, so those clones stay
//! in the session's core's cache. The manager's list changes only when a
//! partition opens; a version number, read without writing, says when a
//! view is stale.
//!
//! Invariant: a view lists only open partitions, sorted by id, and a look-up
//! that misses first refreshes a stale view, so a partition opened after
//! the view was taken is never taken for absent. (The version is raised
//! after the partition is listed, and before its session commits anything
//! another session could observe.)

use super::Wal;
use crate::wal::partition::Partition;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The open partitions as a session last saw them (see the module
/// documentation).
pub(super) struct PartitionsView {
    version: u64,
    list: Arc<[Arc<Partition>]>,
}

impl PartitionsView {
    pub(super) fn of(wal: &Wal) -> Self {
        let version = wal.open_version.load(Ordering::Acquire);
        let list: Arc<[Arc<Partition>]> = wal.all().iter().cloned().collect();
        debug_assert!(list.windows(2).all(|w| w[0].id() < w[1].id()));
        PartitionsView { version, list }
    }

    /// Bring the view up to date if a partition opened since it was taken
    /// (one load of a word only the opening of a partition writes).
    pub(super) fn refresh(&mut self, wal: &Wal) {
        if wal.open_version.load(Ordering::Acquire) != self.version {
            *self = PartitionsView::of(wal);
        }
    }

    pub(super) fn list(&self) -> &Arc<[Arc<Partition>]> {
        &self.list
    }

    /// The index of partition `id` in the list, refreshing the view first
    /// if it is stale. A miss on a current view is an answer: no such
    /// partition is open (TIDs of the loader's or the system's slot, which
    /// never log, are looked up on every commit that read them: rebuilding
    /// the view for each would put the shared lock back on the path).
    pub(super) fn index_of(&mut self, wal: &Wal, id: u32) -> Option<usize> {
        if let Ok(i) = self.list.binary_search_by_key(&id, |p| p.id()) {
            return Some(i);
        }
        self.refresh(wal);
        self.list.binary_search_by_key(&id, |p| p.id()).ok()
    }
}
