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
