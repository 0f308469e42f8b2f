//! Commit-time record locks: a striped lock table keyed by (table, key).
//!
//! Silo keeps a lock bit in each record's TID word (seed 002 §2); records
//! here live in pages that move and get evicted, so the lock lives beside
//! them in a fixed table of stripes instead. Two keys that share a stripe
//! share a lock: harmless for correctness, a rare false conflict.
//!
//! Invariant: a stripe's owner is set only by its owner's CAS from 0 and
//! cleared only by that owner; owners acquire stripes in ascending order,
//! so lock waits cannot form a cycle.

use crate::buffer::latch::Backoff;
use std::sync::atomic::{AtomicU64, Ordering};

const STRIPE_BITS: u32 = 16;

pub(crate) struct LockTable {
    stripes: Box<[AtomicU64]>,
}

impl LockTable {
    pub(crate) fn new() -> Self {
        LockTable {
            stripes: (0..1usize << STRIPE_BITS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    pub(crate) fn stripe(table_id: u32, key: &[u8]) -> u32 {
        let h = crc32c::crc32c_append(crc32c::crc32c(&table_id.to_le_bytes()), key);
        h & ((1 << STRIPE_BITS) - 1)
    }

    /// Lock `stripes` (sorted, deduplicated) for `owner` (non-zero).
    pub(crate) fn lock_all(&self, stripes: &[u32], owner: u64) {
        debug_assert!(owner != 0);
        debug_assert!(
            stripes.windows(2).all(|w| w[0] < w[1]),
            "stripes must be sorted and unique"
        );
        for &s in stripes {
            let slot = &self.stripes[s as usize];
            let mut backoff = Backoff::new();
            while slot
                .compare_exchange_weak(0, owner, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                backoff.wait();
            }
        }
    }

    pub(crate) fn unlock_all(&self, stripes: &[u32], owner: u64) {
        for &s in stripes {
            let prev = self.stripes[s as usize].swap(0, Ordering::Release);
            debug_assert_eq!(prev, owner, "unlock of a stripe held by another owner");
        }
    }

    /// True if another owner holds the stripe of (table, key).
    pub(crate) fn locked_by_other(&self, stripe: u32, me: u64) -> bool {
        let owner = self.stripes[stripe as usize].load(Ordering::Acquire);
        owner != 0 && owner != me
    }
}

/// Holds a set of stripes and releases them when dropped, also when a
/// panic (for example in an application's index extractor) unwinds through
/// the commit: a stripe left locked would block every later committer.
pub(crate) struct StripeGuard<'a> {
    table: &'a LockTable,
    stripes: Vec<u32>,
    owner: u64,
}

impl<'a> StripeGuard<'a> {
    pub(crate) fn lock(table: &'a LockTable, mut stripes: Vec<u32>, owner: u64) -> Self {
        stripes.sort_unstable();
        stripes.dedup();
        table.lock_all(&stripes, owner);
        StripeGuard {
            table,
            stripes,
            owner,
        }
    }
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        self.table.unlock_all(&self.stripes, self.owner);
    }
}

/// Session slots: the low bits of every TID a session produces.
pub(crate) struct SlotPool {
    free: parking_lot::Mutex<(u32, Vec<u16>)>,
    freed: parking_lot::Condvar,
}

impl SlotPool {
    pub(crate) fn new() -> Self {
        SlotPool {
            free: parking_lot::Mutex::new((0, Vec::new())),
            freed: parking_lot::Condvar::new(),
        }
    }

    /// A slot no live session holds. With all 65536 in use this waits for
    /// a session to be dropped.
    pub(crate) fn acquire(&self) -> u16 {
        let mut state = self.free.lock();
        loop {
            if let Some(slot) = state.1.pop() {
                return slot;
            }
            if (state.0 as usize) < super::epoch::MAX_SESSIONS {
                let slot = state.0 as u16;
                state.0 += 1;
                return slot;
            }
            self.freed.wait(&mut state);
        }
    }

    pub(crate) fn release(&self, slot: u16) {
        self.free.lock().1.push(slot);
        self.freed.notify_one();
    }
}
