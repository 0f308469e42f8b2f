//! Hybrid page latch: optimistic, shared and exclusive modes in one word
//! (vmcache, Leis et al. SIGMOD 2023; LeanStore's optimistic lock coupling).
//!
//! Word layout: bits 8.. version, bits 0..8 state (0 unlocked, 1..=254
//! shared holders, 255 exclusive). Readers in optimistic mode only load the
//! word, so they never write a shared cache line; they must call
//! [`HybridLatch::validate`] after reading and discard what they read if it
//! fails.
//!
//! Invariant: the version changes exactly when an exclusive holder releases,
//! so an optimistic read that validates saw no concurrent modification.
//!
//! Model-checked with shuttle (`tests/model_check.rs`, module `latch`):
//! that test compiles this very file with `crate::sync` mapped to shuttle's
//! atomics and yields, so keep every atomic and every wait going through
//! `crate::sync` (see `src/sync.rs`) and this file free of other crate
//! items.

use crate::sync::atomic::{fence, AtomicU64, Ordering};

const STATE_MASK: u64 = 0xFF;
const EXCLUSIVE: u64 = 0xFF;
const MAX_SHARED: u64 = 0xFE;

#[derive(Debug, Default)]
pub struct HybridLatch {
    word: AtomicU64,
}

/// Spin briefly, then yield: on a 2-core machine a waiter that spins
/// steals the CPU from the latch holder. Sleep only after a long run of
/// yields: on a VM a sleeping waiter's vCPU goes idle, and a 50-µs sleep
/// cost a TPC-C worker 1.6 ms on average before it ran again (docs/decisions/measurements.md,
/// "2026-11-23: why workers sleep; latch backoff"), while the holder it waits for is usually back
/// within a few yields.
pub(crate) struct Backoff(u32);

/// Busy-wait rounds (1, 2, 4, ... spins), then yields, then sleeps.
const SPIN_ROUNDS: u32 = 6;
const YIELDS: u32 = 200;

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff(0)
    }
    pub(crate) fn wait(&mut self) {
        if self.0 < SPIN_ROUNDS {
            for _ in 0..(1 << self.0) {
                crate::sync::spin_loop();
            }
        } else if self.0 < SPIN_ROUNDS + YIELDS {
            crate::sync::yield_now();
        } else {
            crate::sync::sleep(std::time::Duration::from_micros(50));
        }
        self.0 = self.0.saturating_add(1);
    }
}

impl HybridLatch {
    /// The current version if no exclusive holder is present.
    #[inline]
    pub fn optimistic(&self) -> Option<u64> {
        let w = self.word.load(Ordering::Acquire);
        (w & STATE_MASK != EXCLUSIVE).then_some(w >> 8)
    }

    /// Spin until the latch is not exclusively held and return its version.
    pub fn optimistic_wait(&self) -> u64 {
        let mut backoff = Backoff::new();
        loop {
            if let Some(v) = self.optimistic() {
                return v;
            }
            backoff.wait();
        }
    }

    /// Did anyone modify the protected data since `optimistic()` returned
    /// `version`? The fence orders the caller's preceding data reads before
    /// the re-check (seqlock reader protocol).
    #[inline]
    pub fn validate(&self, version: u64) -> bool {
        fence(Ordering::Acquire);
        let w = self.word.load(Ordering::Relaxed);
        w >> 8 == version && w & STATE_MASK != EXCLUSIVE
    }

    pub fn try_shared(&self) -> bool {
        let w = self.word.load(Ordering::Relaxed);
        let state = w & STATE_MASK;
        state < MAX_SHARED
            && self
                .word
                .compare_exchange_weak(w, w + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    pub fn shared(&self) {
        let mut backoff = Backoff::new();
        while !self.try_shared() {
            backoff.wait();
        }
    }

    pub fn unlock_shared(&self) {
        let prev = self.word.fetch_sub(1, Ordering::Release);
        debug_assert!(prev & STATE_MASK > 0 && prev & STATE_MASK <= MAX_SHARED);
    }

    pub fn try_exclusive(&self) -> bool {
        let w = self.word.load(Ordering::Relaxed);
        let ok = w & STATE_MASK == 0
            && self
                .word
                .compare_exchange(w, w | EXCLUSIVE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
        if ok {
            // Seqlock writer: the locked state must be visible before any
            // data store, or an optimistic reader on a weakly ordered CPU
            // could see new bytes with the old version.
            fence(Ordering::Release);
        }
        ok
    }

    /// Take a shared latch only if the version is still `version`: turns a
    /// validated optimistic read into a shared one without a gap in which
    /// the page could change identity.
    pub fn try_shared_at(&self, version: u64) -> bool {
        let mut w = self.word.load(Ordering::Relaxed);
        loop {
            if w >> 8 != version || w & STATE_MASK >= MAX_SHARED {
                return false;
            }
            match self
                .word
                .compare_exchange_weak(w, w + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    pub fn exclusive(&self) {
        let mut backoff = Backoff::new();
        while !self.try_exclusive() {
            backoff.wait();
        }
    }

    /// Upgrade an optimistic read of `version` to exclusive; fails if the
    /// data changed or anyone holds the latch.
    pub fn try_upgrade(&self, version: u64) -> bool {
        let ok = self
            .word
            .compare_exchange(
                version << 8,
                (version << 8) | EXCLUSIVE,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok();
        if ok {
            fence(Ordering::Release);
        }
        ok
    }

    pub fn unlock_exclusive(&self) {
        let w = self.word.load(Ordering::Relaxed);
        debug_assert_eq!(
            w & STATE_MASK,
            EXCLUSIVE,
            "unlock of a latch not held exclusively"
        );
        self.word.store(((w >> 8) + 1) << 8, Ordering::Release);
    }

    /// Release exclusive without bumping the version: for holders that did
    /// not modify the data, so optimistic readers need not restart.
    pub fn unlock_exclusive_unchanged(&self) {
        let w = self.word.load(Ordering::Relaxed);
        debug_assert_eq!(w & STATE_MASK, EXCLUSIVE);
        self.word.store(w & !STATE_MASK, Ordering::Release);
    }

    pub fn is_exclusive(&self) -> bool {
        self.word.load(Ordering::Relaxed) & STATE_MASK == EXCLUSIVE
    }
}
