//! The global epoch of Silo (seed 002 §2.1): a counter advanced by one
//! designated thread every 40 ms and embedded in the high bits of every TID
//! ([`Tid`] has the layout), and Silo's rule for a commit's TID.
//!
//! Invariant: a session's TIDs grow, lie above every TID its transaction
//! read or overwrote, and end in its slot, so no two sessions produce the
//! same TID.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::ids::Tid;

pub const EPOCH_INTERVAL: Duration = Duration::from_millis(40);
pub const MAX_SESSIONS: usize = (1 << Tid::SLOT_BITS) - 1;
/// The slot (and log partition) of the database's own work: recovery's
/// undo and catalog changes. Never handed to a session.
pub const SYSTEM_SLOT: u16 = u16::MAX;

pub(crate) struct EpochClock {
    epoch: AtomicU64,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl EpochClock {
    /// Start at `initial` (greater than every epoch in stored TIDs).
    pub(crate) fn start(initial: u64) -> (Arc<Self>, std::thread::JoinHandle<()>) {
        let clock = Arc::new(EpochClock {
            epoch: AtomicU64::new(initial.clamp(1, Tid::MAX_EPOCH)),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let c = Arc::clone(&clock);
        let handle = std::thread::Builder::new()
            .name("waypoint-epoch".into())
            .spawn(move || {
                let mut stop = c.stop.lock();
                while !*stop {
                    c.wake.wait_for(&mut stop, EPOCH_INTERVAL);
                    let _ = c
                        .epoch
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |e| {
                            (e < Tid::MAX_EPOCH).then_some(e + 1)
                        });
                }
            })
            .expect("spawning the epoch thread");
        (clock, handle)
    }

    pub(crate) fn current(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Move the clock to at least `epoch` (a scheme whose log holds
    /// epochs beyond the superblock's, before any TID is taken).
    pub(crate) fn raise_to(&self, epoch: u64) {
        self.epoch
            .fetch_max(epoch.clamp(1, Tid::MAX_EPOCH), Ordering::AcqRel);
    }

    pub(crate) fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }
}

/// Silo's TID rule: larger than every TID read or written and than the
/// session's previous TID, in the current epoch (or later), and ending in
/// the session's slot so no two sessions produce the same TID.
pub fn next_tid(epoch: u64, max_seen: Tid, last: Tid, slot: u16) -> Tid {
    Tid::first_above(max_seen.max(last), epoch, slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_rule() {
        let zero = Tid::ZERO;
        assert_eq!(next_tid(3, zero, zero, 0).get(), 3 << 32);
        assert_eq!(next_tid(3, zero, zero, 7).get(), (3 << 32) | 7);
        let seen = Tid::new((3 << 32) + (5 << 16) + 9);
        assert!(next_tid(3, seen, zero, 2) > seen);
        assert_eq!(next_tid(3, seen, zero, 2).slot(), 2);
        assert!(next_tid(3, zero, seen, 1) > seen);
        assert_eq!(next_tid(4, seen, zero, 0).epoch(), 4);
        // Same inputs, different sessions: different TIDs.
        assert_ne!(next_tid(3, seen, zero, 1), next_tid(3, seen, zero, 2));
    }
}
