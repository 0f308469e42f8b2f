//! The global epoch of Silo (seed 002 §2.1): a counter advanced by one
//! designated thread every 40 ms and embedded in the high bits of every TID.
//! TIDs of different epochs are ordered compatibly with the serial order,
//! which value logging (seed 002 §3) relies on for replay.
//!
//! TID layout: bit 63 is the ABSENT flag of placeholder records (never set
//! in a committed TID), bits 32..63 the epoch, bits 0..32 a sequence.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const EPOCH_INTERVAL: Duration = Duration::from_millis(40);
pub const ABSENT_BIT: u64 = 1 << 63;

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
            epoch: AtomicU64::new(initial.max(1)),
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
                    c.epoch.fetch_add(1, Ordering::AcqRel);
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
/// session's previous TID, and in the current epoch (or later).
pub fn next_tid(epoch: u64, max_seen: u64, last: u64) -> u64 {
    let floor = epoch << 32;
    let tid = floor.max(max_seen.max(last) + 1);
    debug_assert_eq!(tid & ABSENT_BIT, 0, "TID space exhausted");
    tid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_rule() {
        assert_eq!(next_tid(3, 0, 0), 3 << 32);
        assert_eq!(next_tid(3, (3 << 32) + 5, 0), (3 << 32) + 6);
        assert_eq!(next_tid(3, 0, (3 << 32) + 9), (3 << 32) + 10);
        assert_eq!(epoch_of(next_tid(4, (3 << 32) + 5, 0)), 4);
    }
}
