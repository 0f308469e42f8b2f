//! When the pool may write a dirty page: the page-write policy a
//! persistence scheme chooses (`persist::Opening::prepare`) and `db::open`
//! installs before recovery touches a page, and the [`FlushGate`], the WAL
//! rule's seam for the policy that steals behind a log.
//!
//! Invariant (DESIGN.md invariant 1): under
//! [`PageWritePolicy::StealBehindGate`] no batch is written before its gate
//! returned Ok from `ensure_durable` for the batch's largest page GSN; a
//! gate returns Ok only once every record up to that GSN is durable.

use crate::error::Result;
use crate::ids::{Gsn, LogPos};
use std::sync::Arc;

/// Asked before page images are written: the WAL rule's seam. The log layer
/// makes every record up to `gsn` durable (in every log partition) before it
/// returns Ok.
pub trait FlushGate: Send + Sync {
    fn ensure_durable(&self, gsn: Gsn) -> Result<()>;
    /// Whether partition `partition` is durable up to stream position
    /// `end`: the pool asserts it, after `ensure_durable`, for the last
    /// record of every page it writes (the WAL rule checked independently
    /// of how the gate enforced it).
    fn is_durable_at(&self, partition: u32, end: LogPos) -> bool;

    /// The largest page GSN `ensure_durable` can still succeed for:
    /// [`Gsn::MAX`] while the log is healthy; once it can no longer be made
    /// durable (its disk is full), the GSN up to which it is.
    fn write_limit(&self) -> Gsn {
        Gsn::MAX
    }
}

/// When the pool may write a dirty page while the database runs. A clean
/// close writes every dirty page under each of them
/// ([`BufferPool::flush_all`](super::BufferPool::flush_all)).
#[derive(Clone, Default)]
pub enum PageWritePolicy {
    /// Steal behind the WAL rule: the page provider and checkpoint
    /// increments may write (and then evict) any dirty page, once the gate
    /// made the log durable up to its GSN. For the paged schemes with a
    /// log, whose recovery redoes and undoes from it, and for `none`,
    /// whose gate writes the unclean mark before the first page write.
    StealBehindGate(Arc<dyn FlushGate>),
    /// Any dirty page may be written at any time: no log orders the
    /// writes, and the data file is consistent only after a clean close.
    /// A new pool's policy, until a scheme's is installed (the `none`
    /// scheme steals behind a gate that only marks the data file unclean
    /// before its first write).
    #[default]
    WriteFreely,
    /// No dirty page is written while the database runs: the page provider
    /// evicts clean pages only, and checkpoint increments are not allowed.
    /// Dirty pages accumulate, so once too few frames are left besides
    /// them for reads to go on, new pages and writes are refused with
    /// [`Error::MemoryFull`](crate::Error::MemoryFull). For
    /// memory-resident schemes, whose durability is their own log and
    /// checkpoints, never the data file.
    KeepDirtyInMemory,
}

impl PageWritePolicy {
    /// The gate every batch passes, if the policy has one.
    pub(super) fn gate(&self) -> Option<&Arc<dyn FlushGate>> {
        match self {
            PageWritePolicy::StealBehindGate(gate) => Some(gate),
            PageWritePolicy::WriteFreely | PageWritePolicy::KeepDirtyInMemory => None,
        }
    }

    /// Are dirty pages kept out of the data file while running?
    pub(super) fn keeps_dirty_pages(&self) -> bool {
        matches!(self, PageWritePolicy::KeepDirtyInMemory)
    }
}

impl std::fmt::Debug for PageWritePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PageWritePolicy::StealBehindGate(_) => "StealBehindGate",
            PageWritePolicy::WriteFreely => "WriteFreely",
            PageWritePolicy::KeepDirtyInMemory => "KeepDirtyInMemory",
        })
    }
}
