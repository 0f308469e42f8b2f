//! Commit-time record locks: a striped lock table keyed by (table, key).
//!
//! Silo keeps a lock bit in each record's TID word (seed 002 §2); records
//! here live in pages that move and get evicted, so the lock lives beside
//! them in a fixed table of stripes instead. Two keys that share a stripe
//! share a lock: harmless for correctness, a rare false conflict.
//!
//! An owner is a live session (its slot plus one; a session commits one
//! transaction at a time), so a stripe takes two bytes: 2^20 stripes in
//! 2 MiB, a table that stays in the L3 cache. With 2^16 stripes about half
//! of 2-worker TPC-C's aborts were false conflicts (aborts 0.97% of
//! commits; 0.61% with 2^18, 0.53% with 2^20), and 2^20 eight-byte owners
//! (8 MiB) measured no faster than 2^16 (docs/decisions/measurements.md, "2026-11-23: a
//! larger commit lock table").
//!
//! Invariant: a stripe's owner is set only by its owner's CAS from 0 and
//! cleared only by that owner; owners acquire stripes in ascending order,
//! so lock waits cannot form a cycle.

use crate::buffer::latch::Backoff;
use std::num::NonZeroU16;
use crate::ids::Tid;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

const STRIPE_BITS: u32 = 20;

/// Who holds a stripe: a session, by its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LockOwner(NonZeroU16);

impl LockOwner {
    pub(crate) fn of_slot(slot: u16) -> Self {
        // Sessions never get the system slot (epoch::SYSTEM_SLOT), so every
        // session slot plus one is a distinct non-zero owner.
        assert_ne!(
            slot,
            super::epoch::SYSTEM_SLOT,
            "the system slot locks nothing"
        );
        LockOwner(NonZeroU16::new(slot + 1).expect("slot below u16::MAX"))
    }

    fn raw(self) -> u16 {
        self.0.get()
    }
}

pub(crate) struct LockTable {
    stripes: Box<[AtomicU16]>,
    /// Per stripe, the largest TID committed under it, for a scheme that
    /// orders the writes of a key by TID alone (`silor`): a delete
    /// removes the record, and with it the TID an insert after it would
    /// otherwise exceed. Empty when not asked for.
    last_tids: Box<[AtomicU64]>,
    /// Per group of stripes (`DELETE_MARK_BITS` of a stripe's bits), the
    /// largest delete mark (`SessionLog::delete_mark`) a commit that
    /// deleted a key of it left: a delete removes the record and its TID,
    /// and a reader of the absent key still depends on the deleter's
    /// commit (its durability, under RFA). Raised under the stripe's
    /// lock, before its release.
    delete_marks: Box<[AtomicU64]>,
}

/// Delete marks are kept per `1 << DELETE_MARK_BITS` groups of stripes:
/// coarser than the stripes (2 MiB rather than 8), which only makes a
/// reader of an absent key see a mark of a neighbour's delete.
const DELETE_MARK_BITS: u32 = 18;

impl LockTable {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::with_tids(false)
    }

    /// A lock table that also keeps each stripe's last TID if `tids`.
    pub(crate) fn with_tids(tids: bool) -> Self {
        LockTable {
            stripes: (0..1usize << STRIPE_BITS)
                .map(|_| AtomicU16::new(0))
                .collect(),
            last_tids: if tids {
                (0..1usize << STRIPE_BITS)
                    .map(|_| AtomicU64::new(0))
                    .collect()
            } else {
                Box::new([])
            },
            delete_marks: (0..1usize << DELETE_MARK_BITS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// The delete mark of `stripe` (see `delete_marks`).
    pub(crate) fn delete_mark(&self, stripe: u32) -> u64 {
        self.delete_marks[(stripe & ((1 << DELETE_MARK_BITS) - 1)) as usize]
            .load(Ordering::Acquire)
    }

    /// Raise the delete mark of `stripe` (held by the caller) to `mark`.
    pub(crate) fn raise_delete_mark(&self, stripe: u32, mark: u64) {
        self.delete_marks[(stripe & ((1 << DELETE_MARK_BITS) - 1)) as usize]
            .fetch_max(mark, Ordering::AcqRel);
    }

    pub(crate) fn keeps_tids(&self) -> bool {
        !self.last_tids.is_empty()
    }

    /// The largest TID committed under any of `stripes` (held by the
    /// caller).
    pub(crate) fn last_tid(&self, stripes: impl Iterator<Item = u32>) -> Tid {
        let max = stripes
            .filter_map(|s| self.last_tids.get(s as usize))
            .map(|t| t.load(Ordering::Acquire))
            .max()
            .unwrap_or(0);
        Tid::new(max)
    }

    /// Record `tid` as committed under `stripes` (held by the caller).
    pub(crate) fn set_last_tid(&self, stripes: impl Iterator<Item = u32>, tid: Tid) {
        for s in stripes {
            if let Some(t) = self.last_tids.get(s as usize) {
                t.fetch_max(tid.get(), Ordering::AcqRel);
            }
        }
    }

    pub(crate) fn stripe(table_id: u32, key: &[u8]) -> u32 {
        let h = crc32c::crc32c_append(crc32c::crc32c(&table_id.to_le_bytes()), key);
        h & ((1 << STRIPE_BITS) - 1)
    }

    /// Lock `stripes` (sorted, deduplicated) for `owner`.
    pub(crate) fn lock_all(&self, stripes: &[u32], owner: LockOwner) {
        debug_assert!(
            stripes.windows(2).all(|w| w[0] < w[1]),
            "stripes must be sorted and unique"
        );
        for &s in stripes {
            let slot = &self.stripes[s as usize];
            let mut backoff = Backoff::new();
            while slot
                .compare_exchange_weak(0, owner.raw(), Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                backoff.wait();
            }
        }
    }

    pub(crate) fn unlock_all(&self, stripes: &[u32], owner: LockOwner) {
        for &s in stripes {
            let prev = self.stripes[s as usize].swap(0, Ordering::Release);
            debug_assert_eq!(
                prev,
                owner.raw(),
                "unlock of a stripe held by another owner"
            );
        }
    }

    /// True if another owner holds the stripe of (table, key).
    pub(crate) fn locked_by_other(&self, stripe: u32, me: LockOwner) -> bool {
        let owner = self.stripes[stripe as usize].load(Ordering::Acquire);
        owner != 0 && owner != me.raw()
    }
}

/// Holds a set of stripes and releases them when dropped, also when a
/// panic (for example in an application's index extractor) unwinds through
/// the commit: a stripe left locked would block every later committer.
pub(crate) struct StripeGuard<'a> {
    table: &'a LockTable,
    stripes: Vec<u32>,
    owner: LockOwner,
}

impl<'a> StripeGuard<'a> {
    pub(crate) fn lock(table: &'a LockTable, mut stripes: Vec<u32>, owner: LockOwner) -> Self {
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

    /// A slot no live session holds. With all `MAX_SESSIONS` (65,535) in
    /// use this waits for a session to be dropped.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripe_is_locked_for_everyone_but_its_owner_until_released() {
        let table = LockTable::new();
        let (a, b) = (LockOwner::of_slot(0), LockOwner::of_slot(1));
        let s = LockTable::stripe(7, b"key");
        {
            let _held = StripeGuard::lock(&table, vec![s, s], a);
            assert!(table.locked_by_other(s, b));
            assert!(!table.locked_by_other(s, a), "a's own stripe");
        }
        assert!(!table.locked_by_other(s, b), "released on drop");
    }

    #[test]
    fn every_session_slot_is_a_distinct_owner() {
        let first = LockOwner::of_slot(0);
        let last = LockOwner::of_slot(crate::txn::epoch::SYSTEM_SLOT - 1);
        assert_ne!(first, last);
        assert_ne!(first, LockOwner::of_slot(1));
    }

    #[test]
    #[should_panic(expected = "the system slot locks nothing")]
    fn the_system_slot_is_no_lock_owner() {
        LockOwner::of_slot(crate::txn::epoch::SYSTEM_SLOT);
    }

    #[test]
    fn the_table_stays_cache_sized() {
        let table = LockTable::new();
        let bytes = std::mem::size_of_val(&*table.stripes);
        assert_eq!(bytes, 2 << 20, "2^20 two-byte stripes");
        let spread: std::collections::HashSet<u32> = (0..10_000u32)
            .map(|k| LockTable::stripe(1, &k.to_be_bytes()))
            .collect();
        assert!(
            spread.len() > 9_900,
            "{} stripes for 10,000 keys",
            spread.len()
        );
    }
}
