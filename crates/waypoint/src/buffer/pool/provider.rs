//! Free frames and the page provider thread (seed 000 §3.5): workers
//! take frames from a free list and never evict on their hot path; the
//! provider keeps the list filled by cooling resident pages (second
//! chance: an access to a cool page makes it hot again), staging cool
//! dirty pages for writeback and evicting cool clean ones.
//!
//! Invariant: a frame is evicted only when clean, not in writeback and
//! exclusively latched, and its page-table entry is cleared under that
//! latch.

use super::frame::NO_PAGE;
use super::writeback::{WritebackBatch, Writer, WRITEBACK_BATCH_PAGES};
use super::BufferPool;
use crate::buffer::page::{self, PageId};
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a worker waits for a free frame before reporting exhaustion.
const FRAME_WAIT_LIMIT: Duration = Duration::from_secs(10);
/// While the log is full, a dirty page it cannot vouch for is never written
/// and so never evicted. With fewer frames than this left besides such
/// pages, a wait for a frame fails at once: a read that descends the tree
/// (an optimistic guard on a parent while its child loads) gets its frame
/// by the eviction of the very parent it must validate, restarts, and
/// would do so for good, the wait never timing out since frames keep
/// coming free (found by `waypoint simulate --workload tpcc`, seed 2087).
const MIN_USABLE_FRAMES: usize = 8;

impl BufferPool {
    pub(super) fn release_frame(&self, idx: u32) {
        self.free_frames.lock().push(idx);
        self.frames_available.notify_one();
    }

    pub(super) fn wake_provider(&self) {
        let mut wake = self.provider_wake.lock();
        *wake = true;
        self.provider_cv.notify_one();
    }

    pub(super) fn take_free_frame(&self) -> Result<u32> {
        let deadline = Instant::now() + FRAME_WAIT_LIMIT;
        let mut free = self.free_frames.lock();
        loop {
            if let Some(idx) = free.pop() {
                if free.len() < self.free_target {
                    drop(free);
                    self.wake_provider();
                }
                return Ok(idx);
            }
            if self.failed.load(Ordering::Acquire) {
                drop(free);
                self.check_healthy()?;
                unreachable!("failed flag set without a cause");
            }
            if Instant::now() >= deadline {
                return Err(Error::BufferPoolExhausted {
                    frames: self.frames.len(),
                });
            }
            drop(free);
            let limit = self.write_limit.load(Ordering::Acquire);
            if limit != u64::MAX
                && self.frames.len() - self.unwritable_frames(limit) < MIN_USABLE_FRAMES
            {
                return Err(Error::BufferPoolExhausted {
                    frames: self.frames.len(),
                });
            }
            self.wake_provider();
            free = self.free_frames.lock();
            self.frames_available
                .wait_for(&mut free, Duration::from_millis(5));
        }
    }

    /// Frames the page provider cannot free while the log vouches only up
    /// to GSN `limit`: dirty pages above it, and dirty pages latched
    /// exclusively (in use; counted as unwritable to be safe).
    fn unwritable_frames(&self, limit: u64) -> usize {
        (0..self.frames.len() as u32)
            .filter(|&idx| {
                let frame = &self.frames[idx as usize];
                if !frame.dirty.load(Ordering::Acquire) {
                    return false;
                }
                if !frame.latch.try_shared() {
                    return true;
                }
                // SAFETY: the shared latch excludes writers.
                let gsn = page::page_gsn(unsafe {
                    std::slice::from_raw_parts(self.frame_data(idx), self.page_size)
                });
                frame.latch.unlock_shared();
                gsn > limit
            })
            .count()
    }

    pub(super) fn provider_loop(self: Arc<Self>) {
        let mut clock_hand = 0usize;
        let mut cooling: VecDeque<(u32, PageId)> = Default::default();
        let mut batch = WritebackBatch::new(self.page_size, WRITEBACK_BATCH_PAGES);
        loop {
            {
                let mut wake = self.provider_wake.lock();
                if !*wake && !self.shutdown.load(Ordering::Acquire) {
                    self.provider_cv
                        .wait_for(&mut wake, Duration::from_millis(20));
                }
                *wake = false;
            }
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            let mut rounds = 0;
            while self.free_frames.lock().len() < self.free_target
                && !self.failed.load(Ordering::Acquire)
                && !self.shutdown.load(Ordering::Acquire)
                && rounds < 64
            {
                self.provider_round(&mut clock_hand, &mut cooling, &mut batch);
                rounds += 1;
            }
        }
    }

    /// One round of seed 000 §3.5: cool pages, then walk the cooling queue
    /// from its old end, staging dirty pages for writeback and evicting
    /// clean ones.
    pub(super) fn provider_round(
        &self,
        clock_hand: &mut usize,
        cooling: &mut VecDeque<(u32, PageId)>,
        batch: &mut WritebackBatch,
    ) {
        let n = self.frames.len();
        if self.write_limit.load(Ordering::Acquire) != u64::MAX {
            self.learn_write_limit();
        }
        let limit = self.write_limit.load(Ordering::Acquire);
        let mut scanned = 0;
        while cooling.len() < self.cool_target && scanned < n {
            let idx = *clock_hand;
            *clock_hand = (*clock_hand + 1) % n;
            scanned += 1;
            let frame = &self.frames[idx];
            let pid = frame.page_id.load(Ordering::Acquire);
            if pid == NO_PAGE || frame.cool.load(Ordering::Relaxed) {
                continue;
            }
            frame.cool.store(true, Ordering::Relaxed);
            cooling.push_back((idx as u32, pid));
        }
        let mut evicted = Vec::new();
        for _ in 0..cooling.len() {
            let Some((idx, pid)) = cooling.pop_front() else {
                break;
            };
            let frame = &self.frames[idx as usize];
            if frame.page_id.load(Ordering::Acquire) != pid || !frame.cool.load(Ordering::Relaxed) {
                continue; // re-heated or gone: it will be cooled again later
            }
            if frame.dirty.load(Ordering::Acquire) {
                if !batch.is_full() && !self.stage(batch, idx, false, limit) && limit != u64::MAX {
                    // Possibly above what the full log can vouch for: out
                    // of the queue (it would clog it), cooled again later.
                    frame.cool.store(false, Ordering::Relaxed);
                    continue;
                }
                cooling.push_back((idx, pid));
                continue;
            }
            if frame.writeback.load(Ordering::Acquire) || !frame.latch.try_exclusive() {
                cooling.push_back((idx, pid));
                continue;
            }
            if frame.page_id.load(Ordering::Acquire) == pid
                && !frame.dirty.load(Ordering::Acquire)
                && !frame.writeback.load(Ordering::Acquire)
                && frame.cool.load(Ordering::Relaxed)
            {
                let unmapped = self
                    .table
                    .entry(pid)
                    .compare_exchange(idx as u64 + 1, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                debug_assert!(
                    unmapped,
                    "page table entry of page {pid} does not point at its frame"
                );
                frame.page_id.store(NO_PAGE, Ordering::Release);
                frame.latch.unlock_exclusive();
                evicted.push(idx);
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            } else {
                frame.latch.unlock_exclusive_unchanged();
                cooling.push_back((idx, pid));
            }
            if evicted.len() >= self.free_target * 2 {
                break;
            }
        }
        if !evicted.is_empty() {
            self.free_frames.lock().extend(evicted);
            self.frames_available.notify_all();
        }
        if !batch.is_empty() {
            if let Err(e) = self.write_batch(batch, Writer::Provider) {
                self.poison(&e);
            }
        }
    }
}
