//! The central log's latch (seed 000 §4's ARIES baseline): every record
//! of every session is given its LSN and appended to the one log while
//! its appender holds this latch, so the log is in LSN order and a page's
//! LSN is that of its last record. It counts what the comparison with the
//! per-worker log is about: how often it was taken, how often a session
//! found it held, and how long sessions waited for it.
//!
//! Invariant: between [`LogLatch::acquire`] and the guard's drop, no other
//! session reserves an LSN or appends to the log.

use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The one latch of a central log.
#[derive(Default)]
pub struct LogLatch {
    lock: Mutex<()>,
    /// Written only by the holder: a load and a store, no locked add.
    acquisitions: AtomicU64,
    contended: AtomicU64,
    waited_nanos: AtomicU64,
}

/// What the latch counted since the log was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatchStats {
    /// Times a session took the latch (one per record or structure
    /// modification, commit and end record).
    pub acquisitions: u64,
    /// Of those, times it was held by another session.
    pub contended: u64,
    /// Time sessions waited for it, summed over sessions.
    pub waited: Duration,
}

impl std::fmt::Debug for LogLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogLatch({:?})", self.stats())
    }
}

impl LogLatch {
    /// Take the latch; only a contended take reads the clock.
    #[inline]
    pub fn acquire(&self) -> MutexGuard<'_, ()> {
        let guard = match self.lock.try_lock() {
            Some(g) => g,
            None => {
                let t0 = Instant::now();
                let g = self.lock.lock();
                let nanos = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
                // Under the latch: no other writer of these counters.
                self.contended
                    .store(self.contended.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                self.waited_nanos.store(
                    self.waited_nanos.load(Ordering::Relaxed).saturating_add(nanos),
                    Ordering::Relaxed,
                );
                g
            }
        };
        self.acquisitions
            .store(self.acquisitions.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        guard
    }

    pub fn stats(&self) -> LatchStats {
        LatchStats {
            acquisitions: self.acquisitions.load(Ordering::Relaxed),
            contended: self.contended.load(Ordering::Relaxed),
            waited: Duration::from_nanos(self.waited_nanos.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Counters kept under the latch lose no increment, contended or not.
    #[test]
    fn the_latch_counts_every_acquisition() {
        let latch = Arc::new(LogLatch::default());
        let counter = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let (latch, counter) = (Arc::clone(&latch), Arc::clone(&counter));
                s.spawn(move || {
                    for _ in 0..10_000 {
                        let _g = latch.acquire();
                        // A non-atomic increment: only correct under the latch.
                        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        let stats = latch.stats();
        assert_eq!(stats.acquisitions, 40_000);
        assert_eq!(counter.load(Ordering::Relaxed), 40_000);
        assert!(stats.contended <= stats.acquisitions);
    }
}
