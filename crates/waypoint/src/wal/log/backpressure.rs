//! Back-pressure (seed 000 §3.4): new transactions wait while more log
//! reached stage 2 than the checkpointer has caught up with, so the log
//! stays near its limit when the checkpointer lags.
//!
//! Invariant: a wait is bounded (`BACKPRESSURE_WAIT_LIMIT`): a limit the
//! dirty data cannot follow slows commits and never stops them.

use super::Wal;
use std::sync::atomic::Ordering;

/// The longest a commit waits for the checkpointer to bring the log under
/// its limit before it goes on regardless (a limit the dirty data cannot
/// follow must slow commits, not stop them).
const BACKPRESSURE_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Wal {
    /// Log bytes moved to stage 2 since open (all partitions).
    pub fn stage2_bytes(&self) -> u64 {
        self.stage2.load(Ordering::Acquire)
    }

    /// Back-pressure: from now on new transactions wait while more than
    /// `max_lag` bytes reached stage 2 past what the checkpointer reported
    /// through [`Wal::checkpointed_through`]. `u64::MAX` switches it off.
    pub fn set_max_lag(&self, max_lag: u64) {
        self.max_lag.store(max_lag, Ordering::Release);
        self.checkpointed_through(self.stage2_bytes());
    }

    /// The checkpointer has caught up with `stage2` bytes of log.
    pub fn checkpointed_through(&self, stage2: u64) {
        self.checkpointed_through
            .fetch_max(stage2, Ordering::AcqRel);
        let _g = self.relief.0.lock();
        self.relief.1.notify_all();
    }

    fn over_limit(&self) -> bool {
        let lag = self
            .stage2_bytes()
            .saturating_sub(self.checkpointed_through.load(Ordering::Acquire));
        lag > self.max_lag.load(Ordering::Acquire)
    }

    /// Total time commits spent waiting for the log to fall under its limit.
    pub fn backpressure_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.backpressure_nanos.load(Ordering::Relaxed))
    }

    /// Wait while the checkpointer reports the log over its limit (bounded).
    pub(super) fn wait_under_limit(&self) {
        if !self.over_limit() {
            return;
        }
        let start = std::time::Instant::now();
        let deadline = start + BACKPRESSURE_WAIT_LIMIT;
        let mut g = self.relief.0.lock();
        while self.over_limit() {
            if self.relief.1.wait_until(&mut g, deadline).timed_out() {
                break;
            }
        }
        self.backpressure_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}
