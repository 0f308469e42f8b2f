//! A buffer frame's state beside its bytes: which page it holds, its
//! latch, whether it is dirty, in writeback or cooling, the GSN of its
//! newest durable copy, and the log partition that last wrote it.
//!
//! Invariant: a frame's `page_id` changes only under its exclusive latch
//! (so the latch version changes with it), and `persisted_gsn` rises only
//! after the batch that wrote the page was synced (DESIGN.md invariant 4).

use crate::buffer::latch::HybridLatch;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// `page_id` of a frame that holds no page.
pub(super) const NO_PAGE: u64 = u64::MAX;

/// `last_writer` of a frame nothing has logged on since its page was read
/// from the data file: every change in that image was durable before it was
/// written (WAL rule), so it is nobody's remote dependency.
pub const WRITER_READ_FROM_DISK: u32 = u32::MAX - 1;
/// `last_writer` of a frame with no known writer (a newly allocated page,
/// whose free record may not be durable yet).
pub const WRITER_UNKNOWN: u32 = u32::MAX;

pub(super) struct Frame {
    pub(super) latch: HybridLatch,
    pub(super) page_id: AtomicU64,
    pub(super) dirty: AtomicBool,
    pub(super) writeback: AtomicBool,
    /// Second chance: set by the provider, cleared by any access.
    pub(super) cool: AtomicBool,
    /// GSN of the newest copy of this page known to be durable in the data
    /// file (seed 000 §3.4: the checkpointer's and provider's progress).
    pub(super) persisted_gsn: AtomicU64,
    /// Log partition of the last writer (Remote Flush Avoidance, seed 000 §3.2).
    pub(super) last_writer: AtomicU32,
    /// Stream position in `last_writer`'s partition just after the last
    /// record on this page (for the WAL-rule assertion).
    pub(super) last_write_end: AtomicU64,
}

impl Frame {
    pub(super) fn new() -> Self {
        Frame {
            latch: HybridLatch::default(),
            page_id: AtomicU64::new(NO_PAGE),
            dirty: AtomicBool::new(false),
            writeback: AtomicBool::new(false),
            cool: AtomicBool::new(false),
            persisted_gsn: AtomicU64::new(0),
            last_writer: AtomicU32::new(WRITER_UNKNOWN),
            last_write_end: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(super) fn touch(&self) {
        if self.cool.load(Ordering::Relaxed) {
            self.cool.store(false, Ordering::Relaxed);
        }
    }
}
