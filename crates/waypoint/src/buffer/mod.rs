//! Buffer management: the page format header, hybrid latches, the buffer
//! pool with its page provider and writeback buffer (seed 000 §3.5, §3.8).
pub mod double_write;
pub mod latch;
pub mod page;
pub mod pool;

pub use page::{PageId, PageKind};
pub use pool::{
    BufferPool, ExclusiveGuard, FlushGate, OptimisticGuard, PoolConfig, PoolStats, SharedGuard,
    WRITER_READ_FROM_DISK, WRITER_UNKNOWN,
};
