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
//! cleared only by that owner. Every wait for a stripe held out of order
//! ends: a transaction that holds stripes out of the ascending order
//! (taken early by `Transaction::get_for_update`, outside the commit and
//! its quiesce lock) has an age, and any wait for a stripe whose holder
//! has an age, or by a waiter that has one, gives up with `Conflict` after
//! `Options::lock_wait` at most. A commit that holds no early stripe waits
//! for a plain committer's stripes as long as it takes, in ascending
//! order: those holders are inside their commit and wait for nothing but
//! higher stripes. So every cycle of waits contains a wait that ends,
//! including cycles through the quiesce lock (an early holder blocked at
//! its commit behind a pending DDL or close, which waits for a commit that
//! waits for the early holder's stripe).
//!
//! Deadlocks between early holders end sooner, by wound-wait. Ages grow
//! with each transaction's first early stripe. Waiting for a younger
//! holder of early stripes, a transaction wounds it (writes its own owner
//! into the holder's age word); a wounded transaction gives up as soon as
//! it waits for a stripe itself. A cycle of such waits has an older waiter
//! with a younger holder, which is waiting too, so it ends at once, and no
//! wound makes the oldest give way. The one that gave way then waits, its
//! stripes released, until the transaction that wounded it has ended
//! (`step_aside`, at most `lock_wait`), so that its retry does not take
//! the stripes back first. (Without these, a test's transfers chased each
//! other 1,000 times in a row: with limits alone two deadlocked, gave up
//! together, retried together and deadlocked again; with wounds alone the
//! wounded retry took its first stripe back while the older waiter slept
//! in its backoff.) A transaction that ended in `Conflict` hands its age to
//! its session's next early-locking transaction, its retry as a rule
//! (`begin_early`'s `kept`; any commit of the session clears it), as
//! wound-wait's restarted transactions keep their timestamps: a victim
//! grows older than every transaction begun since, and none of those
//! wounds it.

use crate::buffer::latch::Backoff;
use crate::ids::Tid;
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

    /// The session slot, an index of per-slot tables.
    fn slot(self) -> usize {
        usize::from(self.0.get() - 1)
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
    /// The longest an owner holding stripes out of order waits for one
    /// more (module header; `Options::lock_wait`).
    pub(crate) early_wait: Duration,
    /// Per session slot, the age word of the transaction holding stripes
    /// out of order (0: none): its age above `AGE_SHIFT`, and below it the
    /// owner that wounded it (0: not wounded). Set before its first early
    /// stripe is taken, cleared after its last is released.
    ages: Box<[AtomicU64]>,
    /// The last age given out.
    last_age: AtomicU64,
}

/// Why `LockTable::lock_by` gave up.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refusal {
    /// Not granted within `early_wait`.
    TimedOut,
    /// An older transaction, of slot `by`, waits for one of the refused
    /// owner's stripes; `age` is that slot's age as read at the refusal
    /// (a later transaction's, if the wounder ended meanwhile, or the
    /// wounder's retry with its age: stepping aside then waits for that
    /// one, still at most `early_wait`).
    Wounded { by: usize, age: u64 },
}

/// An age word holds the age above these bits and the wounder's owner in
/// them.
const AGE_SHIFT: u32 = 16;

/// Delete marks are kept per `1 << DELETE_MARK_BITS` groups of stripes:
/// coarser than the stripes (2 MiB rather than 8), which only makes a
/// reader of an absent key see a mark of a neighbour's delete.
const DELETE_MARK_BITS: u32 = 18;

impl LockTable {
    /// A lock table that also keeps each stripe's last TID if `tids`, and
    /// bounds waits out of order by `early_wait`.
    pub(crate) fn new(tids: bool, early_wait: Duration) -> Self {
        LockTable {
            early_wait,
            ages: (0..super::epoch::MAX_SESSIONS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            last_age: AtomicU64::new(0),
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

    /// The stripe of `key` in table `table_id`. The table id seeds the
    /// checksum instead of being hashed as four more bytes: one call of the
    /// checksum instead of two on every read validated and every key
    /// written (the stripes are in memory only, so the mapping may change).
    pub(crate) fn stripe(table_id: u32, key: &[u8]) -> u32 {
        let h = crc32c::crc32c_append(table_id, key);
        h & ((1 << STRIPE_BITS) - 1)
    }

    /// Lock `stripes` (sorted, deduplicated) for `owner`, which holds no
    /// stripe yet: as long as a plain committer holds one, or until
    /// `early_wait` passed while a holder of early stripes did (module
    /// header); false then, with the stripes taken so far still held
    /// (the caller's guard releases them).
    fn lock_all(&self, stripes: &[u32], owner: LockOwner, taken: &mut usize) -> bool {
        debug_assert!(
            stripes.windows(2).all(|w| w[0] < w[1]),
            "stripes must be sorted and unique"
        );
        for &s in stripes {
            let slot = &self.stripes[s as usize];
            let mut backoff = Backoff::new();
            let mut early_since = None;
            loop {
                match slot.compare_exchange_weak(0, owner.raw(), Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(0) => continue,
                    Err(held) => {
                        if self.ages[usize::from(held - 1)].load(Ordering::Acquire) != 0 {
                            let since = *early_since.get_or_insert_with(Instant::now);
                            if since.elapsed() >= self.early_wait {
                                return false;
                            }
                        } else {
                            // A plain committer holds it now: the clock
                            // starts again with the next early holder.
                            early_since = None;
                        }
                        backoff.wait();
                    }
                }
            }
            *taken += 1;
        }
        true
    }

    /// Give `owner` an age, before it takes its first stripe out of order;
    /// returns it. Later ages are larger (younger). `kept`, if not 0, is
    /// the age of the owner's session's last such transaction, which
    /// ended in `Conflict`: its retry keeps it, so that no transaction
    /// begun since wounds it (wound-wait's restarted transaction keeps its
    /// timestamp). No live transaction has it: only one transaction of a
    /// session is live.
    pub(crate) fn begin_early(&self, owner: LockOwner, kept: u64) -> u64 {
        let age = if kept != 0 {
            debug_assert!(
                kept <= self.last_age.load(Ordering::Relaxed),
                "a kept age was given before"
            );
            kept
        } else {
            self.last_age.fetch_add(1, Ordering::Relaxed) + 1
        };
        self.ages[owner.slot()].store(age << AGE_SHIFT, Ordering::Release);
        age
    }

    /// Take `stripe` for `owner`, a transaction of age `age` (module
    /// header) that holds stripes out of order or is about to: wounds a
    /// younger holder; refused once `owner` is wounded itself, or after
    /// `early_wait`. Granted at once if `owner` holds it.
    pub(crate) fn lock_by(&self, stripe: u32, owner: LockOwner, age: u64) -> Result<(), Refusal> {
        debug_assert!(age != 0 && age < 1 << (64 - AGE_SHIFT), "an age from begin_early");
        let slot = &self.stripes[stripe as usize];
        let asked = Instant::now();
        let mut backoff = Backoff::new();
        let wounder_mask = (1u64 << AGE_SHIFT) - 1;
        loop {
            match slot.compare_exchange_weak(0, owner.raw(), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(held) if held == owner.raw() => return Ok(()),
                // A spurious failure of the weak exchange: try again.
                Err(0) => continue,
                Err(held) => {
                    let mine = self.ages[owner.slot()].load(Ordering::Acquire);
                    if mine & wounder_mask != 0 {
                        let by = (mine & wounder_mask) as usize - 1;
                        let age = self.ages[by].load(Ordering::Acquire) >> AGE_SHIFT;
                        return Err(Refusal::Wounded { by, age });
                    }
                    let holder = &self.ages[usize::from(held - 1)];
                    let theirs = holder.load(Ordering::Acquire);
                    if theirs >> AGE_SHIFT > age && theirs & wounder_mask == 0 {
                        // Fails harmlessly if that transaction ended meanwhile
                        // or another wounded it first.
                        let _ = holder.compare_exchange(
                            theirs,
                            theirs | u64::from(owner.raw()),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        );
                    }
                    if asked.elapsed() >= self.early_wait {
                        return Err(Refusal::TimedOut);
                    }
                    backoff.wait();
                }
            }
        }
    }

    /// After `refusal`, with every stripe released: a wounded owner waits
    /// until the transaction that wounded it ended (at most `early_wait`),
    /// so that its retry does not take back the stripes that one waits
    /// for (module header).
    pub(crate) fn step_aside(&self, refusal: Refusal) {
        let Refusal::Wounded { by, age } = refusal else {
            return;
        };
        let asked = Instant::now();
        let mut backoff = Backoff::new();
        while age != 0
            && self.ages[by].load(Ordering::Acquire) >> AGE_SHIFT == age
            && asked.elapsed() < self.early_wait
        {
            backoff.wait();
        }
    }

    /// Release the stripes `owner` took out of order (all it holds) and
    /// then its age.
    pub(crate) fn release_early(&self, stripes: &[u32], owner: LockOwner) {
        self.unlock_all(stripes, owner);
        self.ages[owner.slot()].store(0, Ordering::Release);
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
    /// Whether the owner took stripes out of order: its age is cleared on
    /// drop.
    early: bool,
}

impl<'a> StripeGuard<'a> {
    /// Lock `stripes` in ascending order for an owner that holds no stripe
    /// yet: `Conflict` only where a holder of early stripes kept one past
    /// `early_wait` (`LockTable::lock_all`).
    pub(crate) fn lock(
        table: &'a LockTable,
        mut stripes: Vec<u32>,
        owner: LockOwner,
    ) -> crate::error::Result<Self> {
        stripes.sort_unstable();
        stripes.dedup();
        let mut taken = 0;
        let granted = table.lock_all(&stripes, owner, &mut taken);
        stripes.truncate(taken);
        let guard = StripeGuard {
            table,
            stripes,
            owner,
            early: false,
        };
        if granted {
            Ok(guard)
        } else {
            Err(crate::error::Error::Conflict)
        }
    }

    /// Take over `held` (stripes `owner`, of age `age`, took out of order:
    /// distinct) and lock the rest of `more`, each wait ended as
    /// [`LockTable::lock_by`]'s since the held ones break the ascending
    /// order. `Conflict` if one is not granted in time; every stripe and
    /// the age are released then.
    pub(crate) fn lock_after(
        table: &'a LockTable,
        held: Vec<u32>,
        age: u64,
        more: impl IntoIterator<Item = u32>,
        owner: LockOwner,
    ) -> crate::error::Result<Self> {
        let mut guard = StripeGuard {
            table,
            stripes: held,
            owner,
            early: true,
        };
        guard.stripes.sort_unstable();
        let held = guard.stripes.len();
        let mut more: Vec<u32> = more.into_iter().collect();
        more.sort_unstable();
        more.dedup();
        for s in more {
            if guard.stripes[..held].binary_search(&s).is_ok() {
                continue;
            }
            if let Err(refusal) = table.lock_by(s, owner, age) {
                drop(guard);
                table.step_aside(refusal);
                return Err(crate::error::Error::Conflict);
            }
            guard.stripes.push(s);
        }
        Ok(guard)
    }
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        if self.early {
            self.table.release_early(&self.stripes, self.owner);
        } else {
            self.table.unlock_all(&self.stripes, self.owner);
        }
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
        let table = LockTable::new(false, Duration::from_millis(5));
        let (a, b) = (LockOwner::of_slot(0), LockOwner::of_slot(1));
        let s = LockTable::stripe(7, b"key");
        {
            let _held = StripeGuard::lock(&table, vec![s, s], a).expect("free");
            assert!(table.locked_by_other(s, b));
            assert!(!table.locked_by_other(s, a), "a's own stripe");
        }
        assert!(!table.locked_by_other(s, b), "released on drop");
    }

    #[test]
    fn a_wait_out_of_order_ends_at_its_limit_or_a_wound_and_releases_everything() {
        let limit = Duration::from_millis(40);
        let table = LockTable::new(false, limit);
        let (a, b) = (LockOwner::of_slot(0), LockOwner::of_slot(1));
        let (x, y, z) = (
            LockTable::stripe(1, b"x"),
            LockTable::stripe(1, b"y"),
            LockTable::stripe(1, b"z"),
        );
        let old = table.begin_early(a, 0);
        let young = table.begin_early(b, 0);
        assert!(old < young);
        assert!(table.lock_by(x, a, old).is_ok(), "free: taken");
        assert!(table.lock_by(x, a, old).is_ok(), "own: taken at once");
        let asked = Instant::now();
        assert!(matches!(table.lock_by(x, b, young), Err(Refusal::TimedOut)));
        assert!(asked.elapsed() >= limit, "the younger waited the limit");
        // The younger b holds y; the older a, waiting for it, wounds b.
        assert!(table.lock_by(y, b, young).is_ok());
        assert!(
            matches!(table.lock_by(y, a, old), Err(Refusal::TimedOut)),
            "b did not give way: a's limit"
        );
        assert_eq!(
            table.ages[b.slot()].load(Ordering::Relaxed) & 0xffff,
            u64::from(a.raw()),
            "wounded by a"
        );
        // Wounded, b gives up at its next wait without waiting it out, and
        // steps aside until a (still running) ends: here, a's limit.
        let refusal = table.lock_by(z, a, old).and_then(|()| table.lock_by(x, b, young));
        assert!(matches!(refusal, Err(Refusal::Wounded { by: 0, .. })), "{refusal:?}");
        table.unlock_all(&[z], a);
        let asked = Instant::now();
        let refused = StripeGuard::lock_after(&table, vec![y], young, [z, x, y], b);
        assert!(matches!(refused, Err(crate::error::Error::Conflict)));
        assert!(asked.elapsed() >= limit, "stepped aside: {:?}", asked.elapsed());
        for s in [y, z] {
            assert!(!table.locked_by_other(s, a), "b's stripes all released");
        }
        assert_eq!(table.ages[b.slot()].load(Ordering::Relaxed), 0, "b's age too");
        table.release_early(&[x], a);
        let again = table.begin_early(b, 0);
        let granted = StripeGuard::lock_after(&table, Vec::new(), again, [z, x], b).expect("free");
        assert!(table.locked_by_other(x, a) && table.locked_by_other(z, a));
        drop(granted);
        assert!(!table.locked_by_other(x, a) && !table.locked_by_other(z, a));
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
        let table = LockTable::new(false, Duration::from_millis(5));
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
        // The table id seeds the checksum: one key in two tables is two
        // stripes, not one lock the two tables' writers would share. (A
        // CRC is affine in its seed, so for keys of one length the two
        // tables' stripes differ by one constant: all or none collide.)
        let shared = (0..10_000u32)
            .filter(|k| {
                LockTable::stripe(1, &k.to_be_bytes()) == LockTable::stripe(2, &k.to_be_bytes())
            })
            .count();
        assert_eq!(shared, 0, "keys share a stripe across tables");
    }
}
