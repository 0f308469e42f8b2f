//! The synchronisation primitives of the code the model checker runs.
//!
//! `buffer/latch.rs` takes its atomics and its ways of waiting (spin, yield,
//! sleep) from `crate::sync`, not from `std` directly. Here they are `std`'s.
//! `tests/model_check.rs` compiles the same `latch.rs` into a test crate
//! whose own `crate::sync` maps these names to `shuttle`'s, so the model
//! checker runs the real latch rather than a copy, with no `cfg` flag in the
//! engine and shuttle only a dev-dependency. Keep the names in step with
//! the shim there.

pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{fence, AtomicU64, Ordering};
}

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
