//! The synchronisation primitives of the code the model checker runs.
//!
//! `buffer/latch.rs` and `txn/quiesce.rs` take its atomics and its ways of waiting (spin, yield,
//! sleep) from `crate::sync`, not from `std` directly. Here they are `std`'s.
//! `tests/model_check.rs` compiles the same files into a test crate
//! whose own `crate::sync` maps these names to `shuttle`'s, so the model
//! checker runs the real latch rather than a copy, with no `cfg` flag in the
//! engine and shuttle only a dev-dependency. Keep the names in step with
//! the shim there.

pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
}

pub(crate) use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One iteration of a busy wait.
#[inline]
pub(crate) fn spin_loop() {
    std::hint::spin_loop()
}

pub(crate) fn yield_now() {
    std::thread::yield_now()
}

pub(crate) fn sleep(duration: std::time::Duration) {
    std::thread::sleep(duration)
}

/// Stripes of [`StripedCounter`] and of the quiesce lock's reader counts
/// (`txn::quiesce`): sessions in different stripes never write the same
/// cache line.
pub(crate) const STRIPES: usize = 32;

/// A counter every session adds to, striped by session slot: each stripe
/// on a cache line of its own, so that adding costs no cache miss from
/// another core's add (a single shared counter cost one per commit;
/// docs/decisions/032-no-shared-writes-on-the-commit-path.md). Reading
/// sums the stripes.
pub(crate) struct StripedCounter {
    stripes: Box<[crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>]>,
}

impl Default for StripedCounter {
    fn default() -> Self {
        StripedCounter {
            stripes: (0..STRIPES).map(|_| Default::default()).collect(),
        }
    }
}

impl StripedCounter {
    /// Add `n` in `slot`'s stripe; returns that stripe's count before.
    #[inline]
    pub(crate) fn add(&self, slot: u16, n: u64) -> u64 {
        self.stripes[slot as usize % STRIPES].fetch_add(n, std::sync::atomic::Ordering::Relaxed)
    }

    /// The sum of every stripe (not a snapshot: adds may land meanwhile).
    pub(crate) fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }
}
