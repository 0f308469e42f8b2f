//! The `aether` scheme's consolidation array (Johnson et al., "Aether: A
//! Scalable Approach to Logging", PVLDB 2010, §5.1): sessions that insert
//! into the central log at the same time combine into one group, and only
//! the group's leader takes the log latch, reserving the whole group's
//! GSNs (LSNs) and bytes at once; each member then encodes and copies its
//! records into its part outside the latch (decoupled buffer fill, §5.2),
//! and the last member to finish releases the group's space for writing
//! (`logstore::stream::reserve`), which happens in stream order.
//!
//! Follows the paper: a small array of slots; the first inserter to find
//! a slot empty opens a group there and leads it; later inserters join
//! while the leader waits for the latch (the longer the wait, the larger
//! the group); the leader closes the group by taking it out of its slot
//! once it holds the latch, so a group never grows after its space is
//! reserved; one reservation per group, and the group is released whole.
//! Differs: joining takes the slot's mutex instead of a compare-and-swap
//! on a slot word, and members wait on a condition variable, not spin (the
//! machines this runs on have fewer cores than sessions); the leader
//! computes each member's size, because a record's length depends on its
//! GSN (a varint: [`SizeAtGsn`]), which only the leader knows; and the
//! release is per group, not per member (the paper's release is per
//! group buffer too, by its last member).
//!
//! Invariants: members of a group get consecutive, disjoint GSN ranges and
//! byte ranges in join order, so the log stays in GSN order; a group's
//! space is released only after every member filled its part, or the
//! stream is stopped (a member that cannot fill abandons it, so no hole is
//! ever written and no waiter waits for one forever).

use super::latch::LogLatch;
use crate::error::Error;
use crate::ids::{Gsn, LogPos};
use crate::logstore::stream::Reserved;
use crate::wal::partition::Partition;
use crate::wal::record::SizeAtGsn;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Slots of the array: a few, so that inserters arriving together mostly
/// meet in one group, and several leaders can wait for the latch at once.
const SLOTS: usize = 4;

/// What the consolidation array counted since the log was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsolidationStats {
    /// Groups formed: each took the log latch once.
    pub groups: u64,
    /// Inserts (records, or structure modifications, commit and end
    /// records) the groups held.
    pub inserts: u64,
    /// The largest group.
    pub max_group: u64,
}

impl ConsolidationStats {
    /// Inserts per latch acquisition.
    pub fn mean_group(&self) -> f64 {
        if self.groups == 0 {
            0.0
        } else {
            self.inserts as f64 / self.groups as f64
        }
    }
}

#[repr(align(128))]
struct Slot(Mutex<Option<Arc<Group>>>);

/// The consolidation array of one central log.
pub struct Consolidation {
    slots: Box<[Slot]>,
    groups: AtomicU64,
    inserts: AtomicU64,
    max_group: AtomicU64,
}

impl std::fmt::Debug for Consolidation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Consolidation({:?})", self.stats())
    }
}

impl Default for Consolidation {
    fn default() -> Self {
        Consolidation {
            slots: (0..SLOTS).map(|_| Slot(Mutex::new(None))).collect(),
            groups: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            max_group: AtomicU64::new(0),
        }
    }
}

struct Group {
    state: Mutex<GroupState>,
    placed: Condvar,
    reservation: OnceLock<Reserved>,
    /// Members that have not yet filled their part.
    unfilled: AtomicUsize,
}

#[derive(Default)]
struct GroupState {
    members: Vec<Member>,
    /// Every member's record sizes, back to back.
    sizes: Vec<SizeAtGsn>,
    /// Set by the leader: whether the group's space was reserved.
    outcome: Option<bool>,
}

struct Member {
    floor: Gsn,
    /// Its records' entries in `sizes`.
    sizes_from: usize,
    count: usize,
    /// Set by the leader.
    first_gsn: Gsn,
    offset: usize,
    len: usize,
}

/// One inserter's part of a group: its GSNs and its bytes of the group's
/// reservation. Fill it with [`Share::fill`]; dropped unfilled, it stops
/// the log (the hole could never be written).
pub struct Share {
    group: Arc<Group>,
    first_gsn: Gsn,
    offset: usize,
    len: usize,
    partition: Arc<Partition>,
    done: bool,
}

impl Consolidation {
    pub fn stats(&self) -> ConsolidationStats {
        ConsolidationStats {
            groups: self.groups.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            max_group: self.max_group.load(Ordering::Relaxed),
        }
    }

    /// Insert records of the sizes `sizes` (one per record, with GSNs
    /// above `floor`) into `partition`'s log, in a group with whoever
    /// inserts at the same time. `hint` picks the slot (the session slot).
    /// Returns this inserter's share; on a refused reservation, the GSNs
    /// it was given (never durable) and the error.
    pub fn insert(
        &self,
        latch: &LogLatch,
        partition: &Arc<Partition>,
        hint: usize,
        floor: Gsn,
        sizes: &[SizeAtGsn],
    ) -> std::result::Result<Share, (Gsn, Error)> {
        assert!(!sizes.is_empty(), "an insert holds at least one record");
        let slot = &self.slots[hint % self.slots.len()];
        let (group, index) = {
            let mut open = slot.0.lock();
            let group = open.get_or_insert_with(|| {
                Arc::new(Group {
                    state: Mutex::new(GroupState::default()),
                    placed: Condvar::new(),
                    reservation: OnceLock::new(),
                    unfilled: AtomicUsize::new(0),
                })
            });
            let mut st = group.state.lock();
            let index = st.members.len();
            let sizes_from = st.sizes.len();
            st.sizes.extend_from_slice(sizes);
            st.members.push(Member {
                floor,
                sizes_from,
                count: sizes.len(),
                first_gsn: Gsn::ZERO,
                offset: 0,
                len: 0,
            });
            drop(st);
            (Arc::clone(group), index)
        };
        if index == 0 {
            self.lead(latch, partition, slot, &group);
        }
        let mut st = group.state.lock();
        while st.outcome.is_none() {
            group.placed.wait(&mut st);
        }
        let m = &st.members[index];
        let (first_gsn, offset, len) = (m.first_gsn, m.offset, m.len);
        if st.outcome != Some(true) {
            let e = partition.check_healthy().err().unwrap_or(Error::Poisoned {
                cause: "the log refused a reservation".into(),
            });
            return Err((first_gsn, e));
        }
        drop(st);
        Ok(Share {
            group,
            first_gsn,
            offset,
            len,
            partition: Arc::clone(partition),
            done: false,
        })
    }

    /// The leader: take the latch (members join meanwhile), close the
    /// group, reserve its GSNs and bytes, and tell the members their parts.
    fn lead(&self, latch: &LogLatch, partition: &Partition, slot: &Slot, group: &Arc<Group>) {
        let held = latch.acquire();
        let closed = slot.0.lock().take();
        debug_assert!(
            closed.is_some_and(|g| Arc::ptr_eq(&g, group)),
            "only a group's leader closes it"
        );
        let mut st = group.state.lock();
        let st = &mut *st;
        let floor = st.members.iter().map(|m| m.floor).max().unwrap_or(Gsn::ZERO);
        let count: usize = st.members.iter().map(|m| m.count).sum();
        let (first, reserved) = partition.reserve_group(floor, count as u64, |first| {
            let (mut gsn, mut offset) = (first, 0);
            for m in st.members.iter_mut() {
                m.first_gsn = gsn;
                m.offset = offset;
                for size in &st.sizes[m.sizes_from..m.sizes_from + m.count] {
                    offset += size.at(gsn);
                    gsn = gsn.plus(1);
                }
                m.len = offset - m.offset;
            }
            offset
        });
        drop(held);
        debug_assert_eq!(st.members.first().map(|m| m.first_gsn), Some(first));
        let n = st.members.len();
        match reserved {
            Ok(r) => {
                group.unfilled.store(n, Ordering::Relaxed);
                let _ = group.reservation.set(r);
                st.outcome = Some(true);
            }
            Err(_) => st.outcome = Some(false),
        }
        group.placed.notify_all();
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.inserts.fetch_add(n as u64, Ordering::Relaxed);
        self.max_group.fetch_max(n as u64, Ordering::Relaxed);
    }
}

impl Share {
    /// The GSN of this share's first record (the others follow it).
    #[inline]
    pub fn first_gsn(&self) -> Gsn {
        self.first_gsn
    }

    /// Bytes this share holds.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn reservation(&self) -> &Reserved {
        self.group
            .reservation
            .get()
            .expect("a share exists only for a reserved group")
    }

    /// Copy the encoded records `frames` (exactly this share's length)
    /// into the log outside the latch; the last member of the group
    /// releases the group's space for writing. Returns the stream position
    /// after these records.
    pub fn fill(mut self, frames: &mut [u8]) -> LogPos {
        assert_eq!(
            frames.len(),
            self.len,
            "records encoded to the length their reservation was given"
        );
        self.done = true;
        let r = self.reservation();
        // SAFETY: members' ranges are disjoint (the leader laid them out
        // back to back), and the group is released only after this fill.
        unsafe { r.fill(self.offset, frames) };
        let end = r.start().advance((self.offset + self.len) as u64);
        // The last filler releases: AcqRel, so it has seen every other
        // member's bytes before the writer may read them.
        if self.group.unfilled.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.partition.release(r);
        }
        end
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if !self.done {
            // Unwinding before the fill: the hole must never be written.
            self.partition.abandon(self.reservation());
        }
    }
}

#[cfg(test)]
mod tests;
