//! The WAL rule's seam for page writes: what the pool asks before a batch
//! of page copies is written.
//!
//! Invariant (DESIGN.md invariant 1): a gate returns Ok from
//! `ensure_durable(gsn)` only once every record up to `gsn` is durable.

use crate::error::Result;

/// Asked before page images are written: the WAL rule's seam. The log layer
/// makes every record up to `gsn` durable (in every log partition) before it
/// returns Ok.
pub trait FlushGate: Send + Sync {
    fn ensure_durable(&self, gsn: u64) -> Result<()>;
    /// Whether partition `partition` is durable up to stream position
    /// `end`: the pool asserts it, after `ensure_durable`, for the last
    /// record of every page it writes (the WAL rule checked independently
    /// of how the gate enforced it).
    fn is_durable_at(&self, partition: u32, end: u64) -> bool;

    /// The largest page GSN `ensure_durable` can still succeed for:
    /// `u64::MAX` while the log is healthy; once it can no longer be made
    /// durable (its disk is full), the GSN up to which it is.
    fn write_limit(&self) -> u64 {
        u64::MAX
    }
}
