//! The global epoch of Silo (seed 002 §2.1): a counter advanced by one
//! designated thread every 40 ms and embedded in the high bits of every TID.
//! TIDs of different epochs are ordered compatibly with the serial order,
//! which value logging (seed 002 §3) relies on for replay.
//!
//! TID layout: bit 63 is the ABSENT flag of placeholder records (never set
//! in a committed TID), bits 32..63 the epoch, bits 16..32 a sequence and
//! bits 0..16 the committing session's slot. The slot makes TIDs unique
//! across sessions: without it two sessions could both commit `E << 32`,
//! and a key deleted and re-inserted could carry the TID a concurrent reader
//! saw on the old record, passing its validation (found in review).

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const EPOCH_INTERVAL: Duration = Duration::from_millis(40);
pub const ABSENT_BIT: u64 = 1 << 63;
/// The largest epoch: the clock saturates here rather than run into the
/// ABSENT bit (at 25 epochs a second, after 2.7 years of uptime).
pub const MAX_EPOCH: u64 = (1 << 31) - 1;
pub const SLOT_BITS: u32 = 16;
pub const MAX_SESSIONS: usize = (1 << SLOT_BITS) - 1;
/// The slot (and log partition) of the database's own work: recovery's
/// undo and catalog changes. Never handed to a session.
pub const SYSTEM_SLOT: u16 = u16::MAX;

pub fn epoch_of(tid: u64) -> u64 {
    (tid & !ABSENT_BIT) >> 32
}

pub(crate) struct EpochClock {
    epoch: AtomicU64,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl EpochClock {
    /// Start at `initial` (greater than every epoch in stored TIDs).
    pub(crate) fn start(initial: u64) -> (Arc<Self>, std::thread::JoinHandle<()>) {
        let clock = Arc::new(EpochClock {
            epoch: AtomicU64::new(initial.clamp(1, MAX_EPOCH)),
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
                            (e < MAX_EPOCH).then_some(e + 1)
                        });
                }
            })
            .expect("spawning the epoch thread");
        (clock, handle)
    }

    pub(crate) fn current(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub(crate) fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }
}

/// Silo's TID rule: larger than every TID read or written and than the
/// session's previous TID, in the current epoch (or later), and ending in
/// the session's slot so no two sessions produce the same TID.
pub fn next_tid(epoch: u64, max_seen: u64, last: u64, slot: u16) -> u64 {
    let base = (epoch << 32).max(max_seen.max(last) + 1);
    let unit = 1u64 << SLOT_BITS;
    let tid = (base.div_ceil(unit) * unit) | slot as u64;
    debug_assert_eq!(tid & ABSENT_BIT, 0, "TID space exhausted");
    tid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_rule() {
        assert_eq!(next_tid(3, 0, 0, 0), 3 << 32);
        assert_eq!(next_tid(3, 0, 0, 7), (3 << 32) | 7);
        let seen = (3 << 32) + (5 << 16) + 9;
        assert!(next_tid(3, seen, 0, 2) > seen);
        assert_eq!(next_tid(3, seen, 0, 2) & 0xFFFF, 2);
        assert!(next_tid(3, 0, seen, 1) > seen);
        assert_eq!(epoch_of(next_tid(4, seen, 0, 0)), 4);
        // Same inputs, different sessions: different TIDs.
        assert_ne!(next_tid(3, seen, 0, 1), next_tid(3, seen, 0, 2));
    }
}
