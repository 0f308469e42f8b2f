//! Buffer management: the page format header, hybrid latches, the buffer
//! pool with its page provider and writeback buffer (seed 000 §3.5, §3.8).
pub mod double_write;
pub mod latch;
pub mod page;
pub mod pool;

pub use page::{PageId, PageKind};
pub use pool::{
    BufferPool, ExclusiveGuard, FlushGate, FrameHint, OptimisticGuard, PageWritePolicy, PoolConfig,
    PoolStats, SharedGuard, TreeContention, WRITER_READ_FROM_DISK, WRITER_UNKNOWN,
};

// The latch's unit test lives here, not in `latch.rs`: that file is also
// compiled into the shuttle model test, where it must hold no tests.
#[cfg(test)]
mod latch_tests {
    use super::latch::HybridLatch;

    #[test]
    fn modes_exclude_each_other_and_versions_advance() {
        let l = HybridLatch::default();
        let v = l.optimistic().unwrap();
        assert!(l.try_shared());
        assert!(l.try_shared());
        assert!(!l.try_exclusive());
        assert!(l.validate(v), "shared holders do not invalidate readers");
        l.unlock_shared();
        l.unlock_shared();
        assert!(l.try_upgrade(v));
        assert!(l.optimistic().is_none());
        assert!(!l.validate(v));
        assert!(!l.try_shared());
        l.unlock_exclusive();
        assert!(!l.validate(v), "an exclusive release invalidates readers");
        let v2 = l.optimistic().unwrap();
        assert_eq!(v2, v + 1);
        assert!(!l.try_upgrade(v), "stale version cannot upgrade");
        l.exclusive();
        l.unlock_exclusive_unchanged();
        assert!(l.validate(v2));
    }
}
